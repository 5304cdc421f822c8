package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// benchE2E is one end-to-end phase: commands in, every job finished and
// the projections updated.
type benchE2E struct {
	Jobs int `json:"jobs"`
	// Seconds runs from the first command to the projections having
	// applied the last event; ProjectionSeconds is the part after every
	// job was finished in the log.
	Seconds           float64                  `json:"seconds"`
	ProjectionSeconds float64                  `json:"projection_wait_seconds"`
	JobsPerSec        float64                  `json:"jobs_per_sec"`
	Finished          map[aggregate.Status]int `json:"finished"`
	// Durable writes per job, by stream: event messages (an append of
	// several events is one message when it fits), timers and due jobs,
	// projection values; WritesPerJob is their sum with the command.
	// EventsPerJob counts the events those messages hold.
	EventsPerJob     float64 `json:"events_per_job"`
	EventMsgsPerJob  float64 `json:"event_messages_per_job"`
	WorkPerJob       float64 `json:"work_per_job"`
	ProjectionPerJob float64 `json:"projection_values_per_job"`
	WritesPerJob     float64 `json:"writes_per_job"`
	// AppendsPerJob counts the event store's appends: the writes of a
	// job's events the engine waited for, each one atomic (its first
	// message carries the expected last subject sequence). A group commit
	// writes appends of several jobs in one atomic batch, so the disk
	// writes are fewer still.
	AppendsPerJob float64 `json:"appends_per_job"`
	// CPUSeconds is the CPU time this process used over Seconds: with an
	// embedded server, the server's, the engine's, the sandbox's and the
	// bench's together. CoresBusy is CPUSeconds over Seconds;
	// CPUMicrosPerJob, CPUSeconds per job.
	CPUSeconds      float64 `json:"cpu_seconds,omitempty"`
	CoresBusy       float64 `json:"cores_busy,omitempty"`
	CPUMicrosPerJob float64 `json:"cpu_micros_per_job,omitempty"`
	// CPUByPart splits the CPU time a job took by the part of the
	// process that spent it (engine, nats-server, sandbox, bench, other),
	// in microseconds, as a CPU profile of the phase sampled it (at 100
	// a second, so its sum is near CPUMicrosPerJob, not equal to it).
	CPUByPart map[string]float64 `json:"cpu_micros_per_job_by_part,omitempty"`
	// PacePerSec, in a paced phase, is the rate the commands were
	// published at, one at a time; LatencyMillis is then how long a job
	// took from its command's publish to its last event in the log.
	PacePerSec    float64       `json:"paced_commands_per_sec,omitempty"`
	LatencyMillis *benchLatency `json:"job_latency_ms,omitempty"`
	// SearchSeconds is how long the sandbox took to answer a search, when
	// the phase made it take some time.
	SearchSeconds float64 `json:"search_seconds,omitempty"`
}

// benchLatency sums up how long jobs took, in milliseconds.
type benchLatency struct {
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// e2eOptions are how an end-to-end phase runs.
type e2eOptions struct {
	// Pace above zero publishes the commands one at a time, Pace a second.
	Pace float64
	// CPUParts splits the phase's CPU time by part from a profile.
	CPUParts bool
	// NoProjections does not wait for projections: the engine keeps none.
	NoProjections bool
}

// benchEndToEnd publishes jobs schedule commands the way a busy upstream
// system would (atomic batches of 100), or with o.Pace above zero one at a
// time at that pace a second the way a steady one would, and waits until
// every job is finished, counting terminal events as they are stored.
func benchEndToEnd(ctx context.Context, js jetstream.JetStream, label string, jobs int, o e2eOptions, prog progressFunc) (benchE2E, error) {
	pace := o.Pace
	r := benchE2E{Jobs: jobs, Finished: map[aggregate.Status]int{}}
	stamp := time.Now().UnixNano()
	// A slot of now: intake refuses one older than the retention horizon.
	slot := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	commands := make([][]byte, jobs)
	ids := make([]string, jobs)
	for j := range commands {
		cmd := aggregate.ScheduleCommand{Slot: slot, Query: fmt.Sprintf("bench %s %d %d", label, stamp, j),
			Country: "US", Language: "en", Device: "desktop"}
		b, err := json.Marshal(cmd) // the command as an upstream publishes it
		if err != nil {
			return r, fmt.Errorf("bench %s: %w", label, err)
		}
		commands[j] = b
		if pace > 0 {
			sched, err := aggregate.NewSchedule(cmd, aggregate.DefaultPolicy(), "bench")
			if err != nil {
				return r, fmt.Errorf("bench %s: %w", label, err)
			}
			ids[j] = sched.JobID
		}
	}
	var (
		sentMu sync.Mutex
		sent   = make(map[string]time.Time, jobs) // paced: when each job's command left
	)
	evBefore, err := lastSeq(ctx, js, snats.EventStream)
	if err != nil {
		return r, err
	}
	workBefore, err := lastSeq(ctx, js, snats.WorkStream)
	if err != nil {
		return r, err
	}
	projBefore, err := projectionWrites(ctx, js)
	if err != nil {
		return r, err
	}
	cons, err := js.OrderedConsumer(ctx, snats.EventStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{snats.EventSubjectPrefix + ">"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: evBefore + 1,
	})
	if err != nil {
		return r, err
	}
	it, err := cons.Messages()
	if err != nil {
		return r, err
	}
	defer it.Stop()

	var split *cpuSplit
	if o.CPUParts {
		// A profile someone else is taking of this process (a test's
		// -cpuprofile) leaves the split out rather than failing the phase.
		if s, err := startCPUSplit(); err == nil {
			split = s
			defer split.abort() // when the phase fails part way
		}
	}
	start, cpuStart := time.Now(), processCPU()
	pubErr := make(chan error, 1)
	go func() {
		if pace > 0 {
			pubErr <- publishPaced(ctx, js, commands, pace, func(j int) {
				sentMu.Lock()
				sent[ids[j]] = time.Now()
				sentMu.Unlock()
			})
			return
		}
		for i := 0; i < jobs; i += 100 {
			msgs := make([]*natsgo.Msg, 0, 100)
			for j := i; j < min(i+100, jobs); j++ {
				msgs = append(msgs, &natsgo.Msg{Subject: snats.ScheduleSubject, Data: commands[j]})
			}
			if _, err := jetstreamext.PublishMsgBatch(ctx, js, msgs); err != nil {
				pubErr <- err
				return
			}
		}
		pubErr <- nil
	}()
	var took []time.Duration // paced: each job from its command to its end

	done := map[string]bool{}
	timeout := time.AfterFunc(10*time.Minute, it.Stop)
	defer timeout.Stop()
	appends, evs, seen := 0, 0, evBefore
	count := func(msg jetstream.Msg) {
		if meta, err := msg.Metadata(); err == nil {
			seen = meta.Sequence.Stream
		}
		evs += events.HeaderEvents(msg.Headers().Get(events.HeaderType))
		if msg.Headers().Get(events.HeaderExpectedSeq) != "" {
			appends++
		}
	}
	for len(done) < jobs {
		msg, err := it.Next()
		if err != nil {
			return r, fmt.Errorf("bench %s: %d of %d jobs finished: %w", label, len(done), jobs, err)
		}
		count(msg)
		status := terminalStatus(msg)
		if status == "" {
			continue
		}
		job := strings.TrimPrefix(msg.Subject(), snats.EventSubjectPrefix)
		if !done[job] {
			done[job] = true
			if pace > 0 {
				sentMu.Lock()
				if at, ok := sent[job]; ok {
					took = append(took, time.Since(at))
				}
				sentMu.Unlock()
			}
			r.Finished[status]++
			prog("end to end: "+label, len(done), jobs)
		}
	}
	if err := <-pubErr; err != nil {
		return r, fmt.Errorf("bench %s: publishing commands: %w", label, err)
	}
	// A job is done end to end once the projections show it too.
	finished := time.Now()
	if !o.NoProjections {
		if err := waitProjections(ctx, js, 10*time.Minute); err != nil {
			return r, fmt.Errorf("bench %s: %w", label, err)
		}
	}
	elapsed, cpu := time.Since(start), processCPU()-cpuStart
	if split != nil {
		parts, err := split.stop()
		if err != nil {
			return r, err
		}
		r.CPUByPart = perJob(parts, jobs)
	}
	r.ProjectionSeconds = round2(time.Since(finished).Seconds())
	evAfter, err := lastSeq(ctx, js, snats.EventStream)
	if err != nil {
		return r, err
	}
	for seen < evAfter {
		msg, err := it.Next()
		if err != nil {
			return r, fmt.Errorf("bench %s: reading the log after the jobs: %w", label, err)
		}
		count(msg)
	}
	workAfter, err := lastSeq(ctx, js, snats.WorkStream)
	if err != nil {
		return r, err
	}
	projAfter, err := projectionWrites(ctx, js)
	if err != nil {
		return r, err
	}
	r.Seconds = round2(elapsed.Seconds())
	r.JobsPerSec = perSec(jobs, elapsed)
	r.EventsPerJob = round2(float64(evs) / float64(jobs))
	r.EventMsgsPerJob = round2(float64(evAfter-evBefore) / float64(jobs))
	r.WorkPerJob = round2(float64(workAfter-workBefore) / float64(jobs))
	r.ProjectionPerJob = round2(float64(projAfter-projBefore) / float64(jobs))
	r.WritesPerJob = round2(r.EventMsgsPerJob + r.WorkPerJob + r.ProjectionPerJob + 1) // + the command itself
	r.AppendsPerJob = round2(float64(appends) / float64(jobs))
	r.CPUSeconds = round2(cpu.Seconds())
	r.CoresBusy = round2(cpu.Seconds() / elapsed.Seconds())
	r.CPUMicrosPerJob = math.Round(float64(cpu.Microseconds()) / float64(jobs))
	if pace > 0 {
		r.PacePerSec = pace
		if len(took) > 0 {
			median, p99, maxi := quantileMicros(took)
			r.LatencyMillis = &benchLatency{Median: round2(median / 1000), P99: round2(p99 / 1000), Max: round2(maxi / 1000)}
		}
	}
	return r, nil
}

// publishPaced publishes the commands one at a time, each waiting for its
// acknowledgement, the i-th due i/pace seconds after the first; sent is
// told just before each leaves. A publish that takes longer than its
// share delays the ones after it, which then go at once until the pace is
// met again.
func publishPaced(ctx context.Context, js jetstream.JetStream, commands [][]byte, pace float64, sent func(i int)) error {
	start := time.Now()
	for i, data := range commands {
		if wait := time.Until(start.Add(time.Duration(float64(i) / pace * float64(time.Second)))); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		sent(i)
		if _, err := js.PublishMsg(ctx, &natsgo.Msg{Subject: snats.ScheduleSubject, Data: data}); err != nil {
			return err
		}
	}
	return nil
}

// waitProjections polls until the projection runner has applied every
// event of the log, or the bound passes.
func waitProjections(ctx context.Context, js jetstream.JetStream, bound time.Duration) error {
	err := pollUntil(ctx, bound, 20*time.Millisecond, func() (bool, string, error) {
		lag, err := projector.ReadLag(ctx, js, "", time.Now())
		switch {
		case err != nil:
			return false, err.Error(), nil
		case lag.Pending > 0:
			return false, fmt.Sprintf("%d events not applied", lag.Pending), nil
		}
		return true, "", nil
	})
	if err != nil {
		return fmt.Errorf("the projections did not catch up: %w", err)
	}
	return nil
}

// terminalStatus reads the status an event ends its job in, or "".
func terminalStatus(msg jetstream.Msg) aggregate.Status {
	switch events.LastType(msg.Headers().Get(events.HeaderType)) {
	case events.TypeObservationStored:
		return aggregate.StatusSucceeded
	case events.TypeJobFailed:
		return aggregate.StatusFailed
	case events.TypeJobCancelled:
		return aggregate.StatusCancelled
	case events.TypeReconciled:
		if ev, err := events.DecodeLast(msg.Data()); err == nil && ev.Data.(events.Reconciled).Verdict == aggregate.VerdictCharged {
			return aggregate.StatusChargedNoResult
		}
	}
	return ""
}

// projectionWrites sums the last sequences of the streams behind the
// projection buckets: how many values were written to them so far.
func projectionWrites(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	var n uint64
	for _, b := range projections.Buckets() {
		seq, err := lastSeq(ctx, js, projector.BucketStream(b))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue // an engine without projections has not made it
		}
		if err != nil {
			return 0, err
		}
		n += seq
	}
	return n, nil
}

func lastSeq(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	st, err := streamState(ctx, js, stream)
	return st.LastSeq, err
}

// streamState is a stream's state as the server reports it now.
func streamState(ctx context.Context, js jetstream.JetStream, stream string) (jetstream.StreamState, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return jetstream.StreamState{}, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return jetstream.StreamState{}, err
	}
	return info.State, nil
}
