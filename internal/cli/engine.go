package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"strconv"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/eventstore/group"
	"github.com/serpent-engine/serpent/httpops"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/consume"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/nats/service"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

func init() {
	register(command{name: "run", summary: "run the engine (embedded NATS and the sandbox unless told otherwise)", run: runEngine})
}

// runEngine is "serpent run".
func runEngine(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs, f := newEngineFlags(stderr)
	f.env = env
	withProjections := fs.Bool("projections", true, "keep the serp_status, serp_ledger and serp_observations buckets up to date (one process applies at a time)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: run: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: run takes no arguments, got %q", errUsage, fs.Args())
	}
	if f.workers < 1 || f.intakeConc < 1 {
		return fmt.Errorf("%w: --workers %d and --intake-concurrency %d must be at least 1", errUsage, f.workers, f.intakeConc)
	}
	log, err := f.log.logger(stderr)
	if err != nil {
		return err
	}
	table, err := f.table()
	if err != nil {
		return err
	}
	if err := aggregate.ValidatePolicy(f.policy); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if f.skewMargin <= 0 || f.retention < 0 {
		return fmt.Errorf("%w: --skew-margin must be positive and --retention not negative", errUsage)
	}
	if err := aggregate.ValidateRetention(f.retention, f.policy, f.skewMargin); err != nil {
		return fmt.Errorf("%w: --retention: %v", errUsage, err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, "serpent: "+format+"\n", a...) }
	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()

	// The API: the real one with a token, else the built-in sandbox.
	api, err := f.startAPI(env, log, say, &cleanup)
	if err != nil {
		return err
	}

	// The HTTP endpoint listens first: while NATS is not ready, /readyz
	// says why.
	state := &startState{}
	var ep *httpops.Endpoint
	if f.httpAddr != "" {
		if ep, err = httpops.Listen(f.httpAddr, httpops.Starting(state.get), log); err != nil {
			return err
		}
		cleanup = append(cleanup, ep.Stop)
		say("status page on http://%s/ (metrics on /metrics)", ep.Addr())
		say("health on http://%s/healthz (readiness on /readyz)", ep.Addr())
	}
	st := &starter{state: state, log: log, timeout: f.connectTimeout}
	if f.connectTimeout > 0 {
		st.deadline = time.Now().Add(f.connectTimeout)
	}

	// NATS: an existing server or cluster, else an embedded one. Both it
	// and the streams, buckets and consumers may not be ready yet.
	nc, js, err := f.startNATS(ctx, st, env, log, say, &cleanup)
	var n *natsParts
	if err == nil {
		err = st.keepTrying(ctx, "open streams, buckets and consumers", func(ctx context.Context) error {
			var err error
			n, err = f.openNATS(ctx, js, api, *withProjections, log, say)
			return err
		})
	}
	if err != nil && ctx.Err() != nil {
		say("stopped before NATS was ready (%v)", context.Cause(ctx))
		return nil
	}
	if err != nil {
		return err
	}
	cleanup = append(cleanup, n.close)
	clock := n.clock
	var events engine.Store = n.store
	mx, tally := newEngineMetrics(js, f.workerName(), clock.Now, n.proj)
	if f.groupCommit {
		c := group.New(n.store, group.Options{OnCommit: mx.Committed})
		cleanup = append(cleanup, c.Close)
		events = c
	}
	events = mx.TimeAppends(events)
	eng, err := engine.New(engine.Config{Name: f.name, Store: events, API: api, Timers: n.timers, Accounts: n.accts, Limiter: n.lim,
		Policy: f.policy, Retention: f.retention, SkewMargin: f.skewMargin, FirstSlot: f.firstSlot, Table: table, Logger: log, Observer: mx, Now: clock.Now})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	schedules := n.schedules
	schedules.CheckAccountsWith(eng.CheckAccount)
	schedules.SkipExpiredWith(eng.SlotRefused)
	svc, err := service.Start(ctx, nc, eng, schedules)
	if err != nil {
		return fmt.Errorf("micro service: %w", err)
	}
	cleanup = append(cleanup, func() { _ = svc.Stop() })
	// The fold of the log: the HTTP server shows it, and the sweep takes
	// the jobs in flight from it. An engine that serves neither HTTP nor
	// a periodic sweep stops it after the sweep at start.
	stopFold := keepFold(js, tally, log)
	cleanup = append(cleanup, stopFold)
	if ep != nil {
		ops := &opsServer{nc: nc, js: js, worker: eng.Name(), sandbox: f.sandboxAt, projections: *withProjections, ops: f.ops, metrics: mx, tally: tally, log: log, now: clock.Now,
			limiter: n.lim, runner: n.proj}
		ep.Handle(ops.server().Handler())
	}
	intake, work, firing, scheduleCmds, strays, proj := n.intake, n.work, n.firing, n.scheduleCmds, n.strays, n.proj
	say("worker %s ready with %d slots; publish schedule commands on %s", eng.Name(), f.workers, snats.ScheduleSubject)

	// The loops run until ctx ends. One that ends on its own (its consumer
	// was deleted, say) stops the engine with an error, so a supervisor
	// starts it again, rather than leaving a process that looks ready and
	// does nothing.
	loops, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		stopped error
	)
	loop := func(name string, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := run(loops)
			if loops.Err() != nil {
				return // asked to stop
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				err = errors.New("it returned on its own")
			}
			if stopped == nil {
				stopped = fmt.Errorf("the %s loop ended: %w", name, err)
				log.Error("stopping: a loop ended on its own", "loop", name, "err", err)
			}
			stopLoops()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-loops.Done()
		if ctx.Err() != nil {
			say("stopping (%v); searches in flight have up to %s (--grace) to finish", context.Cause(ctx), f.grace)
		}
	}()
	rejections := consume.NewRejections(js)
	loop("intake", func(ctx context.Context) error {
		return consume.Intake(ctx, eng, rejections, intake, consume.Options{Concurrency: f.intakeConc, Logger: log})
	})
	loop("work", func(ctx context.Context) error {
		return consume.Work(ctx, eng, work, consume.Options{Concurrency: f.workers, Grace: f.grace, Logger: log})
	})
	loop("schedule firing", func(ctx context.Context) error {
		return consume.Firing(ctx, schedules, firing, consume.Options{Logger: log})
	})
	loop("schedule command", func(ctx context.Context) error {
		return consume.ScheduleCommands(ctx, eng, schedules, rejections, scheduleCmds, consume.Options{Logger: log})
	})
	loop("stray command", func(ctx context.Context) error {
		return consume.Strays(ctx, eng, rejections, strays, consume.Options{Logger: log})
	})
	if proj != nil {
		loop("projection", proj.Run)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := &sweeper{eng: eng, schedules: schedules, js: js, tally: tally, every: f.sweepEvery, now: clock.Now, mx: mx, log: log}
		s.Run(loops, func() {
			if f.httpAddr == "" {
				stopFold()
			}
		})
	}()
	wg.Wait()
	if stopped != nil {
		return stopped
	}
	say("stopped")
	return nil
}

// openSchedules returns the recurring schedules kept in serp_schedules,
// their timers in SERP_WORK and their slots ordered on serp.cmd.schedule.
func openSchedules(ctx context.Context, js jetstream.JetStream, timers *snats.Timers, now func() time.Time, log *slog.Logger) (*engine.Schedules, error) {
	kv, err := snats.OpenKV(ctx, js, snats.SchedulesBucket)
	if err != nil {
		return nil, err
	}
	return engine.NewSchedules(engine.SchedulesConfig{Bucket: kv, Timers: timers, Orders: snats.NewOrders(js),
		MaxPayload: js.Conn().MaxPayload(), Now: now, Logger: log})
}

// startAPI returns the API client: the real API when a token is given, else
// a sandbox started in this process.
func (f *engineFlags) startAPI(env func(string) string, log *slog.Logger, say func(string, ...any), cleanup *[]func()) (*serper.Client, error) {
	token, err := f.token(env)
	url := f.apiURL
	if url == "" {
		url = env("SERPER_LIVE_URL")
	}
	if err := f.ops.check(); err != nil {
		return nil, err
	}
	cfg := serper.Config{Timeout: f.clientTimeout, MaxResponseBytes: f.ops.maxResponseBytes}
	realAPI := false
	if builtIn := f.sandboxURL == "" && errors.Is(err, serper.ErrNoToken) && url == ""; f.sandboxConfig != "" && !builtIn {
		return nil, fmt.Errorf("%w: --sandbox-config configures the built-in sandbox, which is not used with --sandbox-url, a token or an API URL", errUsage)
	}
	switch {
	case f.sandboxURL != "":
		cfg.BaseURL, cfg.Token, cfg.AllowShortTimeout = f.sandboxURL, sandbox.DefaultToken, true
		if err == nil && onLoopback(f.sandboxURL) {
			// A sandbox on this machine may be set up to check the very
			// token (serpent chaos does); one elsewhere gets its own.
			cfg.Token = token
		}
		say("SANDBOX MODE: searches go to the sandbox at %s and nothing is bought", f.sandboxURL)
		f.sandboxAt = hostOf(f.sandboxURL)
	case errors.Is(err, serper.ErrNoToken) && url == "":
		sbCfg := sandbox.Config{SearchTime: 50 * time.Millisecond}
		if f.sandboxConfig != "" {
			data, err := os.ReadFile(f.sandboxConfig)
			if err != nil {
				return nil, fmt.Errorf("%w: --sandbox-config: %v", errUsage, err)
			}
			if err := json.Unmarshal(data, &sbCfg); err != nil {
				return nil, fmt.Errorf("%w: --sandbox-config %s: %v", errUsage, f.sandboxConfig, err)
			}
		}
		sbCfg.Token = sandbox.DefaultToken
		if err := sbCfg.Validate(); err != nil {
			return nil, fmt.Errorf("%w: --sandbox-config: %v", errUsage, err)
		}
		sbCfg.Logger = log.With("component", "sandbox")
		sb := sandbox.New(sbCfg)
		sbURL, err := sb.Start("127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		*cleanup = append(*cleanup, func() { _ = sb.Close() })
		say("SANDBOX MODE: no %s is set, so searches go to the built-in sandbox at %s and nothing is bought", serper.TokenEnv, sbURL)
		f.sandboxAt = sbURL
		cfg.BaseURL, cfg.Token, cfg.AllowShortTimeout = sbURL, sandbox.DefaultToken, true
	case err != nil && !errors.Is(err, serper.ErrNoToken):
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	case err != nil:
		return nil, fmt.Errorf("%w: --api-url is set but there is no token: set %s or --token-file", errUsage, serper.TokenEnv)
	default:
		if url == "" {
			url = DefaultAPIURL
		}
		cfg.BaseURL, cfg.Token = url, token
		if err := tokenTransport(url); err != nil {
			return nil, fmt.Errorf("%w: --api-url: %v", errUsage, err)
		}
		if err := f.checkRealAPI(); err != nil {
			return nil, err
		}
		realAPI = true
	}
	client, err := serper.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if realAPI {
		// Only once the URL is known to hold no secret (New refuses user
		// info, a query or a fragment).
		say("API %s (real searches are bought)", url)
	}
	*cleanup = append(*cleanup, client.CloseIdleConnections)
	return client, nil
}

// checkRealAPI refuses settings that are safe with a sandbox but could buy
// twice with the real API: the engine's policy is every account's.
func (f *engineFlags) checkRealAPI() error {
	if f.policy.Lease.D() < f.clientTimeout+10*time.Second {
		return fmt.Errorf("%w: --lease %s must cover --client-timeout %s plus 10 s, or a slow search could be sent twice at once",
			errUsage, f.policy.Lease.D(), f.clientTimeout)
	}
	if w := f.policy.ReplayWindow.D(); w > serper.ReplayWindow {
		return fmt.Errorf("%w: --replay-window %s is longer than the API's %s: a resend after the API forgot the key would buy again",
			errUsage, w, serper.ReplayWindow)
	}
	// A resend leaving just before its key's deadline may take as long
	// as the client lets a request be written (its timeout less the
	// longest search) to reach the API: the margin must cover that.
	if write := f.clientTimeout - serper.DefaultMaxSearchTime; f.policy.SafetyMargin.D() < write {
		return fmt.Errorf("%w: --safety-margin %s is shorter than the %s a request may take to reach the API (--client-timeout %s less a %s search): a resend at the deadline could arrive after the key's replay window and buy again",
			errUsage, f.policy.SafetyMargin.D(), write, f.clientTimeout, serper.DefaultMaxSearchTime)
	}
	return nil
}

// startNATS connects to the configured NATS, or starts an embedded server.
// It keeps trying to connect (see starter).
func (f *engineFlags) startNATS(ctx context.Context, st *starter, env func(string) string, log *slog.Logger, say func(string, ...any), cleanup *[]func()) (*natsgo.Conn, jetstream.JetStream, error) {
	if !f.nats.configured(env) {
		host, portStr, err := net.SplitHostPort(f.natsListen)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --nats-listen %q: %v", errUsage, f.natsListen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --nats-listen %q: bad port", errUsage, f.natsListen)
		}
		if port == 0 {
			port = -1
		}
		emb, err := snats.StartEmbedded(snats.EmbeddedConfig{Dir: f.dataDir, Host: host, Port: port,
			Logger: f.serverLog(log)})
		if err != nil {
			return nil, nil, fmt.Errorf("embedded NATS on %s: %w (is another serpent or nats-server running? use --nats-listen)", f.natsListen, err)
		}
		*cleanup = append(*cleanup, emb.Shutdown)
		f.nats.conn.URLs = []string{emb.ClientURL()}
		say("embedded NATS with JetStream at %s (fsync on every write), data in %s", emb.ClientURL(), f.dataDir)
	}
	var (
		nc *natsgo.Conn
		js jetstream.JetStream
	)
	err := st.keepTrying(ctx, "connect to NATS", func(context.Context) error {
		var err error
		nc, js, err = f.nats.connect(env, log, "serpent run")
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	*cleanup = append(*cleanup, func() { _ = nc.Drain() })
	if len(f.nats.conn.URLs) > 0 && f.nats.conn.URLs[0] != nc.ConnectedUrl() {
		say("connected to NATS at %s", snats.RedactURL(nc.ConnectedUrl())) // ConnectedUrlRedacted keeps a token
	}
	return nc, js, nil
}

// serverLog is the embedded server's logger: its warnings and errors
// always, its notices (the start-up banner among them) with --nats-log.
func (f *engineFlags) serverLog(log *slog.Logger) *slog.Logger {
	if f.natsLog {
		return log
	}
	quiet, err := logFlags{format: f.log.format, level: "warn"}.logger(f.logOut)
	if err != nil || !quiet.Enabled(context.Background(), slog.LevelWarn) || !log.Enabled(context.Background(), slog.LevelWarn) {
		return log
	}
	return quiet
}

// natsParts are the streams, buckets and consumers serpent run opens at
// start, and what it builds on them.
type natsParts struct {
	clock        *snats.ServerClock
	store        *snats.EventStore
	timers       *snats.Timers
	accts        map[string]engine.API
	lim          *engine.Limiter
	schedules    *engine.Schedules
	intake       jetstream.Consumer
	work         jetstream.Consumer
	firing       jetstream.Consumer
	scheduleCmds jetstream.Consumer
	strays       jetstream.Consumer
	proj         *projector.Runner
	closers      []func()
}

func (n *natsParts) close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
}

// openNATS makes or checks the streams, buckets and consumers, and opens
// what the engine needs of them. On an error it closes what it opened.
func (f *engineFlags) openNATS(ctx context.Context, js jetstream.JetStream, api *serper.Client, withProjections bool,
	log *slog.Logger, say func(string, ...any)) (_ *natsParts, err error) {
	n := &natsParts{}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	evOpts := snats.EventStreamOptions{Replicas: f.replicas, AllowUpdate: f.updateStreams, Logger: log}
	if _, err := snats.EnsureEventStream(ctx, js, evOpts); err != nil {
		return nil, err
	}
	if _, err := snats.EnsureArchiveStream(ctx, js, evOpts); err != nil {
		return nil, err
	}
	streams := snats.StreamOptions{Replicas: f.replicas, AllowUpdate: f.updateStreams, CommandMaxAge: f.retention, Logger: log}
	if err := snats.EnsureEngineStreams(ctx, js, streams, f.ackWait); err != nil {
		return nil, err
	}
	// Every engine decides by the NATS server's clock, so the times one
	// stamps (a lease's end, a key's deadline) mean the same to another.
	if n.clock, err = snats.NewServerClock(ctx, js, nil, log); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.clock.Close)
	if n.store, err = snats.NewEventStore(ctx, js, snats.EventStoreOptions{Logger: log}); err != nil {
		return nil, err
	}
	n.timers = snats.NewTimers(js, n.clock.Now)
	if n.schedules, err = openSchedules(ctx, js, n.timers, n.clock.Now, log); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		p               *jetstream.Consumer
		stream, durable string
	}{
		{&n.intake, snats.CommandStream, snats.IntakeConsumer},
		{&n.work, snats.WorkStream, snats.WorkConsumer},
		{&n.firing, snats.WorkStream, snats.ScheduleConsumer},
		{&n.scheduleCmds, snats.CommandStream, snats.ScheduleAdminConsumer},
		{&n.strays, snats.CommandStream, snats.StrayConsumer},
	} {
		if *c.p, err = snats.Consumer(ctx, js, c.stream, c.durable); err != nil {
			return nil, err
		}
	}
	if withProjections {
		if n.proj, err = projector.New(ctx, js, projector.Config{Replicas: f.replicas, Name: f.workerName(), Logger: log}); err != nil {
			return nil, err
		}
	}
	// Last, so a failed try does not print the accounts again.
	if n.accts, n.lim, err = f.startAccounts(ctx, f.env, js, api, n.clock.Now, log, say, &n.closers); err != nil {
		return nil, err
	}
	return n, nil
}

// onLoopback says whether an http(s) URL names this machine.
func onLoopback(raw string) bool {
	u, err := neturl.Parse(raw)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tokenTransport refuses to send an API token in clear text off this
// machine: a plain http:// URL must be on the loopback interface.
func tokenTransport(raw string) error {
	u, err := neturl.Parse(raw)
	if err == nil && u.Scheme == "http" && !onLoopback(raw) {
		return fmt.Errorf("%s is plain http on another machine: the API token would travel in clear text (use https)", hostOf(raw))
	}
	return nil
}

// hostOf is a URL's scheme and host, as a message may quote it: its user
// info, query or fragment may hold a token.
func hostOf(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a URL that does not parse)"
	}
	return u.Scheme + "://" + u.Host
}
