package chaos

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWorkerExitsTheRunDidNotCause: a worker that ends by itself (here a
// process printing a Go panic and exiting 2, and one exiting 0 just as the
// run was about to kill it) is counted and is a violation naming its exit
// status and what its log says of its end; a worker the run kills
// (killWorker's SIGKILL) or stops (SIGTERM once stopping) is neither.
// Before, the supervisor counted the first two, restarted them and the run
// passed.
func TestWorkerExitsTheRunDidNotCause(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o755))
	cfg := DefaultConfig()
	var mu sync.Mutex
	var said []string
	r := &run{cfg: cfg, bin: "/bin/sh", dir: dir, token: "chaos-test-secret", rep: newReport(cfg),
		rng: rand.New(rand.NewPCG(1, 1)), say: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			said = append(said, format)
		}}
	// A process waits on its fifo after it says it is ready, so that it
	// ends only once launch has seen it ready.
	fifo := func(name string) string {
		path := filepath.Join(dir, name+".fifo")
		require.NoError(t, syscall.Mkfifo(path, 0o600))
		return path
	}
	release := func(path string) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the process opens it
		require.NoError(t, err)
		_, err = f.WriteString("go\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	start := func(name, script string) *workerSlot {
		w := &workerSlot{name: name, done: make(chan struct{})}
		p, _, err := r.launch(context.Background(), name, []string{"-c", script}, readyLine)
		require.NoError(t, err)
		w.proc = p
		r.workers = append(r.workers, w)
		return w
	}

	// w1's log holds an earlier process's crash, which is not this one's.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "logs", "w1.log"), []byte("panic: an earlier process\n"), 0o644))
	crash := fifo("w1")
	w1 := start("w1", `echo "ready with 1 slots"; read x < `+crash+`
echo 'level=WARN msg="slow store"' >&2
printf 'panic: assignment to entry in nil map (token %s)\n\ngoroutine 7 [running]:\n' "$SERPER_LIVE_TOKEN" >&2
echo 'github.com/serpent-engine/serpent/worker.(*Engine).HandleWork(...)' >&2
exit 2`)
	p := w1.proc
	release(crash)
	<-p.done
	require.False(t, r.noteExit(w1, p))

	// w2 exits 0 by itself just as the run picks it to kill.
	quit := fifo("w2")
	w2 := start("w2", `echo "ready with 1 slots"; read x < `+quit+`; exit 0`)
	p = w2.proc
	w2.killed = true
	release(quit)
	<-p.done
	require.False(t, r.noteExit(w2, p))

	// w3 is killed by the run.
	w3 := start("w3", `echo "ready with 1 slots"; exec sleep 600`)
	p = w3.proc
	r.killWorker() // w3 is the only live worker
	require.True(t, p.killedBy(syscall.SIGKILL))
	require.False(t, r.noteExit(w3, p))

	// w4 is stopped by the run at its end.
	w4 := start("w4", `echo "ready with 1 slots"; exec sleep 600`)
	p = w4.proc
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	p.stop(10 * time.Second)
	require.True(t, p.killedBy(syscall.SIGTERM))
	require.True(t, r.noteExit(w4, p))

	require.Equal(t, 1, r.rep.WorkerKills)
	require.Equal(t, 2, r.rep.WorkerExits)
	r.exitViolations()
	require.Len(t, r.rep.Violations, 2, "%q", r.rep.Violations)
	v := r.rep.Violations[0]
	require.Contains(t, v, "worker w1 ended by itself (exit status 2)")
	require.Contains(t, v, "panic: assignment to entry in nil map (token <the run's token>) | goroutine 7 [running]: | github.com/serpent-engine/serpent/worker.(*Engine).HandleWork(...)")
	require.Contains(t, v, "w1.log")
	require.NotContains(t, v, "earlier")
	require.NotContains(t, v, r.token)
	require.Contains(t, r.rep.Violations[1], "worker w2 ended by itself (exit status 0)")
	require.False(t, r.rep.OK())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, containing(said, "ended by itself"), 2)
}

func containing(lines []string, part string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, part) {
			out = append(out, l)
		}
	}
	return out
}

// TestLogTail: the excerpt is the crash and what follows it, else the
// log's last lines, of what the process wrote.
func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	var b strings.Builder
	b.WriteString("panic: before\n")
	from := int64(b.Len())
	for i := range 20 {
		b.WriteString(strings.Repeat("x", i) + "\n\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	tail := logTail(path, from)
	require.NotContains(t, tail, "panic")
	require.Len(t, strings.Split(tail, " | "), tailLines)
	require.True(t, strings.HasSuffix(tail, strings.Repeat("x", 19)), tail)

	b.WriteString("fatal error: concurrent map writes\n" + strings.Repeat("y", 1000) + "\n")
	for range 20 {
		b.WriteString("frame\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	tail = logTail(path, from)
	lines := strings.Split(tail, " | ")
	require.Len(t, lines, tailLines)
	require.Equal(t, "fatal error: concurrent map writes", lines[0])
	require.Equal(t, strings.Repeat("y", tailLineSize)+"...", lines[1])
	require.Equal(t, "(nothing in its log)", logTail(path, int64(b.Len())))
}
