package sim_test

import (
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/internal/sim"
)

var (
	seedFlag  = flag.Uint64("sim.seed", 0, "first seed of the simulation (0: derived from the time, printed)")
	seedsFlag = flag.Int("sim.seeds", 0, "number of seeds (0: the default size)")
	jobsFlag  = flag.Int("sim.jobs", 0, "jobs per seed (0: the default size)")
	verbose   = flag.Bool("sim.v", false, "print every world's report")
	beyond    = flag.Bool("sim.beyond", false, "worlds whose provider breaks its contract as the sandbox's slow searches do (see sim.BeyondContract)")
	longPause = flag.Bool("sim.long-pauses", false, "let a process pause between the engine's last check and the request leaving last as long as any other (see sim.Faults)")
)

// sizes is the default run: about 100,000 jobs in about a minute on two
// cores without the race detector, much less with it or with -short.
func sizes() (seeds, jobs int) {
	seeds, jobs = 200, 500
	switch {
	case testing.Short():
		seeds, jobs = 8, 100
	case raceEnabled:
		seeds, jobs = 12, 150
	}
	if *seedsFlag > 0 {
		seeds = *seedsFlag
	}
	if *jobsFlag > 0 {
		jobs = *jobsFlag
	}
	return seeds, jobs
}

// TestSimulation runs many seeded worlds (see the package doc) and fails
// on the first broken promise, naming the seed that replays it.
func TestSimulation(t *testing.T) {
	base := *seedFlag
	if base == 0 {
		base = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	seeds, jobs := sizes()
	var (
		total      atomic.Int64
		mu         sync.Mutex
		crashes    int
		charges    int
		duplicates int
		apiDoubles int
		apiFound   int
		known      = map[string][]uint64{}
	)
	start := time.Now()
	t.Run("worlds", func(t *testing.T) {
		for i := range seeds {
			seed := base + uint64(i)
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				cfg := sim.RandomConfig(seed, jobs)
				if *beyond {
					cfg = sim.BeyondContract(cfg)
				}
				cfg.Trace = *traceFlag
				cfg.Faults.LongSendPauses = *longPause
				rep := sim.Run(t, cfg, nil)
				total.Add(int64(rep.Jobs))
				mu.Lock()
				crashes += rep.Crashes
				charges += rep.Charges
				duplicates += rep.DuplicateCharges
				apiDoubles += rep.APIDoubleCharges
				apiFound += rep.APIDoublesFound
				for bug := range rep.Known {
					known[bug] = append(known[bug], seed)
				}
				mu.Unlock()
				if *verbose || rep.Failed() {
					t.Log(rep)
				}
				if rep.Failed() {
					t.Fatalf("seed %d broke a promise; rerun it alone with\n\tgo test ./internal/sim -run 'TestSimulation$' -sim.seed %d -sim.seeds 1 -sim.jobs %d -sim.v%s",
						seed, seed, jobs, flagsOf())
				}
			})
		}
	})
	t.Logf("seeds %d..%d: %d jobs in %s; %d worker crashes, %d charges, %d jobs charged twice by serpent; the API's own double charges: %d made, %d found live",
		base, base+uint64(seeds)-1, total.Load(), time.Since(start).Round(time.Millisecond), crashes, charges, duplicates, apiDoubles, apiFound)
	for bug, seeds := range known {
		slices.Sort(seeds)
		t.Logf("known bug %s (see chaos.Bug*) in seeds %v", bug, seeds)
	}
}

var traceFlag = flag.String("sim.trace", "", "job id whose story the report prints (with -sim.seed)")

// flagsOf repeats the flags that change the worlds, for the rerun line.
func flagsOf() string {
	out := ""
	if *beyond {
		out += " -sim.beyond"
	}
	if *longPause {
		out += " -sim.long-pauses"
	}
	return out
}
