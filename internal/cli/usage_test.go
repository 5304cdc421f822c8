package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestWordsThatAreNoFlagsAreRefused: a word where a flag belongs (a query
// of two words without quotes, a day without --day) is a usage error
// before anything is read or published; it was ignored, and with it every
// flag after it.
func TestWordsThatAreNoFlagsAreRefused(t *testing.T) {
	// accounts set reads the engine's bucket before it checks the limits.
	srv := natstest.RunServer(t)
	require.NoError(t, snats.EnsureEngineStreams(context.Background(), srv.JS, snats.StreamOptions{}, time.Second))
	file := filepath.Join(t.TempDir(), "cmd.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"slot":"2027-01-05T14:00:00Z","query":"q","country":"US","language":"en","device":"mobile"}`), 0o600))
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"a query of two words":   {[]string{"schedule", "--query", "espresso", "scale", "--slot", "2027-01-05T14:00:00Z"}, `not "scale"`},
		"a file and flags":       {[]string{"schedule", "-f", file, "--slot", "2027-01-05T14:00:00Z"}, "--slot would be ignored"},
		"a day without --day":    {[]string{"ledger", "2099-01-01"}, `not "2099-01-01"`},
		"an audit argument":      {[]string{"audit", "extra"}, "takes flags only"},
		"a lag argument":         {[]string{"projections", "lag", "foo"}, "takes flags only"},
		"a rebuild argument":     {[]string{"projections", "rebuild", "foo"}, "takes flags only"},
		"an unknown progress":    {[]string{"audit", "--progress", "yes"}, "use auto, always or never"},
		"an account set too low": {[]string{"accounts", "set", "team-b", "--daily-pages", "-10"}, "cannot be negative"},
		"an account name":        {[]string{"accounts", "set", "Team B", "--rate", "1"}, `account name "Team B"`},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			env := map[string]string{"NATS_URL": srv.URL}
			err := Run(context.Background(), tc.args, func(k string) string { return env[k] }, &stdout, &stderr)
			require.ErrorIs(t, err, errUsage)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, stdout.String())
		})
	}
}

// TestFileLimitsKeepAnOperatorsChange: the --accounts file's limits are
// stored for an account that has none stored; limits an operator lifted
// with "accounts set" are stored too (as none), and a restart keeps them.
func TestFileLimitsKeepAnOperatorsChange(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Second))
	file := filepath.Join(t.TempDir(), "accounts.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"name":"team-c","limits":{"max_in_flight":2,"daily_pages":50}}]`), 0o600))
	start := func() {
		f := &engineFlags{accountsFile: file, name: "w"}
		f.policy.Lease = events.Duration(2 * time.Minute)
		var cleanup []func()
		_, _, err := f.startAccounts(ctx, func(string) string { return "" }, srv.JS, nil, nil, nil, func(string, ...any) {}, &cleanup)
		require.NoError(t, err)
		for _, c := range cleanup {
			c()
		}
	}
	limits := func() accounts.Limits {
		stored, err := engine.ReadLimits(ctx, accountsKV(t, srv.JS), "team-c")
		require.NoError(t, err)
		require.True(t, stored.Found)
		require.NoError(t, stored.Refused)
		return stored.Limits
	}
	start()
	require.Equal(t, accounts.Limits{MaxInFlight: 2, DailyPages: 50}, limits())

	_, err := cli(t, srv.URL, "accounts", "set", "team-c", "--max-in-flight", "0", "--daily-pages", "0", "-o", "json")
	require.NoError(t, err)
	require.True(t, limits().Unlimited())
	start()
	require.True(t, limits().Unlimited(), "the operator's change outlives a restart")
}
