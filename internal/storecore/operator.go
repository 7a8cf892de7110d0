package storecore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// runState locks (where the dialect locks rows) and reads the run an
// operator action or a wake acts on. ErrNotFound when it does not exist
// (in workspace, when set).
func (t *txn) runState(ctx context.Context, workspace, runID string) (runMeta, starflowtype.RunStatus, starflowtype.ClaimState, string, error) {
	var m runMeta
	var status, claim, pool string
	notFound := fmt.Errorf("run %s: %w", runID, starflowtype.ErrNotFound)
	id, ok := CanonicalID(runID)
	if !ok {
		return m, "", "", "", notFound
	}
	err := t.tx.QueryRow(ctx, "run_state", id, workspace).Scan(&m.workspace, &m.env, &m.attempt, &status, &claim, &pool)
	if isNoRows(err) {
		return m, "", "", "", notFound
	}
	if err != nil {
		return m, "", "", "", err
	}
	m.id = id
	return m, starflowtype.RunStatus(status), starflowtype.ClaimState(claim), pool, nil
}

// CancelRun implements state.Adapter. An immediate cancel also ends the
// run's waits and session variables and tells its parent (endRun); either
// way the run's non-terminal children are cancelled too, recursively.
func (s *Store) CancelRun(ctx context.Context, p *state.CancelRunParams) (*starflowtype.Run, error) {
	run, err := s.write(ctx, state.OpCancelRun, p.RunID, true, func(t *txn) error {
		return t.cancelTree(ctx, p.WorkspaceID, p.RunID)
	})
	if err != nil {
		return nil, s.errorf("cancel: %w", err)
	}
	return run, nil
}

// RequeueRun implements state.Adapter.
func (s *Store) RequeueRun(ctx context.Context, p *state.RequeueRunParams) (*starflowtype.Run, error) {
	run, err := s.write(ctx, state.OpRequeueRun, p.RunID, true, func(t *txn) error {
		m, status, claim, pool, err := t.runState(ctx, p.WorkspaceID, p.RunID)
		if err != nil {
			return err
		}
		t.ch.RunID = m.id
		if claim == starflowtype.ClaimClaimed || claim == starflowtype.ClaimRunning ||
			(p.Reason != "retrigger" && status == starflowtype.RunSucceeded) ||
			status == starflowtype.RunQueued || status == starflowtype.RunPaused {
			return fmt.Errorf("run %s is %s (claim_state %s); %s: %w", p.RunID, status, claim, requeueable(p.Reason, status), starflowtype.ErrConflict)
		}
		defID := p.DefinitionID
		if defID != "" {
			if defID, err = checkID("definition id", defID); err != nil {
				return err
			}
		}
		if _, err := t.tx.Exec(ctx, "run_requeued", string(p.RecoveryMode), defID, p.WorkflowRevision, m.id); err != nil {
			return err
		}
		t.notify = append(t.notify, pool)
		payload := marshal(map[string]any{"reason": p.Reason, "recovery_mode": p.RecoveryMode,
			"revision": p.WorkflowRevision, "attempt": m.attempt + 1})
		return t.event(ctx, m, m.id, m.attempt+1, starflowtype.EventRunQueued, "", "", payload)
	})
	if err != nil {
		return nil, s.errorf("requeue: %w", err)
	}
	return run, nil
}

// requeueable says which runs an operator's resume (or retrigger, by
// reason) can queue again, for the refusal of a run in status.
func requeueable(reason string, status starflowtype.RunStatus) string {
	if reason == "retrigger" {
		return "only an interrupted, failed, cancelled or succeeded run that no runner holds can be retriggered"
	}
	s := "only an interrupted, failed or cancelled run that no runner holds can be resumed"
	if status == starflowtype.RunSucceeded {
		s += " (retrigger it to run it again from the first step)"
	}
	return s
}

// cancelRun ends run m.id as cancelled (its open steps cancelled, the
// run_cancelled event with payload, endRun).
func (t *txn) cancelRun(ctx context.Context, m runMeta, id string, payload map[string]any) error {
	if _, err := t.tx.Exec(ctx, "run_cancelled", id); err != nil {
		return err
	}
	if _, err := t.tx.Exec(ctx, "steps_cancelled", id, m.attempt); err != nil {
		return err
	}
	t.ch.Ended = append(t.ch.Ended, state.EndedAttempt{RunID: id, Attempt: m.attempt})
	var raw []byte
	if payload != nil {
		raw = marshal(payload)
	}
	if err := t.event(ctx, m, id, 0, starflowtype.EventRunCancelled, "", "", raw); err != nil {
		return err
	}
	return t.endRun(ctx, id)
}

// cancelTree cancels run runID, the one the operator named (a terminal
// one is ErrConflict), and then its descendants (cancelChildren).
func (t *txn) cancelTree(ctx context.Context, workspace, runID string) error {
	m, status, claim, _, err := t.runState(ctx, workspace, runID)
	if err != nil {
		return err
	}
	t.ch.RunID = m.id
	if status.Terminal() {
		return fmt.Errorf("run %s already ended %s: %w", runID, status, starflowtype.ErrConflict)
	}
	if err := t.cancelOne(ctx, m, claim, "operator"); err != nil {
		return err
	}
	return t.cancelChildren(ctx, m.id)
}

// cancelOne cancels run m, locked by runState with claim state claim: a
// claimed or running run gets cancel_requested (its runner stops at the
// next step boundary), any other is cancelled at once (cancelRun, its
// run_cancelled event saying by whom: "operator", "parent", "schedule").
func (t *txn) cancelOne(ctx context.Context, m runMeta, claim starflowtype.ClaimState, by string) error {
	if claim == starflowtype.ClaimClaimed || claim == starflowtype.ClaimRunning {
		_, err := t.tx.Exec(ctx, "run_cancel_requested", m.id)
		return err
	}
	return t.cancelRun(ctx, m, m.id, map[string]any{"by": by})
}

// cancelChildren cancels the non-terminal descendants of run id, each as
// cancelOne does, and lists them in the Change's Runs. The tree is walked
// level by level, each run locked as it is reached, so a parent is always
// locked before its children (writes that lock both the other way are
// retried when the dialect reports a deadlock); it has no bound on depth
// (decision 261): an operator must be able to stop a runaway recursion
// of workflow_calls, however deep it went. A child that ended meanwhile
// is left alone, with what is below it. Each run is visited once, so a
// cycle of parent_run_id (which no engine writes) cannot loop.
func (t *txn) cancelChildren(ctx context.Context, id string) error {
	seen := map[string]bool{id: true}
	var cancelled []string
	for level := []string{id}; len(level) > 0; {
		var next []string
		for _, parent := range level {
			children, err := t.strings(ctx, "children", parent)
			if err != nil {
				return err
			}
			for _, c := range children {
				if seen[c] {
					continue
				}
				seen[c] = true
				m, status, claim, _, err := t.runState(ctx, "", c)
				if err != nil {
					return err
				}
				if status.Terminal() {
					continue
				}
				if err := t.cancelOne(ctx, m, claim, "parent"); err != nil {
					return err
				}
				cancelled = append(cancelled, m.id)
				next = append(next, m.id)
			}
		}
		level = next
	}
	// Read back once the whole tree is cancelled, deepest first: the
	// rows as the transaction leaves them.
	for i := len(cancelled) - 1; i >= 0; i-- {
		if err := t.otherRun(ctx, cancelled[i]); err != nil {
			return err
		}
	}
	return nil
}

// cancelParked ends run id, just parked with cancel_requested, as an
// immediate cancel does, children included: a workflow_call may have
// started its child after CancelRun cascaded.
func (t *txn) cancelParked(ctx context.Context, id string) error {
	m, _, _, _, err := t.runState(ctx, "", id)
	if err != nil {
		return err
	}
	if err := t.cancelRun(ctx, m, m.id, map[string]any{"by": "operator", "at": "park"}); err != nil {
		return err
	}
	return t.cancelChildren(ctx, m.id)
}

// endRun is what every end of a run does in its transaction (state.Waiter):
// the session variables it wrote without keep_until are dropped, its
// pending waits cancelled, and its end delivered to its parent.
func (t *txn) endRun(ctx context.Context, runID string) error {
	var parent, status, errText string
	var output, errJSON []byte
	var work int
	if err := t.tx.QueryRow(ctx, "run_end_info", runID).Scan(&parent, &status, &output, &errText, &errJSON, &work); err != nil {
		return err
	}
	return t.ended(ctx, runID, parent, status, output, errText, errJSON, work)
}

// ended is endRun for a run whose end the caller read (its parent,
// status, output, error, error_json and end_work).
func (t *txn) ended(ctx context.Context, runID, parent, status string, output []byte, errText string, errJSON []byte, work int) error {
	if work&endSessionVars != 0 {
		if err := t.removedVars(ctx, "session_drop_run", runID); err != nil {
			return err
		}
	}
	if work&endWaits != 0 {
		if err := t.cancelWaits(ctx, "cancel_waits", runID); err != nil {
			return err
		}
	}
	if parent == "" {
		return nil
	}
	return t.deliverChild(ctx, parent, runID, state.ChildPayload(runID, status, output, errText, errJSON))
}

// deliverChild hands a child's end to its parent (locked): the parent's
// pending child wait for it is woken (the parent re-queued when parked),
// or else an inbox row waits for that wait to register. A parent that
// ended (or is gone) gets nothing: nothing of it waits any more.
func (t *txn) deliverChild(ctx context.Context, parent, child string, payload []byte) error {
	pm, status, _, _, err := t.runState(ctx, "", parent)
	if errors.Is(err, starflowtype.ErrNotFound) || (err == nil && status.Terminal()) {
		return nil
	}
	if err != nil {
		return err
	}
	var id string
	err = t.tx.QueryRow(ctx, "pending_child_wait", pm.id, child).Scan(&id)
	if err == nil {
		w, err := scanWait(t.tx.QueryRow(ctx, "get_wait", id))
		if err != nil {
			return err
		}
		if err := t.wake(ctx, w, starflowtype.WaitWoken, payload, "child", false); err != nil {
			return err
		}
		if _, err := t.waitChanged(ctx, id); err != nil {
			return err
		}
		return t.otherRun(ctx, pm.id)
	}
	if !isNoRows(err) {
		return err
	}
	_, err = t.tx.Exec(ctx, "insert_inbox", uuid.NewString(), pm.workspace, pm.id, starflowtype.ChildSignal, child, string(payload))
	return err
}

// endAttempt is what the end of an attempt that the run outlives (the
// sweep, a retry) does to its waits: a wake it received but never resumed
// goes back to the inbox, for the next attempt's wait to consume, and its
// pending waits are cancelled. Call it before the attempt's steps are
// closed.
func (t *txn) endAttempt(ctx context.Context, runID string, attempt int) error {
	type wake struct {
		ws, signal, key, kind string
		payload               []byte
	}
	rows, err := t.tx.Query(ctx, "unresumed_wakes", runID, attempt)
	if err != nil {
		return err
	}
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
		if _, err := t.tx.Exec(ctx, "insert_inbox", uuid.NewString(), w.ws, runID, w.signal,
			nullString(w.key), string(w.payload)); err != nil {
			return err
		}
	}
	return t.cancelWaits(ctx, "cancel_attempt_waits", runID, attempt)
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

// strings runs a query whose rows are one text column.
func (t *txn) strings(ctx context.Context, name string, args ...any) ([]string, error) {
	return queryStrings(ctx, t.tx, name, args...)
}

func queryStrings(ctx context.Context, q Querier, name string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
