package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// DefaultChecks are the checks a run makes besides its own: serpent audit
// over the run's streams, and the projections against a fold of the log.
// Each says so and steps aside when the build it runs does not have what it
// checks.
func DefaultChecks() []Check { return []Check{AuditCheck{}, ProjectionCheck{}} }

// AuditCheck runs "serpent audit -o json" against the run's NATS server
// (joined with the sandbox's billing ledger, if the command can) and
// reports every violation it lists.
type AuditCheck struct{}

func (AuditCheck) Name() string { return "audit" }

func (AuditCheck) Check(ctx context.Context, w *World) CheckResult {
	help, _ := exec.CommandContext(ctx, w.Binary, "help").Output()
	if !bytes.Contains(help, []byte(" audit ")) {
		return CheckResult{Skipped: "this serpent has no audit command"}
	}
	usage, _ := exec.CommandContext(ctx, w.Binary, "audit", "-h").CombinedOutput()
	args := []string{"audit", "-o", "json", "--nats-url", w.NATSURL}
	if bytes.Contains(usage, []byte("-ledger string")) {
		args = append(args, "--ledger", w.SandboxURL) // the token comes from the environment
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.Binary, args...)
	cmd.Env = append(os.Environ(), serper.TokenEnv+"="+sandbox.DefaultToken)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		Jobs       int               `json:"jobs"`
		Violations []json.RawMessage `json:"violations"`
		Rules      map[string]int    `json:"rules"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return CheckResult{Violations: []string{fmt.Sprintf("serpent %s: %v, and no JSON report: %v; stderr: %s",
			strings.Join(args, " "), runErr, err, firstLine(stderr.String()))}}
	}
	res := CheckResult{Summary: fmt.Sprintf("serpent audit of %d jobs", out.Jobs)}
	for _, v := range out.Violations {
		res.Violations = append(res.Violations, string(v))
	}
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		res.Violations = append(res.Violations, "serpent audit: "+runErr.Error())
	}
	if out.Jobs != len(w.Histories) {
		res.Violations = append(res.Violations, fmt.Sprintf("serpent audit saw %d jobs, the log holds %d", out.Jobs, len(w.Histories)))
	}
	return res
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// ProjectionCheck compares every job's value in the serp_status bucket
// with the view of a fold of its log (promise 6), once the projection has
// caught up with the log.
type ProjectionCheck struct{}

func (ProjectionCheck) Name() string { return "projections" }

func (ProjectionCheck) Check(ctx context.Context, w *World) CheckResult {
	kv, err := w.JS.KeyValue(ctx, projections.StatusBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return CheckResult{Skipped: "no " + projections.StatusBucket + " bucket: no projection runs in this deployment"}
	}
	if err != nil {
		return CheckResult{Violations: []string{err.Error()}}
	}
	var res CheckResult
	deadline := time.Now().Add(time.Minute)
	checked := 0
	for job, evs := range w.Histories {
		want := projections.ViewOf(aggregate.Fold(evs))
		for {
			got, err := statusOf(ctx, kv, job)
			if err == nil && got.Version == want.Version {
				if a, b := jsonOf(got), jsonOf(want); a != b {
					res.Violations = append(res.Violations, fmt.Sprintf("job %s: serp_status holds %s, a fold of the log gives %s", job, a, b))
				}
				break
			}
			if time.Now().After(deadline) {
				res.Violations = append(res.Violations, fmt.Sprintf("job %s: serp_status is at version %d (%v), the log at %d", job, got.Version, err, want.Version))
				break
			}
			time.Sleep(200 * time.Millisecond) // the projection is catching up
		}
		checked++
	}
	res.Summary = fmt.Sprintf("serp_status of %d jobs against a fold of their log", checked)
	return res
}

func statusOf(ctx context.Context, kv jetstream.KeyValue, job string) (projections.JobView, error) {
	var v projections.JobView
	e, err := kv.Get(ctx, job)
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal(e.Value(), &v)
}

func jsonOf(v projections.JobView) string {
	b, _ := json.Marshal(v)
	return string(b)
}
