package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/starflow/starflow/internal/redact"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
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
	obs     *runMeter // metrics (nil: none)

	mu      sync.Mutex
	written map[string]bool // step instances this execution wrote a row of, by scope + "\x00" + step id
}

// key names a step instance of the attempt, and notes that this
// execution writes its row or takes it over (every step write builds its
// key here, and so does a wait's read of its row).
func (l *ledger) key(scope, stepID string) state.StepKey {
	l.mu.Lock()
	if l.written == nil {
		l.written = map[string]bool{}
	}
	l.written[scope+"\x00"+stepID] = true
	l.mu.Unlock()
	return state.StepKey{RunID: l.runID, Attempt: l.attempt, ScopePath: scope, StepID: stepID}
}

// wrote reports whether this execution wrote (or is writing) a row of
// the step instance.
func (l *ledger) wrote(scope, stepID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written[scope+"\x00"+stepID]
}

// unencodable is a value that cannot be stored — it does not encode as
// JSON, or it holds a key with the reserved prefix (checkReserved);
// nothing was written.
type unencodable struct{ error }

func (u unencodable) Unwrap() error { return u.error }

// json encodes v scrubbed. Values that do not encode (NaN, ±Inf) are
// refused before anything is written.
func (l *ledger) json(v any) (json.RawMessage, error) {
	b, err := l.red.JSON(v)
	if err != nil {
		return nil, unencodable{step.Permanent(fmt.Errorf("value cannot be stored as JSON: %s", l.red.Error(err)))}
	}
	return b, nil
}

func (l *ledger) nodeStart(ctx context.Context, scope, stepID, kind string, try int) error {
	return l.obs.tried(kind, l.store.OnNodeStart(ctx, &state.NodeStartParams{StepKey: l.key(scope, stepID), Lease: l.lease, Kind: kind, Try: try}))
}

func (l *ledger) nodeRetry(ctx context.Context, scope, stepID string, try int, err error, backoff time.Duration) error {
	return l.obs.retried(scope, stepID, l.store.OnNodeRetry(ctx, &state.NodeRetryParams{StepKey: l.key(scope, stepID), Lease: l.lease, Try: try, Error: l.red.Error(err), Backoff: backoff}))
}

func (l *ledger) nodeComplete(ctx context.Context, scope, stepID, kind string, try int, withStart bool, output any, delta map[string]any) error {
	if delta == nil {
		delta = map[string]any{}
	}
	out, err := l.json(output)
	if err != nil {
		return err
	}
	d, err := l.json(delta)
	if err != nil {
		return err
	}
	if err := checkReserved("output", out); err != nil {
		return err
	}
	if err := checkReserved("context", d); err != nil {
		return err
	}
	return l.obs.ended(scope, stepID, kind, string(starflowtype.StepSucceeded), withStart, l.store.OnNodeComplete(ctx, &state.NodeCompleteParams{StepKey: l.key(scope, stepID), Lease: l.lease, Try: try,
		Output: out, Context: d, WithStart: withStart, Kind: kind}))
}

// nodeError records a step instance's terminal failure; cancelled records
// it cancelled instead (a lane that lost its race). rec (nil: none) is the
// failure as the run goes on with it, kept in the node_error event's
// payload so that a later execution of the attempt replays it (replay.go).
func (l *ledger) nodeError(ctx context.Context, scope, stepID, kind string, try int, err error, cancelled bool, rec *failure) error {
	msg := l.red.Error(err)
	var payload json.RawMessage
	if rec != nil {
		payload = rec.payload(try, msg, cancelled)
	}
	return l.obs.ended(scope, stepID, kind, stepStatus(cancelled), false, l.store.OnNodeError(ctx, &state.NodeErrorParams{StepKey: l.key(scope, stepID), Lease: l.lease, Kind: kind, Try: try,
		Error: msg, Cancelled: cancelled, Payload: payload}))
}

func (l *ledger) nodeSkipped(ctx context.Context, scope, stepID, kind, reason string) error {
	return l.store.OnNodeSkipped(ctx, &state.NodeSkippedParams{StepKey: l.key(scope, stepID), Lease: l.lease, Kind: kind, Reason: l.red.String(reason)})
}

func (l *ledger) phase(ctx context.Context, phase string) error {
	return l.store.RecordPhaseIfChanged(ctx, &state.RecordPhaseParams{RunID: l.runID, Lease: l.lease, Phase: l.red.String(phase)})
}

func (l *ledger) runComplete(ctx context.Context, output any) (*starflowtype.Run, error) {
	out, err := l.json(output)
	if err != nil {
		return nil, err
	}
	return l.obs.run(l.store.OnRunComplete(ctx, &state.RunCompleteParams{RunID: l.runID, Lease: l.lease, Output: out}))
}

// runError records a failed attempt: its message, its typed error
// (already scrubbed; nil: none) and whether it is retried.
func (l *ledger) runError(ctx context.Context, err error, info *starflowtype.ErrorInfo, retry bool, backoff time.Duration) (*starflowtype.Run, error) {
	var detail json.RawMessage
	if info != nil {
		detail, _ = l.red.JSON(infoMap(info)) // plain values: the redactor walks maps, not structs
	}
	return l.obs.run(l.store.OnRunError(ctx, &state.RunErrorParams{RunID: l.runID, Lease: l.lease, Error: l.red.Error(err), ErrorJSON: detail,
		Retry: retry, Backoff: backoff}))
}

func (l *ledger) runCancelled(ctx context.Context) (*starflowtype.Run, error) {
	return l.obs.run(l.store.OnRunCancelled(ctx, &state.RunCancelledParams{RunID: l.runID, Lease: l.lease}))
}

func (l *ledger) release(ctx context.Context) error {
	return l.store.ClearLease(ctx, &state.ClearLeaseParams{RunID: l.runID, Lease: l.lease})
}
