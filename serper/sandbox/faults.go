package sandbox

import (
	"math/rand"
	"strings"
)

// FaultKind names a fault in Stats.Faults.
type FaultKind string

// The faults, in the order they are drawn (BillingLate, FrontDoor and
// LostRecord last, each from a source of its own).
const (
	FaultDropBeforeSearch      FaultKind = "drop_before_search"
	FaultGatewayPage502        FaultKind = "gateway_page_502"
	FaultRateLimited429        FaultKind = "rate_limited_429"
	FaultSlowSearch            FaultKind = "slow_search"
	FaultTimeout408            FaultKind = "timeout_408"
	FaultFailed424             FaultKind = "failed_424"
	FaultUnavailable503        FaultKind = "unavailable_503"
	FaultZeroResults           FaultKind = "zero_results"
	FaultBillingUnavailable503 FaultKind = "billing_unavailable_503"
	FaultDropAfterSearch       FaultKind = "drop_after_search"
	FaultGatewayPage504        FaultKind = "gateway_page_504"
	FaultEarlyExpiry           FaultKind = "early_expiry"
	FaultBillingLate           FaultKind = "billing_late"
	FaultFrontDoor             FaultKind = "front_door"
	FaultLostRecord            FaultKind = "lost_record"
)

// FaultKinds lists every fault kind in draw order.
func FaultKinds() []FaultKind {
	return []FaultKind{FaultDropBeforeSearch, FaultGatewayPage502, FaultRateLimited429, FaultSlowSearch,
		FaultTimeout408, FaultFailed424, FaultUnavailable503, FaultZeroResults,
		FaultBillingUnavailable503, FaultDropAfterSearch, FaultGatewayPage504, FaultEarlyExpiry, FaultBillingLate,
		FaultFrontDoor, FaultLostRecord}
}

// dice draws faults from seeded sources. Every draw consumes one number
// whatever the probability, so the sequence for a seed does not depend on
// which faults are switched on. BillingLate, FrontDoor and LostRecord draw
// from sources of their own (seeded from the same seed), so switching one
// on leaves the draws of the others where they were. Callers hold the
// server's lock.
type dice struct{ rng, late, front, lost *rand.Rand }

// Seeds that set the sources of the later faults apart from the main one.
const (
	lateSeed  = 0x6c617465 // "late"
	frontSeed = 0x66726e74 // "frnt"
	lostSeed  = 0x6c6f7374 // "lost"
)

func newDice(seed int64) dice {
	src := func(x int64) *rand.Rand { return rand.New(rand.NewSource(seed ^ x)) }
	return dice{rng: src(0), late: src(lateSeed), front: src(frontSeed), lost: src(lostSeed)}
}

func (d dice) roll(p float64) bool { return d.rng.Float64() < p }

// transportFaults happen in front of the API, to any search request.
type transportFaults struct{ dropBefore, gateway502 bool }

func (d dice) transport(f Faults) transportFaults {
	drop := d.roll(f.DropBeforeSearch)
	gw := d.roll(f.GatewayPage502)
	return transportFaults{dropBefore: drop, gateway502: gw && !drop}
}

// plan is what will happen to one execution of a fresh key, drawn when the
// key is recorded.
type plan struct {
	slow    bool
	failure FaultKind // FaultTimeout408, FaultFailed424, FaultUnavailable503 or ""
	zero    bool
	// After the search, to the reply of the request that started it:
	billing503, dropAfter, gateway504 bool
	earlyExpiry                       bool
	// billingLate: the charge is written BillingDelay after the search
	// ends, and the reply is 503 billing_unavailable (as for billing503).
	billingLate bool
}

func (d dice) plan(f Faults) plan {
	var p plan
	p.slow = d.roll(f.SlowSearch)
	for _, c := range []struct {
		kind FaultKind
		prob float64
	}{{FaultTimeout408, f.Timeout408}, {FaultFailed424, f.Failed424}, {FaultUnavailable503, f.Unavailable503}} {
		if d.roll(c.prob) && p.failure == "" {
			p.failure = c.kind
		}
	}
	p.zero = d.roll(f.ZeroResults) && p.failure == ""
	p.billing503 = d.roll(f.BillingUnavailable503)
	p.dropAfter = d.roll(f.DropAfterSearch) && !p.billing503
	p.gateway504 = d.roll(f.GatewayPage504) && !p.billing503 && !p.dropAfter
	p.earlyExpiry = d.roll(f.EarlyExpiry)
	p.billingLate = d.late.Float64() < f.BillingLate
	return p
}

// billingUnavailable reports whether the reply to the request that started
// the execution is 503 billing_unavailable, when the search is charged.
func (p plan) billingUnavailable() bool { return p.billing503 || p.billingLate }

// String lists the faults of the plan, for logs: "none" or "slow_search,drop_after_search".
func (p plan) String() string {
	var names []string
	for _, f := range []struct {
		on   bool
		kind FaultKind
	}{{p.slow, FaultSlowSearch}, {p.failure != "", p.failure}, {p.zero, FaultZeroResults},
		{p.billing503, FaultBillingUnavailable503}, {p.dropAfter, FaultDropAfterSearch},
		{p.gateway504, FaultGatewayPage504}, {p.earlyExpiry, FaultEarlyExpiry}, {p.billingLate, FaultBillingLate}} {
		if f.on {
			names = append(names, string(f.kind))
		}
	}
	if names == nil {
		return "none"
	}
	return strings.Join(names, ",")
}

// frontDoorErrors are what FrontDoor answers: confirmed errors of the API
// that come before the key is looked up.
var frontDoorErrors = []struct {
	status int
	code   string
	msg    string
}{
	{503, "service_unavailable", "the search service is unavailable; try again later"},
	{408, "search_timeout", "the request timed out before the search started"},
	{424, "upstream_failed", "a dependency failed before the search started"},
	{429, "rate_limited", "too many requests; retry after the delay"},
}

// frontDoor draws whether a request gets a front-door error, and which:
// an index into frontDoorErrors, or -1.
func (d dice) frontDoor(f Faults) int {
	hit := d.front.Float64() < f.FrontDoor
	i := d.front.Intn(len(frontDoorErrors))
	if !hit {
		return -1
	}
	return i
}

// lostRecord draws whether a request for a known, billed key finds the
// key's record lost, and if so whether the run it starts loses its reply
// (as DropAfterSearch does).
func (d dice) lostRecord(f Faults) (lost, dropAfter bool) {
	lost = d.lost.Float64() < f.LostRecord
	dropAfter = d.lost.Float64() < f.DropAfterSearch
	return lost, dropAfter
}
