package starflow

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/internal/expr"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/maintenance"
	"github.com/starflow/starflow/internal/runner"
	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/workflow"
)

// Config configures an Engine. Only Store is required.
type Config struct {
	// Store is the cold tier (e.g. sqlitestore.Open), already migrated.
	Store state.Adapter
	// Workspace is the workspace_id of definitions and runs. Default
	// "default".
	Workspace string
	// Env is the env column of runs. Default "prod".
	Env string

	// RunnerID is the identity written to leased_by. Default host:pid:random.
	RunnerID string
	// AllWorkspaces makes the in-process runner claim runs of every
	// workspace, not only Config.Workspace's (a server's runner, whose
	// API enqueues into the workspaces of its callers' keys).
	AllWorkspaces bool
	// Pools are the runner pools the in-process runner serves.
	Pools []string
	// OnlyRun limits the in-process runner to one run (by id) and the
	// runs descending from it (child runs of workflow_call, any depth);
	// "" = any.
	OnlyRun string
	// LeaseTTL (default 30 s), Heartbeat (default 10 s, or LeaseTTL/3
	// when 10 s is more than half of LeaseTTL), PollInterval (default
	// 200 ms) and Concurrency (default 8) tune the runner. Heartbeat must
	// be at most LeaseTTL/2: the runner stops a run 0.9 × LeaseTTL after
	// it sent its last successful renewal, and a failed renewal needs
	// time to be retried before then. New refuses a longer one.
	LeaseTTL, Heartbeat, PollInterval time.Duration
	Concurrency                       int

	// NoRunner disables the in-process runner (a `starflow server` that
	// only does maintenance and serves the API).
	NoRunner bool
	// Maintenance makes this engine a candidate for running maintenance:
	// the lease sweep (one pass when a term begins — the boot
	// reconciliation — then one every SweepInterval, default 30 s), the
	// wait passes (WaitMaintenance) and, with a warm tier, its hash sweep.
	// Every engine with Maintenance on one store campaigns, and one at a
	// time leads (state.Elector: a PostgreSQL advisory lock, a lease row
	// in the SQLite file); when the leader dies or stops another takes
	// over within LeaderTTL. Over a store that elects no leader the
	// engine runs maintenance unconditionally.
	Maintenance   bool
	SweepInterval time.Duration
	// WaitMaintenance tunes the wait passes Maintenance also runs: the
	// durable timer poller, the notify retrier and the session-variable GC.
	WaitMaintenance WaitMaintenanceConfig
	// LeaderTTL bounds how long a dead maintenance leader keeps the
	// leadership (see state.CampaignParams.TTL); candidates retry and the
	// leader renews every LeaderTTL/5. Default 10 s; at least 500 ms.
	LeaderTTL time.Duration
	// OnMaintenanceLeader, when set, is called with true when this engine
	// becomes the maintenance leader and false when it stops being one.
	// Default nil. The gauge starflow_maintenance_leader says the same.
	OnMaintenanceLeader func(leading bool)
	// StuckInterval is how often the maintenance leader counts the
	// unfinished runs by why-stuck reason for the metrics
	// starflow_runs_stuck{reason} and starflow_runs_stuck_age_seconds
	// (one aggregate statement over the unfinished runs). Default 15 s.
	StuckInterval time.Duration
	// ScheduleInterval is how often the maintenance leader's scheduler
	// looks for due schedule ticks (definitions' schedules; database
	// clock): a tick fires at most about this long after it fell due.
	// Default 1 s.
	ScheduleInterval time.Duration
	// Retention tunes the maintenance leader's retention pass (retention.go).
	Retention RetentionConfig

	// StepTimeout is the default timeout of one step try. Default 30 s.
	StepTimeout time.Duration
	// RunRetryMin / RunRetryMax bound the backoff between run attempts.
	// Default 1 s / 5 min.
	RunRetryMin, RunRetryMax time.Duration
	// Secrets resolves secret names. Default: environment variables.
	Secrets func(ctx context.Context, name string) (string, error)
	// AllowEnv names the environment variables expressions may read as
	// `env.NAME`. Default none.
	AllowEnv []string
	// EnvLookup reads AllowEnv variables. Default os.LookupEnv.
	EnvLookup func(name string) (string, bool)
	// HTTPClient sends service_call and notify requests. Default: a
	// client that dials through Egress and follows at most 5 redirects,
	// never sending Referer, and sending none of the definition's headers
	// to another origin (scheme, host, port) nor re-sending a body there.
	// A client set here is used as it is: Egress does not apply to it.
	HTTPClient *http.Client
	// Egress is the egress policy of the default HTTPClient (see
	// EgressPolicy). The zero value refuses link-local and cloud-metadata
	// addresses and allows loopback, private and public ones.
	Egress EgressPolicy
	// ExprLimits bound expression evaluation (cost, time).
	ExprLimits expr.Limits
	// Limits caps definitions, run inputs, wake and signal payloads and
	// for_each loops (see Limits). Zero fields take their defaults.
	Limits Limits
	// Logger. Default slog.Default().
	Logger *slog.Logger

	// Warm is the warm tier (SPEC §8): the live-state store read by
	// LiveRun, LiveEvents, LiveProgress and LiveRunners, never by run detail, history
	// or resume. nil = no warm tier. With one, Start also runs the outbox
	// drainer (with a runner or Maintenance), the hash sweep (with
	// Maintenance) and the presence publisher (with a runner), and step
	// progress goes to it.
	// The cold store must then mirror its writes to mirror_outbox (see
	// WarmOptions and the mirror package). The engine does not close it.
	Warm warm.Store
	// WarmOptions tune the warm tier; zero fields take their defaults.
	WarmOptions WarmOptions
	// WakeKeys is the wake-token key ring in the STARFLOW_WAKE_KEYS format
	// ("kid:base64secret,kid2:base64secret"; the first signs, all verify).
	// Default "": the keys of WakeKeyFile.
	WakeKeys string
	// WakeKeyFile is the file holding the wake-token key ring when WakeKeys
	// is empty: one kid:base64secret per line, the first signs; mode 0600
	// (a file others can read is tightened with a warning, or refused when
	// it cannot be). Default: the store's key file (PATH.wakekeys beside a
	// SQLite database), created with one generated key on first use. A
	// PostgreSQL store has none: without WakeKeys or WakeKeyFile, Start of
	// a runner or maintenance fails with ErrNoWakeKeys, since processes on
	// many machines must share one ring. A store that is not durable
	// (nullstore) gets one key held in memory. Stores never hold secrets,
	// only each key's id and fingerprint.
	WakeKeyFile string
	// WakeURL is what notify receivers get as wake_url, "{token}" replaced
	// by the token (e.g. "https://starflow.example.com/wake/{token}").
	// Default "".
	WakeURL string
	// WaitHook is for tests: called at each commit boundary of entering a
	// durable wait (engine.wait.after_paused, engine.wait.after_register,
	// engine.wait.before_notify) with the run id, scope path and step id;
	// blocking in it pauses the run there. Default nil.
	WaitHook func(point, runID, scopePath, stepID string)

	// TracerProvider makes the OpenTelemetry spans of enqueues, run
	// executions and step instances (docs/operations.md, "Traces").
	// Default otel.GetTracerProvider(): a no-op unless the program set a
	// global provider, so tracing is off and no trace is stored. The
	// engine does not shut it down.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into service_call and notify
	// requests and reads it in ExtractTrace. Default: the global one
	// (otel.SetTextMapPropagator) when set, else W3C trace context and
	// baggage.
	Propagator propagation.TextMapPropagator
}

// EnqueueOptions are the optional settings of one enqueue.
type EnqueueOptions struct {
	// ID is the new run's id (a UUID); "" = generated. With an
	// IdempotencyKey that was already used, the first run is returned and
	// its id differs.
	ID string
	// Revision pins a stored revision; "" = the newest applied one.
	Revision string
	// IdempotencyKey is stored on the run.
	IdempotencyKey string
	// RecoveryMode overrides the definition's.
	RecoveryMode starflowtype.RecoveryMode
	// Pool overrides the definition's runner_pool.
	Pool string
	// Priority: higher is claimed first. Default 0.
	Priority int
	// Delay makes the run available only after this long.
	Delay time.Duration
	// MaxAttempts overrides the definition's max_attempts.
	MaxAttempts int
	// Trigger records what started the run. Default api.
	Trigger starflowtype.TriggerType
	// CompareRequest makes a repeat of IdempotencyKey with another
	// request an ErrConflict instead of the first run (Stripe's rule; the
	// HTTP API and the CLI set it). The request is the workflow name, the
	// input (compacted), the revision as given, and the options that
	// differ from the definition's defaults — sending a default
	// explicitly is the same request as leaving it out. Its SHA-256 is
	// stored with the receipt (state.EnqueueRunParams.RequestHash).
	// Default false: a repeat returns the first run whatever it asked.
	CompareRequest bool
}

// Engine embeds Starflow in a Go program.
type Engine struct {
	cfg      Config
	store    state.Adapter
	registry *engine.Registry
	engine   *engine.Engine
	runner   *runner.Runner
	sweep    *maintenance.LeaseSweep // for Sweep; the leader runs its own
	leader   *maintenance.Leader     // started with Maintenance
	stuck    *stuckMetrics           // the leader's stuck tally, exported
	metrics  *metrics                // runs, steps, claims, leases, wakes, sweeps, queues, commits (metrics.go)
	warm     warm.Store
	tier     *warmTier // nil without a warm store
	sweeps   sweepLog  // what this process's sweeps did (Sweeps)

	listenCancel context.CancelFunc
	listenDone   chan struct{}

	mu      sync.Mutex
	started bool
	changed chan struct{} // closed and replaced whenever a run execution ends
	// quit is closed when Stop begins (ending Start's watch of its
	// context); stopped when it has finished.
	quit, stopped chan struct{}
}

// New returns an engine on cfg.Store. It does not start the runner.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("starflow: Config.Store is required")
	}
	if cfg.Workspace == "" {
		cfg.Workspace = state.DefaultWorkspace
	}
	if cfg.Env == "" {
		cfg.Env = state.DefaultEnv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RunnerID == "" {
		cfg.RunnerID = runner.NewID()
	}
	// Every line says which process wrote it (its runner's identity, also
	// when it runs no runner: maintenance, the API).
	cfg.Logger = cfg.Logger.With("runner_id", cfg.RunnerID)
	if rc := (runner.Config{LeaseTTL: cfg.LeaseTTL, Heartbeat: cfg.Heartbeat}).WithDefaults(); rc.LeaseTTL > 0 && rc.Heartbeat > 0 {
		if err := runner.CheckHeartbeat(rc.LeaseTTL, rc.Heartbeat); err != nil {
			return nil, fmt.Errorf("starflow: Config.Heartbeat / Config.LeaseTTL: %w", err)
		}
	}
	env := map[string]string{}
	lookup := cfg.EnvLookup
	if lookup == nil {
		lookup = osLookupEnv
	}
	for _, name := range cfg.AllowEnv {
		if v, ok := lookup(name); ok {
			env[name] = v
		}
	}
	exprEnv := expr.Default()
	if cfg.ExprLimits != (expr.Limits{}) {
		var err error
		if exprEnv, err = expr.NewEnv(cfg.ExprLimits); err != nil {
			return nil, err
		}
	}
	store, tier, err := newWarmTier(cfg)
	if err != nil {
		return nil, err
	}
	reg := engine.NewRegistry()
	var keys []waketoken.Key
	if cfg.WakeKeys != "" {
		var err error
		if keys, err = waketoken.ParseKeys(cfg.WakeKeys); err != nil {
			return nil, fmt.Errorf("starflow: Config.WakeKeys: %w", err)
		}
	}
	keyFile, ephemeral := "", false
	if len(keys) == 0 {
		caps := cfg.Store.Capabilities()
		keyFile, ephemeral = cmp.Or(cfg.WakeKeyFile, caps.WakeKeyFile), !caps.Durable
	}
	var hook func(string, state.StepKey)
	if h := cfg.WaitHook; h != nil {
		hook = func(point string, k state.StepKey) { h(point, k.RunID, k.ScopePath, k.StepID) }
	}
	e := &Engine{cfg: cfg, store: store, warm: cfg.Warm, tier: tier, registry: reg, changed: make(chan struct{}), metrics: newMetrics(tier.reg, cfg.Store)}
	eng, err := engine.New(engine.Config{
		Progress: tier.progressFunc(),
		Store:    store, Registry: reg, Expr: exprEnv, HTTPClient: cfg.HTTPClient, Egress: cfg.egressPolicy(),
		Secrets: cfg.Secrets, Env: env, Logger: cfg.Logger, StepTimeout: cfg.StepTimeout,
		RunRetryMin: cfg.RunRetryMin, RunRetryMax: cfg.RunRetryMax,
		WakeKeys: keys, WakeKeyFile: keyFile, EphemeralWakeKey: ephemeral, WakeURL: cfg.WakeURL, WaitHook: hook, Limits: cfg.Limits,
		OnEnqueue: func() { e.runner.Notify() }, Metrics: e.metrics.engine,
		Tracer: cfg.tracer(), Propagator: cfg.Propagator,
	})
	if err != nil {
		return nil, err
	}
	e.engine = eng
	e.runner, err = runner.New(store, eng, runner.Config{
		ID: cfg.RunnerID, Pools: cfg.Pools, Workspace: claimWorkspace(cfg), OnlyRun: cfg.OnlyRun, LeaseTTL: cfg.LeaseTTL,
		Heartbeat: cfg.Heartbeat, PollInterval: cfg.PollInterval, Concurrency: cfg.Concurrency,
		Logger: cfg.Logger, OnFinish: func(_ string, o engine.Outcome) { tier.finished(o); e.broadcast() }, Metrics: e.metrics.runner,
	})
	if err != nil {
		return nil, err
	}
	e.sweep = e.newLeaseSweep()
	tier.registerRunner(e.runner)
	var elector state.Elector
	if el, ok := cfg.Store.(state.Elector); ok { // the cold store, not the mirror wrapping it
		elector = el
	}
	e.leader, err = maintenance.NewLeader(elector, maintenance.LeaderConfig{
		Owner: e.runner.ID(), TTL: cfg.LeaderTTL, Services: e.maintenanceServices,
		OnChange: cfg.OnMaintenanceLeader, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("starflow: Config.LeaderTTL: %w", err)
	}
	tier.registerLeader(e.leader)
	e.stuck = newStuckMetrics()
	tier.reg.MustRegister(e.stuck)
	return e, nil
}

// LoadWakeKeys makes sure the engine can sign wake tokens: the key ring
// is loaded (the key file created with one generated key when it does not
// exist) and each key's id and fingerprint registered in the store. Start
// calls it for a runner or maintenance; call it yourself to find a
// missing ring before doing anything else. Errors:
// starflowtype.ErrNoWakeKeys (a PostgreSQL store and no WakeKeys or
// WakeKeyFile), starflowtype.ErrWakeKeyMismatch (another process
// registered another secret under one of the ring's key ids), a key file
// that cannot be read or is refused.
func (e *Engine) LoadWakeKeys(ctx context.Context) error {
	if err := e.engine.LoadWakeKeys(ctx); err != nil {
		return fmt.Errorf("starflow: %w", err)
	}
	return nil
}

// newLeaseSweep is a lease sweep of the engine's store whose passes the
// engine records (Sweeps).
func (e *Engine) newLeaseSweep() *maintenance.LeaseSweep {
	return maintenance.NewLeaseSweep(e.store, maintenance.SweepConfig{
		Interval: e.cfg.SweepInterval, RetryMin: e.cfg.RunRetryMin, RetryMax: e.cfg.RunRetryMax,
		Logger: e.cfg.Logger, OnRequeue: e.runner.Notify, OnPass: e.sweepPassed,
	})
}

// maintenanceServices builds the services of one maintenance term: the
// lease sweep, the timer poller, the notify retrier, the session-variable
// GC, the stuck watch (the why-stuck metrics), the job sweep (remote
// workers' expired leases), the scheduler (schedules' ticks), the queue
// watch (queue depth metrics), the retention pass (Config.Retention) and,
// with a warm tier that this process drains, the hash sweep.
func (e *Engine) maintenanceServices() ([]maintenance.Service, error) {
	sweep := e.newLeaseSweep()
	w, err := e.newWaitMaintenance()
	if err != nil {
		return nil, err
	}
	stuck := maintenance.NewStuckWatch(e.store, maintenance.StuckWatchConfig{
		Interval: e.cfg.StuckInterval, OnPass: e.stuck.set, Logger: e.cfg.Logger,
	})
	jobs := maintenance.NewJobSweep(e.store, maintenance.JobSweepConfig{Logger: e.cfg.Logger, OnRequeue: e.runner.Notify})
	sched, err := e.newScheduler()
	if err != nil {
		return nil, err
	}
	queue := maintenance.NewQueueWatch(e.store, maintenance.QueueWatchConfig{Interval: e.cfg.StuckInterval, OnPass: e.metrics.queue.set, Logger: e.cfg.Logger})
	services := append([]maintenance.Service{sweep, w.timers, w.notify, w.gc, stuck, jobs, sched, queue}, e.retentionServices()...)
	if hs := e.tier.hashSweep(); hs != nil {
		services = append(services, hs)
	}
	return services, nil
}

// Listener is implemented by stores that can push "new work" signals
// across processes (PostgreSQL LISTEN/NOTIFY). Listen blocks until ctx is
// done, calling onNotify for every signal.
type Listener interface {
	Listen(ctx context.Context, onNotify func()) error
}

// Store returns the engine's cold store.
func (e *Engine) Store() state.Adapter { return e.store }

// RunnerID is the identity of the in-process runner.
func (e *Engine) RunnerID() string { return e.runner.ID() }

// RegisterStep adds a custom step type: a step written `NAME: <input>` in
// a definition runs fn with the rendered input. Register before applying
// or running definitions that use it. The name must match
// [a-z0-9][a-z0-9_-]* and not be a built-in kind.
func (e *Engine) RegisterStep(name string, fn step.Func) error {
	return e.registry.Register(name, fn)
}

// Parse parses and validates a definition (YAML or JSON) with this
// engine's step types. The error lists every problem as
// "file:line:column: message".
func (e *Engine) Parse(filename string, src []byte) (*workflow.Definition, error) {
	def, err := workflow.Parse(filename, src, e.engine.ParseOptions())
	if err != nil {
		return nil, err
	}
	if err := Supported(filename, def); err != nil {
		return nil, err
	}
	return def, nil
}

// Supported refuses what the definition format accepts but this engine
// cannot execute yet (the control-flow constructs not executed yet), with
// the position of each such step, so a run never fails halfway on it.
// Parse and Apply call it; `starflow validate` too.
func Supported(filename string, def *workflow.Definition) error {
	var errs workflow.Errors
	def.Walk(func(s *workflow.Step, _ []*workflow.Step) bool {
		if notExecuted[s.Kind()] {
			errs = append(errs, &workflow.Error{File: filename, Line: s.Pos.Line, Column: s.Pos.Column,
				Msg: fmt.Sprintf("step %q: the %s construct is not executed by this version of the engine yet", s.ID, s.Kind())})
			return false
		}
		return true
	})
	if len(errs) > 0 {
		return &errs
	}
	return nil
}

// notExecuted are the step kinds the definition format accepts but the
// engine does not execute yet: none today; a kind added to the format
// before the engine runs it goes here.
var notExecuted = map[string]bool{}

// Apply validates a definition and stores it by revision (idempotent).
func (e *Engine) Apply(ctx context.Context, filename string, src []byte) (*starflowtype.Definition, error) {
	def, err := e.Parse(filename, src)
	if err != nil {
		return nil, err
	}
	sc := e.ScopeOf(ctx)
	return e.store.PutDefinition(ctx, &state.PutDefinitionParams{
		WorkspaceID: sc.Workspace, Name: def.Name, Revision: def.Revision(), Spec: def.Canonical(), Source: string(src),
		Env: sc.Env, Schedules: scheduleSpecs(def),
	})
}

// Enqueue inserts a queued run of the named workflow (its newest applied
// revision unless opts.Revision is set). input is any value that encodes
// as a JSON object, or a json.RawMessage; it is checked against the
// definition's input_schema. Errors: ErrNotFound (no such workflow), a
// *workflow.LimitError (the input is over Config.Limits.InputBytes), an
// input error naming what is wrong.
func (e *Engine) Enqueue(ctx context.Context, name string, input any, opts *EnqueueOptions) (*starflowtype.Run, error) {
	p, err := e.EnqueueParams(ctx, name, input, opts)
	if err != nil {
		return nil, err
	}
	run, err := e.store.EnqueueRun(ctx, p)
	if err != nil {
		return nil, err
	}
	e.runner.Notify()
	return run, nil
}

// EnqueueParams resolves and checks an enqueue exactly as Enqueue does —
// the definition's revision, the input against input_schema, the recovery
// mode, pool and attempts — without writing anything. Pass the result to a
// store's transactional enqueue (pgstore.Store.EnqueueTx) to create the
// run inside your own transaction.
func (e *Engine) EnqueueParams(ctx context.Context, name string, input any, opts *EnqueueOptions) (*state.EnqueueRunParams, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return e.enqueueParams(ctx, name, input, opts)
}

// enqueueParams is EnqueueParams without the bounds of the caller's
// options: the engine's own enqueues (a schedule's tick, a webhook
// delivery) make idempotency keys longer than a caller may give.
func (e *Engine) enqueueParams(ctx context.Context, name string, input any, opts *EnqueueOptions) (*state.EnqueueRunParams, error) {
	if opts == nil {
		opts = &EnqueueOptions{}
	}
	row, err := e.store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: e.workspace(ctx), Name: name, Revision: opts.Revision})
	if err != nil {
		return nil, e.definitionMissing(ctx, name, opts.Revision, err)
	}
	def, err := e.engine.Definition(row)
	if err != nil {
		return nil, fmt.Errorf("stored workflow %q: %w", name, err)
	}
	raw, err := encodeInput(input)
	if err != nil {
		return nil, starflowtype.Invalid(err)
	}
	if err := e.engine.Limits().CheckInput(len(raw)); err != nil {
		return nil, err
	}
	decoded, err := jsonvalue.Decode(raw)
	if errors.Is(err, jsonvalue.ErrNonFinite) {
		return nil, starflowtype.Invalid(fmt.Errorf("input: %w", err))
	}
	if err != nil {
		return nil, starflowtype.Invalid(fmt.Errorf("input is not JSON: %w", err))
	}
	if _, ok := decoded.(map[string]any); !ok {
		return nil, starflowtype.Invalid(fmt.Errorf("input must be a JSON object, not %s", jsonKind(decoded)))
	}
	// The input_schema's defaults are filled in before the check, and the
	// run keeps the input with them; the request hash stays that of the
	// input as given.
	stored := raw
	decoded, applied, err := def.ApplyDefaults(decoded)
	if err != nil {
		return nil, starflowtype.Invalid(err)
	}
	if err := def.ValidateInput(decoded); err != nil {
		return nil, starflowtype.Invalid(err)
	}
	if applied {
		if stored, err = jsonvalue.Encode(decoded); err != nil {
			return nil, starflowtype.Invalid(fmt.Errorf("input with its defaults: %w", err))
		}
		if err := e.engine.Limits().CheckInput(len(stored)); err != nil {
			return nil, err
		}
	}
	mode := opts.RecoveryMode
	if mode == "" {
		mode = starflowtype.RecoveryMode(def.RecoveryMode)
	}
	if mode != "" && !mode.Valid() {
		return nil, starflowtype.Invalid(fmt.Errorf("recovery mode %q: must be replay, resume or manual", mode))
	}
	pool := opts.Pool
	if pool == "" {
		pool = def.RunnerPool
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = def.MaxAttempts
	}
	sc := e.ScopeOf(ctx)
	p := &state.EnqueueRunParams{
		ID: opts.ID, WorkspaceID: sc.Workspace, Env: sc.Env, DefinitionID: row.ID, WorkflowName: row.Name,
		WorkflowRevision: row.Revision, RunnerPool: pool, Priority: opts.Priority, MaxAttempts: maxAttempts,
		Delay: opts.Delay, RecoveryMode: mode, TriggerType: opts.Trigger, IdempotencyKey: opts.IdempotencyKey,
		RequestHash: requestHash(name, raw, opts, def), Input: stored,
	}
	e.engine.TraceEnqueue(ctx, p).End() // the run's trace (trace.go)
	return p, nil
}

// definitionMissing words the failure err of reading workflow name's
// definition (at revision, when given) for an enqueue: a workflow that
// was never applied, or one that exists without that revision.
func (e *Engine) definitionMissing(ctx context.Context, name, revision string, err error) error {
	if !errors.Is(err, starflowtype.ErrNotFound) {
		return fmt.Errorf("workflow %q: %w", name, err)
	}
	if revision != "" {
		cur, cerr := e.store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: e.workspace(ctx), Name: name})
		if cerr == nil {
			return starflowtype.NotFound(fmt.Errorf("workflow %q has no revision %q (a revision is the 64 hex digits of a stored definition of it; its current one is %s)",
				name, revision, cur.Revision))
		}
	}
	return starflowtype.NotFound(fmt.Errorf("workflow %q is not applied", name))
}

// requestHash is the RequestHash of an enqueue with opts.CompareRequest
// and an idempotency key, "" otherwise (see CompareRequest).
func requestHash(name string, input json.RawMessage, opts *EnqueueOptions, def *workflow.Definition) string {
	if !opts.CompareRequest || opts.IdempotencyKey == "" {
		return ""
	}
	unlessDefault := func(given, dflt string) string {
		if given == dflt {
			return ""
		}
		return given
	}
	var compact bytes.Buffer
	if json.Compact(&compact, input) != nil {
		compact.Reset()
		compact.Write(input)
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts == cmp.Or(def.MaxAttempts, state.MaxAttemptsDefault) {
		maxAttempts = 0
	}
	raw, _ := json.Marshal([]any{name, compact.String(), opts.Revision,
		unlessDefault(string(opts.RecoveryMode), cmp.Or(def.RecoveryMode, string(starflowtype.RecoveryReplay))), unlessDefault(opts.Pool, def.RunnerPool),
		opts.Priority, opts.Delay.Nanoseconds(), maxAttempts})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// Start starts the in-process runner (unless NoRunner) and, with
// Maintenance, the campaign for the maintenance leadership: once this
// engine leads, the lease sweep, the wait passes (timer poller, notify
// retrier, session-variable GC) and the warm tier's hash sweep run here,
// their first passes at once. It returns at once. When the store is a Listener, new work signalled by other
// processes wakes the runner without waiting for a poll.
//
// The engine runs until Stop, or until ctx ends: then it stops as Stop
// does with a grace period already over — it stops claiming, the runs in
// flight are cancelled and release their leases at once, maintenance and
// the warm tier stop — so a cancelled ctx leaves no loop behind. For a
// graceful stop (runs finishing their steps within a grace period), call
// Stop with that period and give Start a context that outlives it (e.g.
// context.WithoutCancel of a signal context).
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("starflow: engine already started")
	}
	e.started = true
	e.quit = make(chan struct{})
	quit := e.quit
	e.mu.Unlock()
	if err := e.start(ctx); err != nil {
		return err
	}
	if done := ctx.Done(); done != nil {
		go func() {
			select {
			case <-quit:
			case <-done:
				e.cfg.Logger.Info("starflow: Start's context ended; stopping the engine without a grace period", "cause", context.Cause(ctx))
				over, cancel := context.WithCancel(context.WithoutCancel(ctx))
				cancel() // no grace: the runs in flight release their leases at once
				if err := e.Stop(over); err != nil {
					e.cfg.Logger.Warn("starflow: stopping the engine after Start's context ended", "error", err)
				}
			}
		}()
	}
	return nil
}

// start is Start's work once the engine is marked started.
func (e *Engine) start(ctx context.Context) error {
	if !e.cfg.NoRunner || e.cfg.Maintenance {
		// Runners sign tokens, maintenance re-sends notify requests: a
		// missing or mismatched key is an error now, not at the first wait.
		if err := e.LoadWakeKeys(ctx); err != nil {
			return err
		}
	}
	if e.cfg.Maintenance {
		if err := e.leader.Start(ctx); err != nil {
			return err
		}
	}
	if err := e.tier.start(ctx, e.cfg, e.runner); err != nil {
		return err
	}
	if e.cfg.NoRunner {
		return nil
	}
	// The cold store, not the mirror wrapping it, is the one that listens.
	if l, ok := e.cfg.Store.(Listener); ok {
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		e.listenCancel, e.listenDone = cancel, make(chan struct{})
		go func() {
			defer close(e.listenDone)
			if err := l.Listen(lctx, e.runner.Notify); err != nil && lctx.Err() == nil {
				e.cfg.Logger.Warn("listening for new work failed; polling only", "error", err)
			}
		}()
	}
	return e.runner.Start(ctx)
}

// Stop stops claiming, lets runs in flight finish until ctx is done, then
// releases the leases of those still running so another runner continues
// them at once; it also stops maintenance and releases its leadership, so
// another engine takes it over at once. Safe to call twice, and
// concurrently: a Stop called while another is stopping the engine (or
// once Start's context ended, see Start) waits until the engine has
// stopped and returns nil.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		return e.stop(ctx)
	}
	if e.stopped != nil {
		stopped := e.stopped
		e.mu.Unlock()
		<-stopped
		return nil
	}
	e.stopped = make(chan struct{})
	stopped := e.stopped
	close(e.quit)
	e.mu.Unlock()
	defer close(stopped)
	return e.stop(ctx)
}

// stop is Stop's work, done once.
func (e *Engine) stop(ctx context.Context) error {
	err := e.runner.Stop(ctx)
	if e.listenCancel != nil {
		e.listenCancel()
		<-e.listenDone
		e.listenCancel = nil
	}
	// Maintenance has no runs to finish: it stops at once (its passes in
	// progress are cancelled), whatever is left of the grace period. The
	// warm tier stops last: the runs' final writes are drained (or left
	// in the outbox) first.
	err = errors.Join(err, e.leader.Stop(context.WithoutCancel(ctx)))
	return errors.Join(err, e.tier.stop())
}

// Stopping is closed when Stop begins: from then on runs in flight stop at
// their next step boundary and release their leases. Custom steps and
// embedders may watch it to wind down.
func (e *Engine) Stopping() <-chan struct{} { return e.runner.Stopping() }

// Sweep runs one lease-sweep pass now and returns the runs it interrupted
// (re-queued, held for an operator, or dead-lettered).
func (e *Engine) Sweep(ctx context.Context) ([]*starflowtype.Run, error) {
	return e.sweep.Pass(ctx)
}

// WaitRun waits until the run stops moving on its own: it ended
// (succeeded, failed, cancelled), or it is interrupted and waits for an
// operator (manual recovery). It returns the run as then stored.
func (e *Engine) WaitRun(ctx context.Context, runID string) (*starflowtype.Run, error) {
	const poll = 250 * time.Millisecond
	for {
		e.mu.Lock()
		ch := e.changed
		e.mu.Unlock()
		run, err := e.store.GetRun(ctx, &state.GetRunParams{ID: runID})
		if err != nil {
			return nil, err
		}
		if Settled(run) {
			return run, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return run, ctx.Err()
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// Settled reports whether a run will not move again without an operator or
// an external wake: a terminal status, or interrupted and neither queued
// nor claimed (a runner that just claimed a retry has not written
// OnRunStart yet, so the status is still interrupted).
func Settled(run *starflowtype.Run) bool {
	return run.Status.Terminal() ||
		(run.Status == starflowtype.RunInterrupted && run.ClaimState != starflowtype.ClaimQueued &&
			run.ClaimState != starflowtype.ClaimClaimed && run.ClaimState != starflowtype.ClaimRunning)
}

func (e *Engine) broadcast() {
	e.mu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

func encodeInput(input any) (json.RawMessage, error) {
	switch x := input.(type) {
	case nil:
		return json.RawMessage(`{}`), nil
	case json.RawMessage:
		if len(x) == 0 {
			return json.RawMessage(`{}`), nil
		}
		return x, nil
	case []byte:
		return json.RawMessage(x), nil
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return nil, fmt.Errorf("input does not encode as JSON: %w", err)
		}
		if string(b) == "null" { // a typed nil (e.g. map[string]any(nil))
			return json.RawMessage(`{}`), nil
		}
		return b, nil
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// claimWorkspace is the workspace the runner claims from ("" = any).
func claimWorkspace(cfg Config) string {
	if cfg.AllWorkspaces {
		return ""
	}
	return cfg.Workspace
}
