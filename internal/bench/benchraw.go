package bench

import (
	"context"
	"fmt"
	"strconv"
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
	// MemorySinglePerSec is the same one-at-a-time publishing to a stream
	// in memory on the same server: the round trip and the server's work
	// without the disk.
	MemorySinglePerSec float64 `json:"memory_single_per_sec"`
	// DiskSync is a write and an fsync of the payload on the embedded
	// server's disk, without the server; nil on an existing server, whose
	// disk the bench cannot see.
	DiskSync    *benchDiskSync `json:"disk_sync,omitempty"`
	Batch100Sec float64        `json:"batch100_per_sec"`
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
	var err error
	if r.SinglePerSec, err = benchOneAtATime(ctx, js, "serpent.bench.single.", data, n, "raw: one at a time", prog); err != nil {
		return r, err
	}
	if r.MemorySinglePerSec, err = benchRawMemory(ctx, js, replicas, data, n, prog); err != nil {
		return r, err
	}
	if r.Batch100Sec, err = benchRawBatches(ctx, js, data, n, 100, prog); err != nil {
		return r, err
	}
	if r.Batch1000Sec, err = benchRawBatches(ctx, js, data, 10*n, 1000, prog); err != nil {
		return r, err
	}
	return r, nil
}

// benchRawMemory publishes n messages one at a time, each waiting for
// its ack, to a scratch stream held in memory with as many replicas as the
// disk one (so the two differ by the disk alone), and returns the messages
// per second.
func benchRawMemory(ctx context.Context, js jetstream.JetStream, replicas int, data []byte, n int, prog progressFunc) (float64, error) {
	const stream = "SERPENT_BENCH_MEMORY"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"serpent.benchmemory.>"},
		Storage: jetstream.MemoryStorage, Replicas: replicas}); err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	defer js.DeleteStream(context.WithoutCancel(ctx), stream)
	return benchOneAtATime(ctx, js, "serpent.benchmemory.", data, n, "raw: one at a time, memory", prog)
}

// benchOneAtATime publishes n messages on subjects prefix+i, each waiting
// for its ack, and returns the messages per second.
func benchOneAtATime(ctx context.Context, js jetstream.JetStream, prefix string, data []byte, n int, label string, prog progressFunc) (float64, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := js.Publish(ctx, prefix+strconv.Itoa(i), data); err != nil {
			return 0, fmt.Errorf("bench: %s: %w", label, err)
		}
		prog(label, i+1, n)
	}
	return perSec(n, time.Since(start)), nil
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
