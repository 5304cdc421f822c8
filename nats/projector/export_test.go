package projector

import "testing"

// SetPartSize makes checkpoint parts hold at most n bytes until t ends.
func SetPartSize(t testing.TB, n int) {
	old := partSize
	partSize = n
	t.Cleanup(func() { partSize = old })
}
