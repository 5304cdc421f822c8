package nats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/nats"
)

// Example starts an embedded JetStream server, provisions SERP_EVENTS,
// appends a job's first event and then two more atomically, and loads the
// job back.
func Example() {
	dir, _ := os.MkdirTemp("", "serpent-example")
	defer os.RemoveAll(dir)
	srv, err := nats.StartEmbedded(nats.EmbeddedConfig{Dir: dir, Port: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, _ := natsgo.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)

	ctx := context.Background()
	if _, err := nats.EnsureEventStream(ctx, js, nats.EventStreamOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	es, _ := nats.NewEventStore(ctx, js, nats.EventStoreOptions{})

	job := "3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b"
	at := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	event := func(id string, version uint64, p events.Payload) events.Event {
		return events.Event{ID: id, JobID: job, Version: version, Time: at, Data: p}
	}
	key := "0b8f0d9e-3c39-4d0e-9d4b-6c1a2f3e4d5c"

	v, err := es.Append(ctx, job, 0, event("01KBFX3M00000000000000000A", 1, events.AttemptCreated{Attempt: 1, Key: key}))
	fmt.Println("version", v, err)

	v, err = es.Append(ctx, job, v,
		event("01KBFX3M00000000000000000B", 2, events.Sent{Key: key, Attempt: 1, Try: 1, Worker: "w1"}),
		event("01KBFX3M00000000000000000C", 3, events.JobFailed{Reason: "api_error", Key: key, Status: 422}))
	fmt.Println("version", v, err)

	// A writer that still thinks the job is at version 1 is refused.
	_, err = es.Append(ctx, job, 1, event("01KBFX3M00000000000000000D", 2, events.JobCancelled{By: "op", Reason: "late"}))
	fmt.Println(errors.Is(err, eventstore.ErrConcurrency))

	evs, v, _ := es.Load(ctx, job)
	for _, e := range evs {
		fmt.Println(e.Version, e.Type())
	}
	fmt.Println("version", v)
	// Output:
	// version 1 <nil>
	// version 2 <nil>
	// true
	// 1 AttemptCreated
	// 2 Sent
	// 3 JobFailed
	// version 2
}
