package aggregate

import (
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// Rules Verify checks, named as in reports.
const (
	RuleFirstEvent      = "first_event"                // the history starts with one JobScheduled
	RuleOneJob          = "one_job"                    // every event names the same job
	RuleGapless         = "gapless_versions"           // versions run 1, 2, 3, ...
	RuleKeyPersisted    = "key_persisted_before_use"   // a key is stored before a request carries it
	RuleOneBody         = "one_body"                   // every key carries the job's body bytes
	RuleDeadline        = "never_past_deadline"        // no send after first_send + window - margin
	RuleStaleKey        = "only_current_key"           // a replaced key is never sent again
	RuleDefiniteFirst   = "definite_before_new_key"    // a new key only after a definite outcome
	RuleConcurrentSend  = "one_sender"                 // no send while a send's lease holds and its outcome is unknown
	RuleOnePurchase     = "at_most_one_purchase"       // unless a re-purchase was authorised
	RuleAfterTerminal   = "nothing_after_terminal"     // a finished job stays finished
	RuleRepurchaseState = "repurchase_after_charge"    // re-purchase only of charged_no_result
	RuleSettledFirst    = "settled_before_not_charged" // no "not charged" while a search may still run
	RuleChargesOnce     = "charges_listed_once"        // a charged verdict lists its new charges, others none
	RuleJobIdentity     = "job_of_its_observation"     // the job id and body are those of its slot and search
	// RuleStaleOutcome: an outcome recorded is of the current key's latest
	// send (its try). The decider refuses any other as stale
	// (ErrStaleOutcome), so one in the log is a bug: an older try's 429
	// says nothing of a newer try that may have run and been billed
	// (stale-try-rotates-key). A stale outcome neither settles its key nor
	// tells the outcome of the send still waiting for one.
	//
	// Its limit: an ObservationStored carries no try, so a stored result
	// of an older try (stale-success-hides-charge) looks like the latest
	// try's in the log. Only the billing ledger shows it: the newer try's
	// charge is on the accepted key under another request id, which
	// serpent audit --ledger reports unless the stored result has pages.
	RuleStaleOutcome = "outcome_of_latest_send"
)

// Violation is one broken promise in a job's history.
type Violation struct {
	JobID   string `json:"job_id"`
	Version uint64 `json:"version"`
	Rule    string `json:"rule"`
	Detail  string `json:"detail"`
}

func (v Violation) String() string {
	return fmt.Sprintf("job %s v%d: %s: %s", v.JobID, v.Version, v.Rule, v.Detail)
}

// keyTrack is what Verify remembers of one key.
type keyTrack struct {
	key       string
	firstSend time.Time
	deadline  time.Time
	sent      bool
	// notCharged: the key is known not to have bought: a confirmed answer
	// that the search did not complete (or, on its only send, did not
	// run), a reconciliation that found no charge, or an authorised
	// re-purchase. Only then may a new key follow it.
	notCharged bool
}

// purchaseCount counts a job's purchases as its log records them: each
// stored observation, and the distinct charges its reconciliations found
// (a later reconciliation looks up the earlier keys again and finds their
// charges again).
type purchaseCount struct {
	stored  int
	charged map[string]bool // by ChargeID
	blind   int             // charged verdicts that list no entry
}

func (p *purchaseCount) add(e events.Event) {
	switch d := e.Data.(type) {
	case events.Reconciled:
		if d.Verdict != VerdictCharged {
			return
		}
		if len(d.Entries) == 0 {
			p.blind++
		}
		for _, en := range d.Entries {
			if p.charged == nil {
				p.charged = map[string]bool{}
			}
			p.charged[ChargeID(en)] = true
		}
	case events.ObservationStored:
		p.stored++
	}
}

func (p *purchaseCount) n() int { return p.stored + len(p.charged) + p.blind }

// Purchases is how many searches a job's history shows it bought: every
// distinct charge its reconciliations found, and its stored observations.
func Purchases(evs []events.Event) int {
	var p purchaseCount
	for _, e := range evs {
		p.add(e)
	}
	return p.n()
}

// staleOutcome says why an outcome is not of the current key's latest
// send, as the decider judges it (Decider.Decide returns ErrStaleOutcome),
// or "" when it is; s is the job before the outcome.
func staleOutcome(s State, d events.OutcomeClassified) string {
	cur, _ := s.Current()
	a := s.attempt(d.Key)
	switch {
	case a == nil:
		return fmt.Sprintf("an outcome of key %s, which the job never stored", d.Key)
	case d.Key != cur.Key:
		return fmt.Sprintf("an outcome of key %s after %s replaced it: only the current key's latest send speaks", d.Key, cur.Key)
	case d.Try < a.Tries:
		return fmt.Sprintf("the outcome of try %d of key %s, recorded after try %d was sent: only the key's latest send speaks for it", d.Try, d.Key, a.Tries)
	case d.Try > a.Tries:
		return fmt.Sprintf("an outcome of try %d of key %s, which was sent %d times", d.Try, d.Key, a.Tries)
	}
	return ""
}

// Verify checks one job's history, in order, against serpent's promises
// (promises 2 to 4 of docs/reliability.md) and the shape of a log. It returns
// every violation found; an empty result means the history keeps them.
func Verify(evs []events.Event) []Violation {
	var (
		out        []Violation
		s          State
		keys       []keyTrack
		purchases  purchaseCount
		authorised int
		lease      Lease
		lastSend   time.Time // of any key: its search may run for a lease
		outcome    = true    // no send is waiting for its outcome
	)
	flag := func(e events.Event, rule, format string, args ...any) {
		out = append(out, Violation{JobID: e.JobID, Version: e.Version, Rule: rule, Detail: fmt.Sprintf(format, args...)})
	}
	find := func(key string) *keyTrack {
		for i := range keys {
			if keys[i].key == key {
				return &keys[i]
			}
		}
		return nil
	}
	current := func() *keyTrack {
		if len(keys) == 0 {
			return nil
		}
		return &keys[len(keys)-1]
	}
	for i, e := range evs {
		if want := uint64(i + 1); e.Version != want {
			flag(e, RuleGapless, "version %d where %d was due", e.Version, want)
		}
		if i > 0 && e.JobID != evs[0].JobID {
			flag(e, RuleOneJob, "event of job %s in the history of %s", e.JobID, evs[0].JobID)
		}
		if _, ok := e.Data.(events.JobScheduled); ok != (i == 0) {
			flag(e, RuleFirstEvent, "%s at position %d", e.Type(), i+1)
		}
		if _, again := e.Data.(events.RepurchaseAuthorized); s.Status.Terminal() && !(again && s.Status == StatusChargedNoResult) {
			flag(e, RuleAfterTerminal, "%s after the job was %s", e.Type(), s.Status)
		}
		switch d := e.Data.(type) {
		case events.JobScheduled:
			if BodyHash(d.Body) != d.BodySHA256 {
				flag(e, RuleOneBody, "body hash %s does not match the body", d.BodySHA256)
			}
			if body, err := Body(d.Search); err != nil || body != d.Body {
				flag(e, RuleJobIdentity, "the body is not the search context's: %q", d.Body)
			} else if id := JobID(d.Slot, d.Body); id != e.JobID {
				flag(e, RuleJobIdentity, "slot %s and this body make job %s", d.Slot.UTC().Format(time.RFC3339Nano), id)
			}
		case events.AttemptCreated:
			if d.BodySHA256 != s.BodySHA256 {
				flag(e, RuleOneBody, "key %s stored with body %s, the job's body is %s", d.Key, d.BodySHA256, s.BodySHA256)
			}
			keys = append(keys, keyTrack{key: d.Key})
		case events.KeyRotated:
			if d.BodySHA256 != s.BodySHA256 {
				flag(e, RuleOneBody, "key %s stored with body %s, the job's body is %s", d.NewKey, d.BodySHA256, s.BodySHA256)
			}
			switch cur := current(); {
			case cur == nil || cur.key != d.OldKey:
				flag(e, RuleDefiniteFirst, "new key %s replaces %s, which is not the current key", d.NewKey, d.OldKey)
			case cur.sent && !cur.notCharged:
				flag(e, RuleDefiniteFirst, "new key %s while %s was not known to be uncharged", d.NewKey, d.OldKey)
			}
			keys = append(keys, keyTrack{key: d.NewKey})
		case events.Sent:
			k := find(d.Key)
			switch {
			case k == nil:
				flag(e, RuleKeyPersisted, "key %s sent but never stored", d.Key)
			case k != current():
				flag(e, RuleStaleKey, "key %s sent after it was replaced", d.Key)
			}
			if k != nil {
				if !k.sent {
					k.sent, k.firstSend = true, e.Time
					k.deadline = KeyDeadline(s.Policy, e.Time)
				} else if !e.Time.Before(k.deadline) {
					flag(e, RuleDeadline, "key %s sent at %s, its deadline was %s", d.Key,
						e.Time.Format(time.RFC3339Nano), k.deadline.Format(time.RFC3339Nano))
				}
			}
			// A worker's name is no proof of one sender: a process's
			// workers share it, and a restarted process takes it again.
			if !outcome && e.Time.Before(lease.Until) {
				flag(e, RuleConcurrentSend, "%s sent while %s held the lease until %s", d.Worker,
					lease.Worker, lease.Until.Format(time.RFC3339Nano))
			}
			lease, outcome, lastSend = Lease{Worker: d.Worker, Until: d.LeaseUntil}, false, e.Time
		case events.OutcomeClassified:
			if stale := staleOutcome(s, d); stale != "" {
				flag(e, RuleStaleOutcome, "%s", stale)
				break
			}
			// A search that did not complete is settled by any send's
			// confirmed answer (the API replays the key's first
			// execution); one that did not run, only by the key's first
			// send: a later one says nothing of an earlier send whose
			// answer was lost.
			if k := find(d.Key); k != nil && (Class(d.Class) == ClassRetryable || Class(d.Class) == ClassRateLimited && d.Try == 1) {
				k.notCharged = true
			}
			outcome = true
		case events.DeadlineReached:
			outcome = true
		case events.Reconciled:
			switch {
			case d.Verdict == VerdictCharged && len(d.Entries) == 0:
				flag(e, RuleChargesOnce, "a charged verdict that lists no charge")
			case d.Verdict != VerdictCharged && len(d.Entries) > 0:
				flag(e, RuleChargesOnce, "a %s verdict that lists %d charges", d.Verdict, len(d.Entries))
			case d.Verdict == VerdictCharged:
				listed := map[string]bool{}
				for _, en := range d.Entries {
					id := ChargeID(en)
					switch {
					case purchases.charged[id]:
						flag(e, RuleChargesOnce, "charge %s was listed by an earlier reconciliation", id)
					case listed[id]:
						flag(e, RuleChargesOnce, "charge %s is listed twice", id)
					}
					listed[id] = true
				}
			}
			notCharged := d.Verdict == VerdictNotCharged
			if until := lastSend.Add(s.Policy.Lease.D()); notCharged && !lastSend.IsZero() && e.Time.Before(until) {
				// The search of the last send may still run, and is
				// billed when it ends: no charge yet proves nothing.
				flag(e, RuleSettledFirst, "not charged at %s, while the search sent at %s could run until %s",
					e.Time.Format(time.RFC3339Nano), lastSend.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
				notCharged = false
			}
			if notCharged {
				for _, key := range d.Keys {
					if k := find(key); k != nil {
						k.notCharged = true
					}
				}
			}
			purchases.add(e)
		case events.ObservationStored:
			purchases.add(e)
			outcome = true
		case events.JobFailed, events.JobCancelled:
			outcome = true
		case events.RepurchaseAuthorized:
			if s.Status != StatusChargedNoResult {
				flag(e, RuleRepurchaseState, "re-purchase authorised while the job was %s", s.Status)
			}
			authorised++
			if k := current(); k != nil {
				k.notCharged = true
			}
		}
		if n := purchases.n(); n > 1+authorised {
			flag(e, RuleOnePurchase, "%d purchases with %d authorised re-purchases", n, authorised)
			authorised = n - 1 // report each extra purchase once
		}
		s.apply(e)
	}
	return out
}
