package audit

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIndex: jobs added one at a time or many at once, some of them twice,
// are found at the place a map would give them, and IDs never added are
// not found, however the index grew.
func TestIndex(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		var x index
		var jobs []Job
		want := map[string]int{}
		id := func() string { return fmt.Sprintf("job-%d", r.IntN(4000)) }
		for range 1 + r.IntN(40) {
			batch := make([]string, r.IntN(1+r.IntN(300)))
			for i := range batch {
				batch[i] = id()
			}
			x.reserve(jobs, len(jobs)+len(batch))
			for _, b := range batch {
				at, slot := x.find(jobs, b)
				if p, ok := want[b]; ok {
					require.Equal(t, p, at, "seed %d: %s added before", seed, b)
					continue
				}
				require.Equal(t, -1, at, "seed %d: %s not added yet", seed, b)
				x.add(slot, len(jobs))
				want[b] = len(jobs)
				jobs = append(jobs, Job{ID: b})
			}
			require.LessOrEqual(t, 4*len(jobs), 3*len(x.slots), "seed %d: at most three quarters used", seed)
		}
		for range 500 {
			b := id()
			at, _ := x.find(jobs, b)
			p, ok := want[b]
			if !ok {
				p = -1
			}
			require.Equal(t, p, at, "seed %d: %s", seed, b)
		}
	}
}

// TestIndexOfNothing: an index nothing was added to finds nothing.
func TestIndexOfNothing(t *testing.T) {
	var x index
	at, _ := x.find(nil, "job")
	require.Equal(t, -1, at)
	x.reserve(nil, 0)
	at, _ = x.find(nil, "job")
	require.Equal(t, -1, at)
}
