package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/serper"
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
	cmd.Env = append(os.Environ(), serper.TokenEnv+"="+w.Token)
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

// ProjectionCheck compares every value of the projection buckets
// (serp_status, serp_ledger, serp_observations) with the value a fold of
// the whole log gives it, both ways: a value missing, one no event made,
// and one that differs are each a broken promise 6. The projection may
// still be catching up when the check starts, so it looks again for up to
// Wait (a minute when 0).
type ProjectionCheck struct {
	Wait time.Duration
}

func (ProjectionCheck) Name() string { return "projections" }

func (c ProjectionCheck) Check(ctx context.Context, w *World) CheckResult {
	if _, err := w.JS.KeyValue(ctx, projections.StatusBucket); errors.Is(err, jetstream.ErrBucketNotFound) {
		return CheckResult{Skipped: "no " + projections.StatusBucket + " bucket: no projection runs in this deployment"}
	} else if err != nil {
		return CheckResult{Violations: []string{err.Error()}}
	}
	want, err := projections.New(projections.Config{}).Build(w.Log)
	if err != nil {
		return CheckResult{Violations: []string{"a fold of the log: " + err.Error()}}
	}
	gone := leftWithJob(w)
	wait := c.Wait
	if wait <= 0 {
		wait = time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		diffs, err := projectionDiffs(ctx, w.JS, want, gone)
		if err == nil && len(diffs) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			res := CheckResult{Summary: fmt.Sprintf("%d values of %s against a fold of the log", len(want),
				strings.Join(projections.Buckets(), ", "))}
			if err != nil {
				res.Violations = append(res.Violations, err.Error())
			}
			if len(diffs) > maxDiffs {
				diffs = append(diffs[:maxDiffs], fmt.Sprintf("... and %d more", len(diffs)-maxDiffs))
			}
			res.Violations = append(res.Violations, diffs...)
			return res
		}
		time.Sleep(200 * time.Millisecond) // the projection is catching up
	}
}

// maxDiffs bounds the differences a projection check lists.
const maxDiffs = 20

// leftWithJob reports whether a value may have left its bucket with its
// job: a value of one job whose retention horizon has come (its TTL is
// rounded down to the second, so a little before the job's expiry).
func leftWithJob(w *World) func(projections.Target) bool {
	_, byTarget := projections.Group(w.Log)
	return func(t projections.Target) bool {
		recs := byTarget[t]
		if t.Shared() || len(recs) == 0 {
			return false
		}
		exp := aggregate.Fold(w.Histories[recs[0].Event.JobID]).Expires()
		return !exp.IsZero() && time.Now().After(exp.Add(-2*time.Second))
	}
}

// projectionDiffs lists every value of the projection buckets that is not
// the one in want, and every value of want that is missing, unless gone
// says it left with its job.
func projectionDiffs(ctx context.Context, js jetstream.JetStream, want map[projections.Target][]byte, gone func(projections.Target) bool) ([]string, error) {
	var diffs []string
	seen := map[projections.Target]bool{}
	for _, bucket := range projections.Buckets() {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", bucket, err)
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: list keys: %w", bucket, err)
		}
		for key := range keys.Keys() {
			t := projections.Target{Bucket: bucket, Key: key}
			seen[t] = true
			e, err := kv.Get(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				seen[t] = false // deleted meanwhile
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s: get %s: %w", bucket, key, err)
			}
			w, ok := want[t]
			switch {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("%s holds %s, which no event of the log makes", bucket, key))
			case string(w) != string(e.Value()):
				diffs = append(diffs, fmt.Sprintf("%s %s holds %s, a fold of the log gives %s", bucket, key, e.Value(), w))
			}
		}
	}
	for t := range want {
		if !seen[t] && !gone(t) {
			diffs = append(diffs, fmt.Sprintf("%s has no %s, which a fold of the log makes", t.Bucket, t.Key))
		}
	}
	slices.Sort(diffs)
	return diffs, nil
}
