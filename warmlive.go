package starflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/warm"
)

// ErrNoWarm is returned by the live reads of an engine without a warm
// store (Config.Warm nil).
var ErrNoWarm = errors.New("starflow: no warm tier configured (Config.Warm / --warm)")

// The live reads below are the only engine calls that read the warm tier
// (SPEC §8, Authority): live status, progress and peer discovery. Run
// detail, history, the ledger, resume and reconciliation read the cold
// store, whatever the warm tier holds; warm_authority_test.go checks it.

// LiveRun reads a run's warm entry: its live status, phase and current
// steps as last drained from the outbox. The entry may lag the cold store
// (see Health); read Store().GetRun when being wrong has consequences.
// Errors: ErrNoWarm, starflowtype.ErrNotFound (also matching
// warm.ErrNotFound) when the warm tier has no entry, or the warm store's
// error when it is unreachable.
func (e *Engine) LiveRun(ctx context.Context, runID string) (*warm.RunEntry, error) {
	if e.warm == nil {
		return nil, ErrNoWarm
	}
	r, err := e.warm.GetRun(ctx, runID)
	if errors.Is(err, warm.ErrNotFound) {
		return nil, fmt.Errorf("live run %s: %w (%w)", runID, starflowtype.ErrNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("live run %s: %w", runID, err)
	}
	return r, nil
}

// LiveProgress reads a run's latest step progress reports (one per step
// instance that reported any). Progress exists only in the warm tier.
// Errors: ErrNoWarm, or the warm store's error.
func (e *Engine) LiveProgress(ctx context.Context, runID string) ([]*warm.Progress, error) {
	if e.warm == nil {
		return nil, ErrNoWarm
	}
	ps, err := e.warm.ListProgress(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("live progress of run %s: %w", runID, err)
	}
	return ps, nil
}

// LiveEvents reads a run's recent events from the warm tier's feed: the
// newest events the mirror drained (at most mirror.Config.EventsKeep,
// default 200), those with id > afterID, oldest first; empty when the
// warm tier holds none. The feed may lag the cold store; the full history
// is Store().ListEvents (the CLI's `runs events`). Errors: ErrNoWarm, or
// the warm store's error.
func (e *Engine) LiveEvents(ctx context.Context, runID string, afterID int64) ([]*warm.EventEntry, error) {
	if e.warm == nil {
		return nil, ErrNoWarm
	}
	evs, err := e.warm.ListEvents(ctx, runID, afterID)
	if err != nil {
		return nil, fmt.Errorf("live events of run %s: %w", runID, err)
	}
	return evs, nil
}

// LiveRunners lists the runners whose presence has not expired (peer
// discovery): id, pools, runs held, last beat. Errors: ErrNoWarm, or the
// warm store's error.
func (e *Engine) LiveRunners(ctx context.Context) ([]*warm.Presence, error) {
	if e.warm == nil {
		return nil, ErrNoWarm
	}
	ps, err := e.warm.ListPresence(ctx)
	if err != nil {
		return nil, fmt.Errorf("live runners: %w", err)
	}
	return ps, nil
}

// Warm returns the engine's warm store (nil without one).
func (e *Engine) Warm() warm.Store { return e.warm }

// LiveRuns reads every run entry the warm tier holds (each run the
// mirror drained and has not deleted), in no particular order: the live
// runs list. It costs one warm read per entry. Errors: ErrNoWarm, or the
// warm store's error.
func (e *Engine) LiveRuns(ctx context.Context) ([]*warm.RunEntry, error) {
	if e.warm == nil {
		return nil, ErrNoWarm
	}
	ids, err := e.warm.ListRunIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("live runs: %w", err)
	}
	out := make([]*warm.RunEntry, 0, len(ids))
	for _, id := range ids {
		r, err := e.warm.GetRun(ctx, id)
		if errors.Is(err, warm.ErrNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("live run %s: %w", id, err)
		}
		out = append(out, r)
	}
	return out, nil
}
