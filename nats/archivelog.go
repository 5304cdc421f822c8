package nats

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// ArchiveLog is SERP_ARCHIVE, every partition.
func ArchiveLog(js jetstream.JetStream) Log {
	return Log{js: js, stream: ArchiveStream, filter: ArchiveSubjectPrefix + ">"}
}

// unarchive turns archived messages back into the messages of SERP_EVENTS
// they copy: their original subject and sequence (SourceOf). Messages
// that name no source are left out.
func unarchive(msgs []Message) []Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		subj, seq, ok := SourceOf(m.Header)
		if !ok {
			continue
		}
		m.Subject, m.Seq = subj, seq
		out = append(out, m)
	}
	return out
}

// HasArchive reports whether SERP_ARCHIVE exists.
func HasArchive(ctx context.Context, js jetstream.JetStream) (bool, error) {
	_, err := js.Stream(ctx, ArchiveStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	return err == nil, err
}

// NewArchivedAuditLog is the whole history as the audit reads it: the
// archive's copy of SERP_EVENTS, then the live log's messages the
// archive has not copied yet, each once, in log order and with its
// sequence in SERP_EVENTS. It reads where both end now. Without an
// archive it is NewAuditLog of the live log.
func NewArchivedAuditLog(ctx context.Context, js jetstream.JetStream, workers int, progress func(done, total uint64)) (*AuditLog, error) {
	ok, err := HasArchive(ctx, js)
	if err != nil {
		return nil, err
	}
	live := EventLog(js)
	if !ok {
		return NewAuditLog(ctx, live, workers, progress)
	}
	archLast, err := ArchiveLog(js).Last(ctx)
	if err != nil {
		return nil, err
	}
	last, err := live.Last(ctx)
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(uint64, uint64) {}
	}
	read := func(ctx context.Context, emit func([]Message) error) error {
		progress(0, last)
		return readHistory(ctx, js, archLast, last, func(msgs []Message) error {
			if err := emit(msgs); err != nil {
				return err
			}
			progress(msgs[len(msgs)-1].Seq, last)
			return nil
		})
	}
	jobs := func(ctx context.Context, through map[string]uint64) (map[string][]Message, error) {
		return archivedJobs(ctx, js, through, archLast, last)
	}
	return &AuditLog{read: read, jobs: jobs, prefix: EventSubjectPrefix, workers: workers}, nil
}

// archivedJobs reads the histories of the jobs in through: the archive's
// copies up to archLast, then the live log's messages after the last copy
// up to last. It scans each partition that holds one of them once, so
// many jobs cost at most one read of the archive. Each job must reach
// its sequence in through (0: any).
func archivedJobs(ctx context.Context, js jetstream.JetStream, through map[string]uint64, archLast, last uint64) (map[string][]Message, error) {
	want := map[string]bool{}       // the jobs' subjects
	partitions := map[string]bool{} // the archive partitions that hold them
	for jobID := range through {
		want[EventSubjectPrefix+jobID] = true
		if archLast > 0 {
			partitions[ArchivePartition(jobID)] = true
		}
	}
	found := map[string][]Message{} // by subject
	for p := range partitions {
		_, err := ArchiveLog(js).Subject(p).Read(ctx, 1, archLast, 1024, func(msgs []Message) error {
			for _, m := range unarchive(msgs) {
				if want[m.Subject] {
					found[m.Subject] = append(found[m.Subject], m)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make(map[string][]Message, len(through))
	for jobID, t := range through {
		subject := EventSubjectPrefix + jobID
		msgs := found[subject]
		if from := lastSeqOf(msgs) + 1; from <= last {
			tail, err := EventLog(js).Subject(subject).Get(ctx, from, last)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, tail...)
		}
		if err := reaches(subject, msgs, t); err != nil {
			return nil, err
		}
		out[jobID] = msgs
	}
	return out, nil
}

// ArchivedJob reads a job's whole history from the archive (and the live
// log for what the archive has not copied yet), decoded, with its
// sequences in SERP_EVENTS. It scans the partition that holds the job:
// slow for a large archive, but it answers for a job that left the live
// log. No events and no error when the archive does not have the job.
func ArchivedJob(ctx context.Context, js jetstream.JetStream, jobID string) ([]Message, error) {
	arch, err := ArchiveLog(js).Last(ctx)
	if err != nil {
		return nil, err
	}
	last, err := EventLog(js).Last(ctx)
	if err != nil {
		return nil, err
	}
	got, err := archivedJobs(ctx, js, map[string]uint64{jobID: 0}, arch, last)
	return got[jobID], err
}

// readHistory hands fn, in chunks, the archive's copies of SERP_EVENTS up
// to archLast, then the live log's messages after the last copy up to
// last: every message once, in log order, with its SERP_EVENTS subject
// and sequence.
func readHistory(ctx context.Context, js jetstream.JetStream, archLast, last uint64, fn func([]Message) error) error {
	var copied uint64 // the last sequence of SERP_EVENTS the archive holds
	if archLast > 0 {
		_, err := ArchiveLog(js).Read(ctx, 1, archLast, 1024, func(msgs []Message) error {
			msgs = unarchive(msgs)
			if len(msgs) == 0 {
				return nil
			}
			copied = msgs[len(msgs)-1].Seq
			return fn(msgs)
		})
		if err != nil {
			return err
		}
	}
	if copied >= last {
		return nil
	}
	_, err := EventLog(js).Read(ctx, copied+1, last, 1024, fn)
	return err
}

// ReadHistory hands fn every event message SERP_EVENTS ever held as it
// stands now: the archive's copies, then the live log's newer messages
// (readHistory); the live log alone when there is no archive.
func ReadHistory(ctx context.Context, js jetstream.JetStream, fn func([]Message) error) error {
	last, err := EventLog(js).Last(ctx)
	if err != nil {
		return err
	}
	var archLast uint64
	if ok, err := HasArchive(ctx, js); err != nil {
		return err
	} else if ok {
		if archLast, err = ArchiveLog(js).Last(ctx); err != nil {
			return err
		}
	}
	return readHistory(ctx, js, archLast, last, fn)
}
