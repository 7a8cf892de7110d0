package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// Replaying recorded failures. A step instance's terminal failure is as
// final within its attempt as a success: when a later execution of the
// attempt walks past it again — the catch of a try parked at a wait and
// was woken, or the runner died after the failure was recorded — the
// instance is not run again (its side effect, if any, happened, and a
// second try could take another path than the one the run went on
// with). Its failure is replayed instead, as the run first saw it: the
// typed error that `error` binds in a catch, its kind, whether it is
// transient and whether it is final. This is what a successful step's
// checkpoint does for its output; Temporal replays an activity's
// recorded failure the same way.
//
// The record is kept in the node_error event's payload (error_info,
// error_kind, retryable, final beside the try and the message). Rows
// without one (written before this record existed, or by giveUp: a
// wait abandoned by its enclosing construct) are run again, as before.

// failure is a step instance's failure as the run goes on with it.
type failure struct {
	info      *starflowtype.ErrorInfo // scrubbed
	kind      string                  // the kind of the step that failed first
	retryable bool
	final     bool
	message   string // the ledger's error message (replayed records only)
}

// payload is the node_error payload recording f: the store's default
// fields (try, error, cancelled) and the failure.
func (f *failure) payload(try int, message string, cancelled bool) json.RawMessage {
	m := map[string]any{"try": try, "error": message, "error_info": infoMap(f.info),
		"error_kind": f.kind, "retryable": f.retryable, "final": f.final}
	if cancelled {
		m["cancelled"] = true
	}
	b, err := json.Marshal(m)
	if err != nil { // infoMap holds decoded JSON values only
		return nil
	}
	return b
}

// decodeFailure reads the failure a node_error payload records (nil when
// it records none).
func decodeFailure(payload json.RawMessage) *failure {
	v, err := jsonvalue.Decode(payload)
	m, _ := v.(map[string]any)
	if err != nil || m == nil || m["cancelled"] == true {
		return nil
	}
	im, ok := m["error_info"].(map[string]any)
	if !ok {
		return nil
	}
	f := &failure{info: mapInfo(im)}
	f.kind, _ = m["error_kind"].(string)
	f.retryable, _ = m["retryable"].(bool)
	f.final, _ = m["final"].(bool)
	f.message, _ = m["error"].(string)
	if f.info == nil {
		return nil
	}
	return f
}

// loadFailures reads the failures recorded for the attempt's failed rows
// (loadSteps calls it when there is one): the last node_error event of
// each instance.
func (rs *runState) loadFailures(ctx context.Context) error {
	evs, err := rs.e.cfg.Store.ListEvents(ctx, &state.ListEventsParams{RunID: rs.run.ID})
	if err != nil {
		return fmt.Errorf("load recorded failures: %w", err)
	}
	rs.failed = map[string]*failure{}
	for _, e := range evs {
		if e.Type != starflowtype.EventNodeError || e.Attempt != rs.run.Attempt {
			continue
		}
		key := e.ScopePath + "\x00" + e.NodeID
		if f := decodeFailure(e.Payload); f != nil {
			rs.failed[key] = f
		} else {
			delete(rs.failed, key)
		}
	}
	return nil
}

// replayable returns the recorded failure of the instance when an earlier
// execution of the attempt left its row failed with one and this
// execution has not written the row; nil otherwise.
func (rs *runState) replayable(scope, stepID string) *failure {
	key := scope + "\x00" + stepID
	row := rs.found[key]
	if row == nil || row.Status != starflowtype.StepFailed || rs.led.wrote(scope, stepID) {
		return nil
	}
	return rs.failed[key]
}

// replay returns the recorded failure of step s instead of running it,
// writing nothing: f sees the step failed, as fail left it.
func (rs *runState) replay(f *frame, s *workflow.Step, rec *failure) error {
	f.steps[s.ID] = map[string]any{"status": string(starflowtype.StepFailed), "error": rec.message}
	var err error = errors.New(rec.message)
	if !rec.retryable {
		err = step.Permanent(err)
	}
	return &stepFailed{stepID: s.ID, kind: s.Kind(), scope: f.scope, err: err, info: rec.info, innerKind: rec.kind,
		retryable: rec.retryable, final: rec.final}
}
