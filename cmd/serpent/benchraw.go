package main

import (
	"context"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	snats "github.com/serpent-engine/serpent/nats"
)

// benchRaw is the ceiling: what the server does with bare messages.
type benchRaw struct {
	Messages     int     `json:"messages"`
	PayloadBytes int     `json:"payload_bytes"`
	SinglePerSec float64 `json:"single_per_sec"`
	Batch100Sec  float64 `json:"batch100_per_sec"`
	// Batch1000Sec is measured over ten times as many messages, so that it
	// spans more than a few batches.
	Batch1000Sec float64 `json:"batch1000_per_sec"`
}

func benchConnect(url string) (*natsgo.Conn, jetstream.JetStream, error) {
	// Buffered like the engine's connections, so the loads the scale phase
	// times cost what the engine's do.
	nc, err := natsgo.Connect(url, natsgo.Name("serpent bench"), natsgo.SyncQueueLen(snats.SyncQueueLen))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// benchRawPublish measures one-at-a-time durable publishes and atomic
// batches of 100 and of 1,000 on a scratch stream of the same server.
func benchRawPublish(ctx context.Context, js jetstream.JetStream, n, size int, prog progressFunc) (benchRaw, error) {
	const stream = "SERPENT_BENCH"
	// As many copies as the event log has: on a cluster an R1 ceiling
	// would flatter the ratios of an R3 engine.
	replicas := 1
	if st, err := js.Stream(ctx, snats.EventStream); err == nil {
		replicas = max(st.CachedInfo().Config.Replicas, 1)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"serpent.bench.>"},
		Storage: jetstream.FileStorage, AllowAtomicPublish: true, Replicas: replicas}); err != nil {
		return benchRaw{}, fmt.Errorf("bench: %w", err)
	}
	defer js.DeleteStream(context.WithoutCancel(ctx), stream)
	data := make([]byte, size)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	r := benchRaw{Messages: n, PayloadBytes: size}
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("serpent.bench.single.%d", i), data); err != nil {
			return r, fmt.Errorf("bench: raw publish: %w", err)
		}
		prog("raw: one at a time", i+1, n)
	}
	r.SinglePerSec = perSec(n, time.Since(start))
	var err error
	if r.Batch100Sec, err = benchRawBatches(ctx, js, data, n, 100, prog); err != nil {
		return r, err
	}
	if r.Batch1000Sec, err = benchRawBatches(ctx, js, data, 10*n, 1000, prog); err != nil {
		return r, err
	}
	return r, nil
}

// benchRawBatches publishes n messages in atomic batches of size, one batch
// at a time, and returns the messages per second.
func benchRawBatches(ctx context.Context, js jetstream.JetStream, data []byte, n, size int, prog progressFunc) (float64, error) {
	label := fmt.Sprintf("raw: batches of %d", size)
	start := time.Now()
	for i := 0; i < n; i += size {
		msgs := make([]*natsgo.Msg, 0, size)
		for j := i; j < min(i+size, n); j++ {
			msgs = append(msgs, &natsgo.Msg{Subject: fmt.Sprintf("serpent.bench.batch%d.%d", size, j), Data: data})
		}
		if _, err := jetstreamext.PublishMsgBatch(ctx, js, msgs); err != nil {
			return 0, fmt.Errorf("bench: raw batch: %w", err)
		}
		prog(label, min(i+size, n), n)
	}
	return perSec(n, time.Since(start)), nil
}

func perSec(n int, d time.Duration) float64 { return round2(float64(n) / d.Seconds()) }

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
