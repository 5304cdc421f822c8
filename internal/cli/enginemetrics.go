package cli

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/metrics"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// newEngineMetrics returns the registry of "serpent run" (worker is its
// name) and the tally of the log it shows; the tally is fed by keepFold.
// now is the engine's clock: the accounts' slots, pauses and spending
// days are stamped by the server's, and read by it too. runner is the
// engine's projection runner, nil for none: its catch-up is in the lag.
func newEngineMetrics(js jetstream.JetStream, worker string, now func() time.Time, runner *projector.Runner) (*metrics.Metrics, *projections.Tally) {
	tally := projections.NewTally().ForgetFinished()
	lag := func(ctx context.Context) (metrics.Lag, error) {
		lag, err := projector.ReadLag(ctx, js, "", now())
		m := metrics.Lag{Pending: lag.Pending, Behind: lag.Behind}
		if c, ok := catchUp(runner); ok {
			m.CatchingUp, m.CatchUpRate, m.CatchUpLeft = true, c.Rate, c.Left()
		}
		return m, err
	}
	last := func(ctx context.Context) (uint64, error) { return eventLogLastSeq(ctx, js) }
	archive := func(ctx context.Context) (uint64, error) { return snats.ArchiveLag(ctx, js) }
	accts := func(ctx context.Context) ([]metrics.Account, error) { return accountFigures(ctx, js, now()) }
	return metrics.New(metrics.Options{Tally: tally, Lag: lag, LastSeq: last, ArchiveLag: archive, Accounts: accts, Worker: worker, Version: version}), tally
}

// eventLogLastSeq reads the last sequence of SERP_EVENTS from its stream
// information: with or without projections.
func eventLogLastSeq(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	return snats.EventLog(js).Last(ctx)
}

// accountFigures reads the API accounts' shared state for the metrics.
func accountFigures(ctx context.Context, js jetstream.JetStream, now time.Time) ([]metrics.Account, error) {
	sts, err := accountStatuses(ctx, js, now)
	if err != nil {
		return nil, err
	}
	out := make([]metrics.Account, 0, len(sts))
	for _, a := range sts {
		out = append(out, metrics.Account{Name: a.Account, SpentPages: a.SpentToday.Pages, SpentMicros: a.SpentToday.Micros,
			BudgetPages: a.Limits.DailyPages, BudgetMicros: a.Limits.DailyMicros, InFlight: a.InFlight,
			MaxInFlight: a.Limits.MaxInFlight, Waiting: a.WaitingWhy, Paused: a.PausedUntil != nil, LimitsRefused: a.Refused != nil})
	}
	return out, nil
}

// catchUp is the catch-up of this process's projection runner, while it
// has one (nil for none) and it catches up.
func catchUp(r *projector.Runner) (projector.CatchUp, bool) {
	if r == nil {
		return projector.CatchUp{}, false
	}
	return r.CatchingUp()
}
