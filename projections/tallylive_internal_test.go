package projections

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiveJobsIndex: a job is found whether its id is kept in 16 bytes or
// as a string, a hex id among the strings included (a job whose counts do
// not fit a packed one), and an id not in the list is not.
func TestLiveJobsIndex(t *testing.T) {
	h := func(b byte) hexID { return hexID{b, 1, 2, 3} }
	asText := func(id hexID) string { return hex.EncodeToString(id[:]) }
	l := &LiveJobs{hex: []hexID{h(1), h(5), h(9)}, wide: []string{asText(h(7)), "job-x"}}
	require.Equal(t, 5, l.Len())
	for i := range l.Len() {
		k, ok := l.Index(l.ID(i))
		require.True(t, ok, l.ID(i))
		require.Equal(t, i, k)
	}
	require.Equal(t, asText(h(5)), l.ID(1))
	require.Equal(t, "job-x", l.ID(4))
	for _, id := range []string{asText(h(2)), asText(h(10)), "job-y", "", "ABCD"} {
		_, ok := l.Index(id)
		require.False(t, ok, id)
	}
	require.Zero(t, (&LiveJobs{}).Len())
}
