package audit

import (
	"fmt"
	"slices"
	"strings"
)

// Command is one message of SERP_COMMANDS, as the caller parsed it with the
// engine's own rules (worker.ParseCommand and aggregate.NewSchedule).
type Command struct {
	Seq uint64
	// JobID is the job the command maps to; empty when it is invalid.
	JobID string
	// Invalid says why the command cannot become a job. JobID may be set
	// too: the job an earlier, more lenient engine made of it.
	Invalid string
	// Unsettled says the engine has not yet handled the command for sure
	// (past its consumer's acknowledgement floor, whichever settledUpTo
	// says); without a job or a rejection it is pending, not lost.
	Unsettled bool
	// Source is how the engine names the command as a job's source
	// (JobScheduled.Source): a command rejected and also made into its
	// job under this name was both.
	Source string
}

// CommandSummary accounts for the commands.
type CommandSummary struct {
	Commands int `json:"commands"`
	// Jobs counts commands whose job is in the log (several commands may
	// be one job); Rejected those with a rejection record.
	Jobs     int `json:"jobs"`
	Rejected int `json:"rejected"`
	// Pending counts commands the intake has not settled yet (after its
	// acknowledgement floor) and that have neither a job nor a rejection.
	Pending int `json:"pending"`
	Lost    int `json:"lost"`
	// Lenient counts the commands among Jobs that today's rules refuse
	// (a field named twice or in another case) and an earlier engine
	// made a job of: their publishers will see them refused now.
	Lenient int `json:"lenient,omitempty"`
}

// configReasons are the rejection reasons that depend on the engine's
// configuration, not on the command: invalid_account, an API account the
// engine was not given (worker.ReasonInvalidAccount). Every other reason
// (malformed, too_large, invalid_<field>) is about the command itself, and
// the audit reads the command by the engine's own rules.
var configReasons = []string{"invalid_account"}

// ConfigReason reports whether a rejection reason depends on the engine's
// configuration: the only reasons a command valid by the rules may be
// rejected for.
func ConfigReason(reason string) bool { return slices.Contains(configReasons, reason) }

// Commands checks that every command became a job or a rejection, and that
// a command valid by the rules was rejected only for a reason that depends
// on the engine's configuration (ConfigReason). rejected maps the command
// sequence of each rejection record (Serpent-Command-Seq) to its reason
// (Serpent-Reject-Reason); commands after settledUpTo may still be in the
// intake's hands. Call it after every job was added.
func (a *Auditor) Commands(cmds []Command, rejected map[uint64]string, settledUpTo uint64) {
	sum := &CommandSummary{}
	a.commands = sum
	for _, c := range cmds {
		sum.Commands++
		_, hasJob := a.jobs[c.JobID]
		switch {
		case hasRejection(rejected, c.Seq) && hasJob && c.Source != "" && a.jobs[c.JobID].Source == c.Source:
			sum.Rejected++
			a.findings = append(a.findings, Finding{Rule: RuleCommand, Seq: c.Seq, JobID: c.JobID,
				Detail: fmt.Sprintf("command #%d was rejected and also made job %s", c.Seq, c.JobID)})
		case hasRejection(rejected, c.Seq) && c.Invalid == "" && !ConfigReason(rejected[c.Seq]):
			sum.Rejected++
			a.findings = append(a.findings, Finding{Rule: RuleCommand, Seq: c.Seq, JobID: c.JobID,
				Detail: fmt.Sprintf("command #%d is a valid schedule command (job %s) but was rejected as %q; only a reason that depends on the engine's configuration (%s) may refuse it",
					c.Seq, c.JobID, rejected[c.Seq], strings.Join(configReasons, ", "))})
		case hasRejection(rejected, c.Seq):
			sum.Rejected++
		case c.Invalid != "" && (c.Unsettled || c.Seq > settledUpTo):
			sum.Pending++ // to be refused, whatever job its observation has
		case c.JobID != "" && hasJob:
			sum.Jobs++
			if c.Invalid != "" {
				sum.Lenient++
			}
		case c.Unsettled || c.Seq > settledUpTo:
			sum.Pending++
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
}

func hasRejection(rejected map[uint64]string, seq uint64) bool {
	_, ok := rejected[seq]
	return ok
}
