package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The engine's other streams and subjects.
const (
	// CommandStream keeps what upstream publishers ordered, so an audit
	// can check that every command became a job or a rejection.
	CommandStream   = "SERP_COMMANDS"
	CommandSubjects = "serp.cmd.>"
	ScheduleSubject = "serp.cmd.schedule"

	// RejectStream keeps every refused command with its payload and why.
	RejectStream        = "SERP_REJECTED"
	RejectSubjectPrefix = "serp.rejected."

	// WorkStream holds the job timers (serp.timer.<job>, JetStream message
	// schedules) and the due jobs they fire (serp.work.<job>), consumed by
	// the workers as a work queue.
	WorkStream         = "SERP_WORK"
	TimerSubjectPrefix = "serp.timer."
	WorkSubjectPrefix  = "serp.work."

	// Recurring schedules: their timers fire serp.sched.due.<id>, and
	// operators create, pause, resume and delete them with commands on
	// serp.cmd.schedules.<op>. Their definitions and state are in the KV
	// bucket serp_schedules.
	ScheduleTimerPrefix   = "serp.sched.timer."
	ScheduleDuePrefix     = "serp.sched.due."
	ScheduleAdminSubjects = ScheduleOpPrefix + ">"
	ScheduleOpPrefix      = "serp.cmd.schedules."
	SchedulesBucket       = "serp_schedules"

	// AccountsBucket holds each API account's limits and the state the
	// limiters of every worker share: searches in flight, the rate
	// limiter, pauses the API asked for, and the day's spend.
	AccountsBucket = "serp_accounts"

	// MetricsBucket holds the metrics tally's checkpoint (key
	// MetricsCheckpointKey, and its parts under it): where an engine that
	// starts resumes counting the log, instead of at its start; and the
	// last periodic sweep for lost timers an engine began (key
	// MetricsSweepKey), whose turn it is to sweep.
	MetricsBucket        = "serp_metrics"
	MetricsCheckpointKey = "tally"
	MetricsSweepKey      = "sweep"

	// Durable consumers of the engine.
	IntakeConsumer        = "serpent-intake"
	WorkConsumer          = "serpent-workers"
	ScheduleConsumer      = "serpent-schedules"
	ScheduleAdminConsumer = "serpent-schedule-admin"
	StrayConsumer         = "serpent-strays"
)

// StreamOptions configure the engine's streams.
type StreamOptions struct {
	// Replicas of every stream; 0 means 1.
	Replicas int
	// AllowUpdate lets an existing stream be changed in place.
	AllowUpdate bool
	// CommandMaxAge bounds how long commands and rejections are kept; 0
	// keeps them. With a retention horizon it is the retention: a command
	// stays as long as the job it made. --update-streams may add or
	// tighten it on an existing stream.
	CommandMaxAge time.Duration
	// Logger is told what an update changed; nil for none.
	Logger *slog.Logger
}

// duplicates is the duplicate window of the command streams: two minutes,
// or their max age if shorter (JetStream refuses a longer one).
func (o StreamOptions) duplicates() time.Duration {
	if o.CommandMaxAge > 0 {
		return min(2*time.Minute, o.CommandMaxAge)
	}
	return 2 * time.Minute
}

// CommandStreamConfig is SERP_COMMANDS.
func CommandStreamConfig(o StreamOptions) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: CommandStream, Description: "serpent: schedule commands from upstream publishers",
		Subjects: []string{CommandSubjects}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Discard: jetstream.DiscardOld, MaxAge: o.CommandMaxAge, MaxBytes: -1, MaxMsgs: -1, MaxMsgsPerSubject: -1,
		Replicas: max(o.Replicas, 1), Duplicates: o.duplicates(), AllowDirect: true,
		// Upstream publishers with many commands at once can send them as
		// one atomic batch: one disk flush instead of one per command.
		AllowAtomicPublish: true,
	}
}

// RejectStreamConfig is SERP_REJECTED.
func RejectStreamConfig(o StreamOptions) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: RejectStream, Description: "serpent: refused commands, with their payload and the reason",
		Subjects: []string{RejectSubjectPrefix + ">"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Discard: jetstream.DiscardOld, MaxAge: o.CommandMaxAge, MaxBytes: -1, MaxMsgs: -1, MaxMsgsPerSubject: -1,
		Replicas: max(o.Replicas, 1), Duplicates: o.duplicates(), AllowDirect: true,
	}
}

// WorkStreamConfig is SERP_WORK: one timer and at most one due message per
// job or recurring schedule (a newer one replaces the older), removed once a
// worker acknowledges.
func WorkStreamConfig(o StreamOptions) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: WorkStream, Description: "serpent: job and schedule timers, due jobs and schedules",
		Subjects:  []string{TimerSubjectPrefix + ">", WorkSubjectPrefix + ">", ScheduleTimerPrefix + "*", ScheduleDuePrefix + "*"},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.WorkQueuePolicy, Discard: jetstream.DiscardOld,
		MaxBytes: -1, MaxMsgs: -1, MaxMsgsPerSubject: 1,
		Replicas: max(o.Replicas, 1), AllowDirect: true, AllowMsgSchedules: true,
		// nats-server turns rollups on for any stream with message
		// schedules; asking for the same keeps a restart from seeing a
		// difference. serpent sends no rollups.
		AllowRollup: true,
	}
}

// EnsureEngineStreams provisions the command, rejection and work streams
// and the engine's durable consumers. ackWait is how long a worker may hold
// a command or a due job without a sign of life before it goes to another
// worker.
func EnsureEngineStreams(ctx context.Context, js jetstream.JetStream, o StreamOptions, ackWait time.Duration) error {
	for _, cfg := range []jetstream.StreamConfig{CommandStreamConfig(o), RejectStreamConfig(o), WorkStreamConfig(o)} {
		if _, err := ensureStream(ctx, js, cfg, o.AllowUpdate, o.Logger, "max_age"); err != nil {
			return err
		}
	}
	consumers := []struct {
		stream string
		cfg    jetstream.ConsumerConfig
	}{
		{CommandStream, jetstream.ConsumerConfig{Durable: IntakeConsumer, Description: "serpent: intake of schedule commands",
			FilterSubject: ScheduleSubject, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
			MaxDeliver: -1, MaxAckPending: 10000, DeliverPolicy: jetstream.DeliverAllPolicy}},
		{WorkStream, jetstream.ConsumerConfig{Durable: WorkConsumer, Description: "serpent: due jobs for the workers",
			FilterSubject: WorkSubjectPrefix + ">", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
			MaxDeliver: -1, MaxAckPending: 10000, DeliverPolicy: jetstream.DeliverAllPolicy}},
		{WorkStream, jetstream.ConsumerConfig{Durable: ScheduleConsumer, Description: "serpent: recurring schedules whose slot came",
			FilterSubject: ScheduleDuePrefix + "*", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
			MaxDeliver: -1, MaxAckPending: 1000, DeliverPolicy: jetstream.DeliverAllPolicy}},
		// One command at a time over every engine: a create and then a
		// delete of one schedule taken by two engines at once could be
		// applied the other way round.
		// Every command subject, to find commands on one that nothing
		// reads (a typo, an unknown version) and record them as refused
		// instead of leaving them unread. A consumer of its own: engines
		// of an earlier version share the intake while they are replaced.
		{CommandStream, jetstream.ConsumerConfig{Durable: StrayConsumer, Description: "serpent: commands on subjects nothing reads",
			FilterSubject: CommandSubjects, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
			MaxDeliver: -1, MaxAckPending: 10000, DeliverPolicy: jetstream.DeliverAllPolicy}},
		{CommandStream, jetstream.ConsumerConfig{Durable: ScheduleAdminConsumer, Description: "serpent: commands on recurring schedules",
			FilterSubject: ScheduleAdminSubjects, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
			MaxDeliver: -1, MaxAckPending: 1, DeliverPolicy: jetstream.DeliverAllPolicy}},
	}
	for _, cfg := range []jetstream.KeyValueConfig{
		{Bucket: SchedulesBucket, Description: "serpent: recurring schedules, their definitions and state", History: 1,
			Storage: jetstream.FileStorage, Replicas: max(o.Replicas, 1)},
		{Bucket: AccountsBucket, Description: "serpent: API accounts, their limits and shared limiter state", History: 1,
			Storage: jetstream.FileStorage, Replicas: max(o.Replicas, 1)},
		{Bucket: MetricsBucket, Description: "serpent: where the metrics' count of the event log stands, to resume it", History: 1,
			Storage: jetstream.FileStorage, Replicas: max(o.Replicas, 1)},
	} {
		if err := ensureBucket(ctx, js, cfg, o.AllowUpdate); err != nil {
			return err
		}
	}
	for _, c := range consumers {
		if _, err := js.CreateOrUpdateConsumer(ctx, c.stream, c.cfg); err != nil {
			return fmt.Errorf("nats: consumer %s on %s: %w", c.cfg.Durable, c.stream, err)
		}
	}
	return nil
}

// ensureBucket creates a KV bucket, or checks an existing one's replicas as
// EnsureStream checks a stream's: more copies only with allowUpdate, fewer
// never. Its other settings are left as they are.
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, allowUpdate bool) error {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if _, err = js.CreateKeyValue(ctx, cfg); !errors.Is(err, jetstream.ErrBucketExists) {
			if err != nil {
				return fmt.Errorf("nats: bucket %s: %w", cfg.Bucket, err)
			}
			return nil
		}
		kv, err = js.KeyValue(ctx, cfg.Bucket) // made meanwhile by another engine
	}
	if err != nil {
		return fmt.Errorf("nats: bucket %s: %w", cfg.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("nats: bucket %s: %w", cfg.Bucket, err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil // not a JetStream bucket: nothing to compare
	}
	have := bs.StreamInfo().Config
	want := have
	want.Replicas = cfg.Replicas
	diffs := diffStreamConfig(want, have)
	if len(diffs) == 0 {
		return nil
	}
	cerr := &StreamConfigError{Stream: have.Name, Diffs: diffs, UpdateAllowed: allowUpdate}
	if cerr.destructive() || !allowUpdate {
		return cerr
	}
	// The bucket's stream as it is, with the copies changed: UpdateKeyValue
	// would reset every other setting (history, limits, placement) to cfg's.
	if _, err := js.UpdateStream(ctx, mergeStreamConfig(have, want, diffs)); err != nil {
		return fmt.Errorf("nats: update bucket %s (%s): %w", cfg.Bucket, cerr.list(false), err)
	}
	return nil
}

// Consumer returns one of the engine's durable consumers.
func Consumer(ctx context.Context, js jetstream.JetStream, stream, name string) (jetstream.Consumer, error) {
	c, err := js.Consumer(ctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("nats: consumer %s on %s does not exist; start the engine once to provision it", name, stream)
	}
	return c, err
}
