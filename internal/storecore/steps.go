package storecore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// The step writes (OnNodeStart, OnNodeRetry, OnNodeComplete, OnNodeError,
// OnNodeSkipped) are each one StepWrite: the core decides what is written
// (the row's transition, the events and their payloads, the checkpoint and
// its blobs), the dialect executes it (execStep), and the core reads the
// outcome (recordStep). They go through the group committer on both
// dialects.

// OnNodeStart implements state.Adapter.
func (s *Store) OnNodeStart(ctx context.Context, p *state.NodeStartParams) error {
	w := &StepWrite{Op: StepStart, Key: p.StepKey, Lease: p.Lease, Kind: p.Kind, Try: p.Try, RefuseCancelled: true,
		Events: []EventIn{{starflowtype.EventNodeStart, tryPayload(p.Try, p.Payload)}}}
	err := s.stepWrite(ctx, state.OpNodeStart, w, func(*txn) error {
		return fmt.Errorf("step %q: try %d not started: the step already succeeded in attempt %d, or started try %d or a later one: %w",
			p.StepID, p.Try, p.Attempt, p.Try, starflowtype.ErrConflict)
	})
	if err != nil {
		return s.errorf("node start %s: %w", p.StepID, err)
	}
	return nil
}

// OnNodeRetry implements state.Adapter.
func (s *Store) OnNodeRetry(ctx context.Context, p *state.NodeRetryParams) error {
	payload := marshal(map[string]any{"try": p.Try, "error": p.Error, "backoff_ms": p.Backoff.Milliseconds()})
	w := &StepWrite{Op: StepRetry, Key: p.StepKey, Lease: p.Lease, Try: p.Try, Error: p.Error,
		Events: []EventIn{{starflowtype.EventNodeRetry, payload}}}
	err := s.stepWrite(ctx, state.OpNodeRetry, w, func(*txn) error {
		return fmt.Errorf("step %q is not running: %w", p.StepID, starflowtype.ErrConflict)
	})
	if err != nil {
		return s.errorf("node retry %s: %w", p.StepID, err)
	}
	return nil
}

// OnNodeComplete implements state.Adapter: ledger row, node_complete event
// and checkpoint in one transaction (with p.WithStart, node_start first).
func (s *Store) OnNodeComplete(ctx context.Context, p *state.NodeCompleteParams) error {
	w := &StepWrite{Op: StepSucceed, Key: p.StepKey, Lease: p.Lease, Kind: p.Kind, Try: p.Try}
	w.Checkpoint = &CheckpointIn{}
	w.Checkpoint.Context, w.Checkpoint.ContextBlob = s.blobbed(jsonOr(p.Context, "{}"), &w.Blobs)
	w.Checkpoint.Output, w.Checkpoint.OutputBlob = s.blobbed(jsonOr(p.Output, "null"), &w.Blobs)
	conflict := func(*txn) error {
		return fmt.Errorf("step %q is not open: %w", p.StepID, starflowtype.ErrConflict)
	}
	if p.WithStart {
		w.Op, w.RefuseCancelled = StepStartSucceed, true
		w.Events = append(w.Events, EventIn{starflowtype.EventNodeStart, tryPayload(p.Try, nil)})
		conflict = func(*txn) error {
			return fmt.Errorf("step %q: try %d not started: the step already succeeded in attempt %d, or started try %d or a later one: %w",
				p.StepID, p.Try, p.Attempt, p.Try, starflowtype.ErrConflict)
		}
	}
	w.Events = append(w.Events, EventIn{starflowtype.EventNodeComplete, tryPayload(p.Try, nil)})
	if err := s.stepWrite(ctx, state.OpNodeComplete, w, conflict); err != nil {
		return s.errorf("node complete %s: %w", p.StepID, err)
	}
	return nil
}

// OnNodeError implements state.Adapter. A step that failed with no open
// row (it failed before it started, e.g. its `when` did not evaluate) gets
// a failed row of its own, unless it succeeded, which is final within the
// attempt. With p.Cancelled the row is cancelled instead, by the same
// statements.
func (s *Store) OnNodeError(ctx context.Context, p *state.NodeErrorParams) error {
	payload := p.Payload
	if payload == nil {
		m := map[string]any{"try": p.Try, "error": p.Error}
		if p.Cancelled {
			m["cancelled"] = true
		}
		payload = marshal(m)
	}
	w := &StepWrite{Op: StepFail, Key: p.StepKey, Lease: p.Lease, Kind: p.Kind, Try: p.Try, Error: p.Error,
		Cancelled: p.Cancelled, Events: []EventIn{{starflowtype.EventNodeError, payload}}}
	err := s.stepWrite(ctx, state.OpNodeError, w, func(*txn) error {
		return fmt.Errorf("step %q already succeeded: %w", p.StepID, starflowtype.ErrConflict)
	})
	if err != nil {
		return s.errorf("node error %s: %w", p.StepID, err)
	}
	return nil
}

// OnNodeSkipped implements state.Adapter.
func (s *Store) OnNodeSkipped(ctx context.Context, p *state.NodeSkippedParams) error {
	var payload json.RawMessage
	if p.Reason != "" {
		payload = marshal(map[string]any{"reason": p.Reason})
	}
	w := &StepWrite{Op: StepSkip, Key: p.StepKey, Lease: p.Lease, Kind: p.Kind,
		Events: []EventIn{{starflowtype.EventNodeSkipped, payload}}}
	err := s.stepWrite(ctx, state.OpNodeSkipped, w, func(t *txn) error {
		if w.Prior == starflowtype.StepSkipped {
			// Already skipped in this attempt: nothing to write, no hook.
			t.idle = true
			return nil
		}
		return fmt.Errorf("step %q already succeeded: %w", p.StepID, starflowtype.ErrConflict)
	})
	if err != nil {
		return s.errorf("node skipped %s: %w", p.StepID, err)
	}
	return nil
}

// stepWrite executes w as one write of op; unchanged is the outcome when
// the step statement changed no row (a conflict, or nothing to do).
func (s *Store) stepWrite(ctx context.Context, op state.Op, w *StepWrite, unchanged func(t *txn) error) error {
	w.WantRun = len(s.cfg.Hooks) > 0
	record := func(t *txn) error { return t.recordStep(w, unchanged) }
	if s.batch != nil {
		_, err := s.commit.do(ctx, &job{op: op, runID: w.Key.RunID, sw: w, fn: record})
		return err
	}
	_, err := s.write(ctx, op, w.Key.RunID, false, func(t *txn) error {
		if err := s.execStep(ctx, t.tx, w); err != nil {
			return err
		}
		return record(t)
	})
	return err
}

// recordStep turns an executed step write into its outcome and the
// Change.
func (t *txn) recordStep(w *StepWrite, unchanged func(t *txn) error) error {
	if !w.Fenced {
		return lost(w.Key.RunID, w.Lease)
	}
	if w.RefuseCancelled && w.Cancel {
		return fmt.Errorf("run %s: %w", w.Key.RunID, starflowtype.ErrCancelRequested)
	}
	t.ch.RunID = w.Run.ID
	if !w.Changed {
		return unchanged(t)
	}
	if !w.WantRun {
		return nil // no hook needs the rows
	}
	t.ch.Run = w.Run
	t.ch.Steps = append(t.ch.Steps, w.Step)
	for i, e := range w.Events {
		t.ch.Events = append(t.ch.Events, &starflowtype.Event{ID: w.EventIDs[i], RunID: w.Run.ID, Attempt: w.Key.Attempt,
			Type: e.Type, NodeID: w.Key.StepID, ScopePath: w.Key.ScopePath, Payload: e.Payload, CreatedAt: w.EventsAt})
	}
	return nil
}

// execStep executes w inside tx: through the dialect's StepBatcher when it
// has one, else statement by statement.
func (s *Store) execStep(ctx context.Context, tx Tx, w *StepWrite) error {
	w.Fenced, w.Cancel, w.Run, w.Changed, w.Step, w.Prior, w.EventIDs = false, false, nil, false, nil, "", nil
	if s.batch != nil {
		return s.batch.StepWrites(ctx, tx.Conn(), []*StepWrite{w})
	}
	return s.execStepStatements(ctx, tx, w)
}

// execStepStatements is execStep with the named queries, one at a time.
func (s *Store) execStepStatements(ctx context.Context, tx Tx, w *StepWrite) error {
	id, ok := CanonicalID(w.Key.RunID)
	if !ok {
		return nil
	}
	if w.WantRun {
		r, err := scanRun(tx.QueryRow(ctx, "fence_run", id, w.Lease.RunnerID, w.Lease.Epoch))
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("fence: %w", err)
		}
		w.Run = r
	} else {
		r := &starflowtype.Run{ID: id}
		var status, parent, mode, pool string
		var maxAttempts int
		err := tx.QueryRow(ctx, "fence", id, w.Lease.RunnerID, w.Lease.Epoch).Scan(&r.WorkspaceID, &r.Env, &r.Attempt, &r.CancelRequested,
			&status, &parent, &maxAttempts, &mode, &pool)
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("fence: %w", err)
		}
		w.Run = r
	}
	w.Fenced, w.Cancel = true, w.Run.CancelRequested
	if w.RefuseCancelled && w.Cancel {
		return nil
	}
	k, ws, env := w.Key, w.Run.WorkspaceID, w.Run.Env
	// step runs the step statement: with WantRun it reads the row back
	// from RETURNING, else it only counts the rows changed.
	step := func(name string, args ...any) (bool, error) {
		if !w.WantRun {
			n, err := tx.Exec(ctx, name, args...)
			w.Changed = n > 0
			return w.Changed, err
		}
		st, err := scanStep(tx.QueryRow(ctx, name, args...))
		if isNoRows(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		w.Step, w.Changed = st, true
		return true, nil
	}
	var err error
	switch w.Op {
	case StepStart:
		_, err = step("step_start", id, k.Attempt, k.ScopePath, k.StepID, ws, env, w.Kind, w.Try)
	case StepRetry:
		_, err = step("step_retry", w.Try, w.Error, id, k.Attempt, k.ScopePath, k.StepID)
	case StepSucceed:
		_, err = step("step_finish", string(starflowtype.StepSucceeded), w.Try, nil, id, k.Attempt, k.ScopePath, k.StepID)
	case StepStartSucceed:
		_, err = step("step_start_succeed", id, k.Attempt, k.ScopePath, k.StepID, ws, env, w.Kind, w.Try)
	case StepFail:
		var ok bool
		status := string(w.FailStatus())
		if ok, err = step("step_finish", status, w.Try, w.Error, id, k.Attempt, k.ScopePath, k.StepID); err == nil && !ok {
			_, err = step("step_failed_unstarted", id, k.Attempt, k.ScopePath, k.StepID, ws, env, w.Kind, w.Try, w.Error, status)
		}
	case StepSkip:
		var ok bool
		if ok, err = step("step_skipped", id, k.Attempt, k.ScopePath, k.StepID, ws, env, w.Kind); err == nil && !ok {
			st, gerr := scanStep(tx.QueryRow(ctx, "get_step", id, k.Attempt, k.ScopePath, k.StepID))
			if gerr == nil {
				w.Prior = st.Status
			} else if !isNoRows(gerr) {
				err = fmt.Errorf("read step: %w", gerr)
			}
		}
	}
	if err != nil || !w.Changed {
		return err
	}
	point := ""
	if w.Op == StepSucceed || w.Op == StepStartSucceed {
		point = s.d.Name() + "." + string(state.OpNodeComplete) + "."
	}
	hit := func(name string) {
		if point != "" {
			faultpoint.Hit(point + name)
		}
	}
	hit("after_step")
	for _, b := range w.Blobs {
		if _, err := tx.Exec(ctx, "insert_blob", b.Sum, len(b.Data), b.Data); err != nil {
			return fmt.Errorf("blob: %w", err)
		}
	}
	if err := insertEvents(ctx, tx, w, id, ws, env); err != nil {
		return err
	}
	hit("after_event")
	if c := w.Checkpoint; c != nil {
		if _, err := tx.Exec(ctx, "insert_checkpoint", id, k.ScopePath, k.StepID, k.Attempt, ws, env,
			string(c.Context), string(c.Output), nullString(c.ContextBlob), nullString(c.OutputBlob)); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		hit("after_checkpoint")
	}
	return nil
}

// insertEvents appends w's events (a pair in one statement), reading their
// ids back only when hooks need them.
func insertEvents(ctx context.Context, tx Tx, w *StepWrite, id, ws, env string) error {
	k := w.Key
	if len(w.Events) == 2 {
		a, b := w.Events[0], w.Events[1]
		args := []any{id, ws, env, k.Attempt, k.StepID, k.ScopePath, string(a.Type), a.Payload, string(b.Type), b.Payload}
		if !w.WantRun {
			if _, err := tx.Exec(ctx, "insert_event_pair", args...); err != nil {
				return fmt.Errorf("insert %s and %s events: %w", a.Type, b.Type, err)
			}
			return nil
		}
		rows, err := tx.Query(ctx, "insert_event_pair", args...)
		if err != nil {
			return fmt.Errorf("insert %s and %s events: %w", a.Type, b.Type, err)
		}
		defer rows.Close()
		for rows.Next() {
			var eid int64
			if err := rows.Scan(&eid, &w.EventsAt); err != nil {
				return err
			}
			w.EventIDs = append(w.EventIDs, eid)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		slices.Sort(w.EventIDs) // RETURNING keeps no order; ids ascend with the rows
		return nil
	}
	for _, e := range w.Events {
		args := []any{id, ws, env, k.Attempt, string(e.Type), k.StepID, k.ScopePath, e.Payload}
		if !w.WantRun {
			if _, err := tx.Exec(ctx, "insert_event", args...); err != nil {
				return fmt.Errorf("insert %s event: %w", e.Type, err)
			}
			continue
		}
		var eid int64
		if err := tx.QueryRow(ctx, "insert_event", args...).Scan(&eid, &w.EventsAt); err != nil {
			return fmt.Errorf("insert %s event: %w", e.Type, err)
		}
		w.EventIDs = append(w.EventIDs, eid)
	}
	return nil
}

// tryPayload is the payload of a node_start, node_complete: {"try": N}
// and, when given, the rendered input.
func tryPayload(try int, input json.RawMessage) json.RawMessage {
	m := map[string]any{"try": try}
	if len(input) > 0 {
		m["input"] = input
	}
	return marshal(m)
}
