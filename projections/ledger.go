package projections

import (
	"slices"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// KeyLedger is what serp_ledger holds under key.<attempt key>: what one
// Idempotency-Key was used for and what it bought, as the log tells it.
type KeyLedger struct {
	Key     string `json:"key"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	// Reason is why the key was made: "scheduled" for a job's first key,
	// else the KeyRotated reason (search_timeout, not_charged, repurchase...).
	Reason    string     `json:"reason,omitempty"`
	CreatedAt time.Time  `json:"created_at,omitzero"`
	FirstSend *time.Time `json:"first_send,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	// Sends counts the requests that carried the key (Sent events).
	Sends int `json:"sends"`
	// Replays counts replies marked Idempotent-Replayed: true.
	Replays    int      `json:"replays"`
	RequestIDs []string `json:"request_ids,omitempty"`
	LastClass  string   `json:"last_class,omitempty"`
	// DeadlineReached is set when the key's outcome was still unknown at
	// its deadline and it went to reconciliation.
	DeadlineReached bool `json:"deadline_reached,omitempty"`
	// Accepted is set when the job's observation is this key's execution:
	// the key's one first execution, whose charge (if it had pages with
	// results) is the job's purchase.
	Accepted bool `json:"accepted"`
	// Pages are that execution's pages with results: the pages the
	// provider bills once the account's free pages are used.
	Pages int `json:"pages"`
	// Reconciled is the verdict of the last reconciliation that looked the
	// key up (charged, not_charged); Charges are the charges it found on
	// the key, exact, from the billing ledger.
	Reconciled string               `json:"reconciled,omitempty"`
	Charges    []events.LedgerEntry `json:"charges,omitempty"`
	// Checked is the verdict of the check of the accepted key's charges
	// (confirmed, double_charge), whose charges are in Charges too.
	Checked string `json:"checked,omitempty"`
	Seq     uint64 `json:"seq"`
}

func (k *KeyLedger) lastSeq() uint64 { return k.Seq }

func (k *KeyLedger) apply(r Record) {
	e := r.Event
	k.Seq = r.Seq
	if k.JobID == "" {
		k.JobID = e.JobID
	}
	switch d := e.Data.(type) {
	case events.AttemptCreated:
		k.Key, k.Attempt, k.Reason, k.CreatedAt = d.Key, d.Attempt, "scheduled", e.Time
	case events.KeyRotated:
		k.Key, k.Attempt, k.Reason, k.CreatedAt = d.NewKey, d.Attempt, d.Reason, e.Time
	case events.Sent:
		k.Key = d.Key
		k.Sends++
		if k.FirstSend == nil {
			at, dl := e.Time, d.Deadline
			k.FirstSend, k.Deadline = &at, &dl
		}
	case events.OutcomeClassified:
		k.Key = d.Key
		if d.Replayed {
			k.Replays++
		}
		k.RequestIDs = appendNew(k.RequestIDs, d.RequestID)
		k.LastClass = d.Class
	case events.DeadlineReached:
		k.Key = d.Key
		k.DeadlineReached = true
	case events.Reconciled:
		if slices.Contains(d.Keys, k.Key) {
			k.Reconciled = d.Verdict
		}
		for _, en := range d.Entries {
			if en.Key == k.Key {
				k.Charges = appendCharge(k.Charges, en)
			}
		}
	case events.ChargesChecked:
		k.Checked = d.Verdict
		for _, en := range d.Entries {
			k.Charges = appendCharge(k.Charges, en)
		}
	case events.ObservationStored:
		k.Key = d.Key
		k.Accepted, k.Pages = true, d.Pages
		if d.Replayed {
			k.Replays++
		}
		k.RequestIDs = appendNew(k.RequestIDs, d.RequestID)
		k.LastClass = string(aggregate.ClassSuccess)
	}
}

// JobLedger is what serp_ledger holds under job.<job_id>: the purchases of
// one job.
type JobLedger struct {
	JobID   string   `json:"job_id"`
	Keys    []string `json:"keys"`
	Sends   int      `json:"sends"`
	Replays int      `json:"replays"`
	// Purchases counts the searches serpent bought: the stored
	// observation and every key the reconciliations found charged
	// (charged_no_result), as aggregate.Purchases counts them. More than
	// 1 + RepurchasesAuthorized breaks a promise; the audit reports it.
	// DoubleCharges are the API's own double charges under one key that
	// the log found live.
	Purchases             int `json:"purchases"`
	DoubleCharges         int `json:"double_charges,omitempty"`
	RepurchasesAuthorized int `json:"repurchases_authorized"`
	// AcceptedKey is the key whose execution the job stored; Pages are its
	// pages with results.
	AcceptedKey string `json:"accepted_key,omitempty"`
	Pages       int    `json:"pages"`
	// Charges are the charges reconciliations and checks found, exact.
	Charges []events.LedgerEntry `json:"charges,omitempty"`
	Seq     uint64               `json:"seq"`
}

func (j *JobLedger) lastSeq() uint64 { return j.Seq }

func (j *JobLedger) apply(r Record) {
	e := r.Event
	j.Seq, j.JobID = r.Seq, e.JobID
	if j.Keys == nil {
		j.Keys = []string{}
	}
	switch d := e.Data.(type) {
	case events.AttemptCreated:
		j.Keys = appendNew(j.Keys, d.Key)
	case events.KeyRotated:
		j.Keys = appendNew(j.Keys, d.NewKey)
	case events.Sent:
		j.Sends++
	case events.OutcomeClassified:
		if d.Replayed {
			j.Replays++
		}
	case events.ObservationStored:
		j.Purchases++
		j.AcceptedKey, j.Pages = d.Key, d.Pages
		if d.Replayed {
			j.Replays++
		}
	case events.Reconciled:
		if d.Verdict != aggregate.VerdictCharged {
			break // lists no charge (aggregate.Verify checks)
		}
		if len(d.Entries) == 0 {
			j.Purchases++ // a charge recorded without its entries
		}
		j.addCharges(d.Entries)
	case events.ChargesChecked:
		j.addCharges(d.Entries)
	case events.RepurchaseAuthorized:
		j.RepurchasesAuthorized++
	}
}

// addCharges counts charges found in the billing ledger as
// aggregate.Purchases does: the first on a key other than the accepted
// one is a purchase, the first on the accepted key that purchase's
// charge, any other on a key the API's double charge. A charge found
// again counts once.
func (j *JobLedger) addCharges(entries []events.LedgerEntry) {
	for _, en := range entries {
		before := len(j.Charges)
		key := en.Key
		charged := slices.ContainsFunc(j.Charges, func(x events.LedgerEntry) bool { return key != "" && x.Key == key })
		if j.Charges = appendCharge(j.Charges, en); len(j.Charges) == before {
			continue
		}
		switch {
		case charged:
			j.DoubleCharges++
		case key == "" || key != j.AcceptedKey:
			j.Purchases++
		}
	}
}

// DayLedger is what serp_ledger holds under day.<YYYY-MM-DD>: the day's
// traffic and purchases, by the UTC time of the events.
type DayLedger struct {
	Day     string `json:"day"`
	Sends   int    `json:"sends"`
	Replays int    `json:"replays"`
	// Searches counts accepted first executions: observations stored that
	// day. Pages are their pages with results.
	Searches int `json:"searches"`
	Pages    int `json:"pages"`
	// ChargedNoResult counts reconciliations that found a charge without a
	// result; ChargedPages and ChargedAmountMicros are those charges,
	// exact, from the billing ledger.
	ChargedNoResult     int   `json:"charged_no_result"`
	ChargedPages        int   `json:"charged_pages"`
	ChargedAmountMicros int64 `json:"charged_amount_micros"`
	// DoubleCharges count the charges beyond the first that the API made
	// under one key, found that day by a check of a stored key's charges;
	// DoubleChargedMicros is their amount, exact.
	DoubleCharges       int   `json:"double_charges,omitempty"`
	DoubleChargedMicros int64 `json:"double_charged_micros,omitempty"`
	Repurchases         int   `json:"repurchases"`
	// EstSpendMicros is an ESTIMATE: Pages × PriceMicrosPerPage plus
	// ChargedAmountMicros. It ignores free pages and price changes;
	// serpent audit --ledger gives the exact charges.
	EstSpendMicros     int64  `json:"est_spend_micros"`
	PriceMicrosPerPage int64  `json:"price_micros_per_page"`
	Seq                uint64 `json:"seq"`
}

func (d *DayLedger) lastSeq() uint64 { return d.Seq }

func (d *DayLedger) apply(r Record) {
	e := r.Event
	d.Seq, d.Day = r.Seq, e.Time.UTC().Format(DayLayout)
	switch p := e.Data.(type) {
	case events.Sent:
		d.Sends++
	case events.OutcomeClassified:
		if p.Replayed {
			d.Replays++
		}
	case events.ObservationStored:
		d.Searches++
		d.Pages += p.Pages
		if p.Replayed {
			d.Replays++
		}
	case events.Reconciled:
		if p.Verdict != aggregate.VerdictCharged {
			break
		}
		// A charged verdict lists only charges the job had not accounted
		// for before (aggregate.Verify checks): the day adds them up.
		d.ChargedNoResult++
		for _, en := range p.Entries {
			d.ChargedPages += en.BilledPages
			d.ChargedAmountMicros += en.AmountMicros
		}
	case events.RepurchaseAuthorized:
		d.Repurchases++
	case events.ChargesChecked:
		// The first charge is the stored observation's, which the day of
		// its storing counts; the others are the API's doubles.
		for i, en := range p.Entries {
			if i > 0 {
				d.DoubleCharges++
				d.DoubleChargedMicros += en.AmountMicros
			}
		}
	}
}

// estimate fills the spend estimate at the given price.
func (d *DayLedger) estimate(price int64) {
	d.PriceMicrosPerPage = price
	d.EstSpendMicros = int64(d.Pages)*price + d.ChargedAmountMicros + d.DoubleChargedMicros
}

func appendNew(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// appendCharge adds a ledger entry unless its charge (aggregate.ChargeID)
// is already there: a charge counts once however often it is found.
func appendCharge(list []events.LedgerEntry, en events.LedgerEntry) []events.LedgerEntry {
	for _, x := range list {
		if aggregate.ChargeID(x) == aggregate.ChargeID(en) {
			return list
		}
	}
	return append(list, en)
}
