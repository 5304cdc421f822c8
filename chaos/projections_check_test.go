package chaos_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/chaos"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestProjectionCheckReadsEveryBucket: the check holds every value of the
// three projection buckets to a fold of the log, both ways.
func TestProjectionCheckReadsEveryBucket(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	log := projectionstest.Interleave(projectionstest.SampleLog(t))
	want, err := projections.New(projections.Config{}).Build(log)
	require.NoError(t, err)
	kvs := map[string]jetstream.KeyValue{}
	for _, b := range projections.Buckets() {
		kvs[b], err = srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b})
		require.NoError(t, err)
	}
	for target, v := range want {
		_, err := kvs[target.Bucket].Put(ctx, target.Key, v)
		require.NoError(t, err)
	}
	check := chaos.ProjectionCheck{Wait: time.Millisecond}
	res := check.Check(ctx, &chaos.World{JS: srv.JS, Log: log})
	require.Empty(t, res.Violations)
	require.Contains(t, res.Summary, "serp_ledger")

	job := log[0].Event.JobID
	_, err = kvs[projections.StatusBucket].Put(ctx, "0123456789abcdef0123456789abcdef", []byte(`{}`))
	require.NoError(t, err)
	_, err = kvs[projections.LedgerBucket].Put(ctx, projections.JobTarget(job).Key, []byte(`{"purchases":7}`))
	require.NoError(t, err)
	require.NoError(t, kvs[projections.ObservationsBucket].Purge(ctx, job))
	res = check.Check(ctx, &chaos.World{JS: srv.JS, Log: log})
	all := strings.Join(res.Violations, "\n")
	require.Len(t, res.Violations, 3, all)
	require.Contains(t, all, "serp_status holds 0123456789abcdef0123456789abcdef, which no event of the log makes")
	require.Contains(t, all, "serp_ledger "+projections.JobTarget(job).Key+` holds {"purchases":7}`)
	require.Contains(t, all, "serp_observations has no "+job)
}
