package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// Session variables (SPEC §2 session_read / session_write; seed 000
// workflow_session_vars): values keyed by (workspace, session, key) that
// outlive one step. A variable written without keep_until is dropped when
// the run that wrote it ends; with keep_until it stays, for later runs,
// until then. Both kinds are ordinary steps: retried per retry_policy on
// store errors, checkpointed with the value as output, so a resumed run
// restores a read instead of reading again.

// sessionKey renders the session id and key of a session step.
func (rs *runState) sessionKey(ctx context.Context, f *frame, kind string, session, key any) (string, string, error) {
	sv, err := rs.render(ctx, f, kind+".session", session)
	if err != nil {
		return "", "", err
	}
	sid, err := asString(kind+".session", sv)
	if err != nil {
		return "", "", err
	}
	kv, err := rs.render(ctx, f, kind+".key", key)
	if err != nil {
		return "", "", err
	}
	k, err := asString(kind+".key", kv)
	if err != nil {
		return "", "", err
	}
	if sid == "" || k == "" {
		return "", "", step.Permanent(fmt.Errorf("%s: session (%q) and key (%q) must not be empty", kind, sid, k))
	}
	return sid, k, nil
}

// sessionRead: the value, the default when absent or expired, else null.
func (rs *runState) sessionRead(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	r := s.SessionRead
	sid, k, err := rs.sessionKey(ctx, f, "session_read", r.Session, r.Key)
	if err != nil {
		return nil, err
	}
	v, err := rs.e.cfg.Store.SessionGet(ctx, &state.SessionGetParams{WorkspaceID: rs.run.WorkspaceID, SessionID: sid, Key: k})
	if errors.Is(err, starflowtype.ErrNotFound) {
		if r.Default == nil {
			return nil, nil
		}
		return rs.render(ctx, f, "session_read.default", r.Default)
	}
	if err != nil {
		return nil, fmt.Errorf("session_read %s/%s: %w", sid, k, err)
	}
	out, err := jsonvalue.Decode(v.Value)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("session_read %s/%s: stored value: %w", sid, k, err))
	}
	return out, nil
}

// sessionWrite stores the value (scrubbed of secrets, like everything
// stored) and returns it.
func (rs *runState) sessionWrite(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	w := s.SessionWrite
	sid, k, err := rs.sessionKey(ctx, f, "session_write", w.Session, w.Key)
	if err != nil {
		return nil, err
	}
	val, err := rs.render(ctx, f, "session_write.value", w.Value)
	if err != nil {
		return nil, err
	}
	raw, err := rs.led.json(val)
	if err != nil {
		return nil, err
	}
	p := &state.SessionSetParams{WorkspaceID: rs.run.WorkspaceID, SessionID: sid, Key: k, Value: raw, RunID: rs.run.ID, Lease: rs.led.lease}
	if w.KeepUntil != nil {
		// A duration is added to the database's now by the store.
		if p.KeepUntil, p.KeepFor, err = rs.renderTime(ctx, f, "session_write.keep_until", w.KeepUntil, true); err != nil {
			return nil, err
		}
	}
	if _, err := rs.e.cfg.Store.SessionSet(ctx, p); err != nil {
		return nil, fmt.Errorf("session_write %s/%s: %w", sid, k, err)
	}
	return val, nil
}
