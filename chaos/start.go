package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/serper"
)

// logFile opens (appending) the log of a process.
func (r *run) logFile(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(r.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// launch starts a process and waits for the stdout line that says it is
// ready (ready returns the value to keep, or "" for not yet).
func (r *run) launch(ctx context.Context, name string, args []string, ready func(line string) string) (*proc, string, error) {
	log, err := r.logFile(name)
	if err != nil {
		return nil, "", err
	}
	var from int64
	if st, err := log.Stat(); err == nil {
		from = st.Size()
	}
	got := make(chan string, 1)
	p, err := startProc(name, r.bin, args, r.dir, []string{serper.TokenEnv + "=" + r.token}, log, func(line string) {
		if v := ready(line); v != "" {
			select {
			case got <- v:
			default:
			}
		}
	})
	if err != nil {
		log.Close()
		return nil, "", err
	}
	p.logPath, p.logFrom = log.Name(), from
	go func() { <-p.done; log.Close() }()
	select {
	case v := <-got:
		return p, v, nil
	case <-p.done:
		return nil, "", fmt.Errorf("chaos: %s exited before it was ready (%v); see %s", name, p.err, filepath.Join(r.dir, "logs", name+".log"))
	case <-time.After(60 * time.Second):
		p.kill()
		return nil, "", fmt.Errorf("chaos: %s not ready after 60 s; see its log in %s", name, r.dir)
	case <-ctx.Done():
		p.kill()
		return nil, "", ctx.Err()
	}
}

func firstURL(prefix string) func(string) string {
	return func(line string) string {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
		return ""
	}
}

// startNATS starts serpent nats-server on a fixed free port, so that a
// restarted server comes back where the workers look.
func (r *run) startNATS(ctx context.Context) error {
	if r.natsArgs == nil {
		port, err := freePort()
		if err != nil {
			return err
		}
		r.natsArgs = []string{"nats-server", "--data", filepath.Join(r.dir, "nats"),
			"--listen", "127.0.0.1:" + strconv.Itoa(port), "--name", "chaos", "--log-level", "warn"}
	}
	p, url, err := r.launch(ctx, "nats", r.natsArgs, firstURL("nats://"))
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.nats, r.natsURL = p, url
	r.mu.Unlock()
	return nil
}

// startSandbox starts serpent sandbox with the run's faults and seed.
func (r *run) startSandbox(ctx context.Context) error {
	c := r.cfg
	f := c.Faults
	args := []string{"sandbox", "--listen", "127.0.0.1:0", "--seed", strconv.FormatInt(c.Seed, 10),
		"--search-time", c.SearchTime.String(), "--slow-search-time", c.SlowSearchTime.String(),
		"--replay-window", c.ReplayWindow.String(), "--retry-after", "1s"} // the token comes from the environment
	for _, p := range f.Flags() {
		args = append(args, "--"+p.Name, strconv.FormatFloat(*p.P, 'g', -1, 64))
	}
	p, url, err := r.launch(ctx, "sandbox", args, firstURL("http://"))
	if err != nil {
		return err
	}
	r.sandbox, r.sbURL = p, url
	return nil
}

// connect connects the orchestrator itself, reconnecting forever.
func (r *run) connect() error {
	nc, err := natsgo.Connect(r.natsURL, natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100*time.Millisecond),
		natsgo.Name("serpent chaos"))
	if err != nil {
		return fmt.Errorf("chaos: connect to %s: %w", r.natsURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	r.nc, r.js = nc, js
	return nil
}

// startWorkers starts every worker and its supervisor, which restarts it
// whenever it ends, until the run stops.
func (r *run) startWorkers(ctx context.Context) error {
	c := r.cfg
	for i := range c.Workers {
		name := fmt.Sprintf("w%d", i+1)
		args := []string{"run", "--nats-url", r.natsURL, "--sandbox-url", r.sbURL, "--http=", "--name", name,
			"--workers", strconv.Itoa(c.Slots), "--intake-concurrency", "8",
			"--client-timeout", c.ClientTimeout.String(), "--lease", c.Lease.String(), "--ack-wait", c.AckWait.String(),
			"--base-delay", c.BaseDelay.String(), "--max-delay", c.MaxDelay.String(),
			"--replay-window", c.ReplayWindow.String(), "--safety-margin", c.SafetyMargin.String(),
			"--sweep-every", "20s", "--grace", "2s", "--log-level", "warn"}
		if c.Retention > 0 {
			args = append(args, "--retention", c.Retention.String(), "--max-age", c.MaxAge.String(), "--skew-margin", c.SkewMargin.String())
		}
		w := &workerSlot{name: name, args: args, done: make(chan struct{})}
		p, _, err := r.launch(ctx, name, args, readyLine)
		if err != nil {
			return err
		}
		w.proc = p
		r.workers = append(r.workers, w)
		go r.supervise(w)
	}
	return nil
}

func readyLine(line string) string {
	if strings.Contains(line, "ready with") {
		return line
	}
	return ""
}

// supervise restarts a worker each time it ends (after a kill, or on its
// own, which is a violation: see noteExit), until the run stops.
func (r *run) supervise(w *workerSlot) {
	defer close(w.done)
	for {
		r.mu.Lock()
		p := w.proc
		r.mu.Unlock()
		<-p.done
		if r.noteExit(w, p) {
			return
		}
		r.mu.Lock()
		delay := 200*time.Millisecond + time.Duration(r.rng.Int64N(int64(2*time.Second)))
		r.mu.Unlock()
		time.Sleep(delay)
		for {
			r.mu.Lock()
			stopping := r.stopping
			r.mu.Unlock()
			if stopping {
				return
			}
			np, _, err := r.launch(context.Background(), w.name, w.args, readyLine)
			if err == nil {
				r.mu.Lock()
				w.proc = np
				r.rep.WorkerRestarts++
				stop := r.stopping
				r.mu.Unlock()
				if stop {
					np.stop(5 * time.Second)
				}
				break
			}
			r.say("%s did not come back: %v; trying again", w.name, err)
			time.Sleep(time.Second)
		}
	}
}

// stopWorkers stops every worker (SIGTERM, then SIGKILL) and its
// supervisor.
func (r *run) stopWorkers() {
	r.mu.Lock()
	r.stopping = true
	var procs []*proc
	for _, w := range r.workers {
		if w.proc != nil {
			procs = append(procs, w.proc)
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(10 * time.Second) }()
	}
	wg.Wait()
	for _, w := range r.workers {
		<-w.done
	}
}

func (r *run) stopNATSAndSandbox() {
	r.mu.Lock()
	n, s := r.nats, r.sandbox
	r.mu.Unlock()
	if n != nil {
		n.stop(10 * time.Second)
	}
	if s != nil {
		s.stop(10 * time.Second)
	}
}

// killAll kills whatever is still running: the last thing a run does,
// also when it fails.
func (r *run) killAll() {
	r.mu.Lock()
	r.stopping = true
	procs := []*proc{r.nats, r.sandbox}
	for _, w := range r.workers {
		procs = append(procs, w.proc)
	}
	r.mu.Unlock()
	for _, p := range procs {
		if p != nil && !p.exited() {
			p.resume()
			p.kill()
		}
	}
}

// freePort finds a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
