package projections

import "github.com/serpent-engine/serpent/events"

// One reader per payload type, member for member as the events package
// declares them (an unknown member sends the event to events.Decode).

func decodeJobScheduled(s *scan) (events.Payload, bool) {
	var p events.JobScheduled
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "slot":
			return seen.first(0) && s.time(&p.Slot)
		case "search":
			return seen.first(1) && decodeSearch(s, &p.Search)
		case "body":
			return seen.first(2) && s.str(&p.Body)
		case "body_sha256":
			return seen.first(3) && s.str(&p.BodySHA256)
		case "policy":
			return seen.first(4) && decodePolicy(s, &p.Policy)
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

func decodeSearch(s *scan, p *events.SearchContext) bool {
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

func decodePolicy(s *scan, p *events.RetryPolicy) bool {
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
		}
		return false
	})
}

func decodeAttemptCreated(s *scan) (events.Payload, bool) {
	var p events.AttemptCreated
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

func decodeSent(s *scan) (events.Payload, bool) {
	var p events.Sent
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

func decodeOutcomeClassified(s *scan) (events.Payload, bool) {
	var p events.OutcomeClassified
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

func decodeKeyRotated(s *scan) (events.Payload, bool) {
	var p events.KeyRotated
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

func decodeDeadlineReached(s *scan) (events.Payload, bool) {
	var p events.DeadlineReached
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

func decodeLedgerEntry(s *scan, p *events.LedgerEntry) bool {
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

func decodeReconciled(s *scan) (events.Payload, bool) {
	var p events.Reconciled
	var seen once
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "keys":
			return seen.first(0) && s.strings(&p.Keys)
		case "request_ids":
			return seen.first(1) && s.strings(&p.RequestIDs)
		case "entries":
			if !seen.first(2) {
				return false
			}
			p.Entries = []events.LedgerEntry{}
			_, ok := s.array(func() bool {
				var en events.LedgerEntry
				if !decodeLedgerEntry(s, &en) {
					return false
				}
				p.Entries = append(p.Entries, en)
				return true
			})
			return ok
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

func decodeObservationStored(s *scan) (events.Payload, bool) {
	var p events.ObservationStored
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

func decodeJobFailed(s *scan) (events.Payload, bool) {
	var p events.JobFailed
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

func decodeJobCancelled(s *scan) (events.Payload, bool) {
	var p events.JobCancelled
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

func decodeRepurchaseAuthorized(s *scan) (events.Payload, bool) {
	var p events.RepurchaseAuthorized
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
