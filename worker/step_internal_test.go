package worker

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
		unknown string
		want    int
	}{
		{aggregate.ClassUnknown, serper.UnknownTimeout, searchMayRun},
		{aggregate.ClassUnknown, serper.UnknownConnection, searchMayRun},
		{aggregate.ClassUnknown, serper.UnknownNotSent, searchUnsaid},
		{aggregate.ClassInProgress, "", searchMayRun},
		{aggregate.ClassUnresolved, "", searchMayRun},
		{aggregate.ClassSuccess, "", searchEnded},
		{aggregate.ClassRetryable, "", searchEnded},
		{aggregate.ClassReplayUnavailable, "", searchEnded},
		{aggregate.ClassRateLimited, "", searchUnsaid},
		{aggregate.ClassFailure, "", searchUnsaid},
	} {
		require.Equal(t, tc.want, searchState(tc.class, tc.unknown), "%s %s", tc.class, tc.unknown)
	}
}
