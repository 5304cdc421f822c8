package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one child process of a chaos run: the NATS server, the sandbox or
// a worker. It runs in a process group of its own (so a kill reaches
// anything it started) and dies with the orchestrator (Pdeathsig), so no run
// leaves processes behind, even one that is killed itself.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // after done

	// logPath is the log the process appends to, from logFrom on.
	logPath string
	logFrom int64

	mu     sync.Mutex
	paused bool
}

// startProc starts bin with args and env added to this process's
// environment, appending its stdout and stderr to log. Each stdout line is
// also passed to onLine (nil for none).
func startProc(name, bin string, args []string, dir string, env []string, log io.Writer, onLine func(string)) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOTRACEBACK=all"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			if onLine != nil {
				onLine(line)
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		<-copied // Wait closes the pipe; read it all first
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to the process group.
func (p *proc) signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // gone already
	}
	return err
}

// kill ends the process at once (SIGKILL) and waits for it.
func (p *proc) kill() {
	_ = p.signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to stop (SIGTERM), and kills it after grace.
func (p *proc) stop(grace time.Duration) {
	p.resume()
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// pause freezes the process (SIGSTOP); resume thaws it.
func (p *proc) pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return nil
	}
	p.paused = true
	return p.signal(syscall.SIGSTOP)
}

func (p *proc) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		_ = p.signal(syscall.SIGCONT)
	}
}

func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// killedBy reports whether the process ended by sig (after done).
func (p *proc) killedBy(sig syscall.Signal) bool {
	if p.cmd.ProcessState == nil {
		return false
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// status is how the process ended (after done): "exit status 2",
// "signal: killed", ...
func (p *proc) status() string {
	if p.cmd.ProcessState == nil {
		return fmt.Sprint(p.err)
	}
	return p.cmd.ProcessState.String()
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
