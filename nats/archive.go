package nats

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The archive: every event of SERP_EVENTS, kept for ever.
const (
	ArchiveStream        = "SERP_ARCHIVE"
	ArchiveSubjectPrefix = "serp.archive."
	// ArchivePartitions is how many subjects the archive folds the jobs
	// into. The server keeps a fixed cost per subject, so the archive's
	// memory does not grow with jobs. Changing it would move old jobs
	// out of the partition ArchivePartition names for them.
	ArchivePartitions = 8
	// HeaderSource is the header the server puts on every sourced
	// message: "<stream> <seq> <filter> <transform> <original subject>".
	HeaderSource = "Nats-Stream-Source"
)

// ArchiveStreamConfig is SERP_ARCHIVE: it sources SERP_EVENTS, folding
// serp.events.<job> into serp.archive.<0..ArchivePartitions-1> by a hash of
// the job id, so it holds a few subjects whatever the number of jobs. It
// is compressed and has no limits. It does not allow message TTLs: the
// server then keeps the sourced messages although they carry SERP_EVENTS'
// Nats-TTL header (TestArchiveKeepsExpiredEvents shows it). Each message
// keeps its original subject and sequence in HeaderSource.
func ArchiveStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        ArchiveStream,
		Description: "serpent: every event of SERP_EVENTS, kept after it leaves the live log",
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxBytes:    -1, MaxMsgs: -1, MaxMsgsPerSubject: -1,
		Replicas:    max(replicas, 1),
		Duplicates:  2 * time.Minute,
		Compression: jetstream.S2Compression,
		AllowDirect: true,
		DenyDelete:  true,
		DenyPurge:   true,
		Sources: []*jetstream.StreamSource{{
			Name: EventStream,
			SubjectTransforms: []jetstream.SubjectTransformConfig{{
				Source:      EventSubjectPrefix + "*",
				Destination: ArchiveSubjectPrefix + "{{partition(" + strconv.Itoa(ArchivePartitions) + ",1)}}",
			}},
		}},
	}
}

// EnsureArchiveStream creates SERP_ARCHIVE or checks that it is as serpent
// wants it; see EnsureStream.
func EnsureArchiveStream(ctx context.Context, js jetstream.JetStream, opts EventStreamOptions) (jetstream.Stream, error) {
	return ensureStream(ctx, js, ArchiveStreamConfig(opts.Replicas), opts.AllowUpdate, opts.Logger)
}

// ArchivePartition is the archive subject that holds a job's events: the
// server's partition transform, computed here (FNV-1a of the job id,
// modulo ArchivePartitions; nats-server's subject_transform.go).
func ArchivePartition(jobID string) string {
	h := fnv.New32a()
	h.Write([]byte(jobID))
	return ArchiveSubjectPrefix + strconv.Itoa(int(h.Sum32()%ArchivePartitions))
}

// SourceOf reads HeaderSource: the original subject and sequence of an
// archived message in SERP_EVENTS. ok is false for a message that did not
// come from SERP_EVENTS.
func SourceOf(h map[string][]string) (subject string, seq uint64, ok bool) {
	v := h[HeaderSource]
	if len(v) == 0 {
		return "", 0, false
	}
	// The filter and transform fields may be empty or hold wildcards, and
	// a cluster adds an identity at the end: the subject is the last
	// field on serp.events without a wildcard.
	f := strings.Fields(v[0])
	if len(f) < 3 || f[0] != EventStream {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return "", 0, false
	}
	for i := len(f) - 1; i >= 2; i-- {
		if strings.HasPrefix(f[i], EventSubjectPrefix) && !strings.ContainsAny(f[i], "*>") {
			return f[i], seq, true
		}
	}
	return "", 0, false
}

// ArchiveLag is how many messages of SERP_EVENTS the archive has not
// copied yet, as SERP_ARCHIVE's source reports it. An error says the
// archive cannot be read, or does not source SERP_EVENTS, or the server
// reports its source failing: then events that leave the live log before
// it recovers are lost to the archive.
func ArchiveLag(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	s, err := js.Stream(ctx, ArchiveStream)
	if err != nil {
		return 0, fmt.Errorf("nats: stream %s: %w", ArchiveStream, err)
	}
	for _, src := range s.CachedInfo().Sources {
		if src == nil || src.Name != EventStream {
			continue
		}
		if src.Error != nil {
			return src.Lag, fmt.Errorf("nats: %s cannot copy %s: %s", ArchiveStream, EventStream, src.Error.Description)
		}
		return src.Lag, nil
	}
	return 0, fmt.Errorf("nats: %s does not source %s", ArchiveStream, EventStream)
}
