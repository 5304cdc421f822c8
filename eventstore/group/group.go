// Package group commits many concurrent appends together. Under JetStream
// with fsync on every write, one append costs a disk flush; an atomic batch
// of hundreds of messages costs about the same as a few. A Committer sits
// in front of a store: each Append waits in a queue, and one goroutine
// writes whatever has gathered as one group commit (AppendMany) while the
// next group gathers behind it. A lone append is written at once, so light
// load keeps single-append latency; heavy load gets big batches without any
// added wait.
//
// Every Append keeps its own optimistic concurrency check: a job whose
// version moved gets eventstore.ErrConcurrency, the others in its group are not
// affected.
package group

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Store is the store a Committer writes to.
type Store interface {
	Load(ctx context.Context, jobID string) ([]events.Event, uint64, error)
	AppendMany(ctx context.Context, appends []eventstore.Append) []eventstore.Result
}

// Options tune a Committer.
type Options struct {
	// MaxMessages bounds the events of one group commit; default 1000.
	MaxMessages int
	// Linger is how long a commit waits for more appends after the first;
	// default 0: take what has gathered while the last commit ran.
	Linger time.Duration
	// Parallel is how many commits may be in flight at once; default 2. A
	// job's appends are never in two of them at the same time, so they are
	// checked in order.
	Parallel int
	// Timeout bounds one group commit; default 30 s. An append whose
	// commit times out gets eventstore.ErrUnknownOutcome.
	Timeout time.Duration
	// OnCommit, if set, is told the size and duration of every commit.
	OnCommit func(appends, events int, took time.Duration)
}

// Committer is a store whose appends are group-committed. Loads go
// straight through. It is safe for concurrent use; Close stops it.
type Committer struct {
	inner Store
	opts  Options
	queue chan *request
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	mu     sync.RWMutex // held to read closed while queueing; to set it
	closed bool

	waiting atomic.Int64 // appends queued and not yet in a commit
}

type request struct {
	append eventstore.Append
	result chan eventstore.Result
}

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("group: committer is closed")

// New starts a committer in front of inner.
func New(inner Store, opts Options) *Committer {
	if opts.MaxMessages <= 0 {
		opts.MaxMessages = 1000
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 2
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	c := &Committer{inner: inner, opts: opts, queue: make(chan *request, 4*opts.MaxMessages),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// Load reads a job from the inner store.
func (c *Committer) Load(ctx context.Context, jobID string) ([]events.Event, uint64, error) {
	return c.inner.Load(ctx, jobID)
}

// LeaderVersion reads a job's version from the inner store's leader
// (eventstore.LeaderVersion).
func (c *Committer) LeaderVersion(ctx context.Context, jobID string) (uint64, error) {
	return eventstore.LeaderVersion(ctx, c.inner, jobID)
}

// Append queues one append and waits for its group to be committed. If ctx
// ends while the append is queued or being written, the append may still
// land: the error then wraps eventstore.ErrUnknownOutcome, and repeating the
// same append settles it.
func (c *Committer) Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error) {
	r, err := c.enqueue(ctx, eventstore.Append{JobID: jobID, Expected: expected, Events: evs, Expires: eventstore.Expiry(ctx)})
	if err != nil {
		return 0, err
	}
	res := c.wait(ctx, r)
	return res.Version, res.Err
}

// AppendMany queues the appends in order (so a job's second append is
// checked after its first) and waits for all of them.
func (c *Committer) AppendMany(ctx context.Context, appends []eventstore.Append) []eventstore.Result {
	out := make([]eventstore.Result, len(appends))
	reqs := make([]*request, len(appends))
	for i, a := range appends {
		r, err := c.enqueue(ctx, a)
		if err != nil {
			out[i].Err = err
			continue
		}
		reqs[i] = r
	}
	for i, r := range reqs {
		if r != nil {
			out[i] = c.wait(ctx, r)
		}
	}
	return out
}

func (c *Committer) enqueue(ctx context.Context, a eventstore.Append) (*request, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err // a select below would pick at random between the two
	}
	r := &request{append: a, result: make(chan eventstore.Result, 1)}
	select {
	case c.queue <- r:
		// Counted once it is in the queue, where the next commit finds
		// it (the run loop may take it, and count it out, a moment
		// before).
		c.waiting.Add(1)
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err() // not queued: nothing was written
	}
}

func (c *Committer) wait(ctx context.Context, r *request) eventstore.Result {
	select {
	case res := <-r.result:
		return res
	case <-ctx.Done():
		return eventstore.Result{Err: fmt.Errorf("%w: %w", eventstore.ErrUnknownOutcome, ctx.Err())}
	}
}

// Queued is the number of appends waiting for a commit: in the queue or
// gathered for the next commit (for a moment after one is taken, it may
// be counted one too few).
func (c *Committer) Queued() int { return int(c.waiting.Load()) }

// Close stops taking appends, commits what is queued and returns once the
// last commit is done.
func (c *Committer) Close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.stop)
	})
	<-c.done
}

func (c *Committer) run() {
	defer close(c.done)
	var (
		pending  []*request         // queued, in order
		inflight = map[string]int{} // jobs with an append being committed
		running  int
		finished = make(chan []*request, c.opts.Parallel)
		stop     = c.stop
	)
	for {
		// Start commits while there is room and something that may go.
		for running < c.opts.Parallel && len(pending) > 0 {
			batch, rest := c.pick(pending, inflight)
			if len(batch) == 0 {
				break
			}
			pending = rest
			c.waiting.Add(-int64(len(batch)))
			for _, r := range batch {
				inflight[r.append.JobID]++
			}
			running++
			go func() { c.commit(batch); finished <- batch }()
		}
		if stop == nil && running == 0 && len(pending) == 0 && len(c.queue) == 0 {
			return
		}
		select {
		case r := <-c.queue:
			pending = c.collect(append(pending, r), running < c.opts.Parallel)
		case batch := <-finished:
			running--
			for _, r := range batch {
				if inflight[r.append.JobID]--; inflight[r.append.JobID] == 0 {
					delete(inflight, r.append.JobID)
				}
			}
			// What queued meanwhile goes in the next commit whole, not
			// in two because the select took this answer first.
			pending = c.collect(pending, false)
		case <-stop:
			stop = nil // a nil channel is never ready: finish what is queued, then return
		}
	}
}

// collect takes whatever else waits without blocking, so a commit carries
// everything that gathered, and lingers if asked to and a commit may start.
func (c *Committer) collect(pending []*request, mayStart bool) []*request {
	for len(pending) < 4*c.opts.MaxMessages {
		select {
		case r := <-c.queue:
			pending = append(pending, r)
			continue
		default:
		}
		break
	}
	if c.opts.Linger <= 0 || !mayStart {
		return pending
	}
	t := time.NewTimer(c.opts.Linger)
	defer t.Stop()
	for len(pending) < 4*c.opts.MaxMessages {
		select {
		case r := <-c.queue:
			pending = append(pending, r)
		case <-t.C:
			return pending
		}
	}
	return pending
}

// pick takes, in order, the pending appends that may go in the next
// commit, up to the message bound. An append of a job that is being
// committed now waits, and so do that job's later appends: a job's appends
// are checked in the order they came.
func (c *Committer) pick(pending []*request, inflight map[string]int) (batch, rest []*request) {
	msgs := 0
	blocked := map[string]bool{}
	for _, r := range pending {
		job := r.append.JobID
		n := len(r.append.Events)
		if inflight[job] > 0 || blocked[job] || (msgs > 0 && msgs+n > c.opts.MaxMessages) {
			blocked[job] = true
			rest = append(rest, r)
			continue
		}
		batch = append(batch, r)
		msgs += n
	}
	return batch, rest
}

func (c *Committer) commit(batch []*request) {
	appends := make([]eventstore.Append, len(batch))
	msgs := 0
	for i, r := range batch {
		appends[i] = r.append
		msgs += len(r.append.Events)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	start := time.Now()
	res := c.inner.AppendMany(ctx, appends)
	took := time.Since(start)
	cancel()
	for i, r := range batch {
		if ctx.Err() != nil && res[i].Err != nil && !errors.Is(res[i].Err, eventstore.ErrUnknownOutcome) {
			res[i].Err = fmt.Errorf("%w: %w", eventstore.ErrUnknownOutcome, res[i].Err)
		}
		r.result <- res[i]
	}
	if c.opts.OnCommit != nil {
		c.opts.OnCommit(len(batch), msgs, took)
	}
}
