package audit

import (
	"fmt"
	"slices"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// LedgerSummary accounts for the provider's charges joined to the log.
type LedgerSummary struct {
	// Charges counts distinct charges looked at: entries with a request id
	// by it and their key, entries without one by all they hold
	// (aggregate.ChargeID).
	Charges int `json:"charges"`
	// Observations are charges of accepted first executions; Reconciled
	// charges a reconciliation found and recorded (charged_no_result).
	// DoubleCharged are the further charges the API made under an accepted
	// key, which the check of its charges found and recorded.
	Observations  int `json:"observations"`
	Reconciled    int `json:"reconciled"`
	DoubleCharged int `json:"double_charged"`
	// InFlight are charges of jobs still pending: their outcome is not
	// recorded yet. Cancelled are charges on the key a cancelled job left
	// unresolved, which its cancellation warned of.
	InFlight    int `json:"in_flight"`
	Cancelled   int `json:"cancelled"`
	Unexplained int `json:"unexplained"`
	// BilledPages and AmountMicros total the charges, exact.
	BilledPages  int   `json:"billed_pages"`
	AmountMicros int64 `json:"amount_micros"`
}

// Ledger joins the provider's billing ledger to the jobs added so far, by
// attempt key and request id: each accepted first execution with pages has
// exactly one charge, every charge is explained, and no job is charged
// more than once plus its authorised re-purchases. Call it after every job
// was added; entries found twice count once (see chargeOf).
func (a *Auditor) Ledger(entries []events.LedgerEntry) {
	a.needLedger()
	sum := &LedgerSummary{}
	a.ledger = sum
	byKey, byRequest := map[string]*Job{}, map[string]*Job{}
	for i := range a.jobs {
		j := &a.jobs[i]
		for _, k := range j.Ledger.Keys {
			byKey[k] = j
		}
		for _, r := range j.Ledger.RequestIDs {
			byRequest[r] = j
		}
	}
	seen := map[string]bool{}
	perJob, perAccepted := map[*Job]int{}, map[*Job]int{}
	for _, en := range entries {
		id := chargeOf(en)
		if seen[id] {
			continue
		}
		seen[id] = true
		sum.Charges++
		sum.BilledPages += en.BilledPages
		sum.AmountMicros += en.AmountMicros
		j := byKey[en.Key]
		if j == nil {
			j = byRequest[en.RequestID]
		}
		if j == nil {
			sum.Unexplained++
			a.findings = append(a.findings, Finding{Rule: RuleExplained, Key: en.Key, RequestID: en.RequestID,
				Detail: fmt.Sprintf("charge %s on key %s belongs to no job in the log", en.RequestID, en.Key)})
			continue
		}
		perJob[j]++
		switch why := explain(j, en); why {
		case "observation":
			if perAccepted[j] > 0 {
				sum.DoubleCharged++
			} else {
				sum.Observations++
			}
			perAccepted[j]++
		case "reconciled":
			sum.Reconciled++
		case "in_flight":
			sum.InFlight++
		case "cancelled":
			sum.Cancelled++
		default:
			sum.Unexplained++
			a.findings = append(a.findings, Finding{Rule: RuleExplained, JobID: j.ID, Key: en.Key, RequestID: en.RequestID,
				Detail: fmt.Sprintf("charge %s on key %s (%d billed pages) of a %s job is neither its stored observation nor a charge a reconciliation found",
					en.RequestID, en.Key, en.BilledPages, j.Status)})
		}
	}
	for i := range a.jobs {
		j := &a.jobs[i]
		// The API's own double charges count apart, once the log found
		// them live; one the log did not find is a finding.
		if n, allowed := perJob[j], 1+j.Repurchases+j.Purchases.Doubled; n > allowed {
			a.findings = append(a.findings, Finding{Rule: RuleLedgerPurchases, JobID: j.ID,
				Detail: fmt.Sprintf("the billing ledger has %d charges for the job, %d allowed (%d re-purchases authorised, %d double charges of the API found live)",
					n, allowed, j.Repurchases, j.Purchases.Doubled)})
		}
		if acc := j.Ledger.Accepted; acc.Pages > 0 && perAccepted[j] != acceptedCharges(j) {
			a.findings = append(a.findings, Finding{Rule: RuleOneCharge, JobID: j.ID, Key: acc.Key, RequestID: acc.RequestID,
				Detail: fmt.Sprintf("the accepted execution of key %s (request %s, %d pages) has %d charges in the billing ledger, not the %d its log records",
					acc.Key, acc.RequestID, acc.Pages, perAccepted[j], acceptedCharges(j))})
		}
	}
}

// acceptedCharges is how many charges the accepted key of j has, as its
// log says: one, or what the check of its charges found when it found
// the API's double charge.
func acceptedCharges(j *Job) int {
	return max(1, distinct(j.Ledger.Checked))
}

// distinct counts the charges entries name.
func distinct(entries []events.LedgerEntry) int {
	seen := map[string]bool{}
	for _, en := range entries {
		seen[aggregate.ChargeID(en)] = true
	}
	return len(seen)
}

// chargeOf names the charge an entry records, to count each once however
// often the look-ups find it: by its request id and key, or, without a
// request id, by everything the entry holds (aggregate.ChargeID). Two
// charges on one key without request ids are two.
func chargeOf(en events.LedgerEntry) string {
	if en.RequestID == "" {
		return aggregate.ChargeID(en)
	}
	return en.RequestID + "\x00" + en.Key
}

// explain says why a charge on one of j's keys or request ids exists, or
// "" when nothing in the log explains it.
func explain(j *Job, en events.LedgerEntry) string {
	f := j.Ledger
	if acc := f.Accepted; acc.Pages > 0 && (en.Key == acc.Key || en.RequestID != "" && en.RequestID == acc.RequestID) {
		return "observation"
	}
	id := aggregate.ChargeID(en)
	if slices.ContainsFunc(f.Reconciled, func(r events.LedgerEntry) bool { return aggregate.ChargeID(r) == id }) {
		return "reconciled"
	}
	if !j.Status.Terminal() {
		return "in_flight"
	}
	if j.Status == aggregate.StatusCancelled && f.Unresolved != "" && en.Key == f.Unresolved {
		return "cancelled"
	}
	return ""
}

// Lookups lists what to look up in the billing ledger: every key and
// request id of the jobs added so far.
func (a *Auditor) Lookups() (keys, requestIDs []string) {
	a.needLedger()
	for i := range a.jobs {
		j := &a.jobs[i]
		keys = append(keys, j.Ledger.Keys...)
		requestIDs = append(requestIDs, j.Ledger.RequestIDs...)
	}
	return keys, requestIDs
}

// needLedger panics if the jobs were audited WithoutLedger: what the join
// needs of them was not kept, and a join would find every charge
// unexplained. Past it, every job has its Ledger facts.
func (a *Auditor) needLedger() {
	if a.opts.WithoutLedger {
		panic("audit: the billing ledger joined to an audit made WithoutLedger")
	}
	for i := range a.jobs {
		if a.jobs[i].Ledger == nil {
			panic("audit: the billing ledger joined to job " + a.jobs[i].ID + ", checked WithoutLedger")
		}
	}
}
