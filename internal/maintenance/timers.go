package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// maxBatchesPerPass bounds one pass of a batched store call, so that a
// pass ends even if the store kept returning full batches.
const maxBatchesPerPass = 100

// Timer poller defaults (SPEC §6).
const (
	TimerIntervalDefault   = time.Second
	TimerBatchLimitDefault = 500
)

// TimerConfig configures a TimerPoller.
type TimerConfig struct {
	// Interval between passes. Default 1 s. One pass also runs at Start,
	// so a timer whose deadline passed while every process was down fires
	// at the next start.
	Interval time.Duration
	// BatchLimit is how many waits one FireDueWaits call may change; a
	// pass repeats the call until a batch comes back short. Default 500.
	BatchLimit int
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// OnRequeue, when set, is called after a pass changed waits (their
	// parked runs were re-queued), to wake in-process runners at once.
	OnRequeue func()
	// OnFire, when set, is called with each wait a pass changed (status
	// woken or timed_out), after its transaction committed.
	OnFire func(*starflowtype.Wait)
}

// TimerPoller is the durable timer poller: it calls FireDueWaits, which
// wakes pending waits whose timer (wake_at) is due and times out those
// whose timeout (expires_at) passed, each in one transaction with the
// re-queueing of its run. Deadlines are compared with the database's
// clock, and they live in workflow_waits, so nothing is lost when every
// process stops: the first pass after a restart fires whatever fell due
// meanwhile.
//
// Several pollers may run at once (in one process or many): the store
// changes each wait in a transaction that re-checks it is pending, so each
// wait fires exactly once.
type TimerPoller struct {
	store state.Waiter
	cfg   TimerConfig
	*periodic
}

// NewTimerPoller returns a poller over store.
func NewTimerPoller(store state.Waiter, cfg TimerConfig) *TimerPoller {
	if cfg.Interval <= 0 {
		cfg.Interval = TimerIntervalDefault
	}
	if cfg.BatchLimit <= 0 {
		cfg.BatchLimit = TimerBatchLimitDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &TimerPoller{store: store, cfg: cfg}
	p.periodic = newPeriodic("timer poller", cfg.Interval, cfg.Logger, func(ctx context.Context) error {
		_, err := p.Pass(ctx)
		return err
	})
	return p
}

// Pass fires every due timer and timeout now and returns the waits it
// changed (woken or timed_out). It calls FireDueWaits until a batch comes
// back shorter than BatchLimit (at most 100 batches; the next pass takes
// the rest); on error it returns what it changed so
// far with the error.
func (p *TimerPoller) Pass(ctx context.Context) ([]*starflowtype.Wait, error) {
	var changed []*starflowtype.Wait
	var err error
	for range maxBatchesPerPass {
		var batch []*starflowtype.Wait
		batch, err = p.store.FireDueWaits(ctx, &state.FireDueWaitsParams{Limit: p.cfg.BatchLimit})
		changed = append(changed, batch...)
		if err != nil || len(batch) < p.cfg.BatchLimit || ctx.Err() != nil {
			break
		}
	}
	for _, w := range changed {
		p.cfg.Logger.Info("wait fired", "run_id", w.RunID, "wait_id", w.ID, "step_id", w.StepID, "status", w.Status)
		if p.cfg.OnFire != nil {
			p.cfg.OnFire(w)
		}
	}
	if len(changed) > 0 && p.cfg.OnRequeue != nil {
		p.cfg.OnRequeue()
	}
	return changed, err
}
