package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
)

// TestShapeNamesTheField: a field named twice or in another case is named
// with its path, at any depth.
func TestShapeNamesTheField(t *testing.T) {
	s := definitionShape
	require.NoError(t, s.check([]byte(`{"id":"a","catch_up":{"policy":"fire","limit":3},"start":"2026-12-01T00:00:00Z"}`)))
	require.ErrorContains(t, s.check([]byte(`{"id":"a","catch_up":{"limit":3,"limit":50}}`)), `"catch_up.limit" twice`)
	require.ErrorContains(t, s.check([]byte(`{"id":"a","catch_up":{"Policy":"fire"}}`)), `"catch_up.Policy"; the fields of catch_up are, in lower case: policy, limit`)
	require.ErrorContains(t, s.check([]byte(`{"ID":"a"}`)), `"ID"; the fields are, in lower case: id, schedule`)
	require.NoError(t, s.check([]byte(`not an object`)), "left to the decoder")
}

// FuzzShapePlain: whatever the one-pass check lets through, the full
// check has nothing to say about either.
func FuzzShapePlain(f *testing.F) {
	for _, s := range []string{
		`{"slot":"2026-01-01T00:00:00Z","query":"q","country":"US","language":"en","device":"desktop"}`,
		`{"query":"a","query":"b"}`, `{"Query":"a"}`, `{"qu\u0065ry":"a"}`, `{}`, ` { } `, `{"query":1,}`,
		`{"options":{"page":2}}`, `{"options":{"page":2,"page":3}}`, `{"options":null}`, `[1]`, `{"query":"a"} trailing`,
		"{\"qu\xffery\":1}", `{"query":{"a":[1,{"b":null}]}}`, `{"nope":1}`,
		`{"id":"d","catch_up":{"policy":"all","limit":3}}`, `{"id":"d","catch_up":{"policy":"all","policy":"none"}}`,
		`{"catch_up":{"Policy":"all"}}`, `{"catch_up":[{"policy":1}]}`,
		`{"id":"d","catch_up":{"policy":"all","limit":3}}`, `{"id":"d","catch_up":{"policy":"all","policy":"none"}}`,
		`{"catch_up":{"Policy":"all"}}`, `{"catch_up":[{"policy":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range []*jsonShape{commandShape, definitionShape} {
			if s.plain(b) {
				require.NoError(t, s.checkAt(b, ""), "%q", b)
			}
		}
	})
}

// TestShapePlainTakesWhatPublishersSend: the one-pass check answers for
// the commands and definitions publishers send, so the full check is left
// for the odd ones.
func TestShapePlainTakesWhatPublishersSend(t *testing.T) {
	require.True(t, commandShape.plain([]byte(`{"slot":"2026-01-01T00:00:00Z","query":"q \"x\"","country":"US","language":"en","device":"desktop","limit":10}`)))
	require.True(t, commandShape.plain([]byte(" {\n \"query\" : \"q\" }\n")))
	for _, odd := range []string{`{"query":"a","query":"b"}`, `{"Query":"a"}`, `{"qu\u0065ry":"a"}`, `{"nope":1}`} {
		require.False(t, commandShape.plain([]byte(odd)), odd)
	}
}

// BenchmarkCommandCheck is the strict reading of a typical schedule
// command: decode, then the check for fields named twice or in another
// case.
func BenchmarkCommandCheck(b *testing.B) {
	data := []byte(`{"slot":"2026-01-01T00:00:00Z","query":"espresso scale","country":"US","language":"en","device":"desktop","limit":10}`)
	for b.Loop() {
		var cmd aggregate.ScheduleCommand
		if err := decodeStrict(data, &cmd, commandShape); err != nil {
			b.Fatal(err)
		}
	}
}
