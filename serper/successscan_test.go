package serper

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzScanSuccess: whatever the one-pass reader of success bodies takes,
// json.Unmarshal takes too, with the same request id, organic array and
// page count.
func FuzzScanSuccess(f *testing.F) {
	files, err := os.ReadDir(fixtures)
	require.NoError(f, err)
	for _, file := range files {
		body, err := os.ReadFile(filepath.Join(fixtures, file.Name()))
		require.NoError(f, err)
		f.Add(body)
	}
	for _, s := range []string{
		`{"requestId":"req_1","organic":[{"a":1},{}],"pages":1}`, ` {"requestId" : "req_1", "organic" : [ ] , "pages" : 0 } `,
		`{"requestId":"req_1","RequestId":"req_2","organic":[],"pages":1}`, `{"requestId":"a","requestId":"b"}`,
		`{"requestId":null,"organic":null,"pages":null}`, `{"pages":1.0}`, `{"pages":1e2}`, `{"pages":-0}`, `{"pages":01}`,
		`{"pages":99999999999999999999}`, `{"organic":[1]}`, `{"organic":[{}],}`, `{"requestId":"r\u0065q"}`,
		"{\"requestId\":\"r\xffq\"}", `{"x":{"organic":5},"organic":[{"b":[1,2]}]}`, `{} x`, `[]`, `{"ORGANIC":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := scanSuccess(body)
		if !ok {
			return
		}
		var slow successWire
		require.NoError(t, json.Unmarshal(body, &slow), "%q", body)
		require.Equal(t, slow.RequestID, fast.RequestID, "%q", body)
		require.Equal(t, slow.Organic == nil, fast.Organic == nil, "%q", body)
		require.Equal(t, slow.Pages, fast.Pages, "%q", body)
	})
}

// TestScanSuccessReadsTheSandboxsReplies: the captured successes take the
// one-pass way, so json.Unmarshal is left for the odd body.
func TestScanSuccessReadsTheSandboxsReplies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtures, "200_*"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		body, err := os.ReadFile(file)
		require.NoError(t, err)
		var slow successWire
		if json.Unmarshal(body, &slow) != nil || slow.RequestID == nil || slow.Organic == nil || slow.Pages == nil {
			continue // not a success body
		}
		_, ok := scanSuccess(body)
		require.True(t, ok, file)
	}
}
