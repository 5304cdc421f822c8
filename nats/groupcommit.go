package nats

import (
	"context"
	"slices"

	natsgo "github.com/nats-io/nats.go"

	"github.com/serpent-engine/serpent/store"
)

// AppendMany is group commit: the appends go in atomic batches of at most
// MaxBatch messages, one append per job per batch, each carrying its own
// expected version on its first message. A batch the server refuses (one
// job's version is stale, an id is known, the answer is lost) is retried
// one append at a time, so only the appends that really fail do; those
// single appends find out for themselves whether the batch had landed.
// Results are in the order of appends.
func (s *EventStore) AppendMany(ctx context.Context, appends []store.Append) []store.Result {
	res := make([]store.Result, len(appends))
	msgs := make([][]store.Message, len(appends))
	done := make([]bool, len(appends))
	for i, a := range appends {
		m, err := s.prepare(a.JobID, a.Expected, a.Events)
		msgs[i] = m
		if err != nil {
			res[i], done[i] = store.Result{Err: err}, true
		}
	}
	limit := s.MaxMessageSize()
	for _, batch := range store.PlanBatches(appends, s.opts.MaxBatch, func(i int) bool { return done[i] }) {
		if ctx.Err() != nil {
			break
		}
		group := s.fitting(batch, msgs, limit)
		if len(group) >= 2 {
			s.commitBatch(ctx, appends, msgs, group, res)
		} else {
			group = nil
		}
		for _, i := range batch {
			if !slices.Contains(group, i) {
				v, err := s.write(ctx, appends[i].JobID, appends[i].Expected, msgs[i])
				res[i] = store.Result{Version: v, Err: err}
			}
			done[i] = true
		}
	}
	for i, a := range appends {
		if !done[i] {
			v, err := s.write(ctx, a.JobID, a.Expected, msgs[i])
			res[i] = store.Result{Version: v, Err: err}
		}
	}
	return res
}

// fitting drops from a batch the appends one of whose messages would
// outgrow the limit with the batch headers of its place in the group (a
// few bytes more than alone); they are written alone.
func (s *EventStore) fitting(batch []int, msgs [][]store.Message, limit int) []int {
	total := 0
	for _, i := range batch {
		total += len(msgs[i])
	}
	out := batch[:0:0]
	pos := 0
	for _, i := range batch {
		fits := true
		for k, m := range msgs[i] {
			if m.Size()+store.BatchOverhead(pos+k, total) > limit {
				fits = false
			}
		}
		pos += len(msgs[i])
		if fits {
			out = append(out, i)
		}
	}
	if len(out) < len(batch) {
		return s.fitting(out, msgs, limit) // positions moved
	}
	return out
}

// commitBatch publishes one group as an atomic batch, or falls back to
// single appends.
func (s *EventStore) commitBatch(ctx context.Context, appends []store.Append, msgs [][]store.Message, batch []int, res []store.Result) {
	var wire []*natsgo.Msg
	for _, i := range batch {
		wire = append(wire, wireMsgs(s.subject(appends[i].JobID), msgs[i])...)
	}
	actx, cancel := context.WithTimeout(ctx, s.opts.AttemptTimeout)
	last, out, err := s.publish(actx, wire)
	cancel()
	if out == written {
		seq := last - uint64(len(wire)) // batches are written at consecutive sequences
		for _, i := range batch {
			seq += uint64(len(msgs[i]))
			res[i] = store.Result{Version: seq}
		}
		return
	}
	s.log.Debug("nats: group commit refused, appending one by one", "appends", len(batch), "answer", err)
	for _, i := range batch {
		v, err := s.write(ctx, appends[i].JobID, appends[i].Expected, msgs[i])
		res[i] = store.Result{Version: v, Err: err}
	}
}
