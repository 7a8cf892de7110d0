package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/starflow/starflow/state"
)

// Session-variable GC defaults.
const (
	SessionGCIntervalDefault   = time.Minute
	SessionGCBatchLimitDefault = 1000
)

// SessionGCConfig configures a SessionGC.
type SessionGCConfig struct {
	// Interval between passes. Default 1 min. One pass also runs at Start.
	Interval time.Duration
	// BatchLimit is how many variables one DeleteExpiredSessionVars call
	// may remove; a pass repeats the call until a batch comes back short.
	// Default 1000.
	BatchLimit int
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// SessionGC removes session variables whose keep_until has passed
// (database clock). Variables written without keep_until are not its
// business: they are dropped in the transaction that ends their run.
type SessionGC struct {
	store state.Waiter
	cfg   SessionGCConfig
	*periodic
}

// NewSessionGC returns a session-variable GC over store.
func NewSessionGC(store state.Waiter, cfg SessionGCConfig) *SessionGC {
	if cfg.Interval <= 0 {
		cfg.Interval = SessionGCIntervalDefault
	}
	if cfg.BatchLimit <= 0 {
		cfg.BatchLimit = SessionGCBatchLimitDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := &SessionGC{store: store, cfg: cfg}
	g.periodic = newPeriodic("session-variable GC", cfg.Interval, cfg.Logger, func(ctx context.Context) error {
		_, err := g.Pass(ctx)
		return err
	})
	return g
}

// Pass removes every expired session variable now (in batches of
// BatchLimit, at most 100 per pass) and returns how many it removed (on
// error: how many so far, and the error).
func (g *SessionGC) Pass(ctx context.Context) (int64, error) {
	var total int64
	for range maxBatchesPerPass {
		n, err := g.store.DeleteExpiredSessionVars(ctx, &state.DeleteExpiredSessionVarsParams{Limit: g.cfg.BatchLimit})
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(g.cfg.BatchLimit) || ctx.Err() != nil {
			break
		}
	}
	if total > 0 {
		g.cfg.Logger.Info("expired session variables removed", "count", total)
	}
	return total, nil
}
