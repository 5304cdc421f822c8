package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/memstore"
)

func Example() {
	ctx := context.Background()
	s := memstore.New(memstore.Options{})
	job := "3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b"
	at := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	created := events.Event{ID: "01KBFX3M00000000000000000A", JobID: job, Version: 1, Time: at,
		Data: events.AttemptCreated{Attempt: 1, Key: "0b8f0d9e-3c39-4d0e-9d4b-6c1a2f3e4d5c"}}

	v, err := s.Append(ctx, job, 0, created)
	fmt.Println(v, err)

	// A second writer that also saw version 0 loses.
	other := created
	other.ID = "01KBFX3M00000000000000000B"
	_, err = s.Append(ctx, job, 0, other)
	fmt.Println(errors.Is(err, eventstore.ErrConcurrency))

	evs, v, _ := s.Load(ctx, job)
	fmt.Println(len(evs), evs[0].Type(), v)
	// Output:
	// 1 <nil>
	// true
	// 1 AttemptCreated 1
}
