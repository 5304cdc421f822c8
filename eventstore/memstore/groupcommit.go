package memstore

import (
	"context"

	"github.com/serpent-engine/serpent/eventstore"
)

// AppendMany is group commit, as the JetStream store does it: the appends
// are gathered into atomic batches of at most MaxBatch messages (one append
// per job per batch); a batch in which every append passes is written at
// consecutive sequences, and a batch with a refused append falls back to
// one Append per job, so only that append fails. Results are in order.
// Hooks are called for every append, as by Append.
func (s *Store) AppendMany(ctx context.Context, appends []eventstore.Append) []eventstore.Result {
	res := make([]eventstore.Result, len(appends))
	msgs := make([][]eventstore.Message, len(appends))
	done := make([]bool, len(appends))
	for i, a := range appends {
		m, err := s.prepare(a.JobID, a.Expected, a.Events, a.Expires)
		msgs[i] = m
		if err != nil {
			res[i], done[i] = eventstore.Result{Err: err}, true
		}
	}
	for _, batch := range eventstore.PlanBatches(appends, s.opts.MaxBatch, func(i int) int { return len(msgs[i]) }, func(i int) bool { return done[i] }) {
		if err := ctx.Err(); err != nil {
			break
		}
		s.commitBatch(appends, msgs, batch, res)
		for _, i := range batch {
			done[i] = true
		}
	}
	for i, a := range appends {
		if !done[i] {
			res[i] = s.result(s.Append(eventstore.WithExpiry(ctx, a.Expires), a.JobID, a.Expected, a.Events...))
		}
	}
	return res
}

// commitBatch writes one planned batch atomically, or falls back to single
// appends when one of them is refused.
func (s *Store) commitBatch(appends []eventstore.Append, msgs [][]eventstore.Message, batch []int, res []eventstore.Result) {
	ok := batch[:0:0]
	for _, i := range batch {
		if h := s.opts.Hooks.BeforeAppend; h != nil {
			if err := h(appends[i].JobID); err != nil {
				res[i].Err = err
				continue
			}
		}
		ok = append(ok, i)
	}
	s.mu.Lock()
	clean := true
	staged := make(map[string]bool) // message ids of the batch: JetStream refuses one twice (10201)
	for _, i := range ok {
		if v, err := s.check(appends[i].JobID, appends[i].Expected, msgs[i]); err != nil || v != 0 {
			clean = false
			break
		}
		for _, m := range msgs[i] {
			if staged[m.ID()] {
				clean = false
			}
			staged[m.ID()] = true
		}
	}
	if clean {
		for _, i := range ok {
			res[i].Version = s.commit(appends[i].JobID, msgs[i])
		}
	}
	s.mu.Unlock()
	for _, i := range ok {
		if !clean {
			res[i] = s.result(s.appendChecked(appends[i].JobID, appends[i].Expected, msgs[i]))
		}
		if h := s.opts.Hooks.AfterAppend; h != nil && res[i].Err == nil {
			if err := h(appends[i].JobID); err != nil {
				res[i] = eventstore.Result{Err: err}
			}
		}
	}
}

// appendChecked is Append after prepare and BeforeAppend, without hooks.
func (s *Store) appendChecked(jobID string, expected uint64, msgs []eventstore.Message) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.check(jobID, expected, msgs)
	if err == nil && v == 0 {
		v = s.commit(jobID, msgs)
	}
	return v, err
}

func (s *Store) result(v uint64, err error) eventstore.Result {
	return eventstore.Result{Version: v, Err: err}
}
