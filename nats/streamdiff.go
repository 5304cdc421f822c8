package nats

import (
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// streamField is one field of a stream configuration that serpent sets.
type streamField struct {
	name string
	// show renders the field for messages; fields compare by it.
	show func(c jetstream.StreamConfig) string
	// skip ignores the field when serpent leaves it to the server.
	skip func(want jetstream.StreamConfig) bool
	// destructive reports whether going from have to want loses data or
	// is refused by JetStream.
	destructive func(have, want jetstream.StreamConfig) bool
	apply       func(dst *jetstream.StreamConfig, src jetstream.StreamConfig)
}

var streamFields = []streamField{
	{name: "subjects", show: func(c jetstream.StreamConfig) string { return fmt.Sprint(slices.Sorted(slices.Values(c.Subjects))) },
		destructive: func(have, want jetstream.StreamConfig) bool {
			for _, s := range have.Subjects {
				if !slices.Contains(want.Subjects, s) {
					return true // messages on it would no longer be reachable by new writes
				}
			}
			return false
		},
		apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.Subjects = s.Subjects }},
	{name: "storage", show: func(c jetstream.StreamConfig) string { return c.Storage.String() },
		destructive: always, apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.Storage = s.Storage }},
	{name: "retention", show: func(c jetstream.StreamConfig) string { return c.Retention.String() },
		destructive: always, apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.Retention = s.Retention }},
	{name: "replicas", show: func(c jetstream.StreamConfig) string { return fmt.Sprint(max(c.Replicas, 1)) },
		// Fewer copies of a paid ledger is not a change to make on a
		// restart's flags: an operator scales a stream down by hand.
		destructive: func(have, want jetstream.StreamConfig) bool { return max(want.Replicas, 1) < max(have.Replicas, 1) },
		apply:       func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.Replicas = s.Replicas }},
	// An async persist mode acknowledges writes before they are synced, on
	// a server that syncs every write; the server cannot change it.
	{name: "persist_mode", show: func(c jetstream.StreamConfig) string { return c.PersistMode.String() },
		destructive: always, apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.PersistMode = s.PersistMode }},
	limitField("max_age", func(c jetstream.StreamConfig) int64 { return int64(c.MaxAge) },
		func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.MaxAge = s.MaxAge }),
	limitField("max_bytes", func(c jetstream.StreamConfig) int64 { return c.MaxBytes },
		func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.MaxBytes = s.MaxBytes }),
	limitField("max_msgs", func(c jetstream.StreamConfig) int64 { return c.MaxMsgs },
		func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.MaxMsgs = s.MaxMsgs }),
	limitField("max_msgs_per_subject", func(c jetstream.StreamConfig) int64 { return c.MaxMsgsPerSubject },
		func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.MaxMsgsPerSubject = s.MaxMsgsPerSubject }),
	{name: "max_msg_size", show: func(c jetstream.StreamConfig) string { return unlimited(int64(c.MaxMsgSize)) },
		apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.MaxMsgSize = s.MaxMsgSize }},
	{name: "discard", show: func(c jetstream.StreamConfig) string { return c.Discard.String() },
		apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.Discard = s.Discard }},
	{name: "duplicate_window", show: func(c jetstream.StreamConfig) string { return c.Duplicates.String() },
		skip:  func(w jetstream.StreamConfig) bool { return w.Duplicates == 0 },
		apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.Duplicates = s.Duplicates }},
	boolField("allow_direct", func(c *jetstream.StreamConfig) *bool { return &c.AllowDirect }, false),
	boolField("allow_atomic", func(c *jetstream.StreamConfig) *bool { return &c.AllowAtomicPublish }, false),
	boolField("allow_batched", func(c *jetstream.StreamConfig) *bool { return &c.AllowBatchPublish }, false),
	boolField("allow_rollup_hdrs", func(c *jetstream.StreamConfig) *bool { return &c.AllowRollup }, false),
	boolField("deny_delete", func(c *jetstream.StreamConfig) *bool { return &c.DenyDelete }, true),
	boolField("deny_purge", func(c *jetstream.StreamConfig) *bool { return &c.DenyPurge }, true),
	boolField("allow_msg_ttl", func(c *jetstream.StreamConfig) *bool { return &c.AllowMsgTTL }, true),
	boolField("allow_msg_schedules", func(c *jetstream.StreamConfig) *bool { return &c.AllowMsgSchedules }, true),
	{name: "allow_msg_counter", show: func(c jetstream.StreamConfig) string { return fmt.Sprint(c.AllowMsgCounter) },
		destructive: always, apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.AllowMsgCounter = s.AllowMsgCounter }},
	{name: "compression", show: func(c jetstream.StreamConfig) string { return c.Compression.String() },
		skip:  func(w jetstream.StreamConfig) bool { return w.Compression == jetstream.NoCompression },
		apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.Compression = s.Compression }},
	{name: "description", show: func(c jetstream.StreamConfig) string { return fmt.Sprintf("%q", c.Description) },
		skip:  func(w jetstream.StreamConfig) bool { return w.Description == "" },
		apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { d.Description = s.Description }},
}

func always(_, _ jetstream.StreamConfig) bool { return true }

func unlimited(v int64) string {
	if v <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(v)
}

// limitField compares a limit where zero and negative mean none. A limit
// that is new or tighter would delete messages: destructive.
func limitField(name string, get func(jetstream.StreamConfig) int64, apply func(*jetstream.StreamConfig, jetstream.StreamConfig)) streamField {
	show := func(c jetstream.StreamConfig) string {
		v := get(c)
		if name == "max_age" && v > 0 {
			return time.Duration(v).String()
		}
		return unlimited(v)
	}
	return streamField{name: name, show: show, apply: apply,
		destructive: func(have, want jetstream.StreamConfig) bool {
			h, w := get(have), get(want)
			return w > 0 && (h <= 0 || w < h)
		}}
}

// boolField compares a flag; if oneWay, turning it off is refused by
// JetStream (or would weaken the append-only log).
func boolField(name string, field func(*jetstream.StreamConfig) *bool, oneWay bool) streamField {
	return streamField{name: name,
		show: func(c jetstream.StreamConfig) string { return fmt.Sprint(*field(&c)) },
		destructive: func(have, want jetstream.StreamConfig) bool {
			return oneWay && *field(&have) && !*field(&want)
		},
		apply: func(d *jetstream.StreamConfig, s jetstream.StreamConfig) { *field(d) = *field(&s) }}
}

// diffStreamConfig lists the fields serpent sets that differ.
func diffStreamConfig(want, have jetstream.StreamConfig) []FieldDiff {
	var diffs []FieldDiff
	for _, f := range streamFields {
		if f.skip != nil && f.skip(want) {
			continue
		}
		h, w := f.show(have), f.show(want)
		if h == w {
			continue
		}
		d := FieldDiff{Field: f.name, Have: h, Want: w}
		if f.destructive != nil {
			d.Destructive = f.destructive(have, want)
		}
		diffs = append(diffs, d)
	}
	return diffs
}

// mergeStreamConfig is have with the differing fields taken from want, so
// whatever the server filled in stays as it is.
func mergeStreamConfig(have, want jetstream.StreamConfig, diffs []FieldDiff) jetstream.StreamConfig {
	out := have
	for _, d := range diffs {
		for _, f := range streamFields {
			if f.name == d.Field {
				f.apply(&out, want)
			}
		}
	}
	return out
}
