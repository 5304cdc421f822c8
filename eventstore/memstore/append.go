package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Append writes evs to jobID if the job's version is expected, all or
// none, and returns the new version. See the package documentation for the
// exact rules; they are the JetStream store's.
func (s *Store) Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error) {
	msgs, err := s.prepare(jobID, expected, evs, eventstore.Expiry(ctx))
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if h := s.opts.Hooks.BeforeAppend; h != nil {
		if err := h(jobID); err != nil {
			return 0, err
		}
	}
	v, err := s.appendChecked(jobID, expected, msgs)
	if err != nil {
		return 0, err
	}
	if h := s.opts.Hooks.AfterAppend; h != nil {
		if err := h(jobID); err != nil {
			return 0, err
		}
	}
	return v, nil
}

// prepare encodes and checks an append before anything is looked up.
func (s *Store) prepare(jobID string, expected uint64, evs []events.Event, expires time.Time) ([]eventstore.Message, error) {
	if len(evs) > s.opts.MaxBatch {
		return nil, fmt.Errorf("%w: %d events for job %s, an atomic append takes at most %d", eventstore.ErrInvalid, len(evs), jobID, s.opts.MaxBatch)
	}
	msgs, err := eventstore.EncodeAppend(jobID, expected, evs)
	if err != nil {
		return nil, err
	}
	msgs = eventstore.Pack(msgs, s.opts.MaxMsgSize)
	eventstore.SetTTL(msgs, expected, expires, s.opts.Now())
	if err := eventstore.CheckSize(jobID, msgs, s.opts.MaxMsgSize); err != nil {
		return nil, err
	}
	return msgs, nil
}

// check decides an append against the log. It returns a version when the
// append already happened, 0 and nil when it may be committed.
// s.mu must be held.
func (s *Store) check(jobID string, expected uint64, msgs []eventstore.Message) (uint64, error) {
	job := s.live(jobID)
	var last uint64
	if len(job) > 0 {
		last = job[len(job)-1].seq
	}
	if last != expected {
		if v, ok := landed(job, expected, msgs); ok {
			return v, nil
		}
		return 0, fmt.Errorf("%w: job %s is at version %d, the append expected %d", eventstore.ErrConcurrency, jobID, last, expected)
	}
	now := s.opts.Now()
	for _, m := range msgs {
		if e, ok := s.ids[m.ID()]; ok && now.Sub(e.at) < s.opts.DuplicateWindow {
			return 0, fmt.Errorf("%w: %s event %s for job %s is already at sequence %d", eventstore.ErrDuplicate, m.Type, m.ID(), jobID, e.seq)
		}
	}
	return 0, nil
}

// commit writes msgs at the next sequences and returns the last.
// s.mu must be held.
func (s *Store) commit(jobID string, msgs []eventstore.Message) uint64 {
	now := s.opts.Now()
	for _, m := range msgs {
		s.seq++
		st := stored{seq: s.seq, msg: m}
		if m.TTL > 0 {
			st.expires = now.Add(m.TTL)
		}
		s.jobs[jobID] = append(s.live(jobID), st)
		s.ids[m.ID()] = idEntry{seq: s.seq, at: now}
	}
	s.commits++
	if s.commits%1024 == 0 {
		s.forget(now)
	}
	return s.seq
}

// forget drops ids older than the duplicate window, so the map does not
// grow without bound. s.mu must be held.
func (s *Store) forget(now time.Time) {
	for id, e := range s.ids {
		if now.Sub(e.at) >= s.opts.DuplicateWindow {
			delete(s.ids, id)
		}
	}
}

// landed reports whether the events right after expected on the job are
// those of msgs, whatever form they were written in (eventstore.Match), and
// the sequence of the message holding the last of them.
func landed(job []stored, expected uint64, msgs []eventstore.Message) (uint64, bool) {
	want := eventstore.IDs(msgs)
	var found [][]string
	for _, m := range job {
		if m.seq <= expected {
			continue
		}
		found = append(found, m.msg.IDs)
		switch eventstore.Match(want, found) {
		case eventstore.Landed:
			return m.seq, true
		case eventstore.Other:
			return 0, false
		}
	}
	return 0, false
}

// live returns a job's messages, first moving those whose TTL ran out to
// the archive, as the server removes them. s.mu must be held.
func (s *Store) live(jobID string) []stored {
	job := s.jobs[jobID]
	now := s.opts.Now()
	kept := job[:0:0]
	for _, m := range job {
		if m.expires.IsZero() || now.Before(m.expires) {
			kept = append(kept, m)
		} else {
			s.archived[jobID] = append(s.archived[jobID], m)
		}
	}
	if len(kept) == len(job) {
		return job
	}
	if len(kept) == 0 {
		delete(s.jobs, jobID)
		return nil
	}
	s.jobs[jobID] = kept
	return kept
}
