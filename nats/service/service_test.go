package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/service"
	"github.com/serpent-engine/serpent/serper"
)

// idle arms no timer, orders nothing and buys nothing: the jobs and
// schedules here only need to exist.
type idle struct{}

func (idle) Arm(context.Context, string, time.Time) error         { return nil }
func (idle) ArmSchedule(context.Context, string, time.Time) error { return nil }
func (idle) DisarmSchedule(context.Context, string) error         { return nil }
func (idle) ScheduleArmed(context.Context, string) (bool, error)  { return true, nil }
func (idle) Order(context.Context, []byte, string, string) error  { return nil }
func (idle) Search(context.Context, string, []byte) serper.Result { return serper.Result{} }
func (idle) Ledger(context.Context, serper.LedgerQuery) ([]serper.LedgerEntry, error) {
	return nil, nil
}

// ask sends a request to an endpoint and returns the answer's error code
// ("" for none) and body.
func ask(t *testing.T, srv *natstest.Server, endpoint, body string) (string, []byte) {
	t.Helper()
	msg, err := srv.Conn.Request(service.Prefix+"."+endpoint, []byte(body), 5*time.Second)
	require.NoError(t, err)
	return msg.Header.Get(micro.ErrorCodeHeader), msg.Data
}

// TestService: every operation answers on its endpoint, and an error with
// a code the caller can act on and a JSON body that says why.
func TestService(t *testing.T) {
	srv := natstest.RunServer(t)
	eng, err := engine.New(engine.Config{Name: "w", Store: memstore.New(memstore.Options{}), API: idle{}, Timers: idle{}})
	require.NoError(t, err)
	schedules, err := engine.NewSchedules(engine.SchedulesConfig{Bucket: enginetest.NewBucket(), Timers: idle{}, Orders: idle{}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := service.Start(ctx, srv.Conn, eng, schedules)
	require.NoError(t, err)
	defer func() { _ = svc.Stop() }()
	require.Equal(t, service.Name, svc.Info().Name)

	code, body := ask(t, srv, "schedule", `{"slot":"2026-12-02T14:00:00Z","query":"espresso scale","country":"US","language":"en","device":"mobile"}`)
	require.Empty(t, code, string(body))
	var scheduled engine.Scheduled
	require.NoError(t, json.Unmarshal(body, &scheduled))
	require.True(t, scheduled.Created)
	msg, err := srv.Conn.Request(service.Prefix+".status", []byte(scheduled.JobID), 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, msg.Header.Get(micro.ErrorCodeHeader), string(msg.Data))
	require.Equal(t, "1", msg.Header.Get(service.HeaderRepurchaseCount), "repeating a repurchase is safe here")

	for _, tc := range []struct {
		endpoint, body, code, reason string
	}{
		{"schedule", `{"query":"x","Query":"y"}`, "400", "malformed"},
		{"status", "0123456789abcdef0123456789abcdef", "404", ""},
		{"status", "hello", "400", ""},
		{"status", `{"job_id":"` + scheduled.JobID + `","by":"ops"}`, "400", ""},
		{"repurchase", `{"job_id":"` + scheduled.JobID + `","repurchase":0}`, "400", ""},
		{"repurchase", scheduled.JobID, "409", ""},
		{"schedules.get", "no-such", "404", "no_such_schedule"},
		{"schedules.create", `{"id":"x"}`, "400", "invalid_schedule"},
		{"schedules.frobnicate", "x", "", ""}, // no such endpoint: no responders
	} {
		if tc.endpoint == "schedules.frobnicate" {
			_, err := srv.Conn.Request(service.Prefix+"."+tc.endpoint, []byte(tc.body), time.Second)
			require.Error(t, err, "no such endpoint")
			continue
		}
		code, body := ask(t, srv, tc.endpoint, tc.body)
		require.Equal(t, tc.code, code, "%s %s: %s", tc.endpoint, tc.body, body)
		var e service.ErrorBody
		require.NoError(t, json.Unmarshal(body, &e), string(body))
		require.NotEmpty(t, e.Error)
		require.Equal(t, tc.reason, e.Reason, "%s %s", tc.endpoint, tc.body)
	}
	code, body = ask(t, srv, "cancel", `{"job_id":"`+scheduled.JobID+`","reason":"not needed"}`)
	require.Empty(t, code, string(body))

	// Errors speak to the caller, without the engine's package names.
	for _, tc := range []struct{ endpoint, body, code, want string }{
		{"status", "0123456789abcdef0123456789abcdef", "404", "no such job: nothing was scheduled with this job id"},
		{"repurchase", scheduled.JobID, "409", "not allowed: only a charged_no_result job can be bought again, this one is cancelled"},
		{"status", "hello", "400", `bad request: "hello" is not a job id: a job id is 32 lowercase hex characters, as scheduling answers it`},
	} {
		msg, err := srv.Conn.Request(service.Prefix+"."+tc.endpoint, []byte(tc.body), 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, tc.code, msg.Header.Get(micro.ErrorCodeHeader))
		require.Equal(t, tc.want, msg.Header.Get(micro.ErrorHeader))
		var e service.ErrorBody
		require.NoError(t, json.Unmarshal(msg.Data, &e))
		require.Equal(t, tc.want, e.Error)
		require.NotContains(t, e.Error, "aggregate:")
	}
}
