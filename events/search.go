package events

import "time"

// SearchContext is everything Serper.live is asked for one observation. With
// the slot it identifies a scheduled observation.
type SearchContext struct {
	Query    string `json:"query"`
	Country  string `json:"country"`
	Language string `json:"language"`
	Device   string `json:"device"`
	Limit    int    `json:"limit"`
}

// RetryPolicy is the snapshot of the retry rules a job was scheduled with.
// It travels in JobScheduled so that a job's decisions can be replayed and
// audited with the rules that were in force, whatever the configuration says
// today.
type RetryPolicy struct {
	// BaseDelay and MaxDelay bound the exponential backoff; the delay before
	// retry n is drawn from [MinDelay, min(MaxDelay, BaseDelay*2^n)].
	BaseDelay Duration `json:"base_delay"`
	MaxDelay  Duration `json:"max_delay"`
	MinDelay  Duration `json:"min_delay"`
	// RetryAfterMax caps how long a Retry-After answer can make a job wait.
	RetryAfterMax Duration `json:"retry_after_max"`
	// ReplayWindow is how long the API remembers a key after its first
	// execution; SafetyMargin is kept free at its end. A key is never sent
	// after first_send + ReplayWindow - SafetyMargin.
	ReplayWindow Duration `json:"replay_window"`
	SafetyMargin Duration `json:"safety_margin"`
	// Lease is how long a claim (a Sent event) keeps other workers away. It
	// covers the client timeout plus a margin.
	Lease Duration `json:"lease"`
	// MaxKeys is the budget of attempt keys per job; MaxAge the budget of
	// time from scheduling to the last new purchase attempt.
	MaxKeys int      `json:"max_keys"`
	MaxAge  Duration `json:"max_age"`
	// Retention is how long the job stays in the live log after its slot
	// (or its scheduling, if later); then the log and the views drop it
	// and only the archive keeps it. 0 keeps it for ever.
	Retention Duration `json:"retention,omitempty"`
}

// Duration is a time.Duration written as text ("1m30s") so the log reads
// well in any JSON viewer.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalText writes the duration in Go syntax, for example "1m30s".
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}

// UnmarshalText reads a duration in Go syntax.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
