package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// maxCancelDepth bounds CancelRun's cascade through child runs.
const maxCancelDepth = 64

// OnRunPaused implements state.Waiter (commit boundary 1).
func (s *Store) OnRunPaused(ctx context.Context, p *state.RunPausedParams) error {
	payload, err := state.PausedPayload(p)
	if err != nil {
		return fmt.Errorf("sqlitestore: run paused: %w", err)
	}
	_, err = s.inTx(ctx, "OnRunPaused", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if m.cancel {
			// As OnNodeStart: a run being cancelled enters no wait (and
			// so a workflow_call starts no child for it).
			return fmt.Errorf("run %s: %w", p.RunID, starflowtype.ErrCancelRequested)
		}
		if _, err := t.exec(ctx, "run_paused", nullJSON(p.Snapshot), p.RunID); err != nil {
			return translate(err)
		}
		if err := mustAffect(t.exec(ctx, "step_waiting", p.RunID, p.Attempt, p.ScopePath, p.StepID,
			m.workspace, m.env, p.Kind)); err != nil {
			return fmt.Errorf("step %q already succeeded: %w", p.StepID, err)
		}
		if p.Phase != "" {
			res, err := t.exec(ctx, "set_phase", p.Phase, p.RunID)
			if err != nil {
				return translate(err)
			}
			if n, _ := res.RowsAffected(); n > 0 {
				ph, _ := json.Marshal(map[string]any{"phase": p.Phase})
				if err := t.event(ctx, m, p.RunID, 0, starflowtype.EventPhase, "", "", ph); err != nil {
					return err
				}
			}
		}
		if err := t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventRunPaused, p.StepID, p.ScopePath, payload); err != nil {
			return err
		}
		return s.stepChanged(ctx, t, p.StepKey)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: run paused %s: %w", p.StepID, err)
	}
	return nil
}

// RegisterWait implements state.Waiter (commit boundary 2).
func (s *Store) RegisterWait(ctx context.Context, p *state.RegisterWaitParams) (*starflowtype.Wait, error) {
	signal, err := state.CheckRegisterWait(p)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: register wait: %w", err)
	}
	var out *starflowtype.Wait
	_, err = s.inTx(ctx, "RegisterWait", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		existing, err := scanWait(t.queryRow(ctx, "get_wait_by_step", p.RunID, p.Attempt, p.ScopePath, p.StepID))
		if err == nil {
			out = existing // re-entered after a crash: registered once
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return translate(err)
		}
		id := p.ID
		if id == "" {
			id = uuid.NewString()
		}
		if _, err := t.exec(ctx, "insert_wait", id, p.RunID, m.workspace, p.Attempt, p.ScopePath, p.StepID,
			string(p.Kind), nullString(signal), nullString(p.CorrelationKey),
			absTime(p.WakeAt), offset(p.WakeIn), absTime(p.ExpiresAt), offset(p.ExpiresIn),
			nullString(p.TokenHash), nullString(p.KeyID), nullJSON(p.Notify), sqliteOffset(p.NotifyGrace)); err != nil {
			return translate(err)
		}
		if p.Kind != starflowtype.WaitTimer {
			var inboxID, payload string
			err := t.queryRow(ctx, "inbox_match", p.RunID, m.workspace, signal, p.CorrelationKey).Scan(&inboxID, &payload)
			w := &starflowtype.Wait{ID: id, RunID: p.RunID, Kind: p.Kind, Signal: signal, StepID: p.StepID, ScopePath: p.ScopePath, Attempt: p.Attempt}
			switch {
			case errors.Is(err, sql.ErrNoRows):
				if p.Kind == starflowtype.WaitChild {
					if err := s.wakeFromChildEnd(ctx, t, w, p.CorrelationKey); err != nil {
						return err
					}
				}
			case err != nil:
				return translate(err)
			default:
				if err := mustAffect(t.exec(ctx, "inbox_consume", inboxID)); err != nil {
					return fmt.Errorf("consume inbox entry %s: %w", inboxID, err)
				}
				if err := s.wake(ctx, t, w, starflowtype.WaitWoken, json.RawMessage(payload), "inbox", false); err != nil {
					return err
				}
			}
		}
		out, err = t.waitChanged(ctx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: register wait %s: %w", p.StepID, err)
	}
	return out, nil
}

// ParkRun implements state.Waiter (commit boundary 3).
func (s *Store) ParkRun(ctx context.Context, p *state.ParkRunParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "ParkRun", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		var claim string
		err = t.queryRow(ctx, "park_run", p.RunID).Scan(&claim)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %s is not paused (OnRunPaused comes first): %w", p.RunID, starflowtype.ErrConflict)
		}
		if err != nil || !m.cancel {
			return translate(err)
		}
		// An operator cancelled the run while it entered its wait: no
		// runner would ever see the request, so the cancel ends it here.
		return s.cancelParked(ctx, t, p.RunID)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: park run: %w", err)
	}
	return run, nil
}

// GetWait implements state.Waiter.
func (s *Store) GetWait(ctx context.Context, p *state.GetWaitParams) (*starflowtype.Wait, error) {
	var row *sql.Row
	if p.ID != "" {
		row = s.read.QueryRowContext(ctx, q("get_wait"), p.ID)
	} else {
		row = s.read.QueryRowContext(ctx, q("get_wait_by_step"), p.RunID, p.Attempt, p.ScopePath, p.StepID)
	}
	w, err := scanWait(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("wait %s%s/%s: %w", p.ID, p.ScopePath, p.StepID, starflowtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get wait: %w", err)
	}
	return w, nil
}

// ListWaits implements state.Waiter.
func (s *Store) ListWaits(ctx context.Context, p *state.ListWaitsParams) ([]*starflowtype.Wait, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	statuses, _ := json.Marshal(orEmpty(p.Status))
	rows, err := s.read.QueryContext(ctx, q("list_waits"), p.RunID, string(statuses), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list waits: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.Wait
	for rows.Next() {
		w, err := scanWait(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: list waits: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// WakeWait implements state.Waiter.
func (s *Store) WakeWait(ctx context.Context, p *state.WakeWaitParams) (*starflowtype.Wait, error) {
	var out *starflowtype.Wait
	_, err := s.inTx(ctx, "WakeWait", "", false, func(t *txn) error {
		w, err := scanWait(t.queryRow(ctx, "get_wait", p.WaitID))
		notFound := fmt.Errorf("wait %s with that token: %w", p.WaitID, starflowtype.ErrNotFound)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound
		}
		if err != nil {
			return translate(err)
		}
		if w.TokenHash == "" || w.TokenHash != p.TokenHash || (p.RunID != "" && p.RunID != w.RunID) {
			return notFound
		}
		t.ch.RunID = w.RunID
		if err := s.wake(ctx, t, w, starflowtype.WaitWoken, p.Payload, "token", true); err != nil {
			return err
		}
		out, err = t.waitChanged(ctx, w.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: wake: %w", err)
	}
	return out, nil
}

// Signal implements state.Waiter.
func (s *Store) Signal(ctx context.Context, p *state.SignalParams) (*state.SignalResult, error) {
	if err := state.CheckSignal(p); err != nil {
		return nil, fmt.Errorf("sqlitestore: signal: %w", err)
	}
	res := &state.SignalResult{}
	_, err := s.inTx(ctx, "Signal", p.RunID, false, func(t *txn) error {
		ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
		if p.RunID != "" {
			m, status, _, err := t.runState(ctx, p.WorkspaceID, p.RunID)
			if err != nil {
				return err
			}
			if status.Terminal() {
				return fmt.Errorf("run %s already ended %s: %w", p.RunID, status, starflowtype.ErrConflict)
			}
			ws = m.workspace
		}
		var id string
		err := t.queryRow(ctx, "pending_wait_for_signal", p.RunID, ws, p.Signal, p.CorrelationKey).Scan(&id)
		if err == nil {
			w, err := scanWait(t.queryRow(ctx, "get_wait", id))
			if err != nil {
				return translate(err)
			}
			t.ch.RunID = w.RunID
			if err := s.wake(ctx, t, w, starflowtype.WaitWoken, p.Payload, "signal", true); err != nil {
				return err
			}
			res.Wait, err = t.waitChanged(ctx, id)
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return translate(err)
		}
		e := &starflowtype.InboxEntry{ID: uuid.NewString(), WorkspaceID: ws, RunID: p.RunID, Signal: p.Signal,
			CorrelationKey: p.CorrelationKey, Payload: p.Payload}
		var created string
		if err := t.queryRow(ctx, "insert_inbox", e.ID, ws, nullString(p.RunID), p.Signal,
			nullString(p.CorrelationKey), nullJSON(p.Payload)).Scan(&created); err != nil {
			return translate(err)
		}
		e.CreatedAt = parseTime(created)
		res.Inbox = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: signal %s: %w", p.Signal, err)
	}
	return res, nil
}

// FireDueWaits implements state.Waiter: one transaction per wait.
func (s *Store) FireDueWaits(ctx context.Context, p *state.FireDueWaitsParams) ([]*starflowtype.Wait, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	rows, err := s.read.QueryContext(ctx, q("due_waits"), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: fire due waits: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlitestore: fire due waits: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: fire due waits: %w", err)
	}
	var out []*starflowtype.Wait
	for _, id := range ids {
		var fired *starflowtype.Wait
		_, err := s.inTx(ctx, "FireDueWaits", "", false, func(t *txn) error {
			w, err := scanWait(t.queryRow(ctx, "get_wait", id))
			if err != nil {
				return translate(err)
			}
			var now string
			if err := t.tx.QueryRowContext(ctx, `SELECT strftime('%Y-%m-%dT%H:%M:%fZ','now')`).Scan(&now); err != nil {
				return err
			}
			status, payload, via, due := dueWake(w, parseTime(now))
			if w.Status != starflowtype.WaitPending || !due {
				t.idle = true // fired or woken meanwhile
				return nil
			}
			t.ch.RunID = w.RunID
			if err := s.wake(ctx, t, w, status, payload, via, false); err != nil {
				return err
			}
			fired, err = t.waitChanged(ctx, id)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("sqlitestore: fire wait %s: %w", id, err)
		}
		if fired != nil {
			out = append(out, fired)
		}
	}
	return out, nil
}

// dueWake decides what the poller does with pending wait w at now: a due
// timer wakes it (payload {"fired_at": now}), else a due timeout times it
// out (payload {"timed_out": true}). When both are due the earlier wins
// (the timer on a tie).
func dueWake(w *starflowtype.Wait, now time.Time) (starflowtype.WaitStatus, json.RawMessage, string, bool) {
	timer := !w.WakeAt.IsZero() && !w.WakeAt.After(now)
	timeout := !w.ExpiresAt.IsZero() && !w.ExpiresAt.After(now)
	switch {
	case timer && (!timeout || !w.WakeAt.After(w.ExpiresAt)):
		b, _ := json.Marshal(map[string]any{"fired_at": now.UTC().Format(time.RFC3339Nano)})
		return starflowtype.WaitWoken, b, "timer", true
	case timeout:
		return starflowtype.WaitTimedOut, json.RawMessage(`{"timed_out":true}`), "timeout", true
	}
	return "", nil, "", false
}

// PendingNotifies implements state.Waiter.
func (s *Store) PendingNotifies(ctx context.Context, p *state.PendingNotifiesParams) ([]*starflowtype.Wait, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.read.QueryContext(ctx, q("pending_notifies"), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: pending notifies: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.Wait
	for rows.Next() {
		w, err := scanWait(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: pending notifies: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// MarkNotified implements state.Waiter.
func (s *Store) MarkNotified(ctx context.Context, p *state.MarkNotifiedParams) error {
	_, err := s.inTx(ctx, "MarkNotified", "", false, func(t *txn) error {
		if err := mustAffect(t.exec(ctx, "mark_notified", p.WaitID, p.Delivered, sqliteOffset(p.RetryIn))); err != nil {
			if errors.Is(err, starflowtype.ErrConflict) {
				return fmt.Errorf("wait %s: %w", p.WaitID, starflowtype.ErrNotFound)
			}
			return err
		}
		w, err := t.waitChanged(ctx, p.WaitID)
		if err == nil {
			t.ch.RunID = w.RunID
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: mark notified: %w", err)
	}
	return nil
}

// SessionGet implements state.Waiter.
func (s *Store) SessionGet(ctx context.Context, p *state.SessionGetParams) (*starflowtype.SessionVar, error) {
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	v, err := scanSessionVar(s.read.QueryRowContext(ctx, q("session_get"), ws, p.SessionID, p.Key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %s key %q: %w", p.SessionID, p.Key, starflowtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: session get: %w", err)
	}
	return v, nil
}

// SessionSet implements state.Waiter.
func (s *Store) SessionSet(ctx context.Context, p *state.SessionSetParams) (*starflowtype.SessionVar, error) {
	if err := state.CheckSessionSet(p); err != nil {
		return nil, fmt.Errorf("sqlitestore: session set: %w", err)
	}
	var out *starflowtype.SessionVar
	_, err := s.inTx(ctx, "SessionSet", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		ws := orDefault(p.WorkspaceID, m.workspace)
		out, err = scanSessionVar(t.queryRow(ctx, "session_set", ws, p.SessionID, p.Key, string(p.Value), p.RunID, absTime(p.KeepUntil), offset(p.KeepFor)))
		if err != nil {
			return translate(err)
		}
		v := *out
		t.ch.SessionVars = append(t.ch.SessionVars, &v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: session set %s/%s: %w", p.SessionID, p.Key, err)
	}
	return out, nil
}

// DeleteExpiredSessionVars implements state.Waiter.
func (s *Store) DeleteExpiredSessionVars(ctx context.Context, p *state.DeleteExpiredSessionVarsParams) (int64, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var n int64
	_, err := s.inTx(ctx, "DeleteExpiredSessionVars", "", false, func(t *txn) error {
		rows, err := t.query(ctx, "session_gc", limit)
		if err != nil {
			return translate(err)
		}
		if err := t.removedVars(rows); err != nil {
			return err
		}
		n = int64(len(t.ch.SessionVars))
		t.idle = n == 0
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: session gc: %w", err)
	}
	return n, nil
}

// WakeKeys implements state.Waiter.
func (s *Store) WakeKeys(ctx context.Context) ([]state.WakeKey, error) {
	rows, err := s.read.QueryContext(ctx, q("wake_keys"))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: wake keys: %w", err)
	}
	defer rows.Close()
	var out []state.WakeKey
	for rows.Next() {
		var k state.WakeKey
		var created string
		if err := rows.Scan(&k.ID, &k.Fingerprint, &created); err != nil {
			return nil, fmt.Errorf("sqlitestore: wake keys: %w", err)
		}
		k.CreatedAt = parseTime(created)
		out = append(out, k)
	}
	return out, rows.Err()
}

// AddWakeKey implements state.Waiter.
func (s *Store) AddWakeKey(ctx context.Context, k state.WakeKey) (state.WakeKey, error) {
	if err := state.CheckWakeKey(k); err != nil {
		return state.WakeKey{}, fmt.Errorf("sqlitestore: add wake key: %w", err)
	}
	var out state.WakeKey
	_, err := s.inTx(ctx, "AddWakeKey", "", false, func(t *txn) error {
		res, err := t.exec(ctx, "insert_wake_key", k.ID, k.Fingerprint)
		if err != nil {
			return translate(err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			t.idle = true
		}
		var created string
		if err := t.queryRow(ctx, "get_wake_key", k.ID).Scan(&out.ID, &out.Fingerprint, &created); err != nil {
			return translate(err)
		}
		out.CreatedAt = parseTime(created)
		return nil
	})
	if err != nil {
		return state.WakeKey{}, fmt.Errorf("sqlitestore: add wake key %s: %w", k.ID, err)
	}
	return out, nil
}

// wake completes pending wait w with status and payload inside t: the
// wait row (conditionally: ErrWaitClosed when it is no longer pending, or,
// with checkExpiry, when its timeout passed), a wake_received event on the
// wait's run and attempt, and the run re-queued when it is parked.
func (s *Store) wake(ctx context.Context, t *txn, w *starflowtype.Wait, status starflowtype.WaitStatus, payload json.RawMessage, via string, checkExpiry bool) error {
	res, err := t.exec(ctx, "wake_wait", w.ID, string(status), nullJSON(payload), checkExpiry)
	if err != nil {
		return translate(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("wait %s: %w", w.ID, starflowtype.ErrWaitClosed)
	}
	faultpoint.Hit("sqlite.wake.after_wait")
	var m runMeta
	if err := t.queryRow(ctx, "run_meta", w.RunID).Scan(&m.workspace, &m.env, &m.attempt); err != nil {
		return translate(err)
	}
	if err := t.event(ctx, m, w.RunID, w.Attempt, starflowtype.EventWakeReceived, w.StepID, w.ScopePath, state.WakePayload(w, status, via)); err != nil {
		return err
	}
	faultpoint.Hit("sqlite.wake.after_event")
	if _, err := t.exec(ctx, "requeue_parked", w.RunID, w.Attempt, w.ScopePath, w.StepID); err != nil {
		return translate(err)
	}
	return nil
}

// wakeFromChildEnd wakes child wait w (just inserted, nothing in the
// inbox for it) from its child's stored row when that child of w's run
// has already ended: a later attempt re-attaching to the child its
// earlier attempt started (the child id does not depend on the attempt)
// finds the end even when it was delivered to that attempt's wait and
// resumed, or to no one. A child still running is left to deliver its
// end itself.
func (s *Store) wakeFromChildEnd(ctx context.Context, t *txn, w *starflowtype.Wait, child string) error {
	var status, output, errText string
	err := t.queryRow(ctx, "child_end", child, w.RunID).Scan(&status, &output, &errText)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return translate(err)
	}
	payload := state.ChildPayload(child, status, json.RawMessage(output), errText)
	return s.wake(ctx, t, w, starflowtype.WaitWoken, payload, "child", false)
}

// waitChanged reads wait id back into the Change and returns it.
func (t *txn) waitChanged(ctx context.Context, id string) (*starflowtype.Wait, error) {
	w, err := scanWait(t.queryRow(ctx, "get_wait", id))
	if err != nil {
		return nil, fmt.Errorf("read back wait %s: %w", id, translate(err))
	}
	c := *w
	t.ch.Waits = append(t.ch.Waits, &c)
	return w, nil
}

// removedVars records the (workspace, session, key) rows of a DELETE …
// RETURNING as removed session variables in the Change, and closes rows.
func (t *txn) removedVars(rows *sql.Rows) error {
	defer rows.Close()
	for rows.Next() {
		var v starflowtype.SessionVar
		if err := rows.Scan(&v.WorkspaceID, &v.SessionID, &v.Key); err != nil {
			return err
		}
		t.ch.SessionVars = append(t.ch.SessionVars, &v)
	}
	return rows.Err()
}

// otherRun records run id, changed by a write addressed to another run, in
// the Change's Runs.
func (t *txn) otherRun(ctx context.Context, id string) error {
	r, err := getRun(ctx, t.tx, "", id)
	if err != nil {
		return err
	}
	t.ch.Runs = append(t.ch.Runs, r)
	return nil
}

// endRun is what every end of a run does in its transaction (state.Waiter):
// the session variables it wrote without keep_until are dropped, its
// pending waits cancelled, and its end delivered to its parent.
func (s *Store) endRun(ctx context.Context, t *txn, runID string) error {
	rows, err := t.query(ctx, "session_drop_run", runID)
	if err != nil {
		return translate(err)
	}
	if err := t.removedVars(rows); err != nil {
		return err
	}
	if err := t.cancelWaits(ctx, "cancel_waits", runID); err != nil {
		return err
	}
	var parent, status, output, errText, ws string
	if err := t.queryRow(ctx, "run_end_info", runID).Scan(&parent, &status, &output, &errText, &ws); err != nil {
		return translate(err)
	}
	if parent == "" {
		return nil
	}
	payload := state.ChildPayload(runID, status, json.RawMessage(output), errText)
	return s.deliverChild(ctx, t, parent, runID, payload)
}

// cancelWaits runs a cancel_* query and records the waits it cancelled.
func (t *txn) cancelWaits(ctx context.Context, query string, args ...any) error {
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return translate(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := t.waitChanged(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// deliverChild hands a child's end to its parent: the parent's pending
// child wait for it is woken (the parent re-queued when parked), or else
// an inbox row waits for that wait to register. A parent that ended (or
// is gone) gets nothing: nothing of it waits any more.
func (s *Store) deliverChild(ctx context.Context, t *txn, parent, child string, payload json.RawMessage) error {
	pm, status, _, err := t.runState(ctx, "", parent)
	if errors.Is(err, starflowtype.ErrNotFound) || (err == nil && status.Terminal()) {
		return nil
	}
	if err != nil {
		return err
	}
	var id string
	err = t.queryRow(ctx, "pending_child_wait", parent, child).Scan(&id)
	if err == nil {
		w, err := scanWait(t.queryRow(ctx, "get_wait", id))
		if err != nil {
			return translate(err)
		}
		if err := s.wake(ctx, t, w, starflowtype.WaitWoken, payload, "child", false); err != nil {
			return err
		}
		if _, err := t.waitChanged(ctx, id); err != nil {
			return err
		}
		return t.otherRun(ctx, parent)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return translate(err)
	}
	var created string
	return translate(t.queryRow(ctx, "insert_inbox", uuid.NewString(), pm.workspace, parent,
		starflowtype.ChildSignal, child, string(payload)).Scan(&created))
}

// endAttempt is what the end of an attempt that the run outlives (the
// sweep, a retry) does to its waits: a wake it received but never resumed
// goes back to the inbox, for the next attempt's wait to consume, and its
// pending waits are cancelled. Call it before the attempt's steps are
// closed.
func (s *Store) endAttempt(ctx context.Context, t *txn, runID string, attempt int) error {
	rows, err := t.query(ctx, "unresumed_wakes", runID, attempt)
	if err != nil {
		return translate(err)
	}
	type wake struct{ ws, signal, key, payload, kind string }
	var wakes []wake
	for rows.Next() {
		var w wake
		if err := rows.Scan(&w.ws, &w.signal, &w.key, &w.payload, &w.kind); err != nil {
			rows.Close()
			return err
		}
		wakes = append(wakes, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, w := range wakes {
		var created string
		if err := t.queryRow(ctx, "insert_inbox", uuid.NewString(), w.ws, runID, w.signal,
			nullString(w.key), w.payload).Scan(&created); err != nil {
			return translate(err)
		}
	}
	return t.cancelWaits(ctx, "cancel_attempt_waits", runID, attempt)
}

// cancelTree cancels run id (as CancelRun does) and then its non-terminal
// children, recursively. top: the run the operator named (a terminal one
// is ErrConflict); children that ended meanwhile are left alone.
func (s *Store) cancelTree(ctx context.Context, t *txn, workspace, id string, top bool, depth int) error {
	if depth > maxCancelDepth {
		return fmt.Errorf("run %s: child runs nested deeper than %d", id, maxCancelDepth)
	}
	m, status, claim, err := t.runState(ctx, workspace, id)
	if err != nil {
		return err
	}
	switch {
	case status.Terminal():
		if top {
			return fmt.Errorf("run %s already ended %s: %w", id, status, starflowtype.ErrConflict)
		}
		return nil
	case claim == starflowtype.ClaimClaimed || claim == starflowtype.ClaimRunning:
		if _, err := t.exec(ctx, "run_cancel_requested", id); err != nil {
			return translate(err)
		}
	default:
		if _, err := t.exec(ctx, "run_cancelled", id); err != nil {
			return translate(err)
		}
		if _, err := t.exec(ctx, "steps_cancelled", id, m.attempt); err != nil {
			return translate(err)
		}
		by := map[string]any{"by": "operator"}
		if !top {
			by = map[string]any{"by": "parent"}
		}
		payload, _ := json.Marshal(by)
		if err := t.event(ctx, m, id, 0, starflowtype.EventRunCancelled, "", "", payload); err != nil {
			return err
		}
		if err := s.endRun(ctx, t, id); err != nil {
			return err
		}
	}
	return s.cancelChildren(ctx, t, id, depth)
}

// cancelChildren cancels the non-terminal children of run id (at depth
// of the cascade) as cancelTree does, recursively, and lists them in the
// Change's Runs.
func (s *Store) cancelChildren(ctx context.Context, t *txn, id string, depth int) error {
	children, err := t.children(ctx, id)
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := s.cancelTree(ctx, t, "", c, false, depth+1); err != nil {
			return err
		}
		if err := t.otherRun(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// cancelParked ends run id, just parked with cancel_requested, as an
// immediate cancel does, children included: a workflow_call may have
// started its child after CancelRun cascaded.
func (s *Store) cancelParked(ctx context.Context, t *txn, id string) error {
	m, _, _, err := t.runState(ctx, "", id)
	if err != nil {
		return err
	}
	if _, err := t.exec(ctx, "run_cancelled", id); err != nil {
		return translate(err)
	}
	if _, err := t.exec(ctx, "steps_cancelled", id, m.attempt); err != nil {
		return translate(err)
	}
	payload, _ := json.Marshal(map[string]any{"by": "operator", "at": "park"})
	if err := t.event(ctx, m, id, 0, starflowtype.EventRunCancelled, "", "", payload); err != nil {
		return err
	}
	if err := s.endRun(ctx, t, id); err != nil {
		return err
	}
	return s.cancelChildren(ctx, t, id, 0)
}

// children lists run id's non-terminal child runs.
func (t *txn) children(ctx context.Context, id string) ([]string, error) {
	rows, err := t.query(ctx, "children", id)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func scanWait(sc scanner) (*starflowtype.Wait, error) {
	var w starflowtype.Wait
	var kind, status, created string
	var wakeAt, expiresAt, notifiedAt, consumedAt, payload, notify sql.NullString
	err := sc.Scan(&w.ID, &w.RunID, &w.WorkspaceID, &w.Attempt, &w.ScopePath, &w.StepID, &kind,
		&w.Signal, &w.CorrelationKey, &w.TokenHash, &w.KeyID, &wakeAt, &expiresAt, &status,
		&payload, &notify, &notifiedAt, &w.NotifyTries, &created, &consumedAt)
	if err != nil {
		return nil, err
	}
	w.Kind = starflowtype.WaitKind(kind)
	w.Status = starflowtype.WaitStatus(status)
	w.WakeAt = parseNullTime(wakeAt)
	w.ExpiresAt = parseNullTime(expiresAt)
	w.NotifiedAt = parseNullTime(notifiedAt)
	w.ConsumedAt = parseNullTime(consumedAt)
	w.CreatedAt = parseTime(created)
	w.Payload = rawJSON(payload)
	w.Notify = rawJSON(notify)
	return &w, nil
}

func scanSessionVar(sc scanner) (*starflowtype.SessionVar, error) {
	var v starflowtype.SessionVar
	var value, updated string
	var keep sql.NullString
	if err := sc.Scan(&v.WorkspaceID, &v.SessionID, &v.Key, &value, &v.OriginRunID, &keep, &updated); err != nil {
		return nil, err
	}
	v.Value = json.RawMessage(value)
	v.KeepUntil = parseNullTime(keep)
	v.UpdatedAt = parseTime(updated)
	return &v, nil
}

// absTime is t as stored, or NULL when zero.
func absTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

// offset is d as a strftime modifier, or NULL when not positive.
func offset(d time.Duration) any {
	if d <= 0 {
		return nil
	}
	return sqliteOffset(d)
}
