package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/starflow/starflow/internal/backoff"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Sweep defaults (SPEC §5 and §3).
const (
	SweepIntervalDefault = 30 * time.Second
	RetryMinDefault      = time.Second
	RetryMaxDefault      = 5 * time.Minute
)

// SweepConfig configures a LeaseSweep.
type SweepConfig struct {
	// Interval between passes. Default 30 s. One pass also runs at Start
	// (the boot reconciliation of seed 000).
	Interval time.Duration
	// RetryMin and RetryMax bound the backoff before the next attempt of a
	// run whose runner was lost: RetryMin × 2^(attempt-1), at most
	// RetryMax, ±20% jitter within that cap (never above it). Defaults 1 s
	// and 5 min.
	RetryMin, RetryMax time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// OnRequeue, when set, is called after a pass re-queued runs (to wake
	// in-process runners).
	OnRequeue func()
	// OnPass, when set, is called after every pass (from the goroutine
	// that ran it) with when it began, how long it took, the runs it
	// changed and its error (the pass's own, not a cancellation).
	OnPass func(began time.Time, took time.Duration, changed []*starflowtype.Run, err error)
	// Now is the clock of OnPass. Default time.Now.
	Now func() time.Time
}

// LeaseSweep periodically calls ExpireOldLeases("runner_lost"): runs whose
// runner stopped heartbeating past its lease become interrupted and are
// retried or dead-lettered by their recovery mode.
//
// Several sweeps may run at once, in one process or many: each run's
// transition happens in one transaction that re-checks the lease
// (PostgreSQL skips rows another sweeper has locked; SQLite has one
// writer), so a run is changed by exactly one of them.
type LeaseSweep struct {
	store state.Adapter
	cfg   SweepConfig

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	trigger chan struct{}
}

// NewLeaseSweep returns a sweep over store.
func NewLeaseSweep(store state.Adapter, cfg SweepConfig) *LeaseSweep {
	if cfg.Interval <= 0 {
		cfg.Interval = SweepIntervalDefault
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = RetryMinDefault
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = RetryMaxDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &LeaseSweep{store: store, cfg: cfg, trigger: make(chan struct{}, 1)}
}

// Start runs one pass now and then one every Interval, in the background.
func (s *LeaseSweep) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return errors.New("maintenance: lease sweep already started")
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go s.loop(ctx)
	return nil
}

// Trigger asks for a pass now (tests, operators); it never blocks.
func (s *LeaseSweep) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Stop ends the loop: a pass in progress is cancelled, and Stop returns
// once the loop has exited. Safe to call twice.
func (s *LeaseSweep) Stop(context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}

func (s *LeaseSweep) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := s.Pass(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("lease sweep failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.trigger:
		}
	}
}

// Pass runs one sweep and returns the runs it changed; OnPass hears of
// it unless ctx ended first.
func (s *LeaseSweep) Pass(ctx context.Context) ([]*starflowtype.Run, error) {
	began := s.cfg.Now()
	runs, err := s.pass(ctx)
	if s.cfg.OnPass != nil && ctx.Err() == nil {
		s.cfg.OnPass(began, s.cfg.Now().Sub(began), runs, err)
	}
	return runs, err
}

// pass is one sweep.
func (s *LeaseSweep) pass(ctx context.Context) ([]*starflowtype.Run, error) {
	runs, err := s.store.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{
		Reason: "runner_lost",
		Backoff: func(attempt int) time.Duration {
			return backoff.Exponential(s.cfg.RetryMin, s.cfg.RetryMax, 2, attempt)
		},
	})
	if err != nil {
		return nil, err
	}
	requeued := false
	for _, r := range runs {
		msg := "runner lost; run interrupted"
		if r.ClaimState == starflowtype.ClaimQueued {
			msg = "runner lost; run re-queued"
		}
		s.cfg.Logger.Warn(msg, "run_id", r.ID, "workflow", r.WorkflowName, "attempt", r.Attempt, "status", r.Status, "claim_state", r.ClaimState)
		requeued = requeued || r.ClaimState == starflowtype.ClaimQueued
	}
	if requeued && s.cfg.OnRequeue != nil {
		s.cfg.OnRequeue()
	}
	return runs, nil
}
