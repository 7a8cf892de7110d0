package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/starflow/starflow/internal/redact"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// ledger is the one writer of a run's cold rows during execution. Every
// call carries the run's lease (so the store fences it) and every string
// and JSON value passes through the run's redactor first (SPEC §4: secrets
// are scrubbed by value in every writer).
type ledger struct {
	store   state.Adapter
	runID   string
	attempt int
	lease   starflowtype.Lease
	red     *redact.Redactor
}

func (l *ledger) key(scope, stepID string) state.StepKey {
	return state.StepKey{RunID: l.runID, Attempt: l.attempt, ScopePath: scope, StepID: stepID}
}

func (l *ledger) json(v any) json.RawMessage {
	b, err := l.red.JSON(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"unencodable": l.red.String(err.Error())})
	}
	return b
}

func (l *ledger) nodeStart(ctx context.Context, scope, stepID, kind string, try int) error {
	return l.store.OnNodeStart(ctx, &state.NodeStartParams{StepKey: l.key(scope, stepID), Lease: l.lease, Kind: kind, Try: try})
}

func (l *ledger) nodeRetry(ctx context.Context, scope, stepID string, try int, err error, backoff time.Duration) error {
	return l.store.OnNodeRetry(ctx, &state.NodeRetryParams{StepKey: l.key(scope, stepID), Lease: l.lease, Try: try, Error: l.red.Error(err), Backoff: backoff})
}

func (l *ledger) nodeComplete(ctx context.Context, scope, stepID string, try int, output any, delta map[string]any) error {
	if delta == nil {
		delta = map[string]any{}
	}
	return l.store.OnNodeComplete(ctx, &state.NodeCompleteParams{StepKey: l.key(scope, stepID), Lease: l.lease, Try: try,
		Output: l.json(output), Context: l.json(delta)})
}

func (l *ledger) nodeError(ctx context.Context, scope, stepID, kind string, try int, err error) error {
	return l.store.OnNodeError(ctx, &state.NodeErrorParams{StepKey: l.key(scope, stepID), Lease: l.lease, Kind: kind, Try: try, Error: l.red.Error(err)})
}

func (l *ledger) nodeSkipped(ctx context.Context, scope, stepID, kind, reason string) error {
	return l.store.OnNodeSkipped(ctx, &state.NodeSkippedParams{StepKey: l.key(scope, stepID), Lease: l.lease, Kind: kind, Reason: l.red.String(reason)})
}

func (l *ledger) phase(ctx context.Context, phase string) error {
	return l.store.RecordPhaseIfChanged(ctx, &state.RecordPhaseParams{RunID: l.runID, Lease: l.lease, Phase: l.red.String(phase)})
}

func (l *ledger) runComplete(ctx context.Context, output any) (*starflowtype.Run, error) {
	return l.store.OnRunComplete(ctx, &state.RunCompleteParams{RunID: l.runID, Lease: l.lease, Output: l.json(output)})
}

func (l *ledger) runError(ctx context.Context, err error, retry bool, backoff time.Duration) (*starflowtype.Run, error) {
	return l.store.OnRunError(ctx, &state.RunErrorParams{RunID: l.runID, Lease: l.lease, Error: l.red.Error(err), Retry: retry, Backoff: backoff})
}

func (l *ledger) release(ctx context.Context) error {
	return l.store.ClearLease(ctx, &state.ClearLeaseParams{RunID: l.runID, Lease: l.lease})
}
