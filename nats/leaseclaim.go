package nats

import (
	"encoding/json"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// LeaseClaim is what a lease's key says: who holds it, for what, since
// when, when it was last written (by the holder's clock, or the shared
// clock of a lease that has one) and the holder's TTL.
type LeaseClaim struct {
	Holder string
	What   string
	Since  time.Time
	Stamp  time.Time
	TTL    time.Duration
}

// LeaseFormat is how a claim is written in a lease's key. Decode reports
// false for a value that is not a claim.
type LeaseFormat struct {
	Encode func(LeaseClaim) []byte
	Decode func([]byte) (LeaseClaim, bool)
}

// LeaseJSON is the default format: {"holder", "what", "since", "renewed",
// "ttl"}, as docs/design.md documents the projection runner's lease.
var LeaseJSON = LeaseFormat{Encode: encodeLeaseJSON, Decode: ReadLeaseClaim}

// leaseJSON is a claim in LeaseJSON.
type leaseJSON struct {
	Holder  string          `json:"holder"`
	What    string          `json:"what"`
	Since   time.Time       `json:"since"`
	Renewed time.Time       `json:"renewed"`
	TTL     events.Duration `json:"ttl,omitempty"`
}

func encodeLeaseJSON(c LeaseClaim) []byte {
	b, _ := json.Marshal(leaseJSON{Holder: c.Holder, What: c.What, Since: c.Since.UTC(), Renewed: c.Stamp.UTC(), TTL: events.Duration(c.TTL)})
	return b
}

// ReadLeaseClaim reads a claim written in LeaseJSON; false if b is not one.
func ReadLeaseClaim(b []byte) (LeaseClaim, bool) {
	var v leaseJSON
	if json.Unmarshal(b, &v) != nil {
		return LeaseClaim{}, false
	}
	return LeaseClaim{Holder: v.Holder, What: v.What, Since: v.Since, Stamp: v.Renewed, TTL: v.TTL.D()}, true
}
