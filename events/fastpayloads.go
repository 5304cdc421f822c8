package events

// The fast path's reader of each payload type at its current schema,
// member for member as types.go declares them. An unknown member, or
// anything else a reader is unsure of, sends the event to decodeJSON.

func scanJobScheduled(s *scan) (Payload, bool) {
	var p JobScheduled
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "slot":
			return seen.first(0) && s.time(&p.Slot)
		case "search":
			return seen.first(1) && scanSearch(s, &p.Search)
		case "body":
			return seen.first(2) && s.str(&p.Body)
		case "body_sha256":
			return seen.first(3) && s.str(&p.BodySHA256)
		case "policy":
			return seen.first(4) && scanPolicy(s, &p.Policy)
		case "not_before":
			return seen.first(5) && s.time(&p.NotBefore)
		case "account":
			return seen.first(6) && s.str(&p.Account)
		case "priority":
			return seen.first(7) && s.str(&p.Priority)
		case "source":
			return seen.first(8) && s.str(&p.Source)
		}
		return false
	})
	return p, ok
}

func scanSearch(s *scan, p *SearchContext) bool {
	var seen once
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "query":
			return seen.first(0) && s.str(&p.Query)
		case "country":
			return seen.first(1) && s.str(&p.Country)
		case "language":
			return seen.first(2) && s.str(&p.Language)
		case "device":
			return seen.first(3) && s.str(&p.Device)
		case "limit":
			return seen.first(4) && s.int(&p.Limit)
		}
		return false
	})
}

func scanPolicy(s *scan, p *RetryPolicy) bool {
	var seen once
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "base_delay":
			return seen.first(0) && s.duration(&p.BaseDelay)
		case "max_delay":
			return seen.first(1) && s.duration(&p.MaxDelay)
		case "min_delay":
			return seen.first(2) && s.duration(&p.MinDelay)
		case "retry_after_max":
			return seen.first(3) && s.duration(&p.RetryAfterMax)
		case "replay_window":
			return seen.first(4) && s.duration(&p.ReplayWindow)
		case "safety_margin":
			return seen.first(5) && s.duration(&p.SafetyMargin)
		case "lease":
			return seen.first(6) && s.duration(&p.Lease)
		case "max_keys":
			return seen.first(7) && s.int(&p.MaxKeys)
		case "max_age":
			return seen.first(8) && s.duration(&p.MaxAge)
		case "retention":
			return seen.first(9) && s.duration(&p.Retention)
		}
		return false
	})
}

func scanAttemptCreated(s *scan) (Payload, bool) {
	var p AttemptCreated
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "attempt":
			return seen.first(0) && s.int(&p.Attempt)
		case "key":
			return seen.first(1) && s.str(&p.Key)
		case "body_sha256":
			return seen.first(2) && s.str(&p.BodySHA256)
		}
		return false
	})
	return p, ok
}

func scanSent(s *scan) (Payload, bool) {
	var p Sent
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "key":
			return seen.first(0) && s.str(&p.Key)
		case "attempt":
			return seen.first(1) && s.int(&p.Attempt)
		case "try":
			return seen.first(2) && s.int(&p.Try)
		case "worker":
			return seen.first(3) && s.str(&p.Worker)
		case "lease_until":
			return seen.first(4) && s.time(&p.LeaseUntil)
		case "deadline":
			return seen.first(5) && s.time(&p.Deadline)
		}
		return false
	})
	return p, ok
}

func scanOutcomeClassified(s *scan) (Payload, bool) {
	var p OutcomeClassified
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "key":
			return seen.first(0) && s.str(&p.Key)
		case "try":
			return seen.first(1) && s.int(&p.Try)
		case "status":
			return seen.first(2) && s.int(&p.Status)
		case "code":
			return seen.first(3) && s.str(&p.Code)
		case "unknown":
			return seen.first(4) && s.str(&p.Unknown)
		case "request_id":
			return seen.first(5) && s.str(&p.RequestID)
		case "replayed":
			return seen.first(6) && s.bool(&p.Replayed)
		case "retry_after":
			return seen.first(7) && s.duration(&p.RetryAfter)
		case "class":
			return seen.first(8) && s.str(&p.Class)
		case "action":
			return seen.first(9) && s.str(&p.Action)
		case "attempt":
			return seen.first(10) && s.int(&p.Attempt)
		case "sends":
			return seen.first(11) && s.int(&p.Sends)
		case "next_run_at":
			return seen.first(12) && s.time(&p.NextRunAt)
		}
		return false
	})
	return p, ok
}

func scanKeyRotated(s *scan) (Payload, bool) {
	var p KeyRotated
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "old_key":
			return seen.first(0) && s.str(&p.OldKey)
		case "new_key":
			return seen.first(1) && s.str(&p.NewKey)
		case "attempt":
			return seen.first(2) && s.int(&p.Attempt)
		case "body_sha256":
			return seen.first(3) && s.str(&p.BodySHA256)
		case "reason":
			return seen.first(4) && s.str(&p.Reason)
		case "next_run_at":
			return seen.first(5) && s.time(&p.NextRunAt)
		}
		return false
	})
	return p, ok
}

func scanDeadlineReached(s *scan) (Payload, bool) {
	var p DeadlineReached
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "key":
			return seen.first(0) && s.str(&p.Key)
		case "deadline":
			return seen.first(1) && s.time(&p.Deadline)
		case "reason":
			return seen.first(2) && s.str(&p.Reason)
		}
		return false
	})
	return p, ok
}

func scanLedgerEntry(s *scan, p *LedgerEntry) bool {
	var seen once
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "request_id":
			return seen.first(0) && s.str(&p.RequestID)
		case "key":
			return seen.first(1) && s.str(&p.Key)
		case "pages":
			return seen.first(2) && s.int(&p.Pages)
		case "billed_pages":
			return seen.first(3) && s.int(&p.BilledPages)
		case "amount_micros":
			return seen.first(4) && s.int64(&p.AmountMicros)
		case "at":
			return seen.first(5) && s.time(&p.At)
		}
		return false
	})
}

// scanEntries reads a list of ledger entries; [] gives an empty, non-nil
// slice as encoding/json does.
func scanEntries(s *scan, v *[]LedgerEntry) bool {
	out := []LedgerEntry{}
	_, ok := s.array(func() bool {
		var en LedgerEntry
		if !scanLedgerEntry(s, &en) {
			return false
		}
		out = append(out, en)
		return true
	})
	*v = out
	return ok
}

func scanReconciled(s *scan) (Payload, bool) {
	var p Reconciled
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "keys":
			return seen.first(0) && s.strings(&p.Keys)
		case "request_ids":
			return seen.first(1) && s.strings(&p.RequestIDs)
		case "entries":
			return seen.first(2) && scanEntries(s, &p.Entries)
		case "charges":
			return seen.first(3) && s.int(&p.Charges)
		case "verdict":
			return seen.first(4) && s.str(&p.Verdict)
		case "action":
			return seen.first(5) && s.str(&p.Action)
		}
		return false
	})
	return p, ok
}

func scanObservationStored(s *scan) (Payload, bool) {
	var p ObservationStored
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "key":
			return seen.first(0) && s.str(&p.Key)
		case "request_id":
			return seen.first(1) && s.str(&p.RequestID)
		case "replayed":
			return seen.first(2) && s.bool(&p.Replayed)
		case "pages":
			return seen.first(3) && s.int(&p.Pages)
		case "result":
			return seen.first(4) && s.raw(&p.Result)
		case "check_charges":
			return seen.first(5) && s.bool(&p.CheckCharges)
		}
		return false
	})
	return p, ok
}

func scanChargesChecked(s *scan) (Payload, bool) {
	var p ChargesChecked
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "key":
			return seen.first(0) && s.str(&p.Key)
		case "request_ids":
			return seen.first(1) && s.strings(&p.RequestIDs)
		case "entries":
			return seen.first(2) && scanEntries(s, &p.Entries)
		case "charges":
			return seen.first(3) && s.int(&p.Charges)
		case "verdict":
			return seen.first(4) && s.str(&p.Verdict)
		}
		return false
	})
	return p, ok
}

func scanJobFailed(s *scan) (Payload, bool) {
	var p JobFailed
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "reason":
			return seen.first(0) && s.str(&p.Reason)
		case "key":
			return seen.first(1) && s.str(&p.Key)
		case "status":
			return seen.first(2) && s.int(&p.Status)
		case "code":
			return seen.first(3) && s.str(&p.Code)
		case "message":
			return seen.first(4) && s.str(&p.Message)
		case "request_id":
			return seen.first(5) && s.str(&p.RequestID)
		}
		return false
	})
	return p, ok
}

func scanJobCancelled(s *scan) (Payload, bool) {
	var p JobCancelled
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "by":
			return seen.first(0) && s.str(&p.By)
		case "reason":
			return seen.first(1) && s.str(&p.Reason)
		case "unresolved":
			return seen.first(2) && s.str(&p.Unresolved)
		}
		return false
	})
	return p, ok
}

func scanRepurchaseAuthorized(s *scan) (Payload, bool) {
	var p RepurchaseAuthorized
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "by":
			return seen.first(0) && s.str(&p.By)
		case "reason":
			return seen.first(1) && s.str(&p.Reason)
		}
		return false
	})
	return p, ok
}
