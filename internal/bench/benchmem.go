package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

// benchMemory is the peak memory of the bench process, which holds the
// engine and its embedded NATS server.
type benchMemory struct {
	PeakRSSMB  float64 `json:"peak_rss_mb"`
	PeakHeapMB float64 `json:"peak_heap_mb"`
}

type memorySampler struct {
	mu       sync.Mutex
	heapPeak uint64
	quit     chan struct{}
	done     chan struct{}
	// With profile, the sampler keeps a heap profile taken at the peak
	// (whenever the heap in use grows by a tenth over the last one).
	profile    bool
	profiledAt uint64
	heap       bytes.Buffer
}

// startMemorySampler samples the heap every 100 ms until stop; with
// profile it keeps a heap profile of the peak.
func startMemorySampler(profile bool) *memorySampler {
	m := &memorySampler{quit: make(chan struct{}), done: make(chan struct{}), profile: profile}
	go func() {
		defer close(m.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-m.quit:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memorySampler) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heapPeak = max(m.heapPeak, ms.HeapInuse)
	if m.profile && ms.HeapInuse > m.profiledAt+m.profiledAt/10 {
		m.heap.Reset()
		if err := pprof.Lookup("heap").WriteTo(&m.heap, 0); err == nil {
			m.profiledAt = ms.HeapInuse
		}
	}
}

// writeProfile writes the heap profile taken at the peak to path: what was
// live then, by where it was allocated (and every allocation so far, as
// any heap profile has).
func (m *memorySampler) writeProfile(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.heap.Len() == 0 {
		if err := pprof.Lookup("heap").WriteTo(&m.heap, 0); err != nil {
			return err
		}
	}
	return os.WriteFile(path, m.heap.Bytes(), 0o644)
}

func (m *memorySampler) stop() {
	select {
	case <-m.quit:
	default:
		close(m.quit)
	}
	<-m.done
}

// peak returns the peaks so far: the kernel's high-water mark of resident
// memory (VmHWM, Linux) and the largest heap in use seen.
func (m *memorySampler) peak() benchMemory {
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	return benchMemory{PeakRSSMB: round2(float64(vmHWM()) / (1 << 20)), PeakHeapMB: round2(float64(m.heapPeak) / (1 << 20))}
}

// vmHWM reads the peak resident set size of this process, in bytes, or 0
// where /proc is not there.
func vmHWM() uint64 { return procStatus(0, "VmHWM") }

// procStatus reads a memory field (VmHWM, VmRSS, ...) of process pid (0:
// this one) from /proc/<pid>/status, in bytes, or 0 where /proc is not
// there.
func procStatus(pid int, field string) uint64 {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
