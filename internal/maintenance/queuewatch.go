package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/starflow/starflow/state"
)

// QueueWatchConfig configures a QueueWatch.
type QueueWatchConfig struct {
	// Interval between passes. Default StuckIntervalDefault (15 s). One
	// pass also runs at Start.
	Interval time.Duration
	// OnPass is called with each pass's depths (claimable runs by pool,
	// in no order; pools with none absent), and with nil when the watch
	// stops (a process that no longer leads exports nothing). Required.
	OnPass func([]*state.QueueDepth)
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// QueueWatch counts the claimable runs of every workspace by runner pool,
// with the age of the oldest (one QueueDepths aggregate per pass), for the
// metrics starflow_queue_depth{pool} and
// starflow_queue_oldest_age_seconds{pool}. It runs in the maintenance
// leader only, so a deployment runs one such statement per interval
// however many processes are scraped.
type QueueWatch struct {
	store state.Watchdog
	cfg   QueueWatchConfig
	*periodic
}

// NewQueueWatch returns a queue watch over store.
func NewQueueWatch(store state.Watchdog, cfg QueueWatchConfig) *QueueWatch {
	if cfg.Interval <= 0 {
		cfg.Interval = StuckIntervalDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OnPass == nil {
		cfg.OnPass = func([]*state.QueueDepth) {}
	}
	w := &QueueWatch{store: store, cfg: cfg}
	w.periodic = newPeriodic("queue watch", cfg.Interval, cfg.Logger, func(ctx context.Context) error {
		ds, err := store.QueueDepths(ctx, &state.QueueDepthsParams{})
		if err != nil {
			return err
		}
		if ds == nil {
			ds = []*state.QueueDepth{}
		}
		cfg.OnPass(ds)
		return nil
	})
	return w
}

// Stop stops the watch and reports nil to OnPass.
func (w *QueueWatch) Stop(ctx context.Context) error {
	err := w.periodic.Stop(ctx)
	w.cfg.OnPass(nil)
	return err
}
