package metrics

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
)

// A checkpoint larger than one KV value holds (the server's max_payload,
// 1 MB by default) is written in parts: each part under its own key,
// tally.<seq>.<nonce>.<i>, and then the head under the key tally, naming
// the parts with their length and SHA-256. The head is written last and
// only over one less far along, so a reader that finds a head finds its
// parts, unless a newer head replaced it meanwhile (it reads the head
// again) or a writer crashed in between (it folds the log from its start).
// The parts of one write have a key of their own, so two engines writing
// at once never mix theirs.

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
// size bytes, and returns what its head says of them.
func writeParts(ctx context.Context, kv jetstream.KeyValue, b []byte, seq uint64, size int) (*checkpointParts, error) {
	var nonce [4]byte
	_, _ = rand.Read(nonce[:]) // never fails
	sum := sha256.Sum256(b)
	p := &checkpointParts{ID: strconv.FormatUint(seq, 10) + "." + hex.EncodeToString(nonce[:]),
		N: (len(b) + size - 1) / size, Bytes: len(b), SHA256: hex.EncodeToString(sum[:])}
	for i := range p.N {
		part := b[i*size : min((i+1)*size, len(b))]
		if _, err := kv.Put(ctx, partKey(p.ID, i), part); err != nil {
			return nil, fmt.Errorf("metrics: checkpoint part %d of %d: %w", i+1, p.N, err)
		}
	}
	return p, nil
}

// readParts reads the parts p names back into one checkpoint. A part
// missing is errPartMissing; parts that are not what the head says (their
// length or their sum) an ErrCheckpoint.
func readParts(ctx context.Context, kv jetstream.KeyValue, p checkpointParts) ([]byte, error) {
	if p.N <= 0 || p.Bytes < p.N || p.Bytes > checkpointLimit {
		return nil, fmt.Errorf("%w: %d parts of %d bytes", ErrCheckpoint, p.N, p.Bytes)
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
			return nil, fmt.Errorf("%w: its parts are longer than the %d bytes its head says", ErrCheckpoint, p.Bytes)
		}
		b = append(b, e.Value()...)
	}
	if sum := sha256.Sum256(b); len(b) != p.Bytes || hex.EncodeToString(sum[:]) != p.SHA256 {
		return nil, fmt.Errorf("%w: its parts are not the %d bytes its head says", ErrCheckpoint, p.Bytes)
	}
	return b, nil
}

// purgeParts removes from the bucket the parts of every checkpoint at a
// sequence up to seq except keep's (the parts id of the head written
// last; "" for a head without parts): those of the heads it replaced, of
// writes that lost to another engine's, and of writes cut short. Parts of
// a checkpoint further along than seq are left: another engine may be
// writing them, and its head will take the place of this one. Purged, the
// parts leave nothing behind in the bucket's stream, not even a marker.
func purgeParts(ctx context.Context, js jetstream.JetStream, seq uint64, keep string) error {
	st, err := js.Stream(ctx, "KV_"+snats.MetricsBucket)
	if err != nil {
		return fmt.Errorf("metrics: checkpoint parts: %w", err)
	}
	prefix := "$KV." + snats.MetricsBucket + "." + snats.MetricsCheckpointKey + "."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return fmt.Errorf("metrics: checkpoint parts: %w", err)
	}
	ids := map[string]bool{}
	for subject := range info.State.Subjects {
		f := strings.Split(strings.TrimPrefix(subject, prefix), ".") // seq, nonce, part
		if at, err := strconv.ParseUint(f[0], 10, 64); len(f) == 3 && err == nil && at <= seq {
			ids[f[0]+"."+f[1]] = true
		}
	}
	delete(ids, keep)
	for id := range ids {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(prefix+id+".>")); err != nil {
			return fmt.Errorf("metrics: checkpoint parts %s: %w", id, err)
		}
	}
	return nil
}
