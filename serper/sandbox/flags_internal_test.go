package sandbox

import "testing"

// TestEveryFaultHasAFlag: serpent sandbox and serpent chaos declare their
// fault flags from Faults.Flags, so a fault without a flag could not be
// switched on from either.
func TestEveryFaultHasAFlag(t *testing.T) {
	var f Faults
	flagged := map[*float64]bool{}
	for _, fl := range f.Flags() {
		flagged[fl.P] = true
	}
	for kind, p := range f.probabilities() {
		if !flagged[p] {
			t.Errorf("fault %s has no flag", kind)
		}
	}
	if len(flagged) != len(FaultKinds()) {
		t.Errorf("%d flags for %d faults", len(flagged), len(FaultKinds()))
	}
}
