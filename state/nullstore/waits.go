package nullstore

import (
	"context"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// A run that keeps nothing cannot pause and be woken later, nor share a
// session variable with a later step: the Waiter writes return
// state.ErrDurableWaitsNeedStore (which wraps state.ErrNotImplemented), so
// the engine fails the step with a clear message instead of losing the
// wait. Reads answer as an empty store does.

// OnRunPaused implements state.Waiter: refused.
func (*Store) OnRunPaused(_ context.Context, p *state.RunPausedParams) error {
	return fmt.Errorf("nullstore: wait step %q: %w", p.StepID, state.ErrDurableWaitsNeedStore)
}

// RegisterWait implements state.Waiter: refused.
func (*Store) RegisterWait(_ context.Context, p *state.RegisterWaitParams) (*starflowtype.Wait, error) {
	return nil, fmt.Errorf("nullstore: wait step %q: %w", p.StepID, state.ErrDurableWaitsNeedStore)
}

// ParkRun implements state.Waiter: refused.
func (*Store) ParkRun(_ context.Context, p *state.ParkRunParams) (*starflowtype.Run, error) {
	return nil, fmt.Errorf("nullstore: park run %s: %w", p.RunID, state.ErrDurableWaitsNeedStore)
}

// GetWait implements state.Waiter: always ErrNotFound.
func (*Store) GetWait(_ context.Context, p *state.GetWaitParams) (*starflowtype.Wait, error) {
	return nil, fmt.Errorf("nullstore: wait %s%s: %w", p.ID, p.StepID, starflowtype.ErrNotFound)
}

// ListWaits implements state.Waiter: always empty.
func (*Store) ListWaits(context.Context, *state.ListWaitsParams) ([]*starflowtype.Wait, error) {
	return nil, nil
}

// WakeWait implements state.Waiter: refused.
func (*Store) WakeWait(_ context.Context, p *state.WakeWaitParams) (*starflowtype.Wait, error) {
	return nil, fmt.Errorf("nullstore: wake wait %s: %w", p.WaitID, state.ErrDurableWaitsNeedStore)
}

// Signal implements state.Waiter: refused.
func (*Store) Signal(_ context.Context, p *state.SignalParams) (*state.SignalResult, error) {
	return nil, fmt.Errorf("nullstore: signal %s: %w", p.Signal, state.ErrDurableWaitsNeedStore)
}

// FireDueWaits implements state.Waiter: no wait is ever due.
func (*Store) FireDueWaits(context.Context, *state.FireDueWaitsParams) ([]*starflowtype.Wait, error) {
	return nil, nil
}

// PendingNotifies implements state.Waiter: always empty.
func (*Store) PendingNotifies(context.Context, *state.PendingNotifiesParams) ([]*starflowtype.Wait, error) {
	return nil, nil
}

// MarkNotified implements state.Waiter: there is no wait to mark.
func (*Store) MarkNotified(_ context.Context, p *state.MarkNotifiedParams) error {
	return fmt.Errorf("nullstore: wait %s: %w", p.WaitID, starflowtype.ErrNotFound)
}

// SessionGet implements state.Waiter: always ErrNotFound.
func (*Store) SessionGet(_ context.Context, p *state.SessionGetParams) (*starflowtype.SessionVar, error) {
	return nil, fmt.Errorf("nullstore: session %s key %q: %w", p.SessionID, p.Key, starflowtype.ErrNotFound)
}

// SessionSet implements state.Waiter: refused (a later read would not
// find the value).
func (*Store) SessionSet(_ context.Context, p *state.SessionSetParams) (*starflowtype.SessionVar, error) {
	return nil, fmt.Errorf("nullstore: session %s key %q: session variables need a durable store (sqlite or postgres): %w",
		p.SessionID, p.Key, state.ErrNotImplemented)
}

// DeleteExpiredSessionVars implements state.Waiter: nothing to delete.
func (*Store) DeleteExpiredSessionVars(context.Context, *state.DeleteExpiredSessionVarsParams) (int64, error) {
	return 0, nil
}

// WakeKeys implements state.Waiter: none stored.
func (*Store) WakeKeys(context.Context) ([]state.WakeKey, error) { return nil, nil }

// AddWakeKey implements state.Waiter: the key is returned as given (with
// the local time when it has none) and not kept.
func (*Store) AddWakeKey(_ context.Context, k state.WakeKey) (state.WakeKey, error) {
	if err := state.CheckWakeKey(k); err != nil {
		return state.WakeKey{}, fmt.Errorf("nullstore: add wake key: %w", err)
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = now()
	}
	return k, nil
}
