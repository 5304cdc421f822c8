package eventstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

const job = "job-1"

func event(id string, version uint64) events.Event {
	return events.Event{ID: id, JobID: job, Version: version, Time: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC),
		Data: events.JobCancelled{By: "op", Reason: "test"}}
}

const (
	id1 = "01KBFX3M00000000000000000A"
	id2 = "01KBFX3M00000000000000000B"
)

func TestEncodeAppend(t *testing.T) {
	msgs, err := eventstore.EncodeAppend(job, 42, []events.Event{event(id1, 1), event(id2, 2)})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Equal(t, []string{"42"}, msgs[0].Header[events.HeaderExpectedSeq], "expected version on the first message")
	require.NotContains(t, msgs[1].Header, events.HeaderExpectedSeq, "and only there")
	for i, m := range msgs {
		require.Equal(t, []string{m.ID()}, m.Header[events.HeaderMsgID])
		require.Equal(t, []string{events.TypeJobCancelled}, m.Header[events.HeaderType])
		require.Equal(t, []string{"1"}, m.Header[events.HeaderSchema])
		evs, err := eventstore.DecodeMessage(job, uint64(i+1), m.Header, m.Data)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, m.ID(), evs[0].ID)
	}
}

func TestPack(t *testing.T) {
	evs := []events.Event{event(id1, 1), event(id2, 2)}
	msgs, err := eventstore.EncodeAppend(job, 42, evs)
	require.NoError(t, err)

	packed := eventstore.Pack(msgs, 1<<20)
	require.Len(t, packed, 1, "two events that fit go as one message")
	m := packed[0]
	require.Equal(t, []string{id1}, m.Header[events.HeaderMsgID], "under the first event's id")
	require.Equal(t, []string{"42"}, m.Header[events.HeaderExpectedSeq])
	require.Equal(t, []string{events.TypeJobCancelled + "," + events.TypeJobCancelled}, m.Header[events.HeaderType])
	require.Equal(t, []string{"1,1"}, m.Header[events.HeaderSchema])
	require.Equal(t, id1, m.ID())
	got, err := eventstore.DecodeMessage(job, 7, m.Header, m.Data)
	require.NoError(t, err)
	require.Equal(t, evs, got)

	require.Equal(t, msgs, eventstore.Pack(msgs, m.Size()-1), "too large for one message: one message per event, as a batch")
	require.Len(t, eventstore.Pack(msgs, m.Size()), 1)
	require.Equal(t, msgs[:1], eventstore.Pack(msgs[:1], 1<<20), "one event is its own message")
}

func TestEncodeAppendRefuses(t *testing.T) {
	other := event(id2, 2)
	other.JobID = "job-2"
	tests := []struct {
		name string
		job  string
		evs  []events.Event
		is   error
	}{
		{"no events", job, nil, eventstore.ErrInvalid},
		{"bad job id", "Job 1", []events.Event{event(id1, 1)}, eventstore.ErrInvalid},
		{"other job", job, []events.Event{event(id1, 1), other}, eventstore.ErrInvalid},
		{"version gap", job, []events.Event{event(id1, 1), event(id2, 3)}, eventstore.ErrInvalid},
		{"id twice", job, []events.Event{event(id1, 1), event(id1, 2)}, eventstore.ErrDuplicate},
		{"bad envelope", job, []events.Event{event("x", 1)}, eventstore.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := eventstore.EncodeAppend(tt.job, 0, tt.evs)
			require.ErrorIs(t, err, tt.is)
		})
	}
}

func TestSizes(t *testing.T) {
	h := map[string][]string{"A": {"1"}, "Bc": {"xy", "z"}}
	// "NATS/1.0\r\n" + "A: 1\r\n" + "Bc: xy\r\n" + "Bc: z\r\n" + "\r\n"
	require.Equal(t, 10+6+8+7+2, eventstore.HeaderSize(h))
	require.Zero(t, eventstore.HeaderSize(nil))

	require.Zero(t, eventstore.BatchOverhead(0, 1), "a single message is a plain publish")
	idAndSeq := len("Nats-Batch-Id: ") + 22 + 2 + len("Nats-Batch-Sequence: ") + 2
	require.Equal(t, idAndSeq+1, eventstore.BatchOverhead(0, 3))
	require.Equal(t, idAndSeq+2+len("Nats-Batch-Commit: 1\r\n"), eventstore.BatchOverhead(11, 12))

	msgs, err := eventstore.EncodeAppend(job, 0, []events.Event{event(id1, 1)})
	require.NoError(t, err)
	size := msgs[0].Size()
	require.NoError(t, eventstore.CheckSize(job, msgs, size))
	err = eventstore.CheckSize(job, msgs, size-1)
	require.ErrorIs(t, err, eventstore.ErrTooLarge)
	for _, s := range []string{job, events.TypeJobCancelled, id1} {
		require.ErrorContains(t, err, s)
	}
}

func TestDecodeMessageCorrupt(t *testing.T) {
	good, err := events.Encode(event(id1, 1))
	require.NoError(t, err)
	tests := []struct {
		name   string
		job    string
		header map[string][]string
		data   []byte
	}{
		{"garbage", job, nil, []byte("{{")},
		{"other job", "job-2", nil, good},
		{"other message id", job, map[string][]string{events.HeaderMsgID: {id2}}, good},
		{"other type header", job, map[string][]string{events.HeaderType: {"Sent"}}, good},
		{"a group under another id", job, map[string][]string{events.HeaderMsgID: {id2}}, group(event(id1, 1), event(id2, 2))},
		{"a group with one type in its header", job, map[string][]string{events.HeaderType: {events.TypeJobCancelled}}, group(event(id1, 1), event(id2, 2))},
		{"a group with a gap in its versions", job, nil, group(event(id1, 1), event(id2, 3))},
		{"a group of one", job, nil, []byte("[" + string(good) + "]")},
		{"an empty group", job, nil, []byte("[]")},
		{"a group cut short", job, nil, []byte("[" + string(good) + ",")},
		{"a group of another job", job, nil, group(otherJob(event(id1, 1)), otherJob(event(id2, 2)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := eventstore.DecodeMessage(tt.job, 7, tt.header, tt.data)
			var ce *eventstore.CorruptError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, uint64(7), ce.Seq)
			require.Equal(t, tt.job, ce.JobID)
			require.True(t, strings.Contains(err.Error(), "sequence 7"))
		})
	}
}

func TestPlanBatches(t *testing.T) {
	a := func(job string, n int) eventstore.Append {
		return eventstore.Append{JobID: job, Events: make([]events.Event, n)}
	}
	tests := []struct {
		name    string
		appends []eventstore.Append
		max     int
		skip    map[int]bool
		want    [][]int
	}{
		{"one batch", []eventstore.Append{a("a", 1), a("b", 2), a("c", 1)}, 10, nil, [][]int{{0, 1, 2}}},
		{"split at the limit", []eventstore.Append{a("a", 3), a("b", 3), a("c", 3)}, 6, nil, [][]int{{0, 1}, {2}}},
		{"later append fills an earlier batch", []eventstore.Append{a("a", 4), a("b", 4), a("c", 2)}, 6, nil, [][]int{{0, 2}, {1}}},
		{"a job's appends stay in order", []eventstore.Append{a("a", 1), a("a", 1), a("b", 1), a("a", 1)}, 10, nil, [][]int{{0, 2}, {1}, {3}}},
		{"skipped and oversized left out", []eventstore.Append{a("a", 1), a("b", 9), a("c", 1), a("d", 0)}, 5, map[int]bool{2: true}, [][]int{{0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := eventstore.PlanBatches(tt.appends, tt.max, nil, func(i int) bool { return tt.skip[i] })
			require.Equal(t, tt.want, got)
		})
	}
	t.Run("appends counted as the messages they are written as", func(t *testing.T) {
		appends := []eventstore.Append{a("a", 3), a("b", 3), a("c", 3), a("d", 3)}
		one := func(int) int { return 1 } // each append's events as one message
		require.Equal(t, [][]int{{0, 1}, {2, 3}}, eventstore.PlanBatches(appends, 2, one, nil))
	})
}

// group encodes events as one message holds a group.
func group(evs ...events.Event) []byte {
	var bodies [][]byte
	for _, e := range evs {
		b, err := events.Encode(e)
		if err != nil {
			panic(err)
		}
		bodies = append(bodies, b)
	}
	return events.Group(bodies)
}

func otherJob(e events.Event) events.Event {
	e.JobID = "job-2"
	return e
}

func TestMatch(t *testing.T) {
	want := []string{"a", "b", "c"}
	for _, tt := range []struct {
		name  string
		found [][]string
		is    eventstore.Landing
	}{
		{"nothing yet", nil, eventstore.Short},
		{"one message", [][]string{{"a", "b", "c"}}, eventstore.Landed},
		{"a message each", [][]string{{"a"}, {"b"}, {"c"}}, eventstore.Landed},
		{"more after it", [][]string{{"a", "b", "c"}, {"x"}}, eventstore.Landed},
		{"the first of a batch", [][]string{{"a"}}, eventstore.Short},
		{"another append", [][]string{{"x"}}, eventstore.Other},
		{"ours inside a larger group", [][]string{{"a", "b", "c", "d"}}, eventstore.Other},
		{"part of ours, then others", [][]string{{"a"}, {"x"}}, eventstore.Other},
		{"a message without events", [][]string{{}}, eventstore.Other},
	} {
		require.Equal(t, tt.is, eventstore.Match(want, tt.found), tt.name)
	}
}
