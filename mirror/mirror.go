package mirror

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// Defaults of Config.
const (
	PollIntervalDefault   = 200 * time.Millisecond
	CoalesceDefault       = 10 * time.Millisecond
	RetentionDefault      = time.Hour
	PruneIntervalDefault  = time.Minute
	SweepIntervalDefault  = 30 * time.Second
	WarmRetentionDefault  = 24 * time.Hour
	StatsIntervalDefault  = time.Second
	WarningAfterDefault   = 2 * time.Second
	CriticalAfterDefault  = 30 * time.Second
	ApplyTimeoutDefault   = 5 * time.Second
	BackoffMinDefault     = 100 * time.Millisecond
	BackoffMaxDefault     = 5 * time.Second
	ReconcileWaitDefault  = 5 * time.Second
	MaxReconcilesDefault  = 16
	BatchSizeDefault      = state.OutboxDefaultLimit
	healthPingTimeout     = time.Second
	directWriteTimeoutDef = time.Second
)

// Config configures New. Durations are wall-clock; zero fields take the
// defaults above.
type Config struct {
	// Warm is the warm store. Required.
	Warm warm.Store
	// Registerer receives the collectors of Metrics (nil: not registered;
	// Adapter.Metrics still returns them).
	Registerer prometheus.Registerer
	// Logger receives drain, sweep and reconcile failures. Default: discard.
	Logger *slog.Logger

	// PollInterval is how often the drainer looks for rows when no local
	// write nudged it (writes through this Adapter nudge it at once; writes
	// of other processes are found by the poll). Default 200 ms.
	PollInterval time.Duration
	// Coalesce is how long the drainer waits after a nudge before its
	// pass, so that concurrent writes drain together (fewer passes, each
	// one transaction and four statements on PostgreSQL). Default 10 ms;
	// negative: no wait.
	Coalesce time.Duration
	// BatchSize bounds the rows of one drain pass. Default 500.
	BatchSize int
	// EventsKeep is how many recent events the warm tier keeps per run
	// (warm.Store.AppendEvents). Default warm.EventsKeepDefault (200).
	EventsKeep int
	// ApplyTimeout bounds one warm-store call of the drainer. Default 5 s.
	ApplyTimeout time.Duration
	// BackoffMin and BackoffMax bound the drainer's exponential backoff
	// after a failed pass (warm store failing). Defaults 100 ms and 5 s.
	BackoffMin, BackoffMax time.Duration
	// Retention is how long applied rows are kept before pruning. Default
	// 1 h. PruneInterval is how often the drainer prunes. Default 1 min.
	Retention, PruneInterval time.Duration

	// SweepInterval is the period of the hash-compare sweep. Default 30 s;
	// negative disables the periodic sweep.
	SweepInterval time.Duration
	// WarmRetention is how long after its end a finished run is still
	// compared by the sweep: it checks every non-terminal run and every
	// run finished within it. Default 24 h. (The warm store keeps a
	// finished run until retention removes it from the cold store: the
	// hook's RunRemovedPayload row.)
	WarmRetention time.Duration
	// ReconcileWait bounds how long an end-of-run reconciliation waits for
	// the run's rows to drain before comparing. Default 5 s.
	ReconcileWait time.Duration
	// MaxReconciles bounds concurrent end-of-run reconciliations; one more
	// is skipped (the periodic sweep covers it). Default 16.
	MaxReconciles int

	// StatsInterval is how often Run refreshes the outbox gauges. Default
	// 1 s.
	StatsInterval time.Duration
	// WarningAfter and CriticalAfter are the health thresholds on the age
	// of the oldest unapplied row. Defaults 2 s and 30 s.
	WarningAfter, CriticalAfter time.Duration
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PollInterval, PollIntervalDefault)
	if c.Coalesce == 0 {
		c.Coalesce = CoalesceDefault
	}
	def(&c.ApplyTimeout, ApplyTimeoutDefault)
	def(&c.BackoffMin, BackoffMinDefault)
	def(&c.BackoffMax, BackoffMaxDefault)
	def(&c.Retention, RetentionDefault)
	def(&c.PruneInterval, PruneIntervalDefault)
	if c.SweepInterval == 0 {
		c.SweepInterval = SweepIntervalDefault
	}
	def(&c.WarmRetention, WarmRetentionDefault)
	def(&c.ReconcileWait, ReconcileWaitDefault)
	def(&c.StatsInterval, StatsIntervalDefault)
	def(&c.WarningAfter, WarningAfterDefault)
	def(&c.CriticalAfter, CriticalAfterDefault)
	if c.BatchSize <= 0 {
		c.BatchSize = BatchSizeDefault
	}
	if c.EventsKeep <= 0 {
		c.EventsKeep = warm.EventsKeepDefault
	}
	if c.MaxReconciles <= 0 {
		c.MaxReconciles = MaxReconcilesDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	if c.Warm == nil {
		return errors.New("mirror: Config.Warm is required")
	}
	if c.BackoffMax < c.BackoffMin {
		return errors.New("mirror: Config.BackoffMax must not be below BackoffMin")
	}
	if c.CriticalAfter < c.WarningAfter {
		return errors.New("mirror: Config.CriticalAfter must not be below WarningAfter")
	}
	return nil
}

// Adapter is the mirror adapter of SPEC §8: it wraps a cold adapter.
// Every state.Adapter method goes to the cold adapter; after a write
// commits, the Adapter nudges its drainer and, when the write ended a run,
// reconciles that run's warm entry in the background (never failing or
// delaying the write). Reads never touch the warm tier.
type Adapter struct {
	state.Adapter // the cold adapter
	cfg           Config
	outbox        state.Outbox // nil: direct mode (non-durable cold adapter)
	metrics       *Metrics
	drainer       *Drainer
	sweeper       *Sweeper
	direct        *direct

	mu      sync.Mutex // guards closing and wg.Add against Close
	closing bool
	wg      sync.WaitGroup // background reconciliations
	sem     chan struct{}
	stop    chan struct{}
	once    sync.Once
}

// New wraps cold. When cold implements state.Outbox (sqlitestore,
// pgstore) it must have been opened with Hook() in its Config.Hooks; the
// Adapter then drains its outbox. Otherwise (nullstore) the Adapter writes
// to cfg.Warm directly after each write, best effort. Errors: an invalid
// Config, a metrics registration failure.
func New(cold state.Adapter, cfg Config) (*Adapter, error) {
	if cold == nil {
		return nil, errors.New("mirror: cold adapter is nil")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	met, err := NewMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Adapter{Adapter: cold, cfg: cfg, metrics: met, sem: make(chan struct{}, cfg.MaxReconciles), stop: make(chan struct{})}
	if ob, ok := cold.(state.Outbox); ok && cold.Capabilities().Durable {
		m.outbox = ob
		m.drainer = NewDrainer(ob, cfg, met)
		m.sweeper = NewSweeper(cold, ob, cfg, met)
	} else {
		m.direct = &direct{warm: cfg.Warm, log: cfg.Logger}
	}
	return m, nil
}

// Metrics returns the drift collectors (registered with Config.Registerer
// when it was set).
func (m *Adapter) Metrics() *Metrics { return m.metrics }

// Drainer returns the Adapter's drainer (nil in direct mode).
func (m *Adapter) Drainer() *Drainer { return m.drainer }

// Sweeper returns the Adapter's sweeper (nil in direct mode).
func (m *Adapter) Sweeper() *Sweeper { return m.sweeper }

// Cold returns the wrapped adapter.
func (m *Adapter) Cold() state.Adapter { return m.Adapter }

// Run runs the background services until ctx ends: the drainer (with
// pruning), the periodic sweep and the gauge refresh. It returns nil when
// ctx ends. In direct mode it only refreshes the reachability gauge.
func (m *Adapter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if m.drainer != nil {
		wg.Go(func() { m.drainer.Run(ctx) })
		if m.cfg.SweepInterval > 0 {
			wg.Go(func() { m.sweeper.Run(ctx) })
		}
	}
	wg.Go(func() {
		t := time.NewTicker(m.cfg.StatsInterval)
		defer t.Stop()
		for {
			m.Health(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	wg.Wait()
	return nil
}

// Close stops the end-of-run reconciliations in flight (waiting for them
// to return) and closes the cold adapter. Run's ctx must be cancelled
// separately.
func (m *Adapter) Close() error {
	m.once.Do(func() {
		m.mu.Lock()
		m.closing = true
		m.mu.Unlock()
		close(m.stop)
	})
	m.wg.Wait()
	return m.Adapter.Close()
}
