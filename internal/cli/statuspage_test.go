package cli

import (
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// chromiumPath is where Debian's chromium package puts the browser;
// $SERPENT_CHROMIUM overrides it.
const chromiumPath = "/usr/bin/chromium"

// chromium returns the browser to drive, or skips the test when there is
// none (CI installs it, and sets SERPENT_REQUIRE_CHROMIUM=1 so that a
// missing browser fails instead).
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("SERPENT_CHROMIUM")
	if path == "" {
		path = chromiumPath
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("SERPENT_REQUIRE_CHROMIUM") != "" {
			t.Fatalf("no headless browser at %s (SERPENT_REQUIRE_CHROMIUM is set): %v", path, err)
		}
		t.Skipf("no headless browser at %s: install Debian's chromium package (apt-get install -y chromium), as .ci/run does, to run this test", path)
	}
	return path
}

// browse runs headless Chromium on url with the extra arguments and
// returns what it printed on stdout.
func browse(t *testing.T, browser, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, browser, append(all, url)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium %v:\n%s", args, stderr.String())
	return stdout.String()
}

// artifacts is the folder for test artefacts: $SERPENT_ARTIFACTS, else
// artifacts/ at the top of the repository (git-ignored).
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SERPENT_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	return abs
}

var (
	tagRE   = regexp.MustCompile(`(?s)<(script|style|title)[^>]*>.*?</(script|style|title)>|<[^>]+>`)
	spaceRE = regexp.MustCompile(`\s+`)
)

// visibleText is roughly what a person reads on a page: the DOM without
// tags, styles and scripts, white space collapsed.
func visibleText(dom string) string {
	return strings.TrimSpace(spaceRE.ReplaceAllString(html.UnescapeString(tagRE.ReplaceAllString(dom, " ")), " "))
}

// TestStatusPageInBrowser: a headless Chromium opens the status page of a
// running engine after it has run jobs through a fault mix, and sees the
// jobs by state, the chart of pages and spend, the recent jobs with their
// attempt timelines and the reconciliation queue; the page refreshes
// itself and loads nothing from elsewhere. The screenshot is kept as a
// test artefact.
func TestStatusPageInBrowser(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	sbCfg := filepath.Join(dir, "sandbox.json")
	require.NoError(t, os.WriteFile(sbCfg, []byte(`{"seed":11,"searchTime":"2ms","faults":{"dropAfterSearch":0.3,"timeout408":0.2}}`), 0o644))
	r := startEngine(t, nil, "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--sandbox-config", sbCfg, "--base-delay", "20ms", "--max-delay", "200ms", "--log-level", "warn")
	base := r.opsURL(t)
	_, js := natstest.Connect(t, r.natsURL)
	require.NoError(t, engine.SetLimits(context.Background(), accountsKV(t, js), "default", accounts.Limits{MaxInFlight: 4, DailyPages: 500, PriceMicros: 1000}))
	const jobs = 12
	publishJobs(t, js, "espresso scale", jobs)
	waitFinished(t, base, jobs)
	// The projections catch up with the log: the page's details come
	// from the buckets.
	natstest.WaitFor(t, 30*time.Second, func() error {
		_, page := get(t, base+"/")
		if strings.Count(page, `<tr data-job=`) < 10 || !strings.Contains(page, "succeeded") {
			return fmt.Errorf("the recent jobs are not projected yet")
		}
		return nil
	})

	_, raw := get(t, base+"/")
	require.Contains(t, raw, `<meta http-equiv="refresh" content="5">`, "the page refreshes itself")
	require.NotRegexp(t, `(src|href)="(https?:)?//`, raw, "nothing is loaded from another site")

	dom := browse(t, browser, base+"/", "--dump-dom")
	text := visibleText(dom)
	for _, want := range []string{"Jobs by state", "succeeded", "jobs in all", "double charges by serpent", "double charges by the API, found", "Double charges",
		"Billed pages and spend per day", "Reconciliation queue", "Recent jobs", "API accounts", "500 pages", "espresso scale", "first sent", "tries"} {
		require.Contains(t, text, want)
	}
	require.Contains(t, text, "SANDBOX MODE: searches go to the sandbox at http://", "the page says it is in sandbox mode")
	require.Regexp(t, `\b`+fmt.Sprint(jobs)+` jobs in all\b`, text)
	require.Regexp(t, `\b0 double charges by serpent\b`, text)
	require.Regexp(t, `default \d+ pages?, \$\d+\.\d{2,6} 500 pages \d+ of 4`, text, "the account's spend against its budget and its searches in flight")
	require.Regexp(t, `key [0-9a-f]{8} scheduled at \d\d:\d\d:\d\d`, text, "attempt timelines show keys")
	today := time.Now().UTC().Format("01-02")
	require.Regexp(t, today+` \$\d+\.\d\d`, text, "today's spend is under its bar")
	require.Regexp(t, `<rect class="bar" x="\d+" y="\d+" width="36" height="([1-9]\d*)"`, dom, "today's bar has a height")

	shot := filepath.Join(artifacts(t), "statuspage.png")
	_ = os.Remove(shot)
	browse(t, browser, base+"/", "--screenshot="+shot, "--window-size=1280,1400")
	info, err := os.Stat(shot)
	require.NoError(t, err)
	require.Greater(t, info.Size(), int64(10_000), "a screenshot of a rendered page")
	require.NoError(t, os.WriteFile(filepath.Join(artifacts(t), "statuspage.html"), []byte(dom), 0o644))
	t.Logf("screenshot: %s", shot)
}
