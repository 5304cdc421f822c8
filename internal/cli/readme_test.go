package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/serpent-engine/serpent/internal/bench"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats/natstest"
)

// readmePath is the README at the top of the repository.
var readmePath = filepath.Join("..", "..", "README.md")

// docPages are the README and every page of docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	return append([]string{readmePath}, pages...)
}

// readmeExample is one command of a fenced sh block of a page.
type readmeExample struct {
	line int // where the command starts
	cmd  string
}

// readmeExamples returns every command of every ```sh block of a page:
// lines joined at a trailing backslash, comments dropped.
func readmeExamples(t *testing.T, path string) []readmeExample {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []readmeExample
	in, cont := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case in && strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		text := strings.TrimSpace(stripComment(line))
		joined := strings.HasSuffix(text, `\`)
		text = strings.TrimSpace(strings.TrimSuffix(text, `\`))
		switch {
		case cont:
			out[len(out)-1].cmd += " " + text
		case text != "":
			out = append(out, readmeExample{line: n, cmd: text})
		}
		cont = joined
	}
	require.NoError(t, sc.Err())
	return out
}

// stripComment drops a shell comment: a # at the start or after white
// space, outside quotes.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' '):
			return line[:i]
		}
	}
	return line
}

// splitArgs splits a command line as a POSIX shell would for the
// README's examples: white space separates, quotes group.
func splitArgs(t *testing.T, s string) []string {
	t.Helper()
	var args []string
	var cur strings.Builder
	var quote rune
	have := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, have = r, true
		case r == ' ' || r == '\t':
			if have {
				args, have = append(args, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	require.Zero(t, quote, "unbalanced quotes in %q", s)
	if have {
		args = append(args, cur.String())
	}
	return args
}

// readmeEnv is the world the README's examples run in: an engine started
// with "serpent run" (in this process), its NATS, its built-in sandbox and
// its HTTP server, and the job the README's schedule example ordered.
type readmeEnv struct {
	r       *engineRun
	nc      *natsgo.Conn
	js      jetstream.JetStream
	opsURL  string
	job     string
	sandbox string
}

// TestReadmeExamples runs every command of every sh block of README.md,
// then of each page of docs/, in order, against a serpent run started in
// the test:
//
//   - serpent commands ("go run ./cmd/serpent X" or "serpent X") run
//     through run(), with NATS_URL pointing at the engine; the engine
//     itself is the README's "serpent run" with a free port, a temporary
//     data folder and its HTTP server on a free port; "serpent bench"
//     only parses its flags (TestBenchEveryPhase runs it); "serpent sandbox"
//     runs until it prints its URL, on a free port;
//   - nats CLI commands run as the same request with nats.go;
//   - curl commands are the same GET;
//   - "go test" commands are this test suite: they must be CI's command
//     or name an existing package; "docker compose" must name the compose
//     file, which go test ./deploy exercises without Docker.
//
// The example job id (3f1c9a7e...) and "<the job id it printed>" stand for
// the job the README's first schedule example ordered.
func TestReadmeExamples(t *testing.T) {
	examples := readmeExamples(t, readmePath)
	require.NotEmpty(t, examples)
	require.Equal(t, "go run ./cmd/serpent run", examples[0].cmd, "the README starts with the command that runs serpent")
	require.Equal(t, "go test -race ./...", examples[1].cmd, "and then the command that tests it")

	env := &readmeEnv{}
	env.r = startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "error")
	env.opsURL, env.sandbox = env.r.opsURL(t), env.r.sandboxURL
	env.nc, env.js = natstest.Connect(t, env.r.natsURL)
	for _, ex := range examples[2:] {
		t.Run(fmt.Sprintf("README line %d", ex.line), func(t *testing.T) {
			for _, cmd := range expandAlternatives(ex.cmd) {
				env.runExample(t, cmd)
			}
		})
	}
	for _, page := range docPages(t)[1:] {
		for _, ex := range readmeExamples(t, page) {
			t.Run(fmt.Sprintf("%s line %d", filepath.Base(page), ex.line), func(t *testing.T) {
				for _, cmd := range expandAlternatives(ex.cmd) {
					env.runExample(t, cmd)
				}
			})
		}
	}
}

// expandAlternatives turns "serpent schedules pause|resume|delete X" into
// one command per alternative.
func expandAlternatives(cmd string) []string {
	m := regexp.MustCompile(`\b([a-z]+(?:\|[a-z]+)+)\b`).FindStringSubmatch(cmd)
	if m == nil || strings.Contains(cmd, "'") {
		return []string{cmd}
	}
	var out []string
	for _, alt := range strings.Split(m[1], "|") {
		out = append(out, strings.Replace(cmd, m[1], alt, 1))
	}
	return out
}

// exampleJobID is the job id the README uses in examples.
const exampleJobID = "3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b"

func (e *readmeEnv) runExample(t *testing.T, cmd string) {
	t.Helper()
	if e.job != "" {
		cmd = strings.ReplaceAll(cmd, exampleJobID, e.job)
		cmd = strings.ReplaceAll(cmd, "<the job id it printed>", e.job)
	}
	args := splitArgs(t, cmd)
	switch {
	case len(args) >= 3 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/serpent":
		e.serpent(t, args[3:])
	case args[0] == "serpent":
		e.serpent(t, args[1:])
	case args[0] == "nats":
		e.natsCLI(t, args[1:])
	case args[0] == "curl":
		e.curl(t, args[1:])
	case args[0] == "go" && len(args) > 1 && args[1] == "test":
		i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "./") })
		require.Positive(t, i, "go test example %q names a package", cmd)
		pkg := args[i]
		_, err := os.Stat(filepath.Join("..", "..", strings.TrimSuffix(pkg, "/...")))
		require.NoError(t, err, "go test example %q", cmd)
	case args[0] == "docker":
		require.Contains(t, cmd, "docker compose up")
		checkComposeCommands(t)
	case args[0] == "strace":
		// A serpent command run under strace (a slower disk, emulated):
		// its own flags must parse.
		i := slices.Index(args, "serpent")
		require.Positive(t, i, "strace example %q runs serpent", cmd)
		e.serpent(t, args[i+1:])
	case args[0] == "apt-get":
		require.Equal(t, []string{"apt-get", "install", "strace"}, args, "the one package an example needs")
	default:
		t.Fatalf("README example %q is not run by readme_test.go: teach runExample about it", cmd)
	}
}

// serpent runs one serpent command against the engine.
func (e *readmeEnv) serpent(t *testing.T, args []string) {
	t.Helper()
	require.NotEmpty(t, args)
	switch args[0] {
	case "run":
		// The engine of this test is this command; check the README's
		// flags parse.
		fs, _ := newEngineFlags(&strings.Builder{})
		require.NoError(t, fs.Parse(args[1:]))
		return
	case "sandbox":
		e.sandboxExample(t, args[1:])
		return
	case "bench":
		// Minutes of measurement: TestBenchEveryPhase runs every phase
		// small; here the README's flags must parse.
		require.NoError(t, bench.CheckFlags(args[1:]), "serpent %s", strings.Join(args, " "))
		return
	case "chaos":
		// Minutes of real processes: TestChaosCommand runs it small; here
		// the example's flags must parse.
		fs, _, _, _ := chaosFlags(&strings.Builder{})
		require.NoError(t, fs.Parse(args[1:]), "serpent %s", strings.Join(args, " "))
		return
	}
	for i, a := range args {
		if a == "http://127.0.0.1:8790" { // the standalone sandbox of the examples
			args[i] = e.sandbox
		}
	}
	env := map[string]string{"NATS_URL": e.r.natsURL, "SERPER_LIVE_TOKEN": "sandbox-token"}
	var stdout, stderr strings.Builder
	err := Run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	require.NoError(t, err, "serpent %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	if args[0] == "schedule" && e.job == "" {
		e.job = strings.TrimSpace(stdout.String())
		require.Regexp(t, `^[0-9a-f]{32}$`, e.job)
		e.waitJob(t)
	}
}

// waitJob waits until the README's job succeeded and is projected, so
// the status, ledger and observation examples have something to show.
func (e *readmeEnv) waitJob(t *testing.T) {
	t.Helper()
	natstest.WaitFor(t, 30*time.Second, func() error {
		var stdout, stderr strings.Builder
		env := map[string]string{"NATS_URL": e.r.natsURL}
		if err := Run(context.Background(), []string{"observation", e.job}, func(k string) string { return env[k] }, &stdout, &stderr); err != nil {
			return err
		}
		return nil
	})
}

// sandboxExample runs "serpent sandbox" with the README's flags on a free
// port until it prints its URL.
func (e *readmeEnv) sandboxExample(t *testing.T, args []string) {
	t.Helper()
	for i := range args {
		if args[i] == "--listen" && i+1 < len(args) {
			args[i+1] = "127.0.0.1:0"
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append([]string{"sandbox"}, args...), func(string) string { return "" }, stdout, stderr)
	}()
	stopped := false
	t.Cleanup(func() { // stopped however the test ends
		if !stopped {
			cancel()
			<-done
		}
	})
	natstest.WaitFor(t, 10*time.Second, func() error {
		if !strings.HasPrefix(stdout.String(), "http://") {
			return fmt.Errorf("no URL printed yet: %s", stderr)
		}
		return nil
	})
	cancel()
	stopped = true
	require.NoError(t, <-done)
}

// natsCLI does what a nats CLI example does, with nats.go.
func (e *readmeEnv) natsCLI(t *testing.T, args []string) {
	t.Helper()
	ctx := context.Background()
	var flags []string
	var pos []string
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			flags = append(flags, a)
		} else {
			pos = append(pos, a)
		}
	}
	switch strings.Join(pos[:min(2, len(pos))], " ") {
	case "pub serp.cmd.schedule":
		require.Contains(t, flags, "--jetstream", "commands are published with JetStream")
		_, err := e.js.Publish(ctx, pos[1], []byte(pos[2]))
		require.NoError(t, err)
	case "req serpent.status", "req serpent.schedule", "req serpent.cancel", "req serpent.repurchase":
		msg, err := e.nc.Request(pos[1], []byte(pos[2]), 5*time.Second)
		require.NoError(t, err)
		require.Empty(t, msg.Header.Get("Nats-Service-Error-Code"), "%s", msg.Data)
	case "stream view", "stream info", "stream get":
		_, err := e.js.Stream(ctx, pos[2])
		require.NoError(t, err)
	case "kv get", "kv ls", "kv watch":
		kv, err := e.js.KeyValue(ctx, pos[2])
		require.NoError(t, err)
		if pos[1] == "get" {
			_, err = kv.Get(ctx, pos[3])
			require.NoError(t, err)
		}
	case "micro ls", "micro info":
		msg, err := e.nc.Request("$SRV.INFO.serpent", nil, 5*time.Second)
		require.NoError(t, err)
		require.Contains(t, string(msg.Data), `"name":"serpent"`)
	default:
		t.Fatalf("nats example %v is not mapped to nats.go in readme_test.go", args)
	}
}

// curl GETs one of the engine's endpoints at the address the README
// uses, on the test's port.
func (e *readmeEnv) curl(t *testing.T, args []string) {
	t.Helper()
	var url string
	for _, a := range args {
		if strings.HasPrefix(a, "http://") {
			url = a
		}
	}
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:8080/"), "curl examples use the default address: %v", args)
	resp, err := http.Get(e.opsURL + strings.TrimPrefix(url, "http://127.0.0.1:8080"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", url)
}

// checkComposeCommands: the serpent commands of docker-compose.yml
// parse (go test ./deploy runs its NATS config files).
func checkComposeCommands(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	require.NoError(t, err)
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^\s+command: (\[.*\])$`).FindAllStringSubmatch(string(data), -1) {
		var args []string
		require.NoError(t, json.Unmarshal([]byte(m[1]), &args), m[1])
		switch args[0] {
		case "run":
			fs, _ := newEngineFlags(&strings.Builder{})
			require.NoError(t, fs.Parse(args[1:]), "%v", args)
			require.Contains(t, args, "--replicas")
		case "sandbox":
			fs, _, _, _, _ := sandboxFlags(&strings.Builder{})
			require.NoError(t, fs.Parse(args[1:]), "%v", args)
		default:
			continue // the NATS servers' own command line
		}
		seen[args[0]]++
	}
	require.Equal(t, map[string]int{"run": 2, "sandbox": 1}, seen, "two engines and a sandbox")
}
