package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/chaos"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// check holds the world against serpent's promises (docs/reliability.md), from the log and from
// the provider's own books, and fills in the report's figures.
func (w *World) check() {
	r := w.rep
	if w.cfg.Retention > 0 {
		// Time goes on past the end of the work until about half the
		// jobs have left the live log: the checks then see jobs gone,
		// jobs leaving and jobs live.
		if d := time.Until(w.start.Add(w.cfg.Retention + w.cfg.Spread/2)); d > 0 {
			time.Sleep(d)
		}
	}
	r.SimTime = time.Since(w.start)
	r.Cmds = len(w.cmds)
	st := w.sb.Stats()
	r.Executions, r.Charges, r.SandboxFaults = st.Executions, st.Charges, st.Faults
	r.BodiesChargedTwice = len(st.BodiesChargedTwice)

	// Promise 7: every command is a job or a recorded rejection; 1: one
	// observation is one job, however often it is published.
	jobs := map[string]bool{}
	var order []string
	for i, c := range w.cmds {
		switch {
		case c.job == "" && c.rejected != c.reason:
			r.fail("command %d: rejected as %q, want %q", i, c.rejected, c.reason)
		case c.job == "":
		case c.rejected != "":
			r.fail("command %d of job %s was rejected as %s", i, c.job, c.rejected)
		case !jobs[c.job]:
			jobs[c.job] = true
			order = append(order, c.job)
		}
	}

	keyJob := map[string]string{}
	ctx := context.Background()
	digest := sha256.New()
	for _, job := range order {
		evs, err := w.store.History(ctx, job) // the live log and the archive
		if err != nil {
			r.fail("job %s: %v", job, err)
			continue
		}
		w.checkLeft(job, evs)
		if len(evs) == 0 {
			r.fail("job %s: its command was taken but the job has no events (promise 7)", job)
			continue
		}
		r.Events += len(evs)
		for _, e := range evs {
			// Ids, keys and request ids are all drawn from the seed: the
			// envelope is enough to tell two runs apart.
			fmt.Fprintf(digest, "%s %s %d %d\n", e.ID, e.Type(), e.Version, e.Time.UnixNano())
		}
		if job == w.cfg.Trace {
			w.traceLog(evs, st.ChargesPerKey)
		}
		// Promises 2 to 4, from the log.
		for _, v := range aggregate.Verify(evs) {
			r.fail("%s", v)
		}
		s := aggregate.Fold(evs)
		r.Final[s.Status]++
		if !s.Finished() { // promise 5
			r.fail("job %s is still %s (next run %s, check of charges pending %t) at the end; faults stopped %s before",
				job, s.Status, s.NextRunAt.Sub(w.start), s.CheckPending, w.cfg.Settle)
		}
		w.tally(evs)
		for _, a := range s.Attempts {
			keyJob[a.Key] = job
			// Promise 3, from the provider's side: the engine let every
			// request of a key go after its claim and before its deadline;
			// a process pause may hold it a little longer, never past the
			// provider's window.
			for _, sd := range w.sends[a.Key] {
				if a.FirstSend.IsZero() || sd.handed.Before(a.FirstSend) {
					r.fail("job %s: key %s was sent at %s before it was claimed", job, a.Key, sd.handed.Sub(w.start))
				}
				if !a.Deadline.IsZero() && !sd.handed.Before(a.Deadline) {
					r.fail("job %s: key %s was sent at %s, past its deadline %s", job, a.Key, sd.handed.Sub(w.start), a.Deadline.Sub(w.start))
				}
				if late := sd.left.Sub(a.Deadline); !a.Deadline.IsZero() && late > 0 {
					r.LatePastDeadline = max(r.LatePastDeadline, late)
					if !sd.left.Before(a.FirstSend.Add(w.cfg.Policy.ReplayWindow.D())) {
						r.fail("job %s: key %s left at %s (held by a pause), past the provider's window", job, a.Key, sd.left.Sub(w.start))
					}
				}
			}
		}
		// Promise 2, from the provider's ledger: at most one key charged
		// per job, and exactly the charges the log accounts for. Promise
		// 9: every double charge the API made under one key is found live.
		books := chaos.BooksOf(s, st.ChargesPerKey)
		found := aggregate.PurchasesOf(evs).Doubled
		r.APIDoubleCharges += books.Doubled
		r.APIDoublesFound += found
		charges := books.Charges
		switch want := chaos.Accounted(evs, s); {
		case books.Keys > 1+s.Repurchases:
			r.DuplicateCharges++
			w.knownOrFail(w.classify(evs, s, st.ChargesPerKey), "job %s: %d of its keys were charged (%d re-purchases authorised)", job, books.Keys, s.Repurchases)
		case s.Finished() && books.Doubled != found:
			r.fail("job %s: the API charged its keys %d times more than once, its log found %d (promise 9)", job, books.Doubled, found)
		case s.Finished() && charges != want:
			w.knownOrFail(w.classify(evs, s, st.ChargesPerKey), "job %s is %s with %d charges, but its log accounts for %d", job, s.Status, charges, want)
		}
		if s.Status == aggregate.StatusChargedNoResult {
			r.ChargedNoResult++
		}
		if body := st.ChargesPerBody[s.BodySHA256]; body > 1 && charges <= 1 {
			r.fail("job %s: its body was charged %d times, %d of them under keys it never stored", job, body, body-charges)
		}
	}
	for key, n := range st.ChargesPerKey {
		if keyJob[key] == "" {
			r.fail("key %s was charged %d times but no job stored it (promise 3)", key, n)
		}
	}
	for key := range w.sends {
		if keyJob[key] == "" {
			r.fail("key %s was sent but no job stored it (promise 3)", key)
		}
	}
	fmt.Fprintf(digest, "%d %d %d %d %v", st.Requests, st.Executions, st.Charges, r.Steps, st.Faults)
	r.Digest = hex.EncodeToString(digest.Sum(nil))
	if st.BodyViolations > 0 {
		r.fail("%d requests carried another body under a known key (promise 3)", st.BodyViolations)
	}
}

// tally counts outcomes, rotations, deadlines and reconciliations.
func (w *World) tally(evs []events.Event) {
	r := w.rep
	for _, e := range evs {
		switch d := e.Data.(type) {
		case events.OutcomeClassified:
			r.Outcomes[d.Class]++
		case events.KeyRotated:
			r.Rotations++
		case events.DeadlineReached:
			r.Deadlines++
		case events.Reconciled:
			r.Reconciles++
		case events.ObservationStored:
			r.Outcomes["success"]++
		case events.JobFailed:
			if d.Reason == aggregate.ReasonAPIError {
				r.Outcomes["failure"]++
			}
		}
	}
}

// traceLog adds a job's log and its keys' requests and charges to the
// report's trace.
func (w *World) traceLog(evs []events.Event, charges map[string]int) {
	r := w.rep
	r.Trace = append(r.Trace, "log:")
	for _, e := range evs {
		data, _ := json.Marshal(e.Data)
		if len(data) > 400 {
			data = append(data[:400], "..."...)
		}
		r.trace(e.Time.Sub(w.start), "v%d %s %s", e.Version, e.Type(), data)
	}
	for _, a := range aggregate.Fold(evs).Attempts {
		for _, sd := range w.sends[a.Key] {
			r.trace(sd.left.Sub(w.start), "request of key %s left (handed over at %s)", a.Key, sd.handed.Sub(w.start))
		}
		r.Trace = append(r.Trace, fmt.Sprintf("key %s: %d charges", a.Key, charges[a.Key]))
	}
}

// checkLeft holds a job to the retention horizon: a job whose time has
// come (the last of its messages, TailDelay after its expiry) has left the
// live log whole; any other is there whole.
func (w *World) checkLeft(job string, history []events.Event) {
	live, _, err := w.store.Load(context.Background(), job)
	if err != nil {
		w.rep.fail("job %s: %v", job, err)
		return
	}
	exp, now := aggregate.Fold(history).Expires(), time.Now()
	switch {
	case !exp.IsZero() && !now.Before(exp.Add(eventstore.TailDelay)):
		if len(live) > 0 {
			w.rep.fail("job %s: expired at %s, yet %d of its events are live", job, exp.Sub(w.start), len(live))
		}
		w.rep.Expired++
	case !exp.IsZero() && !now.Before(exp.Add(-time.Second)) && len(live) == 0:
		// Leaving: its head went (TTLs are whole seconds), its tail goes.
	case len(live) != len(history):
		w.rep.fail("job %s: %d of its %d events are live before its expiry", job, len(live), len(history))
	}
}
