package projector

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// A checkpoint larger than a part (512 KB, or half the server's
// max_payload if that is less) is written in parts: each part under its
// own key, tally.<seq>.<nonce>.<i>, and then the head under the key tally,
// naming the parts with their length and SHA-256. The head is written
// last and only over one less far along, so a reader that finds a head
// finds its parts, unless a newer head replaced it meanwhile (it reads the
// head again). A writer that dies before its head leaves the head before
// it as it was; its parts are purged by a later write. The parts of one
// write have a key of their own, so two engines writing at once never mix
// theirs.

// checkpointHead is what a checkpoint says of itself, read without the
// jobs it holds. The value under the key tally is a whole checkpoint
// (projections.Tally.Checkpoint), or only its head: no Format, the whole
// one's in PartsFormat, and the Parts that hold the whole one. A version
// that knows nothing of parts thus refuses a head rather than take it for
// a whole checkpoint.
type checkpointHead struct {
	Format      int              `json:"format,omitempty"`
	PartsFormat int              `json:"parts_format,omitempty"`
	Log         time.Time        `json:"log"`
	Seq         uint64           `json:"seq"`
	Forget      bool             `json:"forget"`
	Parts       *checkpointParts `json:"parts,omitempty"`
}

// format is the format of the checkpoint h is the head of.
func (h checkpointHead) format() int {
	if h.Parts != nil {
		return h.PartsFormat
	}
	return h.Format
}

// checkpointParts names the parts of a checkpoint written in parts.
type checkpointParts struct {
	// ID is "<seq>.<nonce>": the parts are under tally.<ID>.0, .1, ...
	ID     string `json:"id"`
	N      int    `json:"n"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// partSize is the most a part holds. A variable for tests.
var partSize = 512 << 10

// errPartMissing says a part the head names is not in the bucket.
var errPartMissing = errors.New("metrics: a part of the checkpoint is missing")

// sizeOfParts is partSize, or less on a server that takes smaller messages.
func sizeOfParts(js jetstream.JetStream) int {
	if m := int(js.Conn().MaxPayload()); m > 0 && m/2 < partSize {
		return m / 2
	}
	return partSize
}

// partKey is the key of part i of the parts id.
func partKey(id string, i int) string {
	return snats.MetricsCheckpointKey + "." + id + "." + strconv.Itoa(i)
}

// writeParts writes b, the checkpoint of the tally at seq, in parts of
// size bytes, and returns what its head says of them; with an error, the
// parts it may have written.
func writeParts(ctx context.Context, kv jetstream.KeyValue, b []byte, seq uint64, size int) (*checkpointParts, error) {
	var nonce [4]byte
	_, _ = rand.Read(nonce[:]) // never fails
	sum := sha256.Sum256(b)
	p := &checkpointParts{ID: strconv.FormatUint(seq, 10) + "." + hex.EncodeToString(nonce[:]),
		N: (len(b) + size - 1) / size, Bytes: len(b), SHA256: hex.EncodeToString(sum[:])}
	for i := range p.N {
		part := b[i*size : min((i+1)*size, len(b))]
		if _, err := kv.Put(ctx, partKey(p.ID, i), part); err != nil {
			return p, fmt.Errorf("metrics: checkpoint part %d of %d: %w", i+1, p.N, err)
		}
	}
	return p, nil
}

// readParts reads the parts p names back into one checkpoint. A part
// missing is errPartMissing; parts that are not what the head says (their
// length or their sum) an projections.ErrTallyCheckpoint.
func readParts(ctx context.Context, kv jetstream.KeyValue, p checkpointParts) ([]byte, error) {
	if p.N <= 0 || p.Bytes < p.N || p.Bytes > projections.MaxTallyCheckpointBytes {
		return nil, fmt.Errorf("%w: %d parts of %d bytes", projections.ErrTallyCheckpoint, p.N, p.Bytes)
	}
	b := make([]byte, 0, p.Bytes)
	for i := range p.N {
		e, err := kv.Get(ctx, partKey(p.ID, i))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("%w: %s", errPartMissing, partKey(p.ID, i))
		}
		if err != nil {
			return nil, fmt.Errorf("metrics: checkpoint part %d of %d: %w", i+1, p.N, err)
		}
		if len(b)+len(e.Value()) > p.Bytes {
			return nil, fmt.Errorf("%w: its parts are longer than the %d bytes its head says", projections.ErrTallyCheckpoint, p.Bytes)
		}
		b = append(b, e.Value()...)
	}
	if sum := sha256.Sum256(b); len(b) != p.Bytes || hex.EncodeToString(sum[:]) != p.SHA256 {
		return nil, fmt.Errorf("%w: its parts are not the %d bytes its head says", projections.ErrTallyCheckpoint, p.Bytes)
	}
	return b, nil
}

// partsStream is the stream of the serp_metrics bucket.
var partsStream = BucketStream(snats.MetricsBucket)

// bucketPrefix is the subject of every key of the bucket, less the key.
const bucketPrefix = "$KV." + snats.MetricsBucket + "."

// partsPrefix is the subject of every part, less its id and number.
const partsPrefix = bucketPrefix + snats.MetricsCheckpointKey + "."

// purgeID removes the parts of id from the bucket. Purged, they leave
// nothing behind in the bucket's stream, not even a marker.
func purgeID(ctx context.Context, js jetstream.JetStream, id string) error {
	st, err := js.Stream(ctx, partsStream)
	if err == nil {
		err = st.Purge(ctx, jetstream.WithPurgeSubject(partsPrefix+id+".>"))
	}
	if err != nil {
		return fmt.Errorf("metrics: purging the checkpoint parts %s: %w", id, err)
	}
	return nil
}

// purgeStale removes the parts no head names and none will: those of
// checkpoints at sequences up to head's but its own (keep; "" for a head
// without parts), left by writes that lost to a head further along or
// were cut short, and those past the log's end, which are of a log made
// before this one under the same name (end says where the log ends,
// asked after the parts are listed). Parts between head's sequence and
// the log's end may be another engine's, writing them still.
func purgeStale(ctx context.Context, js jetstream.JetStream, head uint64, keep string, end func(uint64) (uint64, error)) error {
	behind, past := map[string]bool{}, map[string]uint64{}
	err := snats.EachSubject(ctx, js, partsStream, partsPrefix+">", func(subject string) {
		f := strings.Split(strings.TrimPrefix(subject, partsPrefix), ".") // seq, nonce, part
		if len(f) != 3 {
			return // not a part: an operator's key, say
		}
		at, err := strconv.ParseUint(f[0], 10, 64)
		switch id := f[0] + "." + f[1]; {
		case err != nil || id == keep:
		case at <= head:
			behind[id] = true
		default:
			past[id] = at
		}
	})
	if err != nil {
		return fmt.Errorf("metrics: checkpoint parts: %w", err)
	}
	if len(past) > 0 {
		last, err := end(math.MaxUint64)
		if err != nil {
			return err
		}
		for id, at := range past {
			if at > last {
				behind[id] = true
			}
		}
	}
	for id := range behind {
		if err := purgeID(ctx, js, id); err != nil {
			return err
		}
	}
	return nil
}

// partsAtLeader checks with the bucket stream's leader that every part p
// names is there: errPartMissing if one is not.
func partsAtLeader(ctx context.Context, js jetstream.JetStream, p checkpointParts) error {
	for i := range p.N {
		key := partKey(p.ID, i)
		h, ok, err := snats.LastHeader(ctx, js, partsStream, bucketPrefix+key)
		if err != nil {
			return err
		}
		if !ok || deleteMarker(h) {
			return fmt.Errorf("%w: %s", errPartMissing, key)
		}
	}
	return nil
}
