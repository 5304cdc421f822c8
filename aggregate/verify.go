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
	// RuleCheckUnproven: a result the log cannot prove was its key's only
	// execution is marked for a check of its charges, and a check comes
	// only then, of that key, with the verdict its charges make.
	RuleCheckUnproven = "unproven_result_checked"
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

// Purchases are what a job's log says it bought, as every count of
// purchases counts them (the audit, the metrics, the ledger view).
type Purchases struct {
	// Bought are the searches serpent bought: each stored observation, and
	// each other key a reconciliation found charged. More than one plus
	// the authorised re-purchases breaks promise 2.
	Bought int `json:"bought"`
	// Doubled are the charges the API made beyond the first under one key
	// (its own double purchase), found by a check of a stored key's
	// charges or by a reconciliation. serpent cannot prevent them; it
	// shows every one (promise 9).
	Doubled int `json:"doubled"`
}

// purchaseCounter counts Purchases event by event: it knows the charges
// counted (by ChargeID), and of each key whether it was bought without a
// charge seen yet, or charged.
type purchaseCounter struct {
	Purchases
	seen map[string]bool
	keys map[string]keyBought
}

type keyBought uint8

const (
	keyStored  keyBought = iota + 1 // a stored observation, its charge not seen yet
	keyCharged                      // a charge seen
)

// Total is every charge the log accounts for.
func (p Purchases) Total() int { return p.Bought + p.Doubled }

// add counts one more event of the job's history, in order. A charge
// found again (a later reconciliation lists it once more) counts once.
func (p *purchaseCounter) add(e events.Event) {
	if p.seen == nil {
		p.seen, p.keys = map[string]bool{}, map[string]keyBought{}
	}
	switch d := e.Data.(type) {
	case events.ObservationStored:
		p.Bought++
		if p.keys[d.Key] == 0 {
			p.keys[d.Key] = keyStored
		}
	case events.Reconciled:
		if d.Verdict != VerdictCharged {
			return
		}
		if len(d.Entries) == 0 {
			p.Bought++ // a charge recorded without its entries
		}
		p.charges(d.Entries)
	case events.ChargesChecked:
		p.charges(d.Entries)
	}
}

// charges counts charges found in the billing ledger: the first on a key
// not stored is a purchase, the first on a stored key that purchase's
// charge, any other on a key the API's double charge.
func (p *purchaseCounter) charges(entries []events.LedgerEntry) {
	for _, en := range entries {
		id := ChargeID(en)
		if p.seen[id] {
			continue
		}
		p.seen[id] = true
		k := en.Key
		if k == "" {
			k = id // no key to group it by: a purchase of its own
		}
		switch p.keys[k] {
		case 0:
			p.Bought++
		case keyCharged:
			p.Doubled++
		}
		p.keys[k] = keyCharged
	}
}

// PurchasesOf counts a job's purchases from its history.
func PurchasesOf(evs []events.Event) Purchases {
	var p purchaseCounter
	for _, e := range evs {
		p.add(e)
	}
	return p.Purchases
}

// PurchasesIn is what one event adds to a job's purchases, read without
// the job's history (the metrics keep no history): what PurchasesOf
// counts for a log that Verify accepts, where no reconciliation lists a
// charge again and a check lists only the stored key's charges.
func PurchasesIn(e events.Event) Purchases {
	var p purchaseCounter
	if c, ok := e.Data.(events.ChargesChecked); ok {
		p.seen, p.keys = map[string]bool{}, map[string]keyBought{c.Key: keyStored}
	}
	p.add(e)
	return p.Purchases
}

// afterEnd reports whether e may follow the end of a job in state s: a
// re-purchase of a charged_no_result job, or the check of the charges of
// a stored result that asked for one.
func afterEnd(s State, e events.Event) bool {
	switch e.Data.(type) {
	case events.RepurchaseAuthorized:
		return s.Status == StatusChargedNoResult
	case events.ChargesChecked:
		return s.CheckPending
	}
	return false
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
		purchases  purchaseCounter
		charged    = map[string]bool{} // charges listed by reconciliations, by ChargeID
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
		if after := afterEnd(s, e); s.Status.Terminal() && !after {
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
			// A confirmed "did not complete" or "did not run" settles
			// the key only when it speaks for the key: on its first
			// send, or replayed. A resend's own error says nothing of
			// an earlier send whose answer was lost.
			if c := Class(d.Class); (c == ClassRetryable || c == ClassRateLimited) && SpeaksForKey(d.Try, d.Replayed) {
				if k := find(d.Key); k != nil {
					k.notCharged = true
				}
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
					case charged[id]:
						flag(e, RuleChargesOnce, "charge %s was listed by an earlier reconciliation", id)
					case listed[id]:
						flag(e, RuleChargesOnce, "charge %s is listed twice", id)
					}
					listed[id] = true
					charged[id] = true
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
		case events.ObservationStored:
			if a := s.attempt(d.Key); a != nil && Unproven(a.Tries, d.Replayed) && !d.CheckCharges {
				flag(e, RuleCheckUnproven, "key %s was sent %d times and its result is not marked for a check of its charges", d.Key, a.Tries)
			}
			outcome = true
		case events.ChargesChecked:
			switch {
			case !s.CheckPending:
				flag(e, RuleCheckUnproven, "a check of charges no stored result asked for")
			case s.Result != nil && d.Key != s.Result.Key:
				flag(e, RuleCheckUnproven, "a check of key %s, the stored result is of %s", d.Key, s.Result.Key)
			case d.Charges != len(d.Entries) || (d.Verdict == VerdictDoubleCharge) != (d.Charges > 1):
				flag(e, RuleCheckUnproven, "verdict %s with %d charges and %d entries", d.Verdict, d.Charges, len(d.Entries))
			}
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
		purchases.add(e)
		if n := purchases.Bought; n > 1+authorised {
			flag(e, RuleOnePurchase, "%d purchases with %d authorised re-purchases", n, authorised)
			authorised = n - 1 // report each extra purchase once
		}
		s.apply(e)
	}
	return out
}
