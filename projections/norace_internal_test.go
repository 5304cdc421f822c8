//go:build !race

package projections

// seeds is how many of a property test's seeds run: all of them without
// the race detector (see race_internal_test.go).
func seeds(all uint64) uint64 { return all }
