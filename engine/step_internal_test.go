package engine

import (
	"testing"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/serper"
	"github.com/stretchr/testify/require"
)

// TestSearchState: what an answer says of its key's search decides
// whether a slot stays taken (the search may run), is freed even of an
// earlier send's hold (it has ended), or neither (this send did not run).
func TestSearchState(t *testing.T) {
	for _, tc := range []struct {
		class   aggregate.Class
		speaks  bool // the key's first send, or replayed
		unknown string
		want    int
	}{
		{aggregate.ClassUnknown, true, serper.UnknownTimeout, searchMayRun},
		{aggregate.ClassUnknown, false, serper.UnknownConnection, searchMayRun},
		{aggregate.ClassUnknown, true, serper.UnknownNotSent, searchUnsaid},
		{aggregate.ClassInProgress, false, "", searchMayRun},
		{aggregate.ClassUnresolved, false, "", searchMayRun},
		{aggregate.ClassSuccess, false, "", searchEnded},
		{aggregate.ClassRetryable, true, "", searchEnded},
		{aggregate.ClassReplayUnavailable, false, "", searchEnded},
		{aggregate.ClassRateLimited, true, "", searchUnsaid},
		{aggregate.ClassFailure, true, "", searchUnsaid},
		// A resend's own error: an earlier send's search may still run.
		{aggregate.ClassRetryable, false, "", searchMayRun},
		{aggregate.ClassRateLimited, false, "", searchMayRun},
		{aggregate.ClassFailure, false, "", searchMayRun},
	} {
		require.Equal(t, tc.want, searchState(tc.class, tc.speaks, tc.unknown), "%s speaks=%t %s", tc.class, tc.speaks, tc.unknown)
	}
}
