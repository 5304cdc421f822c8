package cli

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/httpops"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// opsSource is what the HTTP server of "serpent run" reads
// (httpops.Source), over the engine's connection.
type opsSource struct {
	nc *natsgo.Conn
	js jetstream.JetStream
	// runner is the engine's projection runner, nil for none.
	runner *projector.Runner
}

func (s opsSource) Connection() (bool, string) { return s.nc.IsConnected(), s.nc.Status().String() }

// Stream checks that a stream is there; for SERP_ARCHIVE, also that it
// copies SERP_EVENTS without an error.
func (s opsSource) Stream(ctx context.Context, name string) error {
	if name == snats.ArchiveStream {
		_, err := snats.ArchiveLag(ctx, s.js)
		return err
	}
	_, err := s.js.Stream(ctx, name)
	return err
}

func (s opsSource) Bucket(ctx context.Context, name string) error {
	_, err := s.js.KeyValue(ctx, name)
	return err
}

func (s opsSource) Lag(ctx context.Context, now time.Time) (httpops.Lag, error) {
	lag, err := projector.ReadLag(ctx, s.js, "", now)
	out := httpops.Lag{Last: lag.Last, Pending: lag.Pending, Behind: lag.Behind}
	if c, ok := catchUp(s.runner); ok {
		out.CatchUp = &httpops.CatchUp{Done: c.Done, Total: c.Total(), Rate: c.Rate, Left: c.Left()}
	}
	return out, err
}

func (s opsSource) LastSeq(ctx context.Context) (uint64, error) { return eventLogLastSeq(ctx, s.js) }

func (s opsSource) Jobs(ctx context.Context, ids []string) ([]projections.JobView, error) {
	kv, err := s.js.KeyValue(ctx, projections.StatusBucket)
	if err != nil {
		return nil, err
	}
	var out []projections.JobView
	for _, id := range ids {
		e, err := kv.Get(ctx, id)
		if err != nil {
			continue // not projected yet
		}
		var v projections.JobView
		if json.Unmarshal(e.Value(), &v) == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

func (s opsSource) DayLedgers(ctx context.Context, days []string) (map[string]projections.DayLedger, []string, error) {
	kv, err := s.js.KeyValue(ctx, projections.LedgerBucket)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]projections.DayLedger{}
	var unread []string
	for _, day := range days {
		e, err := kv.Get(ctx, projections.LedgerDayPrefix+day)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			unread = append(unread, day)
		default:
			var v projections.DayLedger
			if json.Unmarshal(e.Value(), &v) == nil {
				out[day] = v
			}
		}
	}
	return out, unread, nil
}

func (s opsSource) Accounts(ctx context.Context, now time.Time) ([]httpops.Account, error) {
	sts, err := accountStatuses(ctx, s.js, now)
	if err != nil {
		return nil, err
	}
	out := make([]httpops.Account, 0, len(sts))
	for _, a := range sts {
		acct := httpops.Account{Account: a.Account, Limits: a.Limits, SpentToday: a.SpentToday, InFlight: a.InFlight,
			PausedUntil: a.PausedUntil, PauseReason: a.PauseReason, Waiting: a.Waiting, WaitingWhy: a.WaitingWhy}
		if r := a.Refused; r != nil {
			acct.Refused = &httpops.RefusedLimits{Key: r.Key, Value: r.Value, Error: r.Error, Holding: r.Holding, Keeping: r.Keeping}
		}
		out = append(out, acct)
	}
	return out, nil
}

// refusals are the accounts whose stored limits lim refuses, as
// readiness reports them; none without a limiter.
func refusals(lim *engine.Limiter) func() []httpops.Refusal {
	if lim == nil {
		return nil
	}
	return func() []httpops.Refusal {
		var out []httpops.Refusal
		for _, r := range lim.Refusals() {
			out = append(out, httpops.Refusal{Account: r.Account, Key: r.Key, Err: r.Err, Held: r.Held})
		}
		return out
	}
}
