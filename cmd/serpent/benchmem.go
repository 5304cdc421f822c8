package main

import (
	"bufio"
	"os"
	"runtime"
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
}

// startMemorySampler samples the heap every 100 ms until stop.
func startMemorySampler() *memorySampler {
	m := &memorySampler{quit: make(chan struct{}), done: make(chan struct{})}
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
	m.heapPeak = max(m.heapPeak, ms.HeapInuse)
	m.mu.Unlock()
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
func vmHWM() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
