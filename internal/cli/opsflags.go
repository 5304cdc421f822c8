package cli

import (
	"flag"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/serper"
)

// opsFlags are the operations flags of "serpent run": readiness and the
// size limit on API replies.
type opsFlags struct {
	readyMaxLag      uint64
	readyMaxBehind   time.Duration
	maxResponseBytes int64
}

// Defaults of the readiness bounds: a few thousand events, or a minute.
const (
	defaultReadyMaxLag    = 5000
	defaultReadyMaxBehind = time.Minute
)

func (o *opsFlags) register(fs *flag.FlagSet) {
	fs.Uint64Var(&o.readyMaxLag, "ready-max-lag", defaultReadyMaxLag, "/readyz fails while more events than this wait to be applied to the projection buckets")
	fs.DurationVar(&o.readyMaxBehind, "ready-max-behind", defaultReadyMaxBehind, "/readyz fails while the oldest event not yet applied to the projection buckets has waited longer than this (by the NATS server's clock)")
	fs.Int64Var(&o.maxResponseBytes, "max-response-bytes", serper.DefaultMaxResponseBytes,
		fmt.Sprintf("largest API reply body read; a larger one is an unknown outcome (oversized_body), resent with the same key (at least 1024). Schedule commands are limited to %d bytes (rejected as too_large)", engine.MaxCommandBytes))
}

// check reports a setting that cannot work.
func (o *opsFlags) check() error {
	if o.readyMaxBehind < 0 {
		return fmt.Errorf("%w: --ready-max-behind %s is negative: the projections are never less than 0s behind, so /readyz would never answer 200 (use 0 for no delay at all)", errUsage, o.readyMaxBehind)
	}
	if o.maxResponseBytes < 1024 {
		return fmt.Errorf("%w: --max-response-bytes %d is under 1024: no search result fits", errUsage, o.maxResponseBytes)
	}
	return nil
}
