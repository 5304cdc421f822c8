package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
)

// threeEvents is a group as the engine writes one, encoded one by one.
func threeEvents(t *testing.T) ([]events.Event, [][]byte) {
	s := samples()
	evs := []events.Event{
		sampleEvent(s[events.TypeJobScheduled], 1),
		sampleEvent(s[events.TypeAttemptCreated], 2),
		sampleEvent(s[events.TypeSent], 3),
	}
	bodies := make([][]byte, len(evs))
	for i, e := range evs {
		b, err := events.Encode(e)
		require.NoError(t, err)
		bodies[i] = b
	}
	return evs, bodies
}

func TestHeader(t *testing.T) {
	evs, _ := threeEvents(t)
	require.Equal(t, map[string][]string{
		events.HeaderMsgID:  {evs[0].ID},
		events.HeaderType:   {"JobScheduled,AttemptCreated,Sent"},
		events.HeaderSchema: {"1,1,1"},
	}, events.Header(evs...))
	require.Equal(t, map[string][]string{
		events.HeaderMsgID:  {evs[1].ID},
		events.HeaderType:   {"AttemptCreated"},
		events.HeaderSchema: {"1"},
	}, events.Header(evs[1]))

	hs := []map[string][]string{events.Header(evs[0]), events.Header(evs[1]), events.Header(evs[2])}
	hs[0][events.HeaderExpectedSeq] = []string{"7"}
	joined := events.JoinHeaders(hs)
	require.Equal(t, []string{"7"}, joined[events.HeaderExpectedSeq], "the first message's expected version")
	delete(joined, events.HeaderExpectedSeq)
	require.Equal(t, events.Header(evs...), joined, "joined as if written together")

	require.Equal(t, "JobScheduled,AttemptCreated,Sent", events.TypeHeader(evs))
	require.Equal(t, 3, events.HeaderEvents(events.TypeHeader(evs)))
	require.Equal(t, "Sent", events.LastType(events.TypeHeader(evs)))
	require.Equal(t, "JobScheduled", events.TypeHeader(evs[:1]))
	require.Equal(t, 1, events.HeaderEvents("JobScheduled"))
	require.Equal(t, "JobScheduled", events.LastType("JobScheduled"))
}

func TestDecodeMessage(t *testing.T) {
	evs, bodies := threeEvents(t)
	group := events.Group(bodies)
	for _, decode := range []func(map[string][]string, []byte) ([]events.Event, error){events.DecodeMessage, events.DecodeMessageLight} {
		got, err := decode(events.Header(evs...), group)
		require.NoError(t, err)
		require.Equal(t, evs, got)
		got, err = decode(nil, bodies[1])
		require.NoError(t, err, "absent headers are not checked")
		require.Equal(t, evs[1:2], got)

		for name, h := range map[string]map[string][]string{
			"another message id":          {events.HeaderMsgID: {evs[1].ID}},
			"one type for a group":        {events.HeaderType: {events.TypeJobScheduled}},
			"the types in another order":  {events.HeaderType: {"AttemptCreated,JobScheduled,Sent"}},
			"the header of another group": events.Header(evs[1:]...),
		} {
			_, err := decode(h, group)
			require.Error(t, err, name)
		}
		_, err = decode(events.Header(evs[0]), bodies[1])
		require.ErrorContains(t, err, "stored under message id")
		_, err = decode(nil, []byte("{{"))
		require.ErrorIs(t, err, events.ErrMalformed)
	}
}

func TestMessageIDs(t *testing.T) {
	evs, bodies := threeEvents(t)
	ids, err := events.MessageIDs(events.Header(evs...), events.Group(bodies))
	require.NoError(t, err)
	require.Equal(t, []string{evs[0].ID, evs[1].ID, evs[2].ID}, ids, "a group's ids are read from its body")
	ids, err = events.MessageIDs(events.Header(evs[1]), []byte("not read"))
	require.NoError(t, err)
	require.Equal(t, []string{evs[1].ID}, ids, "one event's id is its message id")
	ids, err = events.MessageIDs(nil, bodies[2])
	require.NoError(t, err)
	require.Equal(t, []string{evs[2].ID}, ids)
	_, err = events.MessageIDs(nil, []byte("[1,2]"))
	require.Error(t, err)
}
