package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestAuditJoinsTheSandboxExportOfADay: the sandbox's billing ledger of a
// day (GET /v1/billing/ledger?day=D), saved to a file as curl would, is
// the full export serpent audit --ledger-file joins.
func TestAuditJoinsTheSandboxExportOfADay(t *testing.T) {
	t.Parallel()
	first := time.Now().UTC().Format(time.DateOnly)
	r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--log-level", "error")
	_, js := natstest.Connect(t, r.natsURL)
	ctx := context.Background()
	var jobs []string
	for i, slot := range []string{"2026-12-02T14:00:00Z", "2026-12-02T15:00:00Z", "2026-12-02T16:00:00Z"} {
		body := fmt.Sprintf(`{"slot":%q,"query":"espresso scale %d","country":"US","language":"en","device":"mobile"}`, slot, i)
		_, err := js.Publish(ctx, "serp.cmd.schedule", []byte(body))
		require.NoError(t, err)
		c, err := engine.ParseCommand([]byte(body))
		require.NoError(t, err)
		s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
		require.NoError(t, err)
		jobs = append(jobs, s.JobID)
	}
	waitAllTerminal(t, js, jobs)
	last := time.Now().UTC().Format(time.DateOnly)

	// curl -H "Authorization: Bearer sandbox-token" "$SANDBOX/v1/billing/ledger?day=$(date -u +%F)" > ledger.json
	req, err := http.NewRequest(http.MethodGet, r.sandboxURL+"/v1/billing/ledger?day="+first+","+last, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+sandbox.DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	export, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "ledger.json")
	require.NoError(t, os.WriteFile(file, export, 0o644))

	out, err := cli(t, r.natsURL, "audit", "-o", "json", "--progress=false", "--ledger-file", file)
	require.NoError(t, err, out)
	var rep struct {
		Ledger audit.LedgerSummary `json:"ledger"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, len(jobs), rep.Ledger.Charges, out)
	require.Equal(t, len(jobs), rep.Ledger.Observations, out)
	require.Zero(t, rep.Ledger.Unexplained, out)
}
