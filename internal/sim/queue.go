package sim

import (
	"container/heap"
	"time"
)

// queue models what the engine reads from JetStream: the intake consumer
// on SERP_COMMANDS and the work consumer on SERP_WORK with its timers.
// It keeps JetStream's rules as the engine relies on them:
//
//   - a delivered message that is not acknowledged within the ack wait is
//     delivered again (a keep-alive restarts the wait);
//   - a negative acknowledgement makes it deliverable after its delay;
//   - SERP_WORK holds at most one message per job: a new wake-up replaces
//     the old one, whose later acknowledgement no longer matters;
//   - arming a job's timer replaces its earlier timer; a due timer fires a
//     wake-up;
//   - the server stamps each message it stores, and fires timers, by its
//     own clock, which may run ahead of the workers' (ahead).
//
// Times passed in are the workers' (the world's clock).
type queue struct {
	ahead  time.Duration // the server's clock less the workers'
	seq    uint64
	work   map[string]*message // a job's current message in SERP_WORK
	timers map[string]*timer   // at: by the server's clock
	due    msgHeap             // work messages by the time they can be delivered
	cmds   msgHeap             // commands likewise
	clock  timerHeap
}

// message is one message of SERP_WORK (job set) or SERP_COMMANDS (cmd set).
type message struct {
	seq        uint64
	job        string
	cmd        *command
	stored     time.Time // when it was published (a wake-up: when its timer fired)
	at         time.Time // deliverable from
	gen        int       // bumped when at changes; older heap entries are stale
	deliveries int
	settled    bool // acknowledged, terminated or replaced
}

type timer struct {
	job string
	at  time.Time
	gen int
}

func newQueue(ahead time.Duration) *queue {
	return &queue{ahead: ahead, work: map[string]*message{}, timers: map[string]*timer{}}
}

// server is the server's clock when the workers' reads now.
func (q *queue) server(now time.Time) time.Time { return now.Add(q.ahead) }

// publishWork puts a wake-up of job on SERP_WORK, replacing the last one.
func (q *queue) publishWork(job string, now time.Time) {
	if old := q.work[job]; old != nil {
		old.settled = true
	}
	q.seq++
	m := &message{seq: q.seq, job: job, stored: q.server(now), at: now}
	q.work[job] = m
	heap.Push(&q.due, msgEntry{m, m.gen, m.at})
}

// publishCommand puts a command on SERP_COMMANDS at its publish time.
func (q *queue) publishCommand(c *command) *message {
	q.seq++
	m := &message{seq: q.seq, cmd: c, stored: q.server(c.publishAt), at: c.publishAt}
	heap.Push(&q.cmds, msgEntry{m, m.gen, m.at})
	return m
}

// arm sets job's timer for at by the server's clock, replacing the earlier
// one; a time the server has passed wakes the job at once.
func (q *queue) arm(job string, at, now time.Time) {
	if !at.After(q.server(now)) {
		// As nats.Timers does: a due wake-up is published at once; a
		// timer armed earlier stays and fires later, harmlessly.
		q.publishWork(job, now)
		return
	}
	t := q.timers[job]
	if t == nil {
		t = &timer{job: job}
		q.timers[job] = t
	}
	t.at = at
	t.gen++
	heap.Push(&q.clock, timerEntry{t, t.gen, at})
}

// fire publishes the wake-ups of every timer the server finds due at now.
func (q *queue) fire(now time.Time) {
	for q.clock.Len() > 0 {
		e := q.clock[0]
		if e.gen != e.t.gen || q.timers[e.t.job] != e.t {
			heap.Pop(&q.clock)
			continue
		}
		if e.at.After(q.server(now)) {
			return
		}
		heap.Pop(&q.clock)
		delete(q.timers, e.t.job)
		q.publishWork(e.t.job, now)
	}
}

// next returns the first message of h deliverable by now, or nil.
func next(h *msgHeap, now time.Time) *message {
	for h.Len() > 0 {
		e := (*h)[0]
		if e.m.settled || e.gen != e.m.gen {
			heap.Pop(h)
			continue
		}
		if e.at.After(now) {
			return nil
		}
		return e.m
	}
	return nil
}

// deliver hands m to a worker: it comes back after ackWait unless
// acknowledged or kept alive.
func (q *queue) deliver(m *message, now time.Time, ackWait time.Duration) {
	m.deliveries++
	q.retime(m, now.Add(ackWait))
}

// keepAlive restarts m's ack wait (a worker's "in progress").
func (q *queue) keepAlive(m *message, now time.Time, ackWait time.Duration) {
	if !m.settled && now.Add(ackWait).After(m.at) {
		q.retime(m, now.Add(ackWait))
	}
}

// nak makes m deliverable again after delay.
func (q *queue) nak(m *message, now time.Time, delay time.Duration) {
	if !m.settled {
		q.retime(m, now.Add(delay))
	}
}

// ack removes m, whichever delivery of it is acknowledged.
func (q *queue) ack(m *message) {
	m.settled = true
	if m.job != "" && q.work[m.job] == m {
		delete(q.work, m.job)
	}
}

func (q *queue) retime(m *message, at time.Time) {
	m.at = at
	m.gen++
	h := &q.due
	if m.cmd != nil {
		h = &q.cmds
	}
	heap.Push(h, msgEntry{m, m.gen, m.at})
}

// nextEvent is the earliest time a message becomes deliverable or a timer
// fires; zero if nothing is pending.
func (q *queue) nextEvent() time.Time {
	var t time.Time
	earlier := func(at time.Time) {
		if t.IsZero() || at.Before(t) {
			t = at
		}
	}
	for _, h := range []*msgHeap{&q.due, &q.cmds} {
		for h.Len() > 0 {
			e := (*h)[0]
			if e.m.settled || e.gen != e.m.gen {
				heap.Pop(h)
				continue
			}
			earlier(e.at)
			break
		}
	}
	for q.clock.Len() > 0 {
		e := q.clock[0]
		if e.gen != e.t.gen || q.timers[e.t.job] != e.t {
			heap.Pop(&q.clock)
			continue
		}
		earlier(e.at.Add(-q.ahead))
		break
	}
	return t
}

// pending reports whether anything is left to deliver or fire.
func (q *queue) pending() bool { return !q.nextEvent().IsZero() }

type msgEntry struct {
	m   *message
	gen int
	at  time.Time
}

// msgHeap orders messages by deliverable time, then publish order.
type msgHeap []msgEntry

func (h msgHeap) Len() int { return len(h) }
func (h msgHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].m.seq < h[j].m.seq
}
func (h msgHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *msgHeap) Push(x any)   { *h = append(*h, x.(msgEntry)) }
func (h *msgHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type timerEntry struct {
	t   *timer
	gen int
	at  time.Time
}

type timerHeap []timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].t.job < h[j].t.job
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
