package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Command is one message of SERP_COMMANDS, as the caller parsed it with the
// engine's own rules (engine.ParseCommand and aggregate.NewSchedule).
type Command struct {
	Seq uint64
	// JobID is the job the command maps to; empty when it is invalid.
	JobID string
	// Invalid says why the command cannot become a job.
	Invalid string
	// Stray says the command is on a subject nothing reads: the
	// serpent-strays consumer's to reject, not the intake's.
	Stray bool
	// ScheduleOp says the command is an operation on recurring schedules
	// (serp.cmd.schedules.<op>): it changes a schedule, not a job, or is
	// rejected.
	ScheduleOp bool
	// Source is how the engine names the command as a job's source
	// (JobScheduled.Source): a command rejected and also made into its
	// job under this name was both.
	Source string
	// At is when the stream stored the command (its message time); zero
	// when unknown. A command its consumer has not settled for longer
	// than Options.StuckAfter is stuck.
	At time.Time
}

// Consumer is what a consumer of the commands (the intake, or the
// serpent-strays consumer) had done when the audit began, read from its
// information before the log and the rejections: every command it had
// settled by then has its job or its rejection in what the audit read.
type Consumer struct {
	// Floor is its acknowledgement floor: every command it reads up to
	// Floor was settled.
	Floor uint64
	// Delivered is the last command it had delivered (Delivered.Stream),
	// and Outstanding how many of its deliveries were not acknowledged
	// (NumAckPending). Every command after Floor up to Delivered was
	// settled, or is one of those Outstanding: JetStream does not say
	// which, so the audit counts them.
	Delivered   uint64
	Outstanding int
}

// CommandSummary accounts for the commands.
type CommandSummary struct {
	Commands int `json:"commands"`
	// Jobs counts commands whose job is in the log (several commands may
	// be one job); Rejected those with a rejection record.
	Jobs     int `json:"jobs"`
	Rejected int `json:"rejected"`
	// ScheduleOps counts operations on recurring schedules without a
	// rejection: applied, or still at their consumer. Their effect is in
	// the serp_schedules bucket, not in the log.
	ScheduleOps int `json:"schedule_ops"`
	// Pending counts commands their consumer may not have settled yet
	// (after its acknowledgement floor, and outstanding as far as its
	// information tells), for no longer than the stuck_after, and that
	// have neither a job nor a rejection.
	Pending int `json:"pending"`
	// Lost counts commands settled without becoming a job or a
	// rejection: before their consumer's floor, or after it beyond the
	// deliveries it had outstanding.
	Lost int `json:"lost"`
	// Stuck counts commands after their consumer's floor for longer than
	// stuck_after with neither a job nor a rejection: never settled, or
	// lost.
	Stuck int `json:"stuck"`
}

// configReasons are the rejection reasons that depend on the engine's
// configuration, not on the command: invalid_account, an API account the
// engine was not given (engine.ReasonInvalidAccount), slot_expired, a
// slot older than the engine's retention when the command came
// (engine.ReasonSlotExpired), and before_first_slot, a slot before the
// deployment's first (engine.ReasonBeforeFirstSlot). Every other reason
// (malformed, too_large, invalid_<field>) is about the command itself, and
// the audit reads the command by the engine's own rules.
var configReasons = []string{"invalid_account", "slot_expired", "before_first_slot"}

// ConfigReason reports whether a rejection reason depends on the engine's
// configuration: the only reasons a command valid by the rules may be
// rejected for.
func ConfigReason(reason string) bool { return slices.Contains(configReasons, reason) }

// Commands checks that every command became a job or a rejection, and that
// a command valid by the rules was rejected only for a reason that depends
// on the engine's configuration (ConfigReason). rejected maps the command
// sequence of each rejection record (Serpent-Command-Seq) to its reason
// (Serpent-Reject-Reason). intake and strays are the two consumers that
// settle commands (Command.Stray says whose a command is), as they were
// before the log was read.
//
// A command after its consumer's floor without a job or a rejection may
// still be in the consumer's hands: it is pending for stuck_after from its
// time, and stuck after that. Among those its consumer had delivered, no
// more than its outstanding deliveries can be in its hands: any beyond were
// acknowledged without a job or a rejection, and are lost. Call it after
// every job was added.
func (a *Auditor) Commands(cmds []Command, rejected map[uint64]string, intake, strays Consumer) {
	sum := &CommandSummary{}
	a.commands = sum
	stuckAfter := a.opts.stuckAfter()
	type waiting struct {
		name string
		cons Consumer
		seqs []uint64 // delivered, neither a job nor a rejection, not stuck
	}
	consumers := [2]waiting{{name: "the intake", cons: intake}, {name: "the serpent-strays consumer", cons: strays}}
	for _, c := range cmds {
		sum.Commands++
		w := &consumers[0]
		if c.Stray {
			w = &consumers[1]
		}
		unsettled := c.Seq > w.cons.Floor
		reason, isRejected := rejected[c.Seq]
		job := a.job(c.JobID)
		hasJob := job != nil
		ownJob := hasJob && c.Source != "" && job.Source == c.Source
		switch {
		case c.ScheduleOp && isRejected:
			sum.Rejected++
		case c.ScheduleOp:
			sum.ScheduleOps++
		case isRejected && ownJob:
			sum.Rejected++
			a.findings = append(a.findings, Finding{Rule: RuleCommand, Seq: c.Seq, JobID: c.JobID,
				Detail: fmt.Sprintf("command #%d was rejected and also made job %s", c.Seq, c.JobID)})
		case isRejected && c.Invalid == "" && !ConfigReason(reason):
			sum.Rejected++
			a.findings = append(a.findings, Finding{Rule: RuleCommand, Seq: c.Seq, JobID: c.JobID,
				Detail: fmt.Sprintf("command #%d is a valid schedule command (job %s) but was rejected as %q; only a reason that depends on the engine's configuration (%s) may refuse it",
					c.Seq, c.JobID, reason, strings.Join(configReasons, ", "))})
		case isRejected:
			sum.Rejected++
		case c.Invalid != "" && unsettled:
			// To be refused, whatever job its observation has.
			a.waiting(c, w.name, w.cons, stuckAfter, &w.seqs)
		case c.JobID != "" && hasJob:
			sum.Jobs++
		case unsettled:
			a.waiting(c, w.name, w.cons, stuckAfter, &w.seqs)
		case c.JobID != "" && c.Invalid == "":
			sum.Lost++
			a.findings = append(a.findings, Finding{Rule: RuleCommand, Seq: c.Seq, JobID: c.JobID,
				Detail: fmt.Sprintf("command #%d maps to job %s, which has no events, and was not rejected", c.Seq, c.JobID)})
		default:
			sum.Lost++
			a.findings = append(a.findings, Finding{Rule: RuleCommand, Seq: c.Seq,
				Detail: fmt.Sprintf("command #%d is invalid (%s) but has no rejection record", c.Seq, c.Invalid)})
		}
	}
	for _, w := range consumers {
		lost := len(w.seqs) - w.cons.Outstanding
		if lost <= 0 {
			continue
		}
		sum.Pending -= lost
		sum.Lost += lost
		a.findings = append(a.findings, Finding{Rule: RuleCommand, Seq: w.seqs[0],
			Detail: fmt.Sprintf("%d commands after the acknowledgement floor of %s (#%d), up to its last delivery (#%d), are neither jobs nor rejections, but only %d of its deliveries were unacknowledged: at least %d were acknowledged and lost (among %s)",
				len(w.seqs), w.name, w.cons.Floor, w.cons.Delivered, w.cons.Outstanding, lost, seqList(w.seqs, 20))})
	}
}

// waiting judges a command its consumer may not have settled, with
// neither a job nor a rejection: pending for stuck_after from its time,
// stuck after that. A pending one the consumer had delivered is added to
// delivered, to be counted against the deliveries it had outstanding.
func (a *Auditor) waiting(c Command, name string, cons Consumer, stuckAfter time.Duration, delivered *[]uint64) {
	sum := a.commands
	if !c.At.IsZero() && a.opts.Now.Sub(c.At) > stuckAfter {
		sum.Stuck++
		a.findings = append(a.findings, Finding{Rule: RuleCommand, Seq: c.Seq, JobID: c.JobID,
			Detail: fmt.Sprintf("command #%d, stored at %s, is neither a job nor a rejection over %s later: %s has not settled it (its acknowledgement floor is #%d), or it was lost",
				c.Seq, c.At.UTC().Format(time.RFC3339), stuckAfter, name, cons.Floor)})
		return
	}
	sum.Pending++
	if c.Seq <= cons.Delivered {
		*delivered = append(*delivered, c.Seq)
	}
}

// seqList lists command sequences, the first n of them.
func seqList(seqs []uint64, n int) string {
	var b strings.Builder
	for i, s := range seqs {
		if i == n {
			fmt.Fprintf(&b, " and %d more", len(seqs)-n)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "#%d", s)
	}
	return b.String()
}
