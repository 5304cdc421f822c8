package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestAuditConfigurationReasonsAreTheEngines: the rejection reasons the
// audit accepts for a valid command are the engine's checks that depend
// on its configuration (its accounts, retention and first slot); the
// reasons about a command itself are not accepted.
func TestAuditConfigurationReasonsAreTheEngines(t *testing.T) {
	for _, r := range []string{engine.ReasonInvalidAccount, engine.ReasonSlotExpired, engine.ReasonBeforeFirstSlot} {
		require.True(t, audit.ConfigReason(r), r)
	}
	for _, r := range []string{engine.ReasonMalformed, engine.ReasonTooLarge, engine.ReasonUnknownSubject, "invalid_slot"} {
		require.False(t, audit.ConfigReason(r), r)
	}
}

// auditCommands is the commands part of serpent audit -o json.
type auditCommands struct {
	Commands   audit.CommandSummary `json:"commands"`
	Violations []audit.Finding      `json:"violations"`
}

// commandsServer is a NATS server with serpent's streams and consumers.
func commandsServer(t *testing.T) (*natstest.Server, context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	srv := natstest.RunServer(t)
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Second))
	return srv, ctx
}

// publishCommands publishes a valid schedule command per slot and returns
// their stream sequences.
func publishCommands(t *testing.T, ctx context.Context, js jetstream.JetStream, slots ...string) []uint64 {
	var seqs []uint64
	for _, slot := range slots {
		ack, err := js.Publish(ctx, snats.ScheduleSubject, []byte(`{"slot":"`+slot+`","query":"espresso scale","country":"US","language":"en","device":"mobile"}`))
		require.NoError(t, err)
		seqs = append(seqs, ack.Sequence)
	}
	return seqs
}

// TestAuditValidCommandRejectedForItsContent: the audit reads each
// rejection's reason (Serpent-Reject-Reason). A valid command rejected as
// invalid_account (an account this engine lacks) is handled; one rejected
// as malformed was refused for nothing wrong with it.
func TestAuditValidCommandRejectedForItsContent(t *testing.T) {
	srv, ctx := commandsServer(t)
	seqs := publishCommands(t, ctx, srv.JS, "2026-12-02T14:00:00Z", "2026-12-02T15:00:00Z")
	cons, err := srv.JS.Consumer(ctx, snats.CommandStream, snats.IntakeConsumer)
	require.NoError(t, err)
	batch, err := cons.Fetch(len(seqs), jetstream.FetchMaxWait(10*time.Second)) // returns once both are delivered
	require.NoError(t, err)
	for i, reason := range []string{engine.ReasonInvalidAccount, engine.ReasonMalformed} {
		m := natsgo.NewMsg(snats.RejectSubjectPrefix + reason)
		m.Header.Set(snats.HeaderRejectReason, reason)
		m.Header.Set(snats.HeaderCommandSubject, snats.ScheduleSubject)
		m.Header.Set(snats.HeaderCommandSeq, strconv.FormatUint(seqs[i], 10))
		_, err := srv.JS.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	n := 0
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx)) // rejected: settled
		n++
	}
	require.Equal(t, len(seqs), n)

	out, err := cli(t, srv.URL, "audit", "-o", "json", "--progress=false")
	require.Error(t, err, out)
	var rep auditCommands
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, 2, rep.Commands.Rejected)
	require.Len(t, rep.Violations, 1, "%v", rep.Violations)
	require.Equal(t, audit.RuleCommand, rep.Violations[0].Rule)
	require.Equal(t, seqs[1], rep.Violations[0].Seq)
	require.Contains(t, rep.Violations[0].Detail, `rejected as "malformed"`)
}

// TestAuditLostCommandsBehindAStuckFloor: one command the intake never
// settles (redelivered for ever, as the intake-loops bug did) holds the
// intake's acknowledgement floor. The two valid commands after it, which an
// engine acknowledged without making their jobs, are lost: the intake had
// only one delivery outstanding. Judged an hour later, all three are past
// --stuck-after: each is reported as stuck.
func TestAuditLostCommandsBehindAStuckFloor(t *testing.T) {
	srv, ctx := commandsServer(t)
	seqs := publishCommands(t, ctx, srv.JS, "2026-12-02T14:00:00Z", "2026-12-02T15:00:00Z", "2026-12-02T16:00:00Z")
	cons, err := srv.JS.Consumer(ctx, snats.CommandStream, snats.IntakeConsumer)
	require.NoError(t, err)
	batch, err := cons.Fetch(len(seqs), jetstream.FetchMaxWait(10*time.Second)) // returns once all are delivered
	require.NoError(t, err)
	n := 0
	for m := range batch.Messages() {
		n++
		if n == 1 {
			continue // held: never acknowledged
		}
		require.NoError(t, m.DoubleAck(ctx)) // acknowledged, but no job made: lost
	}
	require.Equal(t, len(seqs), n)

	out, err := cli(t, srv.URL, "audit", "-o", "json", "--progress=false")
	require.Error(t, err, "two valid commands were acknowledged and made no job")
	var rep auditCommands
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, audit.CommandSummary{Commands: 3, Pending: 1, Lost: 2}, rep.Commands)
	require.Len(t, rep.Violations, 1, "%v", rep.Violations)
	require.Equal(t, audit.RuleCommand, rep.Violations[0].Rule)
	require.Contains(t, rep.Violations[0].Detail, "at least 2 were acknowledged and lost")

	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	out, err = cli(t, srv.URL, "audit", "-o", "json", "--progress=false", "--now", later)
	require.Error(t, err)
	rep = auditCommands{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, audit.CommandSummary{Commands: 3, Stuck: 3}, rep.Commands)
	require.Len(t, rep.Violations, 3, "%v", rep.Violations)
	for _, v := range rep.Violations {
		require.Contains(t, v.Detail, "the intake has not settled it")
	}
}

// TestAuditCountsEveryCommand: serpent audit counts as many commands and
// rejections as SERP_COMMANDS and SERP_REJECTED hold, operations on
// recurring schedules among them, an unknown one included.
func TestAuditCountsEveryCommand(t *testing.T) {
	t.Parallel()
	r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--log-level", "error")
	_, js := natstest.Connect(t, r.natsURL)
	ctx := context.Background()
	publishCommands(t, ctx, js, "2026-12-02T14:00:00Z")
	for subject, body := range map[string]string{
		snats.ScheduleSubject:        `{"slot":"tomorrow"}`,
		"serp.cmd.schedules.create":  `{"id":"grinder","schedule":"@daily","query":"grinder","country":"DE","language":"de","device":"desktop"}`,
		"serp.cmd.schedules.explode": `{"id":"grinder"}`,
	} {
		_, err := js.Publish(ctx, subject, []byte(body))
		require.NoError(t, err)
	}
	var rep auditCommands
	natstest.WaitFor(t, 30*time.Second, func() error {
		out, err := cli(t, r.natsURL, "audit", "-o", "json", "--progress=false")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return err
		}
		if rep.Commands.Pending > 0 || rep.Commands.Rejected < 2 {
			return fmt.Errorf("not settled yet: %+v", rep.Commands)
		}
		return nil
	})
	count := func(stream string) int {
		s, err := js.Stream(ctx, stream)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		return int(info.State.Msgs)
	}
	require.Equal(t, audit.CommandSummary{Commands: 4, Jobs: 1, Rejected: 2, ScheduleOps: 1}, rep.Commands)
	require.Equal(t, count(snats.CommandStream), rep.Commands.Commands)
	require.Equal(t, count(snats.RejectStream), rep.Commands.Rejected)
}
