package chaos

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// workerExit is a worker process that ended without the run ending it.
type workerExit struct {
	name   string
	status string // "exit status 2", "signal: segmentation fault", ...
	tail   string // what its log says of its end (logTail)
	log    string
}

// noteExit classifies the end of worker w's process p, once p is done, and
// reports whether the run is stopping its workers (the supervisor then
// ends). The ends the run causes are not counted: a SIGKILL from killWorker
// (w.killed, and the process did die of SIGKILL), and every end once the
// run stops its workers (stopWorkers and killAll set stopping before they
// send SIGTERM or SIGKILL). Any other end (a panic, a fatal error, an exit
// of any status, a signal the run did not send) is counted in
// Report.WorkerExits and kept for exitViolations: serpent run does not end
// by itself, and the supervisor restarting it must not hide a crash that
// the jobs happen to survive.
func (r *run) noteExit(w *workerSlot, p *proc) (stopping bool) {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return true
	}
	ours := w.killed && p.killedBy(syscall.SIGKILL)
	w.killed, w.proc = false, nil
	if ours {
		r.mu.Unlock()
		return false
	}
	e := workerExit{name: w.name, status: p.status(), tail: logTail(p.logPath, p.logFrom), log: p.logPath}
	if r.token != "" {
		e.tail = strings.ReplaceAll(e.tail, r.token, "<the run's token>")
	}
	r.rep.WorkerExits++
	r.exits = append(r.exits, e)
	r.mu.Unlock()
	r.say("%s ended by itself (%s): %s; restarting it", w.name, e.status, e.tail)
	return false
}

// exitViolations reports every worker exit the run did not cause, once the
// supervisors are done.
func (r *run) exitViolations() {
	r.mu.Lock()
	exits := r.exits
	r.mu.Unlock()
	for _, e := range exits {
		r.rep.violation("worker %s ended by itself (%s), not stopped by the run: %s (its log: %s)",
			e.name, e.status, e.tail, filepath.Base(e.log))
	}
}

// Bounds of logTail's excerpt.
const (
	tailLines    = 8
	tailLineSize = 300
)

// logTail is what a process's log, from offset from on (what that process
// wrote), says of its end, as one line: from the first line Go's runtime
// begins a crash with ("panic: ", "fatal error: ") the lines that follow it,
// or else the log's last lines; empty lines are left out and long ones cut.
func logTail(path string, from int64) string {
	if path == "" {
		return "(no log)"
	}
	f, err := os.Open(path)
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	var crash, last []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if len(line) > tailLineSize {
			line = line[:tailLineSize] + "..."
		}
		switch {
		case crash == nil && (strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ")):
			crash = []string{line}
		case crash != nil && len(crash) < tailLines:
			crash = append(crash, line)
		}
		if last = append(last, line); len(last) > tailLines {
			last = last[1:]
		}
	}
	switch {
	case crash != nil:
		return strings.Join(crash, " | ")
	case len(last) == 0:
		return "(nothing in its log)"
	}
	return strings.Join(last, " | ")
}
