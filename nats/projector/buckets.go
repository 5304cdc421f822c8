package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/projections"
)

// The runner's JetStream names.
const (
	// Consumer is the durable consumer on SERP_EVENTS whose acknowledgement
	// floor is the runner's checkpoint.
	Consumer = "serpent-projections"
	// ControlBucket holds the runner's lease and a rebuild's pause request.
	ControlBucket = "serp_projections"
	// StagingSuffix names the buckets a rebuild fills before the switch.
	StagingSuffix = "_rebuild"
)

// Keys of the control bucket.
const (
	leaseKey   = "runner"
	pauseKey   = "pause"
	rebuildKey = "rebuild"
)

// BucketStream is the stream that holds a bucket's values, as JetStream
// names it.
func BucketStream(bucket string) string { return "KV_" + bucket }

// bucketConfig is a projection bucket: file storage, one value per key.
func bucketConfig(name, description string, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: name, Description: description, History: 1,
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1)}
}

var bucketDescriptions = map[string]string{
	projections.StatusBucket:       "serpent: status of every job (projection of SERP_EVENTS)",
	projections.LedgerBucket:       "serpent: what was bought, per key, job and day (projection of SERP_EVENTS)",
	projections.ObservationsBucket: "serpent: the stored observations (projection of SERP_EVENTS)",
}

// buckets are the three projection buckets, by their public names, and
// where they live (the public name, or a staging name during a rebuild).
type buckets struct {
	js     jetstream.JetStream
	kv     map[string]jetstream.KeyValue
	stream map[string]jetstream.Stream
	name   map[string]string
}

// ensureBuckets creates or opens the projection buckets with suffix added
// to their names.
func ensureBuckets(ctx context.Context, js jetstream.JetStream, suffix string, replicas int) (*buckets, error) {
	b := &buckets{js: js, kv: map[string]jetstream.KeyValue{}, stream: map[string]jetstream.Stream{}, name: map[string]string{}}
	for _, pub := range projections.Buckets() {
		kv, err := ensureKV(ctx, js, bucketConfig(pub+suffix, bucketDescriptions[pub], replicas))
		if err != nil {
			return nil, err
		}
		st, err := allowAtomic(ctx, js, BucketStream(pub+suffix))
		if err != nil {
			return nil, fmt.Errorf("projector: bucket %s: %w", pub+suffix, err)
		}
		b.kv[pub], b.stream[pub], b.name[pub] = kv, st, pub+suffix
	}
	return b, nil
}

// ensureKV opens a bucket, creating it when it does not exist; an existing
// bucket is left as it is.
func ensureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("projector: bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// controlBucket opens or creates serp_projections.
func controlBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return ensureKV(ctx, js, bucketConfig(ControlBucket, "serpent: projection runner lease and rebuild requests", replicas))
}

// ensureConsumer creates or updates the runner's durable consumer. Acks
// are cumulative: acknowledging a batch's last message settles the batch,
// and the acknowledgement floor is the checkpoint.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, stream, filter string, ackWait time.Duration) (jetstream.Consumer, error) {
	c, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: Consumer, Description: "serpent: projection runner (checkpoint = ack floor)",
		FilterSubject: filter, AckPolicy: jetstream.AckAllPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver: -1, MaxAckPending: 100000, AckWait: ackWait,
	})
	if err != nil {
		return nil, fmt.Errorf("projector: consumer %s on %s: %w", Consumer, stream, err)
	}
	return c, nil
}

// allowAtomic lets a bucket's stream take atomic batches, which the runner
// writes a batch's values with, and per-message TTLs, which make a job's
// values leave with the job (KV settings cover neither alone).
func allowAtomic(ctx context.Context, js jetstream.JetStream, stream string) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	cfg := st.CachedInfo().Config
	if cfg.AllowAtomicPublish && cfg.AllowMsgTTL {
		return st, nil
	}
	cfg.AllowAtomicPublish, cfg.AllowMsgTTL = true, true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return nil, fmt.Errorf("allow atomic batches and message TTLs: %w", err)
	}
	return js.Stream(ctx, stream)
}
