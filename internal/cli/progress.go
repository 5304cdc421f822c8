package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// progressFlag is --progress: auto (a bar when stderr is a terminal),
// always, or never; anything else is refused.
func progressFlag(fs *flag.FlagSet) *string {
	mode := "auto"
	fs.Func("progress", "progress bar on stderr: auto (when stderr is a terminal), always or never (default auto)", func(s string) error {
		switch s {
		case "auto", "always", "never":
			mode = s
			return nil
		}
		if on, err := strconv.ParseBool(s); err == nil { // --progress=false
			mode = map[bool]string{true: "always", false: "never"}[on]
			return nil
		}
		return fmt.Errorf("%q: use auto, always or never", s)
	})
	return &mode
}

// progress draws a one-line progress bar on stderr, at most ten times a
// second. A nil *progress, or one that is off, draws nothing.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	on    bool
	phase string
	last  time.Time
	drawn bool
}

func newProgress(stderr io.Writer, mode string) *progress {
	on := mode == "always"
	if mode == "auto" || mode == "" {
		f, ok := stderr.(*os.File)
		if ok {
			st, err := f.Stat()
			on = err == nil && st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: stderr, on: on}
}

// update shows how far a phase is; total 0 means unknown.
func (p *progress) update(phase string, done, total uint64) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if phase == p.phase && done < total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	if phase != p.phase && p.drawn {
		fmt.Fprintln(p.w)
	}
	p.phase, p.last, p.drawn = phase, now, true
	fmt.Fprint(p.w, "\r"+bar(phase, done, total))
}

// done ends the bar's line; safe to call twice.
func (p *progress) done() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
		p.phase = ""
	}
}

// bar renders "events [########------------]  40%  400/1000".
func bar(phase string, done, total uint64) string {
	const width = 30
	if total == 0 {
		return fmt.Sprintf("%-8s %d", phase, done)
	}
	done = min(done, total)
	filled := int(done * width / total)
	return fmt.Sprintf("%-8s [%s%s] %3d%%  %d/%d", phase, strings.Repeat("#", filled), strings.Repeat("-", width-filled),
		done*100/total, done, total)
}
