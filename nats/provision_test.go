package nats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

func TestEnsureEventStream(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	s, err := nats.EnsureEventStream(ctx, srv.JS, nats.EventStreamOptions{})
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	require.Equal(t, []string{"serp.events.>"}, cfg.Subjects)
	require.Equal(t, jetstream.FileStorage, cfg.Storage)
	require.Equal(t, jetstream.LimitsPolicy, cfg.Retention)
	require.True(t, cfg.AllowDirect && cfg.AllowAtomicPublish && cfg.DenyDelete && cfg.DenyPurge)
	require.Equal(t, 2*time.Minute, cfg.Duplicates)
	require.Equal(t, 1, cfg.Replicas)

	// Idempotent: a second start finds it as it wants it.
	_, err = nats.EnsureEventStream(ctx, srv.JS, nats.EventStreamOptions{})
	require.NoError(t, err)

	// The log is append-only.
	require.Error(t, s.Purge(ctx))
	_, err = srv.JS.Publish(ctx, "serp.events.job-1", []byte("x"))
	require.NoError(t, err)
	require.Error(t, s.DeleteMsg(ctx, 1))
}

func TestEnsureStream(t *testing.T) {
	base := jetstream.StreamConfig{Name: "SERP_TEST", Subjects: []string{"serp.test.>"}, Storage: jetstream.FileStorage,
		Duplicates: time.Minute, AllowDirect: true}
	tests := []struct {
		name        string
		change      func(c *jetstream.StreamConfig)
		allow       bool
		fields      []string // named in the error; none means success
		destructive bool
	}{
		{"same", func(*jetstream.StreamConfig) {}, false, nil, false},
		{"server defaults are not differences", func(c *jetstream.StreamConfig) { c.MaxMsgs, c.MaxBytes, c.Duplicates = 0, -1, 0 }, false, nil, false},
		{"flag differs", func(c *jetstream.StreamConfig) { c.AllowAtomicPublish = true }, false, []string{"allow_atomic=false, serpent wants true", "--update-streams"}, false},
		{"several differ", func(c *jetstream.StreamConfig) { c.Duplicates = 2 * time.Minute; c.DenyPurge = true },
			false, []string{"duplicate_window=1m0s, serpent wants 2m0s", "deny_purge=false, serpent wants true"}, false},
		{"updated when allowed", func(c *jetstream.StreamConfig) {
			c.AllowAtomicPublish, c.DenyDelete = true, true
			c.Subjects = append(c.Subjects, "serp.more.>")
		}, true, nil, false},
		{"storage never changes", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }, true, []string{"storage=File, serpent wants Memory", "by hand"}, true},
		{"retention never changes", func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }, true, []string{"retention"}, true},
		{"subjects are not removed", func(c *jetstream.StreamConfig) { c.Subjects = []string{"serp.other.>"} }, true, []string{"subjects"}, true},
		{"no new age limit", func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, true, []string{"max_age=unlimited, serpent wants 1h0m0s"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := natstest.RunServer(t)
			ctx := context.Background()
			_, err := nats.EnsureStream(ctx, srv.JS, base, false)
			require.NoError(t, err)
			want := base
			want.Subjects = append([]string(nil), base.Subjects...)
			tt.change(&want)

			s, err := nats.EnsureStream(ctx, srv.JS, want, tt.allow)
			if len(tt.fields) == 0 {
				require.NoError(t, err)
				_, err = nats.EnsureStream(ctx, srv.JS, want, false)
				require.NoError(t, err, "after the update the stream is as wanted")
				require.Equal(t, want.AllowAtomicPublish, s.CachedInfo().Config.AllowAtomicPublish)
				return
			}
			var cerr *nats.StreamConfigError
			require.True(t, errors.As(err, &cerr), "%v", err)
			for _, f := range tt.fields {
				require.ErrorContains(t, err, f)
			}
			require.Equal(t, tt.destructive, cerr.Diffs[0].Destructive)
			info, err := srv.JS.Stream(ctx, base.Name)
			require.NoError(t, err)
			require.Equal(t, base.Storage, info.CachedInfo().Config.Storage, "nothing was changed")
		})
	}
}

// TestEngineBucketsKeptAsTheyAre: an existing serp_schedules or
// serp_accounts bucket is not rewritten at every start.
func TestEngineBucketsKeptAsTheyAre(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: nats.SchedulesBucket, History: 1,
		Storage: jetstream.FileStorage, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{}, time.Second))
	kv, err := srv.JS.KeyValue(ctx, nats.SchedulesBucket)
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1<<20, st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxBytes, "left as it was")
}

// TestStrayConsumerBesideTheIntake: commands on subjects nothing reads
// are found by a consumer of their own over every command subject; the
// intake, which engines of an earlier version share during an upgrade,
// keeps reading serp.cmd.schedule alone.
func TestStrayConsumerBesideTheIntake(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	require.NoError(t, nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{}, time.Second))
	for name, filter := range map[string]string{nats.IntakeConsumer: nats.ScheduleSubject, nats.StrayConsumer: nats.CommandSubjects} {
		c, err := srv.JS.Consumer(ctx, nats.CommandStream, name)
		require.NoError(t, err)
		require.Equal(t, filter, c.CachedInfo().Config.FilterSubject, name)
		require.Equal(t, jetstream.AckExplicitPolicy, c.CachedInfo().Config.AckPolicy, name)
	}
}

// TestBucketReplicasChecked: on a cluster, an engine bucket's replicas are
// checked as a stream's: fewer than it has are refused, even with
// --update-streams; more are not made without it.
func TestBucketReplicasChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.RunCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: nats.AccountsBucket, History: 1,
		Storage: jetstream.FileStorage, Replicas: 3})
	require.NoError(t, err)
	err = nats.EnsureEngineStreams(ctx, js, nats.StreamOptions{Replicas: 1, AllowUpdate: true}, time.Second)
	var cerr *nats.StreamConfigError
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "KV_"+nats.AccountsBucket, cerr.Stream)
	require.ErrorContains(t, err, "will not change that in place")

	require.NoError(t, js.DeleteKeyValue(ctx, nats.AccountsBucket))
	_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: nats.AccountsBucket, History: 1, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	err = nats.EnsureEngineStreams(ctx, js, nats.StreamOptions{Replicas: 3}, time.Second)
	require.ErrorAs(t, err, &cerr) // the R1 streams made above come first; either way, nothing is changed
	require.ErrorContains(t, err, "--update-streams")
}
