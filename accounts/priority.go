package accounts

import "time"

// Retry says how soon a job that could not start because of a limit asks
// again. wait is what the limit said (0 if unknown): the job asks right
// after it, since capacity nobody asks for in time is lost (a rate's token
// unused when it frees is gone). spread is how widely the jobs held back
// for the same moment spread their asks (0: DefaultSpread), so that they do
// not all ask at once. A high-priority job asks in its first tenth, a
// normal one after, so high-priority jobs take the freed capacity first; a
// normal job kept waiting longer than starveAfter is treated as high
// priority: it is never starved. jitter in [0, 1) places the job.
func Retry(high bool, waitedFor, starveAfter, wait, spread time.Duration, jitter float64) time.Duration {
	wait = max(wait, minRetry)
	if spread <= 0 {
		spread = DefaultSpread
	}
	lead := spread / 10
	if high || waitedFor > starveAfter {
		return wait + time.Duration(jitter*float64(lead))
	}
	return wait + lead + time.Duration(jitter*float64(spread))
}

// RetryBound is the longest Retry gives for wait and spread.
func RetryBound(wait, spread time.Duration) time.Duration {
	return Retry(false, 0, 0, wait, spread, 1)
}

const (
	// DefaultSpread spreads jobs held back by anything but the rate.
	DefaultSpread = 500 * time.Millisecond
	// minRetry keeps a job whose wait is unknown from asking at once.
	minRetry = 10 * time.Millisecond
)

// RateSpread is how widely the jobs the rate holds back spread their asks,
// waiting of them: about eight asks for each search the rate lets start.
// Fewer would leave the rate's tokens unused; more would only add load.
func (l Limits) RateSpread(waiting int) time.Duration {
	if l.RatePerSec <= 0 {
		return DefaultSpread
	}
	interval := time.Duration(float64(time.Second) / l.RatePerSec)
	spread := time.Duration(min(float64(max(waiting, 1))*float64(interval)/8, float64(time.Hour)))
	return max(spread, minRetry)
}
