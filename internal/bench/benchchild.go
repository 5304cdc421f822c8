package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// engineBinary is the serpent binary to run the engine from:
// $SERPENT_BENCH_ENGINE_BIN, else this executable unless it is a test
// binary (which would run its tests).
func engineBinary(env func(string) string) (string, string) {
	if p := env("SERPENT_BENCH_ENGINE_BIN"); p != "" {
		return p, ""
	}
	exe, err := os.Executable()
	if err != nil {
		return "", "cannot find this executable: " + err.Error()
	}
	if strings.HasSuffix(filepath.Base(exe), ".test") {
		return "", "this process is a test binary, not serpent; set SERPENT_BENCH_ENGINE_BIN to a serpent binary"
	}
	return exe, ""
}

// childEngine runs "serpent run" as a child process on the log of jobs
// finished jobs (evs events) at natsURL, waits until it has caught up, runs
// fresh jobs through it and reads its peak resident memory; then stops it
// and starts another, which resumes from the checkpoint the first left.
func (b *benchRun) childEngine(ctx context.Context, natsURL string, js jetstream.JetStream, jobs int, evs uint64) (benchChild, error) {
	r := benchChild{Jobs: jobs, Projections: b.f.scaleProj}
	bin, why := engineBinary(b.env)
	if bin == "" {
		r.Why = why
		return r, nil
	}
	r.Binary = bin
	// The log's end, read before the engine starts: a server busy serving
	// an engine reading a log of millions of jobs from its start can take
	// longer than a request's timeout to answer.
	last, err := lastSeq(ctx, js, snats.EventStream)
	if err != nil {
		return r, fmt.Errorf("bench: the log's last sequence: %w", err)
	}
	p, err := b.startChild(ctx, bin, natsURL, r.Projections)
	if err != nil {
		return r, err
	}
	defer p.stop()
	r.StartSeconds = p.startSeconds

	caught := time.Now()
	if err := b.childCatchUp(ctx, p, js, last, r.Projections, fmt.Sprintf("scale: engine catching up at %d jobs", jobs)); err != nil {
		return r, err
	}
	r.CatchUpSeconds = round2(time.Since(caught).Seconds())
	r.CatchUpEventsPerSec = perSec(int(evs), time.Since(caught))
	r.CatchUpMsgsPerSec = perSec(int(last), time.Since(caught))
	r.RSSAfterCatchUpMB = round2(float64(procStatus(p.cmd.Process.Pid, "VmRSS")) / (1 << 20))

	// Fresh jobs through it, end to end.
	if b.f.scaleFresh > 0 {
		e, err := benchEndToEnd(ctx, js, fmt.Sprintf("scale engine at %d jobs", jobs), b.f.scaleFresh, e2eOptions{NoProjections: !r.Projections}, b.prog) // the engine is another process
		if err != nil {
			return r, p.failed("%v", err)
		}
		// This process's CPU time leaves out the engine, a process of its
		// own here: not a figure of the engine's.
		e.CPUSeconds, e.CoresBusy, e.CPUMicrosPerJob = 0, 0, 0
		r.FreshJobs = &e
	}
	// The kernel's RSS counters are kept per CPU and folded in lazily, so
	// the high-water mark read now can lag an RSS read before by a little.
	r.PeakRSSMB = max(round2(float64(procStatus(p.cmd.Process.Pid, "VmHWM"))/(1<<20)), r.RSSAfterCatchUpMB)
	r.Measured = r.PeakRSSMB > 0
	if !r.Measured {
		r.Why = "no /proc/<pid>/status on this system"
	}
	if err := p.stop(); err != nil {
		return r, p.failed("stopping: %v", err)
	}

	// Started again: it resumes counting the log from the checkpoint the
	// first left as it stopped.
	if last, err = lastSeq(ctx, js, snats.EventStream); err != nil {
		return r, fmt.Errorf("bench: the log's last sequence: %w", err)
	}
	var again benchRestart
	if again.ResumedFrom, _, err = projector.ResumeTally(ctx, js, projections.NewTally().ForgetFinished()); err != nil {
		again.Why = err.Error()
	}
	q, err := b.startChild(ctx, bin, natsURL, r.Projections)
	if err != nil {
		return r, err
	}
	defer q.stop()
	again.StartSeconds = q.startSeconds
	caught = time.Now()
	if err := b.childCatchUp(ctx, q, js, last, r.Projections, fmt.Sprintf("scale: engine restarted at %d jobs", jobs)); err != nil {
		return r, err
	}
	again.CatchUpSeconds = round2(time.Since(caught).Seconds())
	again.PeakRSSMB = round2(float64(procStatus(q.cmd.Process.Pid, "VmHWM")) / (1 << 20))
	if err := q.stop(); err != nil {
		return r, q.failed("stopping: %v", err)
	}
	r.Restart = &again
	return r, nil
}

// childProc is the engine running as a child process.
type childProc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncWriter
	exited         chan error
	stopped        bool
	// addr is its HTTP address; startSeconds how long it took from exec
	// to its status page being up.
	addr         string
	startSeconds float64
}

// startChild starts "serpent run" from bin on the server at natsURL and
// waits for its status page. extra are more flags of serpent run.
func (b *benchRun) startChild(ctx context.Context, bin, natsURL string, projections bool, extra ...string) (*childProc, error) {
	args := []string{"run", "--nats-url", natsURL, "--http", "127.0.0.1:0", "--sandbox-url", b.sbURL, "--log-level", "error",
		"--name", "serpent-bench-engine", "--sweep-every", "0", "--grace", "2s",
		"--base-delay", "20ms", "--max-delay", "200ms", "--lease", "20s", "--client-timeout", "10s"}
	if !projections {
		args = append(args, "--projections=false")
	}
	args = append(args, extra...)
	p := &childProc{cmd: exec.Command(bin, args...), stdout: &syncWriter{}, stderr: &syncWriter{}, exited: make(chan error, 1)}
	p.cmd.Env = []string{}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG"} {
		if v := b.env(k); v != "" {
			p.cmd.Env = append(p.cmd.Env, k+"="+v)
		}
	}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the engine %s: %w", bin, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	re := regexp.MustCompile(`status page on http://(\S+)/`)
	if err := pollUntil(ctx, 2*time.Minute, 20*time.Millisecond, func() (bool, string, error) {
		if m := re.FindStringSubmatch(p.stdout.String()); m != nil {
			p.addr = m[1]
			return true, "", nil
		}
		return false, "no status page", p.gone()
	}); err != nil {
		p.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, p.failed("starting: %v", err)
	}
	p.startSeconds = round2(time.Since(start).Seconds())
	return p, nil
}

// childCatchUp waits until the engine p has caught up with the log up to
// sequence last: ready, the metrics tally at last, and with projections
// no projection lag.
func (b *benchRun) childCatchUp(ctx context.Context, p *childProc, js jetstream.JetStream, last uint64, projections bool, label string) error {
	client := &http.Client{Timeout: 10 * time.Second}
	if err := pollUntil(ctx, 3*time.Hour, 100*time.Millisecond, func() (bool, string, error) {
		ok, state, applied := childCaughtUp(ctx, client, p.addr, js, last, projections)
		if ok {
			return true, "", nil
		}
		b.prog(label, int(min(applied, childLogSeq(client, p.addr), last)), int(last))
		return false, state, p.gone()
	}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return p.failed("catching up: %v", err)
	}
	b.prog(label, int(last), int(last))
	return nil
}

// gone reports an error if the engine exited (it should not have).
func (p *childProc) gone() error {
	select {
	case err := <-p.exited:
		p.stopped = true
		return fmt.Errorf("exited: %v", err)
	default:
		return nil
	}
}

// stop stops the engine with SIGTERM, as an operator would, and reports
// how it ended: an error unless it exited cleanly within 30 s.
func (p *childProc) stop() error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			return fmt.Errorf("exited with %v after SIGTERM", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New("the engine did not stop within 30 s of SIGTERM")
	}
}

// failed is an error of the engine process, with the end of what it
// wrote to stderr.
func (p *childProc) failed(format string, a ...any) error {
	return fmt.Errorf("bench: the engine process: %s\n%s", fmt.Sprintf(format, a...), tail(p.stderr.String(), 2000))
}

// childCaughtUp reports whether the engine at addr has caught up with the
// log up to sequence last (its projections too, with projections), and if
// not, what it waits for.
func childCaughtUp(ctx context.Context, client *http.Client, addr string, js jetstream.JetStream, last uint64, projections bool) (bool, string, uint64) {
	lag := projector.Lag{Applied: last}
	if projections {
		var err error
		if lag, err = projector.ReadLag(ctx, js, "", time.Now()); err != nil {
			return false, err.Error(), 0
		}
		if lag.Pending > 0 || lag.Applied < last {
			return false, fmt.Sprintf("%d events not applied to the projections", lag.Pending), lag.Applied
		}
	}
	if seq := childLogSeq(client, addr); seq < last {
		return false, fmt.Sprintf("metrics counted up to %d of %d", seq, last), lag.Applied
	}
	resp, err := client.Get("http://" + addr + "/readyz")
	if err != nil {
		return false, err.Error(), lag.Applied
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Sprintf("/readyz %d: %s", resp.StatusCode, strings.TrimSpace(string(body))), lag.Applied
	}
	return true, "", lag.Applied
}

// childLogSeq reads serpent_metrics_log_seq from the engine's /metrics: how
// far its tally has read the log (MaxUint64 if it does not say).
func childLogSeq(client *http.Client, addr string) uint64 {
	m, err := childMetrics(client, addr)
	if err != nil {
		return 0
	}
	seq, ok := m["serpent_metrics_log_seq"]
	switch {
	case !ok:
		return math.MaxUint64
	case math.IsNaN(seq) || seq < 0:
		return 0
	}
	return uint64(seq)
}

// childMetrics reads the engine's /metrics: each sample's value by its
// name and labels as the page writes them
// (serpent_sweeps_total{outcome="swept"}), NaN where it is not a number.
func childMetrics(client *http.Client, addr string) (map[string]float64, error) {
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			v = math.NaN()
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("/metrics: %w", err)
	}
	return m, nil
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
