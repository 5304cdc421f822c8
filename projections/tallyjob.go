package projections

import (
	"slices"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// jobTally is what a Tally remembers of one job.
type jobTally struct {
	status aggregate.Status
	// purchases are the searches serpent bought (aggregate.Purchases's
	// Bought); apiDoubles the API's own double charges found live.
	purchases   int
	repurchases int
	apiDoubles  int
	// checking: a succeeded job whose stored key's charges wait for a
	// check (aggregate.State.CheckPending). It is still in flight.
	checking bool
}

// doubled reports whether the job's log shows more purchases than one plus
// the re-purchases an operator authorised: a promise broken.
func (j jobTally) doubled() bool { return j.purchases > 1+j.repurchases }

// live reports whether the job still has work ahead: not finished, or
// waiting for the check of its charges.
func (j jobTally) live() bool { return !j.status.Terminal() || j.checking }

// waiting is what the reconciling queue shows of a job in it.
type waiting struct {
	reason string    // why it reconciles
	since  time.Time // when it began to
}

// hexID is a job id of 32 lowercase hex digits, as the 16 bytes it spells.
type hexID [16]byte

// parseHexID returns the bytes id spells, or false if it is not 32
// lowercase hex digits. Only lowercase is taken so that two different ids
// never share bytes.
func parseHexID(id string) (hexID, bool) {
	var h hexID
	if len(id) != 2*len(h) {
		return h, false
	}
	for i := range h {
		hi, lo := hexDigits[id[2*i]], hexDigits[id[2*i+1]]
		if hi|lo > 0xf {
			return hexID{}, false
		}
		h[i] = hi<<4 | lo
	}
	return h, true
}

// hexDigits is the value of each lowercase hex digit, 0xff for any other
// byte.
var hexDigits = func() (d [256]byte) {
	for i := range d {
		d[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		d[c] = byte(i)
	}
	return d
}()

// packedJob is a jobTally in one byte: the status's index in
// packedStatuses (bits 0-3), the purchases (bits 4-5) and the
// re-purchases (bits 6-7).
type packedJob uint8

// packedStatuses are the statuses a packedJob holds, by index. Its length
// is checked at compile time: 4 bits hold 16. The index after them is a
// succeeded job whose charges wait for a check (packedChecking).
var packedStatuses = [...]aggregate.Status{aggregate.StatusNew, aggregate.StatusScheduled,
	aggregate.StatusSending, aggregate.StatusRetrying, aggregate.StatusReconciling,
	aggregate.StatusSucceeded, aggregate.StatusFailed, aggregate.StatusChargedNoResult,
	aggregate.StatusCancelled}

// packedChecking is the status code of a succeeded job still checking.
const packedChecking = len(packedStatuses)

var _ [16 - packedChecking - 1]struct{}

// pack returns j in a byte, or false if it does not fit: a status not in
// packedStatuses, more than 3 purchases or re-purchases, or a double
// charge of the API (rare: such jobs are kept wide).
func pack(j jobTally) (packedJob, bool) {
	code := slices.Index(packedStatuses[:], j.status)
	if j.checking {
		code = packedChecking
		if j.status != aggregate.StatusSucceeded {
			code = -1
		}
	}
	if code < 0 || j.purchases < 0 || j.purchases > 3 || j.repurchases < 0 || j.repurchases > 3 || j.apiDoubles != 0 {
		return 0, false
	}
	return packedJob(code | j.purchases<<4 | j.repurchases<<6), true
}

func (p packedJob) unpack() jobTally {
	j := jobTally{purchases: int(p >> 4 & 3), repurchases: int(p >> 6)}
	if code := int(p & 0xf); code == packedChecking {
		j.status, j.checking = aggregate.StatusSucceeded, true
	} else {
		j.status = packedStatuses[code]
	}
	return j
}

// job returns what t remembers of a job: the zero jobTally if nothing.
func (t *Tally) job(id string, h hexID, isHex bool) jobTally {
	if isHex {
		if p, ok := t.jobs[h]; ok {
			return p.unpack()
		}
	}
	return t.wide[id]
}

// remember keeps j as what t knows of a job, in a byte when it fits, in
// one map only.
func (t *Tally) remember(id string, h hexID, isHex bool, j jobTally) {
	p, fits := pack(j)
	switch {
	case j == (jobTally{}): // nothing to remember
		if isHex {
			delete(t.jobs, h)
		}
		delete(t.wide, id)
	case isHex && fits:
		t.jobs[h] = p
		if len(t.wide) > 0 {
			delete(t.wide, id) // it did not fit before
		}
	default:
		if isHex {
			delete(t.jobs, h)
		}
		t.wide[id] = j
	}
}

// count adds what e says of the job's purchases to j, as
// aggregate.Purchases counts them, and returns what e adds: searches
// serpent bought, and double charges of the API found. A reconciliation
// lists only charges the job had not accounted for before
// (aggregate.Verify checks), so they add up without request ids kept.
func (j *jobTally) count(e events.Event) (bought, apiDoubles int) {
	if _, ok := e.Data.(events.RepurchaseAuthorized); ok {
		j.repurchases++
		return 0, 0
	}
	p := aggregate.PurchasesIn(e)
	j.purchases += p.Bought
	j.apiDoubles += p.Doubled
	return p.Bought, p.Doubled
}

// replayJob is where a job stood before its event of version before, from
// its history: what a Tally would have remembered of it.
func replayJob(history []events.Event, before uint64) jobTally {
	var (
		j      jobTally
		reason string // why it reconciles, which its transitions read
	)
	for _, e := range history {
		if e.Version >= before {
			continue
		}
		j.count(e)
		s := aggregate.Apply(aggregate.State{Status: j.status, Reconcile: reason, CheckPending: j.checking}, e)
		j.status, reason, j.checking = s.Status, s.Reconcile, s.CheckPending
	}
	return j
}
