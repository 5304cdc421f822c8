package projector

import (
	"container/list"

	"github.com/serpent-engine/serpent/projections"
)

// entry is a value as last written or read, at its KV revision. rev 0
// with a nil value means the key does not exist (or was deleted at
// deleted).
type entry struct {
	rev   uint64
	value []byte
}

// cache remembers recent values so a runner does not read back what it
// wrote itself. It may be stale (someone else wrote since): every write is
// a compare-and-set on the cached revision, and a failed one drops the
// entry and reads again.
type cache struct {
	max   int
	ll    *list.List
	items map[projections.Target]*list.Element
}

type cached struct {
	t projections.Target
	e entry
}

func newCache(max int) *cache {
	return &cache{max: max, ll: list.New(), items: map[projections.Target]*list.Element{}}
}

func (c *cache) get(t projections.Target) (entry, bool) {
	if el, ok := c.items[t]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*cached).e, true
	}
	return entry{}, false
}

func (c *cache) put(t projections.Target, e entry) {
	if c.max <= 0 || t.Bucket == projections.ObservationsBucket {
		return // results are large and written once per job
	}
	if el, ok := c.items[t]; ok {
		el.Value.(*cached).e = e
		c.ll.MoveToFront(el)
		return
	}
	c.items[t] = c.ll.PushFront(&cached{t: t, e: e})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*cached).t)
	}
}

func (c *cache) drop(t projections.Target) {
	if el, ok := c.items[t]; ok {
		c.ll.Remove(el)
		delete(c.items, t)
	}
}

func (c *cache) clear() {
	c.ll.Init()
	clear(c.items)
}
