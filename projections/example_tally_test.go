package projections_test

import (
	"fmt"
	"testing"

	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// A Tally counts what the log says: here the six sample jobs of
// projectionstest, one of them bought twice with an operator's consent.
func ExampleTally() {
	t := &testing.T{}
	tally := projections.NewTally()
	for _, r := range projectionstest.Interleave(projectionstest.SampleLog(t)) {
		tally.Apply(r)
	}
	c := tally.Counts()
	fmt.Println("succeeded:", c.Jobs["succeeded"], "failed:", c.Jobs["failed"], "scheduled:", c.Jobs["scheduled"])
	fmt.Println("purchases:", c.Purchases, "pages:", c.ResultPages+c.ChargedPages)
	fmt.Println("suspected double charges:", c.DoubleCharges)
	// Output:
	// succeeded: 4 failed: 1 scheduled: 1
	// purchases: 5 pages: 5
	// suspected double charges: 0
}
