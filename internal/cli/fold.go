package cli

import (
	"context"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// keepFold feeds tally, the metrics' fold of the event log, until the
// returned stop is called (any number of times): it resumes from the
// checkpoint in serp_metrics rather than from the log's start, follows
// the log, and keeps the checkpoint (written on stop too). The HTTP
// server shows the fold, and the sweep for lost timers takes the jobs in
// flight from it.
func keepFold(js jetstream.JetStream, tally *projections.Tally, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		seq, counted, err := projector.ResumeTally(ctx, js, tally)
		if err != nil {
			log.Info("metrics: counting the event log from its start", "why", err)
		} else if seq > 0 {
			log.Debug("metrics: counting the event log from its checkpoint", "seq", seq)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			projector.KeepTallyCheckpoint(ctx, js, tally, counted, seq, projector.DefaultTallyCheckpointEvery, log)
		}()
		projector.FollowTally(ctx, js, tally, log)
	}()
	return sync.OnceFunc(func() {
		cancel()
		wg.Wait()
	})
}
