package accounts

import "time"

// Retry says how soon a job that could not start because of a limit tries
// again. A high-priority job tries soon and often; a normal one waits
// longer, so high-priority jobs take the freed capacity first, but a normal
// job that has been kept waiting longer than starveAfter is treated as high
// priority: it is never starved. wait is what the limit said (0 if
// unknown); jitter in [0, 1) spreads jobs apart.
func Retry(high bool, waitedFor, starveAfter, wait time.Duration, jitter float64) time.Duration {
	base := max(wait, 50*time.Millisecond)
	if high || waitedFor > starveAfter {
		return base + time.Duration(jitter*float64(50*time.Millisecond))
	}
	return 2*base + 250*time.Millisecond + time.Duration(jitter*float64(500*time.Millisecond))
}
