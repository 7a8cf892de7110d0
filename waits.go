package starflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/starflow/starflow/internal/engine"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Durable waits (SPEC §6): a run paused at a `wait` or `workflow_call`
// step holds no runner and no lease; it is woken by a token (Wake), by a
// named signal (Signal, SignalKey), by its timer or timeout (the
// maintenance poller), or by its child run's end.

// Wake resumes the wait a wake token names, with payload as the wait
// step's output (nil or empty: null). The token's signature and expiry
// are checked against the key ring first; then, in one transaction, the
// token is consumed, the wait woken and its parked run re-queued. Errors
// (nothing changes on any of them): starflowtype.ErrTokenInvalid (forged,
// malformed, signed by an unknown key), starflowtype.ErrWaitClosed
// (expired, already used, the wait timed out or was cancelled),
// ErrNotFound (no wait has that id and token),
// starflowtype.ErrPayloadInvalid (the payload is not one JSON value or
// holds a number with no finite value, like 1e400), or a
// *workflow.LimitError for a payload over Config.Limits.PayloadBytes
// (both checked first, so the token stays usable).
func (e *Engine) Wake(ctx context.Context, token string, payload json.RawMessage) (*starflowtype.Wait, error) {
	return e.countWake(e.wake(ctx, "", token, payload))
}

// WakeRun is Wake for a caller that addresses the run too (an API route
// under the run): a token of another run is refused with
// starflowtype.ErrTokenInvalid.
func (e *Engine) WakeRun(ctx context.Context, runID, token string, payload json.RawMessage) (*starflowtype.Wait, error) {
	if runID == "" {
		return nil, errors.New("wake: run id is empty")
	}
	return e.countWake(e.wake(ctx, runID, token, payload))
}

func (e *Engine) wake(ctx context.Context, runID, token string, payload json.RawMessage) (*starflowtype.Wait, error) {
	if err := e.engine.Limits().CheckPayload(len(payload)); err != nil {
		return nil, fmt.Errorf("wake: %w", err) // the token is not spent
	}
	payload, err := wakePayload(payload)
	if err != nil {
		return nil, err
	}
	c, err := e.engine.VerifyToken(ctx, token)
	if err != nil {
		return nil, fmt.Errorf("wake: %w", err)
	}
	if runID != "" && c.RunID != runID {
		return nil, fmt.Errorf("wake: the token belongs to another run than %s: %w", runID, starflowtype.ErrTokenInvalid)
	}
	w, err := e.store.WakeWait(ctx, &state.WakeWaitParams{WaitID: c.WaitID, TokenHash: tokenHash(token), RunID: c.RunID, Payload: payload})
	switch {
	case errors.Is(err, starflowtype.ErrWaitClosed):
		return nil, fmt.Errorf("wake: wait %s of run %s is no longer pending (woken, timed out or cancelled; a token is used once): %w", c.WaitID, c.RunID, err)
	case errors.Is(err, starflowtype.ErrNotFound):
		return nil, fmt.Errorf("wake: no wait %s of run %s with this token: %w", c.WaitID, c.RunID, err)
	case err != nil:
		return nil, fmt.Errorf("wake: %w", err)
	}
	e.runner.Notify()
	return w, nil
}

// Signal delivers the signal name to run runID with payload (nil or empty:
// null): the run's oldest pending signal or approval wait of that name is
// woken (its run re-queued), or, when the run does not wait for it yet,
// the signal is kept in the wake inbox and consumed when such a wait
// registers. Errors: ErrNotFound (no such run), ErrConflict (the run has
// ended), starflowtype.ErrPayloadInvalid (not one JSON value, or a number
// with no finite value), a *workflow.LimitError for a payload over
// Config.Limits.PayloadBytes (nothing is delivered or held).
func (e *Engine) Signal(ctx context.Context, runID, name string, payload json.RawMessage) (*state.SignalResult, error) {
	if runID == "" || name == "" {
		return nil, errors.New("signal: run id and signal name are required")
	}
	return e.countSignal(e.signal(ctx, &state.SignalParams{RunID: runID, Signal: name}, payload))
}

// SignalKey delivers the signal name to whichever run waits for it with
// correlationKey (a `wait` with that correlation_key), or keeps it in the
// wake inbox for the first such wait to register. Errors:
// starflowtype.ErrPayloadInvalid or a *workflow.LimitError, as Signal.
func (e *Engine) SignalKey(ctx context.Context, name, correlationKey string, payload json.RawMessage) (*state.SignalResult, error) {
	if name == "" || correlationKey == "" {
		return nil, errors.New("signal: signal name and correlation key are required")
	}
	return e.countSignal(e.signal(ctx, &state.SignalParams{Signal: name, CorrelationKey: correlationKey}, payload))
}

func (e *Engine) signal(ctx context.Context, p *state.SignalParams, payload json.RawMessage) (*state.SignalResult, error) {
	if strings.HasPrefix(p.Signal, reservedSignalPrefix) {
		// The engine's own signals (a child run's end, ChildSignal) are
		// written by the engine alone: a forged one would end a parent's
		// child wait with a made-up result.
		return nil, starflowtype.Invalid(fmt.Errorf("signal name %q is reserved: names starting with %q are the engine's own", p.Signal, reservedSignalPrefix))
	}
	if err := e.engine.Limits().CheckPayload(len(payload)); err != nil {
		return nil, fmt.Errorf("signal %s: %w", p.Signal, err)
	}
	var err error
	if p.Payload, err = wakePayload(payload); err != nil {
		return nil, err
	}
	p.WorkspaceID = e.workspace(ctx)
	res, err := e.store.Signal(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("signal %s: %w", p.Signal, err)
	}
	if res.Wait != nil {
		e.runner.Notify()
	}
	return res, nil
}

// reservedSignalPrefix starts the signal names the engine sends itself
// (starflowtype.ChildSignal); Signal and SignalKey refuse them.
const reservedSignalPrefix = "starflow."

// Waits lists a run's waits (every attempt), oldest first.
func (e *Engine) Waits(ctx context.Context, runID string) ([]*starflowtype.Wait, error) {
	return e.store.ListWaits(ctx, &state.ListWaitsParams{RunID: runID, Limit: 10000})
}

// DeliverNotify sends a registered wait's notify request again (the token
// re-created from the stored key id): the delivery function of the
// maintenance notify pass. A nil error means delivered (2xx); the caller
// records the outcome with MarkNotified.
func (e *Engine) DeliverNotify(ctx context.Context, w *starflowtype.Wait) error {
	return e.engine.DeliverNotify(ctx, w)
}

// wakePayload checks a wake payload: empty is null; otherwise one JSON
// value whose numbers are all finite and with no object key starting with
// the reserved prefix __celestial (errors wrap
// starflowtype.ErrPayloadInvalid and say what and where).
func wakePayload(p json.RawMessage) (json.RawMessage, error) {
	if len(p) == 0 {
		return json.RawMessage("null"), nil
	}
	if err := jsonvalue.Validate(p); err != nil {
		return nil, fmt.Errorf("%w: %w", starflowtype.ErrPayloadInvalid, err)
	}
	if err := engine.ReservedKeyIn(p); err != nil {
		return nil, fmt.Errorf("%w: it holds %w", starflowtype.ErrPayloadInvalid, err)
	}
	return p, nil
}

func tokenHash(token string) string { return waketoken.Hash(token) }
