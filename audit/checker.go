package audit

import (
	"sync"

	"github.com/serpent-engine/serpent/events"
)

// checker runs CheckJob on histories in parallel, and keeps the
// jobs in the places the reader gave them (the order of their first
// events); a job checked again (read again whole, round 1) replaces its
// first result, whichever finishes first.
type checker struct {
	opts   Options
	work   chan history
	wg     sync.WaitGroup
	once   sync.Once
	mu     sync.Mutex
	jobs   []Job
	rounds []int8 // of jobs: 0 for none yet, else the round plus one
	events []int  // of jobs
}

type history struct {
	at    int
	evs   []events.Event
	round int8
}

func newChecker(o Options) *checker {
	c := &checker{opts: o, work: make(chan history, 4*o.Workers)}
	for range o.Workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for h := range c.work {
				j := CheckJob(h.evs, c.opts)
				c.mu.Lock()
				for len(c.jobs) <= h.at {
					c.jobs, c.rounds, c.events = append(c.jobs, Job{}), append(c.rounds, 0), append(c.events, 0)
				}
				if c.rounds[h.at] <= h.round+1 {
					c.jobs[h.at], c.rounds[h.at], c.events[h.at] = j, h.round+1, len(h.evs)
				}
				c.mu.Unlock()
			}
		}()
	}
	return c
}

// check queues the history of the job at place at.
func (c *checker) check(at int, evs []events.Event, round int8) {
	c.work <- history{at: at, evs: evs, round: round}
}

// close waits for every check and returns the jobs, in their places, and
// the events they were checked on (those of each job's last round); safe
// to call twice.
func (c *checker) close() ([]Job, int) {
	c.once.Do(func() {
		close(c.work)
		c.wg.Wait()
	})
	n := 0
	for _, e := range c.events {
		n += e
	}
	return c.jobs, n
}
