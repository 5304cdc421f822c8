//go:build race

package projections

// seeds is how many of a property test's seeds run under the
// race detector, which makes them some ten times slower; every seed runs
// without it.
func seeds(all uint64) uint64 { return max(all/3, 5) }
