package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/internal/sim"
)

// TestSimulationWithRetention runs seeded worlds whose engines keep jobs
// in the live log for a short horizon: most jobs leave it before the end.
// Every promise holds over the live log and the archive together, and a
// job leaves whole: never a part of it live.
func TestSimulationWithRetention(t *testing.T) {
	seeds, jobs := 6, 150
	if testing.Short() || raceEnabled {
		seeds, jobs = 3, 100
	}
	base := uint64(time.Now().UnixNano()) % 1_000_000_000
	if *seedFlag != 0 {
		base = *seedFlag
	}
	for i := range seeds {
		seed := base + uint64(i)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			cfg := sim.RandomConfig(seed, jobs)
			cfg.Policy.MaxAge = events.Duration(30 * time.Minute)
			cfg.SkewMargin = 5 * time.Minute
			// Longer than the spread: a command published late in it still
			// makes its job. Jobs leave before the world ends.
			cfg.Retention = 2 * time.Hour
			rep := sim.Run(t, cfg, nil)
			if *verbose || rep.Failed() {
				t.Log(rep)
			}
			if rep.Failed() {
				t.Fatalf("seed %d broke a promise with a retention of %s; rerun it with\n\tgo test ./internal/sim -run 'TestSimulationWithRetention$' -sim.seed %d",
					seed, cfg.Retention, seed)
			}
			if rep.Expired == 0 {
				t.Fatalf("seed %d: no job left the live log in %s", seed, rep.SimTime)
			}
		})
	}
}
