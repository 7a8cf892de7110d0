package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/starflow/starflow/internal/egress"
	"github.com/starflow/starflow/internal/expr"
	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// Defaults of Config.
const (
	// StepTimeoutDefault bounds one try of a step that sets no timeout (and
	// whose definition sets no defaults.timeout).
	StepTimeoutDefault = 30 * time.Second
	// RunRetryMinDefault and RunRetryMaxDefault bound the exponential
	// backoff between run attempts (SPEC §3: 1 s to 5 min, with jitter).
	RunRetryMinDefault = time.Second
	RunRetryMaxDefault = 5 * time.Minute
)

// ErrShutdown is the cancellation cause a runner sets when it stops: the
// engine then releases the run's lease (ClearLease) so another runner
// continues it at once.
var ErrShutdown = errors.New("runner shutting down")

type drainKey struct{}

// WithDrain returns a context that tells Execute to stop at the next step
// boundary once drain is closed: the step in flight finishes and is
// recorded, no further step starts, and the lease is released (outcome
// released) so another runner continues the run at once. A runner closes
// drain when it begins a graceful stop.
func WithDrain(ctx context.Context, drain <-chan struct{}) context.Context {
	return context.WithValue(ctx, drainKey{}, drain)
}

func draining(ctx context.Context) bool {
	ch, _ := ctx.Value(drainKey{}).(<-chan struct{})
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// SecretSource resolves a secret name to its value at run time. The
// default reads the process environment.
type SecretSource func(ctx context.Context, name string) (string, error)

// EnvSecrets resolves secrets from environment variables of the same name.
func EnvSecrets(_ context.Context, name string) (string, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("secret %s is not set in the environment", name)
	}
	return v, nil
}

// ProgressFunc receives step progress reports (warm tier only).
type ProgressFunc func(runID, scopePath, stepID string, fraction float64, message string)

// Config configures an Engine.
type Config struct {
	// Store is the cold tier. Required.
	Store state.Adapter
	// Registry holds the custom step types. Required (may be empty).
	Registry *Registry
	// Expr compiles and evaluates expressions. Default expr.Default().
	Expr *expr.Env
	// HTTPClient sends service_call and notify requests. Default:
	// Egress.Client() (dials through the egress policy, follows at most 5
	// redirects under its rules; no overall timeout: each try is bounded
	// by the step timeout). A client set here decides itself where it may
	// connect.
	HTTPClient *http.Client
	// Egress is the egress policy: the default HTTPClient dials through
	// it, and a wait's notify URL is checked against it before the wait
	// is entered. Default egress.New(egress.Config{}) when HTTPClient is
	// nil; with an HTTPClient set and Egress nil, no policy applies.
	Egress *egress.Policy
	// Secrets resolves the names in a definition's `secrets`. Default
	// EnvSecrets.
	Secrets SecretSource
	// Env is what expressions see as `env`: only variables the operator
	// allowed. Default empty.
	Env map[string]string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// StepTimeout is the default timeout of one try. Default
	// StepTimeoutDefault.
	StepTimeout time.Duration
	// RunRetryMin / RunRetryMax bound the backoff between run attempts.
	RunRetryMin, RunRetryMax time.Duration
	// Progress receives step progress reports. Default: dropped.
	Progress ProgressFunc
	// Sleep waits between step tries; tests may shorten it. Default: a
	// timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error

	// WakeKeys sign (the first) and verify (all) wake tokens: a fixed ring
	// (STARFLOW_WAKE_KEYS). Secrets never go to the store; it registers
	// each key's id and fingerprint (ErrWakeKeyMismatch when another
	// process registered another secret under the same id).
	WakeKeys []waketoken.Key
	// WakeKeyFile, used when WakeKeys is empty, is the key file holding
	// the ring (waketoken.ReadKeyFile): read at first use, read again when
	// a token names a key it lacks (at most once per KeyReloadInterval),
	// and created with one generated key (mode 0600) when a key is needed
	// to sign and the file does not exist. Default "".
	WakeKeyFile string
	// EphemeralWakeKey, when neither WakeKeys nor WakeKeyFile is set, makes
	// New generate one key held in memory only: its tokens verify in this
	// process until it exits (for a store that is not durable). Without
	// any of the three, every use of the ring fails with starflowtype.ErrNoWakeKeys.
	EphemeralWakeKey bool
	// WakeURL is sent to notify receivers as wake_url, "{token}" replaced
	// by the wait's token. Default "" (no wake_url).
	WakeURL string
	// WakeTokenTTL is how long the token of a wait without a timeout is
	// valid (a wait with a timeout: until it). Default WakeTokenTTLDefault.
	WakeTokenTTL time.Duration
	// WaitHook, when set, is called at the commit boundaries of entering a
	// durable wait (WaitAfterPaused, WaitAfterRegister, WaitBeforeNotify)
	// with the step instance: a test blocks in it to act at that point.
	// The process-wide faultpoints of the same names pause there too.
	WaitHook func(point string, key state.StepKey)
	// OnEnqueue, when set, is called after the engine enqueued a run (a
	// workflow_call's child) or a parked run was re-queued at once, to wake
	// local runners. Default nil.
	OnEnqueue func()
	// Now is the runner's clock (token expiry, the key file's reload
	// limit). Default faultpoint.Now: time.Now, run ahead or behind by the
	// skew a -tags chaos binary sets from STARFLOW_CHAOS_CLOCK_SKEW
	// (docs/faults.md). Deadlines stored for the database to
	// compare (keep_until durations, timers) are computed by the store on
	// the database's clock, never with Now.
	Now func() time.Time
	// Limits caps definitions (checked by ParseOptions' Parse: Apply and
	// validation), for_each items (at run time), a workflow_call child's
	// input, and bounds the items of one for_each in flight. Zero fields
	// take their defaults (workflow.Limits).
	Limits workflow.Limits
	// Metrics receives runs started and ended, run retries, step tries,
	// retries and durations (see Metrics). Default nil: none.
	Metrics *Metrics
	// Tracer makes the OpenTelemetry spans of runs and steps (trace.go).
	// Default: the global provider's tracer (otel.Tracer), a no-op unless
	// the program set one.
	Tracer trace.Tracer
	// Propagator injects the trace context into service_call and notify
	// requests. Default DefaultPropagator().
	Propagator propagation.TextMapPropagator
}

// WakeTokenTTLDefault is the validity of the token of a wait without a
// timeout.
const WakeTokenTTLDefault = 30 * 24 * time.Hour

// Commit boundaries of entering a durable wait, named for WaitHook and
// internal/faultpoint.
const (
	WaitAfterPaused   = "engine.wait.after_paused"   // OnRunPaused committed
	WaitAfterRegister = "engine.wait.after_register" // RegisterWait committed
	WaitBeforeNotify  = "engine.wait.before_notify"  // the notify request is about to be sent
)

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Registry == nil {
		c.Registry = NewRegistry()
	}
	if c.Expr == nil {
		c.Expr = expr.Default()
	}
	if c.HTTPClient == nil {
		if c.Egress == nil {
			c.Egress = egress.New(egress.Config{})
		}
		c.HTTPClient = c.Egress.Client()
	}
	if c.Secrets == nil {
		c.Secrets = EnvSecrets
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.StepTimeout == 0 {
		c.StepTimeout = StepTimeoutDefault
	}
	if c.RunRetryMin == 0 {
		c.RunRetryMin = RunRetryMinDefault
	}
	if c.RunRetryMax == 0 {
		c.RunRetryMax = RunRetryMaxDefault
	}
	if c.Progress == nil {
		c.Progress = func(string, string, string, float64, string) {}
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	if c.WakeTokenTTL == 0 {
		c.WakeTokenTTL = WakeTokenTTLDefault
	}
	if c.Now == nil {
		c.Now = faultpoint.Now
	}
	c.Limits = c.Limits.WithDefaults()
	c.Tracer, c.Propagator = traceDefaults(c.Tracer, c.Propagator)
	return c
}

// Engine executes runs. It is safe for concurrent use; one Engine serves
// every run of a process.
type Engine struct {
	cfg  Config
	mu   sync.Mutex
	defs map[string]*workflow.Definition // by definition id
	ring keyRing
}

// New returns an engine.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.WithDefaults()
	if cfg.Store == nil {
		return nil, errors.New("engine: Store is required")
	}
	e := &Engine{cfg: cfg, defs: map[string]*workflow.Definition{}}
	switch {
	case len(cfg.WakeKeys) > 0:
		e.ring = keyRing{keys: cfg.WakeKeys, fixed: true}
	case cfg.WakeKeyFile != "":
		e.ring = keyRing{file: cfg.WakeKeyFile}
	case cfg.EphemeralWakeKey:
		k, err := waketoken.Generate("ephemeral")
		if err != nil {
			return nil, err
		}
		e.ring = keyRing{keys: []waketoken.Key{k}, fixed: true}
	}
	return e, nil
}

// ParseOptions returns the options that parse definitions for this engine
// (its registered step types, expression environment and limits).
func (e *Engine) ParseOptions() workflow.ParseOptions {
	return workflow.ParseOptions{IsStepType: e.cfg.Registry.Has, Expr: e.cfg.Expr, Limits: e.cfg.Limits}
}

// Limits returns the engine's limits, defaults filled in.
func (e *Engine) Limits() workflow.Limits { return e.cfg.Limits }

// definition loads (and caches) the definition a run is pinned to.
func (e *Engine) definition(ctx context.Context, run *starflowtype.Run) (*workflow.Definition, error) {
	e.mu.Lock()
	d, ok := e.defs[run.DefinitionID]
	e.mu.Unlock()
	if ok {
		return d, nil
	}
	row, err := e.cfg.Store.GetDefinition(ctx, &state.GetDefinitionParams{ID: run.DefinitionID})
	if err != nil {
		return nil, fmt.Errorf("load definition of run %s: %w", run.ID, err)
	}
	return e.Definition(row)
}

// Definition parses a stored definition row, once per row id: rows are
// immutable (a revision's spec never changes), so the parse is cached. A
// row without an id (not stored) is parsed every time.
func (e *Engine) Definition(row *starflowtype.Definition) (*workflow.Definition, error) {
	e.mu.Lock()
	d, ok := e.defs[row.ID]
	e.mu.Unlock()
	if ok && row.ID != "" {
		return d, nil
	}
	// A stored definition runs as it was applied: the static caps were
	// checked then, with the limits of the process that applied it.
	opts := e.ParseOptions()
	opts.Limits, opts.Stored = workflow.NoLimits(), true
	d, err := workflow.Parse(row.Name+"@"+shortRevision(row.Revision), row.Spec, opts)
	if err != nil {
		return nil, fmt.Errorf("stored definition %s no longer parses: %w", row.Name, err)
	}
	if row.ID != "" {
		e.mu.Lock()
		e.defs[row.ID] = d
		e.mu.Unlock()
	}
	return d, nil
}

// Registry holds custom step types. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	funcs map[string]step.Func
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{funcs: map[string]step.Func{}} }

// builtins are the step kinds the engine implements itself, and the
// construct names reserved for the control-flow kinds.
var builtins = map[string]bool{
	"service_call": true, "context_set": true, "fail": true, "session_read": true,
	"session_write": true, "wait": true, "workflow_call": true, "if": true, "try": true,
	"repeat_until": true, "for_each": true, "parallel": true, "switch": true, "pass": true,
	"job": true,
}

// Register adds a custom step type. name must match [a-z0-9][a-z0-9_-]*
// and not be a built-in kind or a step field; registering a name twice is
// an error.
func (r *Registry) Register(name string, fn step.Func) error {
	if !workflow.ValidID(name) {
		return fmt.Errorf("step type %q: must match [a-z0-9][a-z0-9_-]*", name)
	}
	if builtins[name] || workflow.IsStepField(name) {
		return fmt.Errorf("step type %q: the name is reserved", name)
	}
	if fn == nil {
		return fmt.Errorf("step type %q: nil handler", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.funcs[name]; dup {
		return fmt.Errorf("step type %q is already registered", name)
	}
	r.funcs[name] = fn
	return nil
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.funcs[name]
	return ok
}

func (r *Registry) get(name string) step.Func {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.funcs[name]
}

// shortRevision is the first 12 hex digits of a revision (all of a
// shorter one).
func shortRevision(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
