package sim

import "time"

// verdictNames name verdicts in reports and traces.
var verdictNames = map[verdict]string{vGo: "go", vFail: "fail", vLost: "lost", vLate: "late", vDead: "dead"}

// verdict draws what happens to t at its point. hold means t stays parked
// (its process was paused). It may crash t's process.
func (w *World) verdict(t *task, now time.Time) (v verdict, hold bool) {
	if w.calm {
		return vGo, false
	}
	f, r := w.cfg.Faults, w.rng
	if r.Float64() < f.Crash {
		w.crash(t.worker, now, t)
		return vDead, false
	}
	if r.Float64() < f.Pause {
		w.pause(t.worker, now)
		return vGo, true
	}
	fault := func(p float64, v verdict) bool {
		if r.Float64() < p {
			w.rep.Injected[t.point.String()+":"+verdictNames[v]]++
			return true
		}
		return false
	}
	switch t.point {
	case ptLoad, ptAppend, ptReject:
		if fault(f.StoreFail, vFail) {
			return vFail, false
		}
	case ptAppended:
		if fault(f.StoreLost, vLost) {
			return vLost, false
		}
	case ptLedger:
		if fault(f.LedgerFail, vFail) {
			return vFail, false
		}
	case ptSend:
		if fault(f.Cut, vLost) {
			t.cutAfter = time.Duration(r.Int64N(int64(w.cfg.Sandbox.SearchTime + w.cfg.Sandbox.SlowSearchTime + 1)))
			return vLost, false
		}
	case ptArm:
		if fault(f.ArmFail, vFail) {
			return vFail, false
		}
	case ptAck:
		if fault(f.AckLost, vLost) {
			return vLost, false
		}
		if t.how != nak && fault(f.AckLate, vLate) {
			w.mu.Lock()
			w.late = append(w.late, lateAck{at: now.Add(time.Duration(r.Int64N(int64(3 * w.cfg.AckWait)))), m: t.msg})
			w.mu.Unlock()
			return vLate, false
		}
	}
	return vGo, false
}

// crash kills a worker process: every task it runs stops where it is (a
// parked one learns at once, one inside a request when its context ends);
// it comes back empty after a while. except is the task the caller resumes
// itself.
func (w *World) crash(wk *simWorker, now time.Time, except *task) {
	w.rep.Crashes++
	var parked []*task
	w.mu.Lock()
	for _, id := range w.taskIDs() {
		t := w.tasks[id]
		if t.worker != wk || t.dead {
			continue
		}
		t.dead = true
		t.cancel()
		if t.parked && t != except {
			t.parked = false
			parked = append(parked, t)
		}
	}
	wk.incarnation++
	wk.name = workerName(wk.n, wk.incarnation)
	wk.work, wk.cmds = 0, 0
	wk.pausedUntil = time.Time{}
	wk.downUntil = now.Add(time.Second + time.Duration(w.rng.Int64N(int64(w.cfg.Faults.RestartAfter)+1)))
	w.mu.Unlock()
	// Each is blocked receiving (the scheduler only acts once every
	// goroutine is), and unwinds without touching the world.
	for _, t := range parked {
		t.resume <- vDead
	}
}

// pause freezes a worker process. A pause that catches one of its tasks
// between the engine's last check and the request leaving is bounded by
// MaxSendPause (see Faults).
func (w *World) pause(wk *simWorker, now time.Time) {
	f := w.cfg.Faults
	d := time.Duration(w.rng.Int64N(int64(f.MaxPause) + 1))
	w.mu.Lock()
	for _, t := range w.tasks {
		if t.worker == wk && t.parked && t.point == ptSend && !f.LongSendPauses {
			d = min(d, f.MaxSendPause)
		}
	}
	wk.pausedUntil = now.Add(d)
	w.mu.Unlock()
	w.rep.Pauses++
	w.rep.LongestPause = max(w.rep.LongestPause, d)
}
