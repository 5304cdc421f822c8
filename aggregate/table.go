package aggregate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Action is what a job does after an outcome.
type Action string

const (
	// ActionStore stores the observation and finishes the job.
	ActionStore Action = "store"
	// ActionRetrySameKey backs off and resends the saved key and body.
	ActionRetrySameKey Action = "retry_same_key"
	// ActionRetryNewKey backs off, persists a new key and resends the body.
	ActionRetryNewKey Action = "retry_new_key"
	// ActionReconcile stops automatic sends and asks the billing ledger.
	ActionReconcile Action = "reconcile"
	// ActionFail records the failure for the caller.
	ActionFail Action = "fail"
)

// Class names what an outcome tells about the key's search. Only definite
// classes may lead to a new key.
type Class string

const (
	ClassUnknown           Class = "unknown"            // no identifiable reply
	ClassInProgress        Class = "in_progress"        // the key's search is still running
	ClassUnresolved        Class = "unresolved"         // the API could not settle the original yet
	ClassRetryable         Class = "retryable"          // confirmed: the search did not complete
	ClassRateLimited       Class = "rate_limited"       // confirmed: the search did not run
	ClassReplayUnavailable Class = "replay_unavailable" // charged, response lost
	ClassSuccess           Class = "success"
	ClassFailure           Class = "failure" // confirmed error retrying cannot fix
)

// Definite reports whether the outcome settles what happened to the key's
// search, so that a new key cannot buy the observation a second time.
func (c Class) Definite() bool {
	switch c {
	case ClassRetryable, ClassRateLimited, ClassReplayUnavailable, ClassSuccess, ClassFailure:
		return true
	}
	return false
}

// Rule is one row of the outcome table. Status 0 is the unknown outcome (no
// reply, an unreadable reply or a page that is not the API's own); Code ""
// matches any error code of that status.
type Rule struct {
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	Class  Class  `json:"class"`
	Action Action `json:"action"`
}

// Table maps API outcomes to the next action. The most specific row wins:
// status and code, then status alone, then Default.
type Table struct {
	Rules   []Rule `json:"rules"`
	Default Rule   `json:"default"`
}

// DefaultTable is the Serper.live retry contract (the README's "The retry contract").
func DefaultTable() Table {
	return Table{
		Rules: []Rule{
			{Status: 0, Class: ClassUnknown, Action: ActionRetrySameKey},
			{Status: 409, Code: "idempotency_in_progress", Class: ClassInProgress, Action: ActionRetrySameKey},
			{Status: 503, Code: "billing_unavailable", Class: ClassUnresolved, Action: ActionRetrySameKey},
			{Status: 408, Class: ClassRetryable, Action: ActionRetryNewKey},
			{Status: 424, Class: ClassRetryable, Action: ActionRetryNewKey},
			{Status: 503, Class: ClassRetryable, Action: ActionRetryNewKey},
			{Status: 429, Class: ClassRateLimited, Action: ActionRetryNewKey},
			{Status: 409, Code: "idempotency_replay_unavailable", Class: ClassReplayUnavailable, Action: ActionReconcile},
			{Status: 200, Class: ClassSuccess, Action: ActionStore},
		},
		Default: Rule{Class: ClassFailure, Action: ActionFail},
	}
}

// Classify finds the row for an outcome.
func (t Table) Classify(status int, code string) Rule {
	var byStatus *Rule
	for i := range t.Rules {
		r := &t.Rules[i]
		if r.Status != status {
			continue
		}
		if r.Code == code && code != "" {
			return *r
		}
		if r.Code == "" && byStatus == nil {
			byStatus = r
		}
	}
	if byStatus != nil {
		return *byStatus
	}
	d := t.Default
	d.Status, d.Code = status, code
	return d
}

// Decision is the row an outcome of a key's try-th send acts on. It is
// the outcome's row, bent by one rule: a key is replaced only when the
// API has shown that this key did not buy. A confirmed error shows it on
// the key's first send, and so does an error the API replays for the key
// (Idempotent-Replayed: true). A resend's own error does not: an earlier
// send of the key, whose answer was lost or said "in progress", may have
// run and been billed, and an API that answers before it looks the key
// up speaks only of this request.
//   - A row that would mint a new key keeps the key instead: it is sent
//     again until its deadline, and then the billing ledger decides.
//   - A failure asks the billing ledger first: a charge found ends the
//     job charged_no_result, none the failure.
//
// The rule holds whatever rows a deployment gives (see Validate).
func (t Table) Decision(status int, code string, try int, replayed bool) Rule {
	r := t.Classify(status, code)
	if SpeaksForKey(try, replayed) {
		return r
	}
	switch {
	case r.Action == ActionRetryNewKey:
		r.Action = ActionRetrySameKey
	case r.Action == ActionFail && r.Class == ClassFailure:
		r.Action = ActionReconcile
	}
	return r
}

// SpeaksForKey reports whether an answer to a key's try-th send speaks
// for the key's search, not only for this request: it answers the key's
// first send, or the API replayed it for the key.
func SpeaksForKey(try int, replayed bool) bool { return try <= 1 || replayed }

// Settles reports whether acting on r settles the key: its outcome is
// definite and the key is not sent again. A lost response (charged) is
// settled only by the billing ledger.
func (r Rule) Settles() bool {
	return r.Class.Definite() && r.Class != ClassReplayUnavailable && r.Action != ActionRetrySameKey
}

// With returns a copy of the table where each given row replaces the row with
// the same status and code, or is added.
func (t Table) With(rows ...Rule) Table {
	out := Table{Rules: slices.Clone(t.Rules), Default: t.Default}
	for _, r := range rows {
		i := slices.IndexFunc(out.Rules, func(x Rule) bool { return x.Status == r.Status && x.Code == r.Code })
		if i >= 0 {
			out.Rules[i] = r
		} else {
			out.Rules = append(out.Rules, r)
		}
	}
	return out
}

// ParseRules reads extra rows from JSON (a list of rules) and applies them to
// the default table, validating the result.
func ParseRules(data []byte) (Table, error) {
	var rows []Rule
	if err := json.Unmarshal(data, &rows); err != nil {
		return Table{}, fmt.Errorf("outcome rules: %w", err)
	}
	t := DefaultTable().With(rows...)
	if err := t.Validate(); err != nil {
		return Table{}, err
	}
	return t, nil
}

// allowed is what a class permits, and why nothing else.
type allowed struct {
	actions []Action
	why     string
}

// classActions are the actions each class allows: a new key only once the
// old one is known not to have bought, nothing but reconciliation for a
// charge whose response is lost, a stored result for a success.
var classActions = map[Class]allowed{
	ClassUnknown:           {[]Action{ActionRetrySameKey, ActionReconcile}, whyUnsettled},
	ClassInProgress:        {[]Action{ActionRetrySameKey, ActionReconcile}, whyUnsettled},
	ClassUnresolved:        {[]Action{ActionRetrySameKey, ActionReconcile}, whyUnsettled},
	ClassRetryable:         {[]Action{ActionRetryNewKey, ActionRetrySameKey, ActionReconcile, ActionFail}, ""},
	ClassRateLimited:       {[]Action{ActionRetryNewKey, ActionRetrySameKey, ActionReconcile, ActionFail}, ""},
	ClassReplayUnavailable: {[]Action{ActionReconcile}, "the key was charged and its response is lost; only the billing ledger settles it"},
	ClassSuccess:           {[]Action{ActionStore}, "a success is stored"},
	ClassFailure:           {[]Action{ActionFail, ActionReconcile}, "a confirmed failure ends the job (or asks the ledger); another send would buy what the API refused"},
}

const whyUnsettled = "the key's search may have run and been billed, so only the same key or the billing ledger can settle it"

// contractClasses are the rows whose meaning the provider's contract fixes
// (the README's retry contract): a deployment may change their action within what
// their class allows, not their class.
var contractClasses = map[[2]any]Class{
	{0, ""}:                                 ClassUnknown,
	{409, "idempotency_in_progress"}:        ClassInProgress,
	{503, "billing_unavailable"}:            ClassUnresolved,
	{409, "idempotency_replay_unavailable"}: ClassReplayUnavailable,
}

var knownClasses = []Class{ClassUnknown, ClassInProgress, ClassUnresolved, ClassRetryable,
	ClassRateLimited, ClassReplayUnavailable, ClassSuccess, ClassFailure}

// Validate reports every row that would break serpent's promises or that
// the engine cannot carry out.
func (t Table) Validate() error {
	var errs []error
	check := func(name string, r Rule) {
		if !slices.Contains(knownClasses, r.Class) {
			errs = append(errs, fmt.Errorf("outcome rules: %s: unknown class %q", name, r.Class))
		}
		switch r.Action {
		case ActionStore:
			if r.Status != 200 {
				errs = append(errs, fmt.Errorf("outcome rules: %s: only status 200 can store a result", name))
			}
		case ActionRetryNewKey, ActionRetrySameKey, ActionReconcile, ActionFail:
		default:
			errs = append(errs, fmt.Errorf("outcome rules: %s: unknown action %q", name, r.Action))
		}
		if a, known := classActions[r.Class]; known && !slices.Contains(a.actions, r.Action) && r.Action != "" {
			errs = append(errs, fmt.Errorf("outcome rules: %s: class %q may not %s: %s", name, r.Class, r.Action, a.why))
		}
		if r.Status == 200 && r.Action != ActionStore {
			errs = append(errs, fmt.Errorf("outcome rules: %s: a decoded 200 must be stored", name))
		}
		if r.Status == 0 && r.Class != ClassUnknown {
			errs = append(errs, fmt.Errorf("outcome rules: %s: status 0 is the unknown outcome and must have class %q", name, ClassUnknown))
		}
	}
	seen := map[[2]any]bool{}
	hasUnknown := false
	for _, r := range t.Rules {
		name := fmt.Sprintf("row %d %q", r.Status, r.Code)
		if want, pinned := contractClasses[[2]any{r.Status, r.Code}]; pinned && r.Class != want {
			errs = append(errs, fmt.Errorf("outcome rules: %s: the provider's contract fixes its class as %q", name, want))
		}
		if r.Status != 0 && (r.Status < 100 || r.Status > 599) {
			errs = append(errs, fmt.Errorf("outcome rules: %s: status is not an HTTP status", name))
		}
		k := [2]any{r.Status, r.Code}
		if seen[k] {
			errs = append(errs, fmt.Errorf("outcome rules: %s appears twice", name))
		}
		seen[k] = true
		hasUnknown = hasUnknown || r.Status == 0
		check(name, r)
	}
	if !hasUnknown {
		errs = append(errs, errors.New("outcome rules: a row for the unknown outcome (status 0) is required"))
	}
	if t.Default.Action == ActionStore {
		errs = append(errs, errors.New("outcome rules: the default row cannot store a result"))
	} else {
		d := t.Default
		d.Status = 599 // any confirmed status
		check("default row", d)
	}
	return errors.Join(errs...)
}
