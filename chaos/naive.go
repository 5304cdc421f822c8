package chaos

// THE ANTI-PATTERN UNDER TEST. This file is the naive worker of the seed
// article: it mints a fresh Idempotency-Key for every delivery of a job.
// It exists only so that a chaos run can show, under the same faults, what
// serpent's persisted keys prevent. Nothing in serpent run can reach it;
// only serpent chaos (Config.Naive) runs it, against a sandbox of its own.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// NaiveReport is what the naive worker bought.
type NaiveReport struct {
	Jobs       int `json:"jobs"`
	Deliveries int `json:"deliveries"`
	Crashes    int `json:"crashes"`
	Succeeded  int `json:"succeeded"`
	Charges    int `json:"charges"`
	// DuplicateJobs counts jobs whose search was charged more than once;
	// ExtraCharges the charges beyond the first.
	DuplicateJobs int `json:"duplicate_jobs"`
	ExtraCharges  int `json:"extra_charges"`
}

// DuplicateRate is the share of jobs bought more than once.
func (n *NaiveReport) DuplicateRate() float64 {
	if n.Jobs == 0 {
		return 0
	}
	return float64(n.DuplicateJobs) / float64(n.Jobs)
}

// maxNaiveDeliveries bounds one job's deliveries (a queue's max deliver).
const maxNaiveDeliveries = 20

// runNaive runs cfg.NaiveJobs jobs through the naive worker against a
// sandbox with the run's faults and seed. Like the real one, its queue
// redelivers a job whose worker died before acknowledging (NaiveCrash of
// the deliveries) and one whose request outlives the ack wait, and it
// retries unknown and retryable outcomes; every delivery sends a new key.
func runNaive(ctx context.Context, cfg Config) (*NaiveReport, error) {
	sb := sandbox.New(cfg.sandboxConfig())
	url, err := sb.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	client, err := serper.New(serper.Config{BaseURL: url, Token: sandbox.DefaultToken,
		Timeout: cfg.ClientTimeout, AllowShortTimeout: true})
	if err != nil {
		return nil, err
	}
	defer client.CloseIdleConnections()

	rep := &NaiveReport{Jobs: cfg.NaiveJobs}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x4a17e))
	draw := func() float64 { mu.Lock(); defer mu.Unlock(); return rng.Float64() }

	jobs := make(chan string)
	var wg sync.WaitGroup
	for range cfg.Workers * cfg.Slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for body := range jobs {
				naiveJob(ctx, cfg, client, body, draw, func(ok bool, deliveries, crashes int) {
					mu.Lock()
					defer mu.Unlock()
					rep.Deliveries += deliveries
					rep.Crashes += crashes
					if ok {
						rep.Succeeded++
					}
				})
			}
		}()
	}
	for i := range cfg.NaiveJobs {
		body, _ := aggregate.Body(events.SearchContext{Query: fmt.Sprintf("naive %d observation %d", cfg.Seed, i),
			Country: "US", Language: "en", Device: "mobile", Limit: 10})
		select {
		case jobs <- body:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	sb.Close() // searches still running would bill later: stop them first
	st := sb.Stats()
	rep.Charges = st.Charges
	for _, n := range st.ChargesPerBody {
		if n > 1 {
			rep.DuplicateJobs++
			rep.ExtraCharges += n - 1
		}
	}
	return rep, nil
}

// naiveJob delivers one job until a delivery succeeds or fails for good,
// each delivery with a fresh key.
func naiveJob(ctx context.Context, cfg Config, client *serper.Client, body string, draw func() float64,
	done func(ok bool, deliveries, crashes int)) {
	deliveries, crashes := 0, 0
	for n := 0; n < maxNaiveDeliveries && ctx.Err() == nil; n++ {
		deliveries++
		key := uuid.NewString() // the bug: a new key for every delivery
		res := make(chan serper.Result, 1)
		go func() { res <- client.Search(ctx, key, []byte(body)) }()
		var r serper.Result
		select {
		case r = <-res:
		case <-time.After(cfg.AckWait):
			// The request outlives the ack wait: the queue hands the job
			// to another worker, which sends it under yet another key.
			deliveries++
			go client.Search(ctx, uuid.NewString(), []byte(body))
			r = <-res
		}
		if draw() < cfg.NaiveCrash {
			crashes++ // died before acknowledging: delivered again
			continue
		}
		switch {
		case r.OK():
			done(true, deliveries, crashes)
			return
		case r.Confirmed && (r.Status == 401 || r.Status == 422):
			done(false, deliveries, crashes)
			return
		}
		backoff := aggregate.Backoff(events.RetryPolicy{BaseDelay: events.Duration(cfg.BaseDelay),
			MaxDelay: events.Duration(cfg.MaxDelay)}, n, draw(), r.RetryAfter)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	done(false, deliveries, crashes)
}
