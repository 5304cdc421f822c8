package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/nats/service"
	"github.com/serpent-engine/serpent/projections"
)

// deployAccounts is the example permissions file of the deployment.
var deployAccounts = filepath.Join("..", "..", "deploy", "nats", "accounts.conf")

// rolePasswords are the test's passwords of deploy/nats/accounts.conf's
// users, set in the environment the file reads them from.
var rolePasswords = map[string]string{
	"SERPENT_ENGINE_PASSWORD": "engine-pw", "SERPENT_UPSTREAM_PASSWORD": "upstream-pw",
	"SERPENT_AUDITOR_PASSWORD": "auditor-pw", "SERPENT_SYS_PASSWORD": "sys-pw",
}

// runRolesServer starts a JetStream server with the deployment's
// accounts, users and permissions, loaded from the file.
func runRolesServer(t *testing.T) string {
	t.Helper()
	for k, v := range rolePasswords {
		t.Setenv(k, v)
	}
	return runAuthServer(t, func(o *server.Options) {
		loaded, err := server.ProcessConfigFile(deployAccounts)
		require.NoError(t, err)
		loaded.ServerName, loaded.Host, loaded.Port, loaded.NoLog, loaded.NoSigs = o.ServerName, o.Host, o.Port, true, true
		loaded.JetStream, loaded.StoreDir, loaded.SyncAlways = true, o.StoreDir, true
		*o = *loaded
	})
}

// roleConn connects as one of the roles and collects the permission
// violations the server reports to it.
type roleConn struct {
	nc       *natsgo.Conn
	js       jetstream.JetStream
	refusals chan string
}

func connectAs(t *testing.T, url, user string) *roleConn {
	t.Helper()
	rc := &roleConn{refusals: make(chan string, 100)}
	nc, err := natsgo.Connect(url, natsgo.UserInfo(user, user+"-pw"),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) { rc.refusals <- err.Error() }))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	rc.nc = nc
	rc.js, err = jetstream.New(nc)
	require.NoError(t, err)
	return rc
}

// refused publishes to subject and waits for the server to refuse it.
func (rc *roleConn) refused(t *testing.T, subject string) {
	t.Helper()
	reply := rc.nc.NewRespInbox()
	sub, err := rc.nc.SubscribeSync(reply)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, rc.nc.PublishRequest(subject, reply, []byte(`{}`)))
	require.NoError(t, rc.nc.Flush())
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e := <-rc.refusals:
			if strings.Contains(e, "Permissions Violation for Publish") && strings.Contains(e, subject) {
				return
			}
		case <-timeout:
			t.Fatalf("publishing to %s was not refused", subject)
		}
	}
}

// TestRolePermissions loads deploy/nats/accounts.conf into a real server:
// the engine runs with its role; the upstream publisher can order
// observations and ask about them but cannot write events, delete
// messages, create consumers or write buckets; the auditor can run
// serpent audit and serpent status but cannot write anything.
func TestRolePermissions(t *testing.T) {
	url := runRolesServer(t)
	eng := startEngineOn(t, map[string]string{"NATS_USER": "engine", "NATS_PASSWORD": "engine-pw"},
		"--nats-url", url, "--http", "", "--log-level", "warn")

	// Upstream: schedule with a JetStream publish and through the micro
	// service; ask for the status.
	up := connectAs(t, url, "upstream")
	ctx := context.Background()
	_, err := up.js.Publish(ctx, snats.ScheduleSubject,
		[]byte(`{"slot":"2026-12-02T14:00:00Z","query":"espresso scale","country":"US","language":"en","device":"mobile"}`))
	require.NoError(t, err, "upstream may publish schedule commands")
	msg, err := up.nc.Request(service.Prefix+".schedule",
		[]byte(`{"slot":"2026-12-02T15:00:00Z","query":"milk jug","country":"US","language":"en","device":"mobile"}`), 5*time.Second)
	require.NoError(t, err)
	var sched engine.Scheduled
	require.NoError(t, json.Unmarshal(msg.Data, &sched))
	require.Regexp(t, `^[0-9a-f]{32}$`, sched.JobID)
	natstest.WaitFor(t, 30*time.Second, func() error {
		msg, err := up.nc.Request(service.Prefix+".status", []byte(sched.JobID), 5*time.Second)
		if err != nil {
			return err
		}
		var v projections.JobView
		if err := json.Unmarshal(msg.Data, &v); err != nil {
			return fmt.Errorf("%w: %s", err, msg.Data)
		}
		if v.Status != "succeeded" {
			return fmt.Errorf("job is %q", v.Status)
		}
		return nil
	})
	for _, subject := range []string{
		snats.EventSubjectPrefix + sched.JobID,                     // write an event
		"$JS.API.STREAM.MSG.DELETE." + snats.EventStream,           // delete one
		"$JS.API.STREAM.DELETE." + snats.EventStream,               // delete the log
		"$JS.API.CONSUMER.CREATE." + snats.EventStream + ".peek.>", // read it
		"$JS.API.DIRECT.GET." + snats.EventStream,                  // read it another way
		"$KV." + projections.StatusBucket + "." + sched.JobID,      // rewrite a status
		"serp.rejected.too_large",                                  // forge a rejection
	} {
		up.refused(t, subject)
	}

	// Auditor: the audit and the status views work; writes do not.
	auditorEnv := map[string]string{"NATS_URL": url, "NATS_USER": "auditor", "NATS_PASSWORD": "auditor-pw"}
	var stdout, stderr strings.Builder
	require.NoError(t, Run(ctx, []string{"audit", "--progress=false"}, func(k string) string { return auditorEnv[k] }, &stdout, &stderr),
		"audit as the auditor:\n%s\n%s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), "every promise kept")
	// serpent status reads the projection, which may trail the log the
	// micro service folded.
	natstest.WaitFor(t, 30*time.Second, func() error {
		stdout.Reset()
		if err := Run(ctx, []string{"status", sched.JobID}, func(k string) string { return auditorEnv[k] }, &stdout, &stderr); err != nil {
			return err
		}
		if !strings.Contains(stdout.String(), "succeeded") {
			return fmt.Errorf("the projection shows:\n%s", stdout.String())
		}
		return nil
	})
	aud := connectAs(t, url, "auditor")
	require.NotContains(t, eng.stderr.String(), "Permissions Violation", "the engine's role lets it do all it does")
	for _, subject := range []string{
		snats.ScheduleSubject,
		snats.EventSubjectPrefix + sched.JobID,
		"$KV." + projections.StatusBucket + "." + sched.JobID,
		"$JS.API.STREAM.DELETE." + snats.EventStream,
		"$JS.API.STREAM.UPDATE." + snats.EventStream,
		"$JS.API.STREAM.MSG.DELETE." + snats.EventStream,
		"$JS.API.CONSUMER.CREATE." + snats.WorkStream + ".steal",
		service.Prefix + ".cancel",
	} {
		aud.refused(t, subject)
	}
	// Nor may it stop the engine, or take its work, through its durable
	// consumers.
	for stream, durables := range map[string][]string{
		snats.CommandStream: {snats.IntakeConsumer, snats.ScheduleAdminConsumer, snats.StrayConsumer},
		snats.WorkStream:    {snats.WorkConsumer, snats.ScheduleConsumer},
		snats.EventStream:   {projector.Consumer},
	} {
		for _, c := range durables {
			aud.refused(t, "$JS.API.CONSUMER.DELETE."+stream+"."+c)
			aud.refused(t, "$JS.API.CONSUMER.MSG.NEXT."+stream+"."+c)
			aud.refused(t, "$JS.API.CONSUMER.CREATE."+stream+"."+c+".serp.>")
		}
	}
	// The engine may not reconfigure the log or the commands (a limit
	// would delete messages).
	engConn := connectAs(t, url, "engine")
	for _, stream := range []string{snats.EventStream, snats.CommandStream} {
		engConn.refused(t, "$JS.API.STREAM.UPDATE."+stream)
	}
}
