package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/warmopen"
)

// Environment variables of the warm tier and the HTTP listener.
const (
	envWarm    = "STARFLOW_WARM"
	envAddr    = "STARFLOW_ADDR"
	envWakeURL = "STARFLOW_WAKE_URL"
)

// wakePath is the listener's wake route, "{token}" replaced by the token.
const wakePath = "/wake/{token}"

// warmNone is the --warm value that turns the warm tier off.
const warmNone = "none"

// warmFlags are the warm-tier and listener flags of dev, server and worker.
type warmFlags struct {
	spec        string // --warm: memory | embedded | nats://HOST:PORT | none
	defaultWarm string // when neither --warm nor STARFLOW_WARM is given
	addr        string // --addr: HOST:PORT; "" = no listener
	dir         string // --warm-dir: the embedded NATS server's data
	defaultAddr string
	wakeURL     string // --wake-url: the wake_url template of notify requests
	listen      listenFlags
	opts        starflow.WarmOptions
	api         *apiFlags // nil: the listener serves no API (worker)
}

// apiFlags are the HTTP API's flags (server and dev).
type apiFlags struct {
	metricsPublic bool
	insecure      bool
	tlsCert       string
	tlsKey        string
	rate          float64
	burst         int
}

// registerAPI adds the HTTP API's flags: the listener then serves the
// API, behind API keys once one exists.
func (w *warmFlags) registerAPI(cmd *cobra.Command) {
	a := &apiFlags{}
	w.api = a
	cmd.Flags().BoolVar(&a.metricsPublic, "metrics-public", false, "serve /metrics without an API key even when keys exist")
	cmd.Flags().BoolVar(&a.insecure, "insecure", false, "allow a non-loopback --addr while no API key exists (anyone who can reach it acts as admin; logged at start and on every request)")
	cmd.Flags().StringVar(&a.tlsCert, "tls-cert", "", "serve HTTPS with this certificate chain (PEM file; needs --tls-key)")
	cmd.Flags().StringVar(&a.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM file)")
	cmd.Flags().Float64Var(&a.rate, "api-rate", httpserver.APIRateDefault, "enqueue and signal requests per second one API key (or, without keys, one client address) may send, and webhook deliveries per client address; past it 429 with Retry-After; 0 turns the limit off")
	cmd.Flags().IntVar(&a.burst, "api-burst", httpserver.APIBurstDefault, "enqueue and signal requests one key (webhook deliveries: one client address) may send at once before --api-rate applies")
}

// register adds --warm, --addr and the tunables (--presence-interval with
// a runner, --warm-sweep-interval with maintenance). defaultWarm is memory
// for dev and none for server and worker; defaultAddr is "" (no listener)
// for worker.
func (w *warmFlags) register(cmd *cobra.Command, defaultWarm, defaultAddr string, runner, maintenance bool) {
	w.defaultWarm, w.defaultAddr = defaultWarm, defaultAddr
	cmd.Flags().StringVar(&w.spec, "warm", "", fmt.Sprintf("warm tier (live status, progress, presence): memory, embedded (an in-process NATS server), nats://HOST:PORT, or none (env %s, default %s)", envWarm, defaultWarm))
	addrHelp := fmt.Sprintf("HTTP listener for /healthz, /metrics, live views and POST /wake/{token}, HOST:PORT (env %s, default %s; loopback only)", envAddr, defaultAddr)
	if defaultAddr == "" {
		addrHelp = fmt.Sprintf("HTTP listener for /healthz, /metrics, live views and POST /wake/{token}, HOST:PORT (env %s; default none; loopback only)", envAddr)
	}
	cmd.Flags().StringVar(&w.addr, "addr", "", addrHelp)
	wakeHelp := fmt.Sprintf("the wake_url notify receivers get, {token} replaced by the wake token: this process's public POST /wake/{token} URL behind a proxy (env %s; default http://<listener address>%s)", envWakeURL, wakePath)
	if defaultAddr == "" {
		wakeHelp = fmt.Sprintf("the wake_url notify receivers get, {token} replaced by the wake token: set it to the server's public URL, e.g. https://starflow.example.com%s (env %s; default none: wake_url is empty unless --addr is given)", wakePath, envWakeURL)
	}
	cmd.Flags().StringVar(&w.wakeURL, "wake-url", "", wakeHelp)
	w.listen.register(cmd)
	cmd.Flags().StringVar(&w.dir, "warm-dir", "", "data directory of --warm embedded (default: the SQLite file's path + .warm, or ./starflow.warm)")
	cmd.Flags().DurationVar(&w.opts.HealthWarning, "warm-health-warn", starflow.HealthWarningDefault, "health says warning when the oldest unapplied outbox row is older than this")
	cmd.Flags().DurationVar(&w.opts.HealthCritical, "warm-health-critical", starflow.HealthCriticalDefault, "health says critical past this age")
	w.opts.HashSweepInterval = starflow.HashSweepIntervalDefault
	if maintenance {
		cmd.Flags().DurationVar(&w.opts.HashSweepInterval, "warm-sweep-interval", starflow.HashSweepIntervalDefault, "period of the hash-compare sweep that repairs warm entries")
	}
	cmd.Flags().DurationVar(&w.opts.DrainPoll, "drain-poll", 0, "how often the outbox drainer looks for rows (default the mirror's, 200ms)")
	cmd.Flags().DurationVar(&w.opts.OutboxRetention, "outbox-retention", 0, "how long applied outbox rows are kept (default the mirror's, 1h)")
	w.opts.PresenceInterval = starflow.PresenceIntervalDefault
	if runner {
		cmd.Flags().DurationVar(&w.opts.PresenceInterval, "presence-interval", starflow.PresenceIntervalDefault, "how often the runner republishes its presence (it expires after three intervals)")
	}
}

// resolve applies the environment and defaults, and checks the values.
func (w *warmFlags) resolve(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("warm") {
		w.spec = os.Getenv(envWarm)
		if w.spec == "" {
			w.spec = w.defaultWarm
		}
	}
	w.spec = strings.TrimSpace(w.spec)
	switch {
	case w.spec == warmNone, w.spec == "memory", w.spec == "embedded", strings.HasPrefix(w.spec, "nats://"), strings.HasPrefix(w.spec, "tls://"):
	default:
		return usageError("--warm %q is not a valid value: use one of memory, embedded, nats://HOST:PORT (or tls://HOST:PORT), none", w.spec)
	}
	if !cmd.Flags().Changed("addr") {
		w.addr = os.Getenv(envAddr)
		if w.addr == "" {
			w.addr = w.defaultAddr
		}
	}
	if w.addr != "" && !httpserver.IsLoopback(w.addr) && w.api == nil {
		return fmt.Errorf("--addr %s is not a loopback address: this listener has no authentication, so it binds only to 127.0.0.1, ::1 or localhost (starflow server serves the API with API keys on any address)", w.addr)
	}
	if !cmd.Flags().Changed("wake-url") {
		w.wakeURL = os.Getenv(envWakeURL)
	}
	w.wakeURL = strings.TrimSpace(w.wakeURL)
	if w.wakeURL != "" {
		if err := checkWakeURL(w.wakeURL); err != nil {
			return err
		}
	}
	if err := w.listen.resolve(cmd); err != nil {
		return err
	}
	// Each flag's own range is checked before the command runs
	// (checkFlagRanges).
	if w.opts.HealthCritical <= w.opts.HealthWarning {
		return usageError("--warm-health-critical (%s) must exceed --warm-health-warn (%s)", w.opts.HealthCritical, w.opts.HealthWarning)
	}
	return nil
}

// enabled reports whether the process runs a warm tier.
func (w *warmFlags) enabled() bool { return w.spec != "" && w.spec != warmNone }

// mirrorFromEnv reports whether a one-shot command (enqueue, runs resume,
// …) mirrors its writes to the outbox: when STARFLOW_WARM names a warm
// tier, so that the processes draining it see every write at once.
func mirrorFromEnv() bool {
	v := strings.TrimSpace(os.Getenv(envWarm))
	return v != "" && v != warmNone
}

// listener is the HTTP listener (nil srv: none). It is bound before the
// engine is built (so the wake URL can name the port actually bound) and
// serves once the engine exists.
type listener struct {
	srv    *httpserver.Server
	listen *listenFlags
	api    *apiFlags // nil: no API
	// leaseTTL is the runners' lease TTL (the API's stale filter).
	leaseTTL time.Duration
	insecure bool // serving a non-loopback address without keys
}

// bind binds --addr (no listener when it is empty).
func (w *warmFlags) bind() (*listener, error) {
	if w.addr == "" {
		return &listener{}, nil
	}
	sc := w.listen.serverConfig(w.wakeURL)
	if w.api != nil {
		sc.TLSCertFile, sc.TLSKeyFile = w.api.tlsCert, w.api.tlsKey
	}
	srv, err := httpserver.Bind(w.addr, sc)
	if err != nil {
		return nil, fmt.Errorf("%w (choose another address with --addr or %s)", err, envAddr)
	}
	return &listener{srv: srv, listen: &w.listen, api: w.api}, nil
}

// checkExposure refuses a non-loopback API listener while no API key
// exists, unless --insecure (then it warns).
func (w *warmFlags) checkExposure(ctx context.Context, store state.Adapter, log *slog.Logger) error {
	if w.api == nil || w.addr == "" || httpserver.IsLoopback(w.addr) {
		return nil
	}
	configured, err := store.APIKeysConfigured(ctx)
	if err != nil {
		return fmt.Errorf("reading api_keys: %w", err)
	}
	switch {
	case configured:
		return nil
	case w.api.insecure:
		log.Warn("INSECURE: serving the API on a non-loopback address without API keys: anyone who reaches " + w.addr + " acts as admin (create a key with starflow keys create and drop --insecure)")
		fmt.Fprintf(os.Stderr, "WARNING: --insecure: the API on %s needs no key; anyone who can reach it acts as admin\n", w.addr)
		return nil
	}
	return fmt.Errorf("--addr %s is not a loopback address and no API key exists: create one first (starflow keys create --name NAME --role admin --workspace %s), or pass --insecure to serve without keys", w.addr, state.DefaultWorkspace)
}

// resolveWakeURL is the engine's Config.WakeURL: --wake-url (or
// STARFLOW_WAKE_URL) when given, else http://<bound address>/wake/{token}
// when the process listens, else "".
func (w *warmFlags) resolveWakeURL(l *listener) string {
	if w.wakeURL != "" {
		return w.wakeURL
	}
	if l == nil || l.srv == nil {
		return ""
	}
	return l.srv.URL() + wakePath // https:// when the listener serves TLS
}

// checkWakeURL checks a --wake-url template: an absolute http(s) URL
// with a host that contains "{token}".
func checkWakeURL(s string) error {
	if !strings.Contains(s, "{token}") {
		return fmt.Errorf("--wake-url %q (or %s): must contain {token}, where the wake token goes (e.g. https://starflow.example.com%s)", s, envWakeURL, wakePath)
	}
	u, err := url.Parse(strings.ReplaceAll(s, "{token}", "TOKEN"))
	if err != nil {
		return fmt.Errorf("--wake-url %q (or %s): %w", s, envWakeURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--wake-url %q (or %s): want an absolute http:// or https:// URL with a host", s, envWakeURL)
	}
	return nil
}

// serve serves the engine's handler on the bound listener and prints
// "listening on http://ADDR" on stderr.
func (l *listener) serve(eng *starflow.Engine, log *slog.Logger) error {
	if l.srv == nil {
		return nil
	}
	// The engine's metrics, and the Go runtime's and the process's.
	proc := prometheus.NewRegistry()
	proc.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hc := l.listen.handlerConfig(httpserver.Config{Backend: eng, Gatherer: prometheus.Gatherers{eng.Metrics(), proc}, Registerer: eng.Metrics(), Logger: log,
		MaxWakeBody: eng.Limits().PayloadBytes})
	if a := l.api; a != nil {
		hc.API = &httpserver.APIConfig{Engine: eng, LeaseTTL: l.leaseTTL, MetricsPublic: a.metricsPublic, Insecure: l.insecure,
			Rate: a.rate, Burst: a.burst, Version: readBuildInfo().Version}
		if a.rate == 0 {
			hc.API.Rate = -1 // off
		}
	}
	h, err := httpserver.New(hc)
	if err != nil {
		return err
	}
	if err := l.srv.Serve(h); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "listening on %s\n", l.srv.URL())
	if l.api != nil {
		fmt.Fprintf(os.Stderr, "dashboard %s/\n", l.srv.URL())
		fmt.Fprintf(os.Stderr, "API reference %s/docs (OpenAPI %s/openapi.json)\n", l.srv.URL(), l.srv.URL())
	}
	return nil
}

// shutdown stops the listener, waiting up to 5 s for requests in flight.
func (l *listener) shutdown() error {
	if l == nil || l.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.srv.Shutdown(ctx)
}

// openWarm opens the warm store named by --warm. dbPath is the SQLite
// file ("" on PostgreSQL): embedded keeps its data beside it unless
// --warm-dir says where.
func (w *warmFlags) openWarm(ctx context.Context, dbPath string) (warm.Store, error) {
	dir := w.dir
	if dir == "" {
		dir = "./starflow.warm"
		if dbPath != "" {
			dir = warmopen.EmbeddedDir(dbPath)
		}
	}
	return warmopen.Open(ctx, w.spec, warmopen.Options{DataDir: dir})
}
