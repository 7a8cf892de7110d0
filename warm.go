package starflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/internal/maintenance"
	"github.com/starflow/starflow/internal/runner"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// Defaults of WarmOptions (SPEC §8).
const (
	// HealthWarningDefault: the warm level is warning when the oldest
	// unapplied outbox row is older than this.
	HealthWarningDefault = 2 * time.Second
	// HealthCriticalDefault: the warm level is critical past this age.
	HealthCriticalDefault = 30 * time.Second
	// HashSweepIntervalDefault is the period of the hash-compare sweep.
	HashSweepIntervalDefault = 30 * time.Second
	// PresenceIntervalDefault is how often a runner republishes its
	// presence; PresenceTTL defaults to three times the interval.
	PresenceIntervalDefault = 5 * time.Second
)

// WarmOptions tune the warm tier of an engine with Config.Warm. Zero
// fields take the defaults named; durations must not be negative.
type WarmOptions struct {
	// DrainPoll is how often the drainer looks for unapplied outbox rows
	// when nothing signalled new ones. Default: the mirror's (200 ms).
	DrainPoll time.Duration
	// HashSweepInterval is the period of the hash-compare sweep that
	// corrects divergent or missing warm entries; it runs in the
	// maintenance leader (Config.Maintenance). Default 30 s.
	HashSweepInterval time.Duration
	// HealthWarning / HealthCritical are the ages of the oldest unapplied
	// outbox row past which Health says warning / critical. Defaults 2 s
	// and 30 s; HealthCritical must exceed HealthWarning.
	HealthWarning, HealthCritical time.Duration
	// OutboxRetention is how long applied outbox rows are kept before the
	// drainer prunes them. Default: the mirror's (1 h).
	OutboxRetention time.Duration
	// FinishedWithin: the hash sweep also checks runs finished this
	// recently. Default: the mirror's (24 h). The warm store keeps a
	// finished run until retention removes it from the cold store
	// (RetentionConfig, CollectGarbage).
	FinishedWithin time.Duration
	// PresenceInterval is how often the runner republishes its presence.
	// Default 5 s. PresenceTTL is how long a presence lives without being
	// republished. Default 3 × PresenceInterval.
	PresenceInterval, PresenceTTL time.Duration
	// EventsKeep is how many recent events per run the warm tier keeps
	// for LiveEvents. Default 200 (warm.EventsKeepDefault).
	EventsKeep int
	// NoDrain disables the drainer and the hash sweep in this process
	// (another process drains); presence and progress still go to warm.
	NoDrain bool
}

// withDefaults fills zero fields and checks the rest.
func (o WarmOptions) withDefaults() (WarmOptions, error) {
	for name, d := range map[string]time.Duration{
		"DrainPoll": o.DrainPoll, "HashSweepInterval": o.HashSweepInterval, "HealthWarning": o.HealthWarning,
		"HealthCritical": o.HealthCritical, "OutboxRetention": o.OutboxRetention, "FinishedWithin": o.FinishedWithin,
		"PresenceInterval": o.PresenceInterval, "PresenceTTL": o.PresenceTTL,
	} {
		if d < 0 {
			return o, fmt.Errorf("starflow: WarmOptions.%s is negative (%s)", name, d)
		}
	}
	if o.EventsKeep < 0 {
		return o, fmt.Errorf("starflow: WarmOptions.EventsKeep is negative (%d)", o.EventsKeep)
	}
	if o.EventsKeep == 0 {
		o.EventsKeep = warm.EventsKeepDefault
	}
	if o.HashSweepInterval == 0 {
		o.HashSweepInterval = HashSweepIntervalDefault
	}
	if o.HealthWarning == 0 {
		o.HealthWarning = HealthWarningDefault
	}
	if o.HealthCritical == 0 {
		o.HealthCritical = HealthCriticalDefault
		if o.HealthCritical <= o.HealthWarning {
			o.HealthCritical = 15 * o.HealthWarning
		}
	}
	if o.HealthCritical <= o.HealthWarning {
		return o, fmt.Errorf("starflow: WarmOptions.HealthCritical (%s) must exceed HealthWarning (%s)", o.HealthCritical, o.HealthWarning)
	}
	if o.PresenceInterval == 0 {
		o.PresenceInterval = PresenceIntervalDefault
	}
	if o.PresenceTTL == 0 {
		o.PresenceTTL = 3 * o.PresenceInterval
	}
	if o.PresenceTTL <= o.PresenceInterval {
		return o, errors.New("starflow: WarmOptions.PresenceTTL must exceed PresenceInterval")
	}
	return o, nil
}

// newWarmTier builds the engine's metrics and, with cfg.Warm, the mirror
// adapter wrapping cfg.Store: the store the engine then writes through.
func newWarmTier(cfg Config) (state.Adapter, *warmTier, error) {
	t := &warmTier{reg: prometheus.NewRegistry(), log: cfg.Logger}
	t.runsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_runs_finished_total",
		Help: "Run executions of this process's runner that ended, by outcome (succeeded, failed, cancelled, released, lease_lost, …)."}, []string{"outcome"})
	t.progressDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "starflow_progress_dropped_total",
		Help: "Step progress reports dropped because the warm tier could not keep up (progress is best effort)."})
	t.presenceErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "starflow_presence_errors_total",
		Help: "Presence publications the warm store refused or did not answer."})
	t.reg.MustRegister(t.runsFinished, t.progressDropped, t.presenceErrors)
	if cfg.Warm == nil {
		return cfg.Store, t, nil
	}
	opts, err := cfg.WarmOptions.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	t.opts, t.warm = opts, cfg.Warm
	// The hash sweep is maintenance: the maintenance leader runs it
	// (hashSweep), never the mirror's own loop.
	m, err := mirror.New(keepOpen(cfg.Store), mirror.Config{
		Warm: cfg.Warm, Registerer: t.reg, Logger: cfg.Logger,
		PollInterval: opts.DrainPoll, Retention: opts.OutboxRetention, SweepInterval: -1,
		WarmRetention: opts.FinishedWithin, EventsKeep: opts.EventsKeep, WarningAfter: opts.HealthWarning, CriticalAfter: opts.HealthCritical,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("starflow: warm tier: %w", err)
	}
	t.mirror = m
	t.progress, err = warm.NewProgressSink(warm.ProgressSinkConfig{Store: cfg.Warm,
		OnDrop: func(p *warm.Progress, err error) {
			t.progressDropped.Inc()
			if err != nil {
				t.log.Debug("progress not written to the warm tier", "run_id", p.RunID, "step_id", p.StepID, "error", err)
			}
		}})
	if err != nil {
		return nil, nil, fmt.Errorf("starflow: warm tier: %w", err)
	}
	return m, t, nil
}

// warmTier is the engine's warm-tier machinery: the mirror (drainer, hash
// sweep, drift metrics, health), the presence publisher, the progress
// writer, and the engine's Prometheus registry. Without a warm store only
// the registry and the run counters are used.
type warmTier struct {
	opts   WarmOptions
	warm   warm.Store      // nil without a warm tier
	mirror *mirror.Adapter // nil without a warm tier
	reg    *prometheus.Registry
	log    *slog.Logger

	runsFinished    *prometheus.CounterVec
	progressDropped prometheus.Counter
	presenceErrors  prometheus.Counter

	progress *warm.ProgressSink
	presence *warm.PresencePublisher

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// registerRunner adds the runner's gauges.
func (t *warmTier) registerRunner(r *runner.Runner) {
	t.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "starflow_runner_runs_held",
		Help: "Runs this process's runner holds right now (claimed, not yet finished or released)."},
		func() float64 { return float64(r.Held()) }))
}

// registerLeader adds the maintenance leadership gauge.
func (t *warmTier) registerLeader(l *maintenance.Leader) {
	t.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "starflow_maintenance_leader",
		Help: "1 while this process is the maintenance leader (it runs the lease sweep, timers, notify retries, session GC, the job sweep and the warm hash sweep), else 0."},
		func() float64 {
			if l.Leading() {
				return 1
			}
			return 0
		}))
}

// hashSweep is the hash-compare sweep as a maintenance service (every
// HashSweepInterval), or nil without a warm tier this process drains.
func (t *warmTier) hashSweep() maintenance.Service {
	if t.warm == nil || t.opts.NoDrain || t.mirror.Sweeper() == nil {
		return nil
	}
	sw, every := t.mirror.Sweeper(), t.opts.HashSweepInterval
	return maintenance.NewLoop(func(ctx context.Context) { sw.RunEvery(ctx, every) })
}

// finished counts a run execution's outcome.
func (t *warmTier) finished(o engine.Outcome) {
	t.runsFinished.WithLabelValues(string(o)).Inc()
}

// progressFunc is the engine's ProgressFunc: the warm tier's progress
// sink, which never blocks a step (a full queue drops the report).
// Progress never goes to the cold store.
func (t *warmTier) progressFunc() engine.ProgressFunc {
	if t.warm == nil {
		return nil
	}
	return t.progress.Report
}

// start runs the background services: the mirror (drainer, pruning, hash
// sweep, gauges) when this process runs a runner or maintenance and
// NoDrain is not set; the progress writer; and, with a runner, the
// presence publisher.
func (t *warmTier) start(ctx context.Context, cfg Config, r *runner.Runner) error {
	if t.warm == nil {
		return nil
	}
	ctx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if !t.opts.NoDrain && (cfg.Maintenance || !cfg.NoRunner) {
		t.wg.Go(func() { _ = t.mirror.Run(ctx) })
	}
	t.progress.Start(ctx)
	if cfg.NoRunner {
		return nil
	}
	var warned atomic.Bool
	p, err := warm.NewPresencePublisher(warm.PresencePublisherConfig{
		Store: t.warm, Interval: t.opts.PresenceInterval, TTL: t.opts.PresenceTTL,
		Info: func() warm.Presence {
			return warm.Presence{RunnerID: r.ID(), Pools: r.Pools(), RunsHeld: r.Held()}
		},
		OnError: func(err error) {
			// Logged once per process: the warm tier's health says the rest.
			t.presenceErrors.Inc()
			if !warned.Swap(true) {
				t.log.Warn("presence not published to the warm tier; retrying every interval", "error", err)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("starflow: warm tier: %w", err)
	}
	t.presence = p
	p.Start(ctx)
	return nil
}

// stop stops the background services (the presence is withdrawn) and
// waits for them and for the end-of-run reconciliations in flight. Safe to
// call twice, and before start.
func (t *warmTier) stop() error {
	if t.warm == nil {
		return nil
	}
	var err error
	t.once.Do(func() {
		if t.presence != nil {
			t.presence.Stop()
		}
		if t.cancel != nil {
			t.cancel()
		}
		t.progress.Stop()
		t.wg.Wait()
		err = t.mirror.Close() // the cold store stays open (keepOpen)
	})
	return err
}

// keepOpen wraps the caller's cold store for the mirror, whose Close
// would close it: the caller that opened it closes it. It keeps the
// store's outbox (state.Outbox) visible.
func keepOpen(s state.Adapter) state.Adapter {
	if ob, ok := s.(state.Outbox); ok {
		return &openOutboxStore{Adapter: s, Outbox: ob}
	}
	return &openStore{Adapter: s}
}

type openStore struct{ state.Adapter }

func (*openStore) Close() error { return nil }

type openOutboxStore struct {
	state.Adapter
	state.Outbox
}

func (*openOutboxStore) Close() error { return nil }

// Metrics is the engine's Prometheus registry: the warm tier's drift
// signals (starflow_outbox_pending{age}, starflow_outbox_oldest_age_seconds,
// starflow_warm_corrections_total{reason}, … see package mirror) when
// Config.Warm is set, the runner's starflow_runs_finished_total{outcome}
// and starflow_runner_runs_held, starflow_maintenance_leader, and — from
// the maintenance leader only — the watchdog's starflow_runs_stuck{reason}
// and starflow_runs_stuck_age_seconds{reason} (see Engine.Stuck), and the
// metrics of metrics.go: runs started and ended, run and step retries,
// step tries and durations, claims, lease refreshes and losses, sweeps,
// wakes, the leader's queue depths and the store's group commits
// (docs/operations.md, "Metrics", lists them all). Serve it with
// promhttp.HandlerFor, or register more collectors on it.
func (e *Engine) Metrics() *prometheus.Registry { return e.tier.reg }
