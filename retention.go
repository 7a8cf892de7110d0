package starflow

import (
	"context"
	"fmt"
	"time"

	"github.com/starflow/starflow/internal/maintenance"
	"github.com/starflow/starflow/state"
)

// RetentionConfig configures the retention pass the maintenance leader
// runs (Config.Retention): what is older than the ages goes, in small
// batches that never hold locks a runner waits on (see
// state.Retention.CollectGarbage for what goes and what stays).
type RetentionConfig struct {
	// Interval between passes. Default 1 h (maintenance.
	// RetentionIntervalDefault); one pass also runs when a term begins.
	// Negative turns the pass off: nothing is removed but by
	// Engine.CollectGarbage (`starflow gc`).
	Interval time.Duration
	// Params are the ages and the batch size (zero fields take
	// state.GCParams' defaults: succeeded 7 days, failed and cancelled 30
	// days, held for an operator 90 days, consumed waits and inbox rows 7
	// days, orphan blobs' grace 1 h, applied outbox rows 1 h — or
	// WarmOptions.OutboxRetention —, batches of 500). Expired session
	// variables stay the session GC's (WaitMaintenance.SessionGCInterval).
	Params state.GCParams
}

// gcParams fills in what the engine knows: the warm tier's outbox
// retention.
func (e *Engine) gcParams(p state.GCParams) state.GCParams {
	if p.OutboxApplied == 0 {
		p.OutboxApplied = e.cfg.WarmOptions.OutboxRetention
	}
	return p
}

// retentionServices is the retention pass of one maintenance term (none
// when Config.Retention.Interval is negative).
func (e *Engine) retentionServices() []maintenance.Service {
	c := e.cfg.Retention
	if c.Interval < 0 {
		return nil
	}
	p := e.gcParams(c.Params)
	return []maintenance.Service{maintenance.NewRetentionGC(e.store, maintenance.RetentionConfig{
		Interval: c.Interval, Params: p, Logger: e.cfg.Logger,
	})}
}

// CollectGarbage runs one retention pass now with p's ages (zero fields:
// the defaults; p.DryRun counts and removes nothing) and returns what it
// removed, by kind (on error, what the batches before it removed). Safe
// while runners and the maintenance leader's own pass work on the same
// store. It needs no Start and no Maintenance.
func (e *Engine) CollectGarbage(ctx context.Context, p state.GCParams) (state.GCReport, error) {
	p = e.gcParams(p)
	rep, err := e.store.CollectGarbage(ctx, &p)
	if err != nil {
		return rep, fmt.Errorf("starflow: %w", err)
	}
	return rep, nil
}
