package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/starflow/starflow/state"
)

// RetentionIntervalDefault is the default RetentionConfig.Interval.
const RetentionIntervalDefault = time.Hour

// RetentionConfig configures a RetentionGC.
type RetentionConfig struct {
	// Interval between passes. Default 1 h. One pass also runs at Start.
	Interval time.Duration
	// Params are the ages and the batch size of every pass
	// (state.GCParams; zero fields take their defaults). DryRun is
	// ignored.
	Params state.GCParams
	// OnPass, when set, is called after every pass with what it removed
	// and its error. Default nil.
	OnPass func(state.GCReport, error)
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// RetentionGC removes what is older than the configured ages
// (state.Retention.CollectGarbage) once per interval, while its process
// leads maintenance. Each pass works in small batches, each one short
// transaction that skips rows others hold, so runners never wait on it.
type RetentionGC struct {
	store state.Retention
	cfg   RetentionConfig
	*periodic
}

// NewRetentionGC returns a retention pass over store.
func NewRetentionGC(store state.Retention, cfg RetentionConfig) *RetentionGC {
	if cfg.Interval <= 0 {
		cfg.Interval = RetentionIntervalDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Params.DryRun = false
	g := &RetentionGC{store: store, cfg: cfg}
	g.periodic = newPeriodic("retention", cfg.Interval, cfg.Logger, func(ctx context.Context) error {
		_, err := g.Pass(ctx)
		return err
	})
	return g
}

// Pass runs one retention pass now and returns what it removed (on
// error: what the batches before it removed, and the error).
func (g *RetentionGC) Pass(ctx context.Context) (state.GCReport, error) {
	start := time.Now()
	p := g.cfg.Params
	rep, err := g.store.CollectGarbage(ctx, &p)
	if g.cfg.OnPass != nil {
		g.cfg.OnPass(rep, err)
	}
	if rep.Total() > 0 {
		args := []any{"duration_ms", time.Since(start).Milliseconds()}
		for _, k := range rep.Kinds() {
			if k.Count > 0 {
				args = append(args, k.Name, k.Count)
			}
		}
		g.cfg.Logger.Info("retention removed old rows", args...)
	}
	return rep, err
}
