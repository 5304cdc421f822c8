package projector

import (
	"sync"

	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
)

// checker runs audit.CheckJob on histories in parallel; a job checked
// again (read again whole, round 1) replaces its first result, whichever
// finishes first.
type checker struct {
	opts    audit.Options
	work    chan history
	wg      sync.WaitGroup
	once    sync.Once
	mu      sync.Mutex
	results map[string]checked
}

type history struct {
	id    string
	evs   []events.Event
	round int
}

type checked struct {
	job    audit.Job
	events int
	round  int
}

func newChecker(o AuditOptions) *checker {
	c := &checker{opts: o.Audit, work: make(chan history, 4*o.Workers), results: map[string]checked{}}
	for range o.Workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for h := range c.work {
				j := audit.CheckJob(h.evs, c.opts)
				c.mu.Lock()
				if prev, ok := c.results[h.id]; !ok || prev.round <= h.round {
					c.results[h.id] = checked{job: j, events: len(h.evs), round: h.round}
				}
				c.mu.Unlock()
			}
		}()
	}
	return c
}

// check queues a history.
func (c *checker) check(id string, evs []events.Event, round int) {
	c.work <- history{id: id, evs: evs, round: round}
}

// close waits for every check; safe to call twice.
func (c *checker) close() map[string]checked {
	c.once.Do(func() {
		close(c.work)
		c.wg.Wait()
	})
	return c.results
}
