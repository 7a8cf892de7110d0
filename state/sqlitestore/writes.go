package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// txn is one write transaction and the Change it accumulates for hooks.
type txn struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
	ch    *state.Change
	// idle: the transaction wrote nothing (a claim that found no run), so
	// no hook runs for it.
	idle bool
}

// stmt returns the named query prepared on the writer connection, bound to
// this transaction (no re-parse per call; the single writer connection
// keeps the statements).
func (t *txn) stmt(ctx context.Context, name string) *sql.Stmt {
	st, ok := t.stmts[name]
	if !ok {
		panic("sqlitestore: no prepared query " + name)
	}
	return t.tx.StmtContext(ctx, st)
}

func (t *txn) exec(ctx context.Context, name string, args ...any) (sql.Result, error) {
	return t.stmt(ctx, name).ExecContext(ctx, args...)
}

func (t *txn) queryRow(ctx context.Context, name string, args ...any) *sql.Row {
	return t.stmt(ctx, name).QueryRowContext(ctx, args...)
}

func (t *txn) query(ctx context.Context, name string, args ...any) (*sql.Rows, error) {
	return t.stmt(ctx, name).QueryContext(ctx, args...)
}

// runMeta is what the fence returns about the fenced run.
type runMeta struct {
	workspace, env string
	attempt        int
	cancel         bool   // cancel_requested
	status         string // before the write
	parent         string // parent_run_id, "" when none
}

// inTx runs fn in one BEGIN IMMEDIATE transaction on the writer
// connection, then the hooks, then commits. Any error rolls back.
//
// When readRun is set or hooks need it, inTx reads the run the Change
// names (t.ch.RunID, which fn may set) inside the transaction, after fn's
// writes, and returns it, unless fn already set t.ch.Run (fenceRun: a
// write that changes the run only through the fence): a method that
// returns the run it wrote reports exactly what it committed, and cannot
// fail after its commit.
//
// Errors are returned unprefixed: every caller wraps them with its own
// "sqlitestore: <operation>:" prefix.
func (s *Store) inTx(ctx context.Context, op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	stmts, err := s.prepared(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", translate(err))
	}
	t := &txn{tx: tx, stmts: stmts, ch: &state.Change{Op: op, RunID: runID}}
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	hooks := s.cfg.Hooks
	if t.idle {
		hooks = nil
	}
	if t.ch.RunID != "" && t.ch.Run == nil && (readRun || len(hooks) > 0) {
		if t.ch.Run, err = getRun(ctx, tx, "", t.ch.RunID); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("read back run: %w", err)
		}
	}
	for _, h := range hooks {
		if err := h(ctx, state.SQLTx(tx), "sqlite", t.ch); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("hook: %w", err)
		}
	}
	faultpoint.Hit("sqlite." + op + ".before_commit")
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", translate(err))
	}
	if t.ch.Run == nil {
		return nil, nil
	}
	run := *t.ch.Run // the caller's copy: hooks keep theirs
	return &run, nil
}

// fence is the conditional write of SPEC §4. It matches exactly one row or
// returns ErrLeaseLost.
func (t *txn) fence(ctx context.Context, runID string, l starflowtype.Lease) (runMeta, error) {
	var m runMeta
	err := t.queryRow(ctx, "fence", runID, l.RunnerID, l.Epoch).Scan(&m.workspace, &m.env, &m.attempt, &m.cancel, &m.status, &m.parent)
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("run %s, runner %s, epoch %d: %w", runID, l.RunnerID, l.Epoch, starflowtype.ErrLeaseLost)
	}
	if err != nil {
		return m, fmt.Errorf("fence: %w", translate(err))
	}
	return m, nil
}

// blob stores data in workflow_blobs when it is larger than threshold.
// It returns what the checkpoint row keeps in the JSON column (data itself,
// or the reference placeholder) and the value of its blob column: the
// blob's sha256, or nil when data is kept inline. Only that column marks a
// reference (state.BlobRef).
func (t *txn) blob(ctx context.Context, threshold int, data []byte) ([]byte, any, error) {
	if len(data) <= threshold {
		return data, nil, nil
	}
	ref, sum := state.BlobRef(data)
	if _, err := t.exec(ctx, "insert_blob", sum, len(data), data); err != nil {
		return nil, nil, fmt.Errorf("blob: %w", translate(err))
	}
	return ref, sum, nil
}

// event appends one workflow_run_events row and records it in the Change.
func (t *txn) event(ctx context.Context, m runMeta, runID string, attempt int, typ starflowtype.EventType, node, scope string, payload json.RawMessage) error {
	if attempt == 0 {
		attempt = m.attempt
	}
	ev := &starflowtype.Event{RunID: runID, Attempt: attempt, Type: typ, NodeID: node, ScopePath: scope, Payload: payload}
	var created string
	err := t.queryRow(ctx, "insert_event", runID, m.workspace, m.env, attempt, string(typ),
		nullString(node), scope, nullJSON(payload)).Scan(&ev.ID, &created)
	if err != nil {
		return fmt.Errorf("insert %s event: %w", typ, translate(err))
	}
	ev.CreatedAt = parseTime(created)
	t.ch.Events = append(t.ch.Events, ev)
	return nil
}

// stepChanged reads back a step row into the Change (only when hooks need it).
func (s *Store) stepChanged(ctx context.Context, t *txn, k state.StepKey) error {
	if len(s.cfg.Hooks) == 0 {
		return nil
	}
	st, err := scanStep(t.queryRow(ctx, "get_step", k.RunID, k.Attempt, k.ScopePath, k.StepID))
	if err != nil {
		return fmt.Errorf("read back step: %w", err)
	}
	t.ch.Steps = append(t.ch.Steps, st)
	return nil
}

// stepWrite runs a step write whose RETURNING is the step row
// (/*step_columns*/) and reports whether it changed a row. With hooks the
// row goes into the Change as the write left it, with no read-back.
func (s *Store) stepWrite(ctx context.Context, t *txn, name string, args ...any) (bool, error) {
	st, err := scanStep(t.queryRow(ctx, name, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, translate(err)
	}
	if len(s.cfg.Hooks) > 0 {
		t.ch.Steps = append(t.ch.Steps, st)
	}
	return true, nil
}

// fenceRun is fence for a write that changes the run row only through the
// fence (the step writes). With hooks it fences with fence_run, whose
// RETURNING is the whole run row as the transaction leaves it, and records
// that as Change.Run, so inTx does not read the run back.
func (s *Store) fenceRun(ctx context.Context, t *txn, runID string, l starflowtype.Lease) (runMeta, error) {
	if len(s.cfg.Hooks) == 0 {
		return t.fence(ctx, runID, l)
	}
	r, err := scanRun(t.queryRow(ctx, "fence_run", runID, l.RunnerID, l.Epoch))
	if errors.Is(err, sql.ErrNoRows) {
		return runMeta{}, fmt.Errorf("run %s, runner %s, epoch %d: %w", runID, l.RunnerID, l.Epoch, starflowtype.ErrLeaseLost)
	}
	if err != nil {
		return runMeta{}, fmt.Errorf("fence: %w", translate(err))
	}
	t.ch.Run = r
	return runMeta{workspace: r.WorkspaceID, env: r.Env, attempt: r.Attempt, cancel: r.CancelRequested,
		status: string(r.Status), parent: r.ParentRunID}, nil
}

// PutDefinition implements state.Adapter.
func (s *Store) PutDefinition(ctx context.Context, p *state.PutDefinitionParams) (*starflowtype.Definition, error) {
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	_, err := s.inTx(ctx, "PutDefinition", "", false, func(t *txn) error {
		_, err := t.exec(ctx, "insert_definition", uuid.NewString(), ws, p.Name, p.Revision, string(p.Spec), p.Source)
		return translate(err)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: put definition %s: %w", p.Name, err)
	}
	return s.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: ws, Name: p.Name, Revision: p.Revision})
}

// EnqueueRun implements state.Adapter.
func (s *Store) EnqueueRun(ctx context.Context, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	id := p.ID
	if id == "" {
		id = uuid.NewString()
	}
	maxAttempts := p.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 3
	}
	mode := p.RecoveryMode
	if mode == "" {
		mode = starflowtype.RecoveryReplay
	}
	trigger := p.TriggerType
	if trigger == "" {
		trigger = starflowtype.TriggerAPI
	}
	m := runMeta{workspace: orDefault(p.WorkspaceID, state.DefaultWorkspace), env: orDefault(p.Env, state.DefaultEnv), attempt: 1}
	run, err := s.inTx(ctx, "EnqueueRun", id, true, func(t *txn) error {
		if p.IdempotencyKey != "" {
			ttl := p.IdempotencyTTL
			if ttl <= 0 {
				ttl = state.IdempotencyTTLDefault
			}
			if _, err := t.exec(ctx, "upsert_receipt", m.workspace, p.IdempotencyKey, id, sqliteOffset(ttl)); err != nil {
				return translate(err)
			}
			var holder string
			if err := t.queryRow(ctx, "receipt_run", m.workspace, p.IdempotencyKey).Scan(&holder); err != nil {
				return translate(err)
			}
			if holder != id {
				// A duplicate: nothing is written and the first run answers.
				t.ch.RunID = holder
				t.idle = true
				return nil
			}
		}
		_, err := t.exec(ctx, "insert_run", id, m.workspace, m.env, nullString(p.DefinitionID),
			p.WorkflowName, p.WorkflowRevision, p.WorkflowName, nullString(p.RunnerPool), p.Priority,
			maxAttempts, sqliteOffset(p.Delay), string(mode), string(trigger), nullString(p.ParentRunID),
			nullString(p.IdempotencyKey), nullJSON(p.Input))
		if err != nil {
			return translate(err)
		}
		return t.event(ctx, m, id, 1, starflowtype.EventRunQueued, "", "", nil)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: enqueue %s: %w", p.WorkflowName, err)
	}
	return run, nil
}

// ClaimRun implements state.Adapter.
func (s *Store) ClaimRun(ctx context.Context, p *state.ClaimRunParams) (*starflowtype.Run, error) {
	pools, _ := json.Marshal(orEmpty(p.Pools))
	run, err := s.inTx(ctx, "ClaimRun", "", true, func(t *txn) error {
		var id string
		query, args := "claim_run", []any{p.RunnerID, sqliteOffset(p.LeaseTTL), string(pools), p.WorkspaceID}
		if p.RunID != "" {
			query, args = "claim_run_id", append(args, p.RunID)
			if p.WithDescendants {
				query = "claim_run_family"
			}
		}
		var epoch int64
		err := t.queryRow(ctx, query, args...).Scan(&id, &epoch)
		if errors.Is(err, sql.ErrNoRows) {
			t.idle = true
			return nil
		}
		if err != nil {
			return translate(err)
		}
		t.ch.RunID = id
		var m runMeta
		if err := t.queryRow(ctx, "run_meta", id).Scan(&m.workspace, &m.env, &m.attempt); err != nil {
			return translate(err)
		}
		payload, _ := json.Marshal(map[string]any{"runner_id": p.RunnerID, "lease_epoch": epoch})
		return t.event(ctx, m, id, 0, starflowtype.EventRunClaimed, "", "", payload)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim: %w", err)
	}
	return run, nil
}

// OnRunStart implements state.Adapter.
func (s *Store) OnRunStart(ctx context.Context, p *state.RunStartParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "OnRunStart", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, "run_start", p.RunID); err != nil {
			return translate(err)
		}
		payload, _ := json.Marshal(map[string]any{"runner_id": p.Lease.RunnerID, "lease_epoch": p.Lease.Epoch})
		typ := starflowtype.EventRunStarted
		if m.status == string(starflowtype.RunPaused) {
			typ = starflowtype.EventRunResumed // a woken run continues its attempt
		}
		return t.event(ctx, m, p.RunID, 0, typ, "", "", payload)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: run start: %w", err)
	}
	return run, nil
}

// RefreshLease implements state.Adapter.
func (s *Store) RefreshLease(ctx context.Context, p *state.RefreshLeaseParams) (time.Time, error) {
	var until string
	_, err := s.inTx(ctx, "RefreshLease", p.RunID, false, func(t *txn) error {
		err := t.queryRow(ctx, "refresh_lease", sqliteOffset(p.LeaseTTL), p.RunID, p.Lease.RunnerID, p.Lease.Epoch).Scan(&until)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %s, runner %s, epoch %d: %w", p.RunID, p.Lease.RunnerID, p.Lease.Epoch, starflowtype.ErrLeaseLost)
		}
		return translate(err)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlitestore: refresh lease: %w", err)
	}
	return parseTime(until), nil
}

// OnNodeStart implements state.Adapter.
func (s *Store) OnNodeStart(ctx context.Context, p *state.NodeStartParams) error {
	_, err := s.inTx(ctx, "OnNodeStart", p.RunID, false, func(t *txn) error {
		m, err := s.fenceRun(ctx, t, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if m.cancel {
			return fmt.Errorf("run %s: %w", p.RunID, starflowtype.ErrCancelRequested)
		}
		ok, err := s.stepWrite(ctx, t, "step_start", p.RunID, p.Attempt, p.ScopePath, p.StepID,
			m.workspace, m.env, p.Kind, p.Try)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("step %q: try %d not started: the step already succeeded in attempt %d, or started try %d or a later one: %w",
				p.StepID, p.Try, p.Attempt, p.Try, starflowtype.ErrConflict)
		}
		payload := tryPayload(p.Try, p.Payload)
		return t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventNodeStart, p.StepID, p.ScopePath, payload)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: node start %s: %w", p.StepID, err)
	}
	return nil
}

// OnNodeRetry implements state.Adapter.
func (s *Store) OnNodeRetry(ctx context.Context, p *state.NodeRetryParams) error {
	_, err := s.inTx(ctx, "OnNodeRetry", p.RunID, false, func(t *txn) error {
		m, err := s.fenceRun(ctx, t, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if ok, err := s.stepWrite(ctx, t, "step_retry", p.Try, p.Error, p.RunID, p.Attempt, p.ScopePath, p.StepID); err != nil || !ok {
			return fmt.Errorf("step %q is not running: %w", p.StepID, cmp.Or(err, starflowtype.ErrConflict))
		}
		payload, _ := json.Marshal(map[string]any{"try": p.Try, "error": p.Error, "backoff_ms": p.Backoff.Milliseconds()})
		return t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventNodeRetry, p.StepID, p.ScopePath, payload)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: node retry %s: %w", p.StepID, err)
	}
	return nil
}

// OnNodeComplete implements state.Adapter: ledger row, node_complete event
// and checkpoint in one transaction.
func (s *Store) OnNodeComplete(ctx context.Context, p *state.NodeCompleteParams) error {
	_, err := s.inTx(ctx, "OnNodeComplete", p.RunID, false, func(t *txn) error {
		m, err := s.fenceRun(ctx, t, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if ok, err := s.stepWrite(ctx, t, "step_finish", string(starflowtype.StepSucceeded), p.Try, nil,
			p.RunID, p.Attempt, p.ScopePath, p.StepID); err != nil || !ok {
			return fmt.Errorf("step %q is not open: %w", p.StepID, cmp.Or(err, starflowtype.ErrConflict))
		}
		faultpoint.Hit("sqlite.OnNodeComplete.after_step")
		if err := t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventNodeComplete, p.StepID, p.ScopePath, tryPayload(p.Try, nil)); err != nil {
			return err
		}
		faultpoint.Hit("sqlite.OnNodeComplete.after_event")
		delta, deltaBlob, err := t.blob(ctx, s.cfg.BlobThreshold, []byte(jsonOrNull(p.Context, "{}")))
		if err != nil {
			return err
		}
		out, outBlob, err := t.blob(ctx, s.cfg.BlobThreshold, []byte(jsonOrNull(p.Output, "null")))
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, "insert_checkpoint", p.RunID, p.ScopePath, p.StepID, p.Attempt,
			m.workspace, m.env, string(delta), string(out), deltaBlob, outBlob); err != nil {
			return fmt.Errorf("checkpoint: %w", translate(err))
		}
		faultpoint.Hit("sqlite.OnNodeComplete.after_checkpoint")
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: node complete %s: %w", p.StepID, err)
	}
	return nil
}

// OnNodeError implements state.Adapter.
func (s *Store) OnNodeError(ctx context.Context, p *state.NodeErrorParams) error {
	_, err := s.inTx(ctx, "OnNodeError", p.RunID, false, func(t *txn) error {
		m, err := s.fenceRun(ctx, t, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		ok, err := s.stepWrite(ctx, t, "step_finish", string(starflowtype.StepFailed), p.Try, p.Error,
			p.RunID, p.Attempt, p.ScopePath, p.StepID)
		if err != nil {
			return err
		}
		if !ok {
			// No open row: the step failed before it started (e.g. its
			// `when` did not evaluate) and gets a failed row of its own,
			// unless it succeeded, which is final within the attempt.
			if ok, err := s.stepWrite(ctx, t, "step_failed_unstarted", p.RunID, p.Attempt, p.ScopePath, p.StepID,
				m.workspace, m.env, p.Kind, p.Try, p.Error); err != nil || !ok {
				return fmt.Errorf("step %q already succeeded: %w", p.StepID, cmp.Or(err, starflowtype.ErrConflict))
			}
		}
		payload := p.Payload
		if payload == nil {
			payload, _ = json.Marshal(map[string]any{"try": p.Try, "error": p.Error})
		}
		return t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventNodeError, p.StepID, p.ScopePath, payload)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: node error %s: %w", p.StepID, err)
	}
	return nil
}

// OnNodeSkipped implements state.Adapter.
func (s *Store) OnNodeSkipped(ctx context.Context, p *state.NodeSkippedParams) error {
	_, err := s.inTx(ctx, "OnNodeSkipped", p.RunID, false, func(t *txn) error {
		m, err := s.fenceRun(ctx, t, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		ok, err := s.stepWrite(ctx, t, "step_skipped", p.RunID, p.Attempt, p.ScopePath, p.StepID,
			m.workspace, m.env, p.Kind)
		if err != nil {
			return err
		}
		if !ok {
			// No row changed: the step is succeeded (a conflict) or already
			// skipped in this attempt (nothing to write, so no hook runs).
			st, err := scanStep(t.queryRow(ctx, "get_step", p.RunID, p.Attempt, p.ScopePath, p.StepID))
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("read step: %w", translate(err))
			}
			if err == nil && st.Status == starflowtype.StepSkipped {
				t.idle = true
				return nil
			}
			return fmt.Errorf("step %q already succeeded: %w", p.StepID, starflowtype.ErrConflict)
		}
		var payload json.RawMessage
		if p.Reason != "" {
			payload, _ = json.Marshal(map[string]any{"reason": p.Reason})
		}
		return t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventNodeSkipped, p.StepID, p.ScopePath, payload)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: node skipped %s: %w", p.StepID, err)
	}
	return nil
}

// RecordPhaseIfChanged implements state.Adapter.
func (s *Store) RecordPhaseIfChanged(ctx context.Context, p *state.RecordPhaseParams) error {
	_, err := s.inTx(ctx, "RecordPhaseIfChanged", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		res, err := t.exec(ctx, "set_phase", p.Phase, p.RunID)
		if err != nil {
			return translate(err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		payload, _ := json.Marshal(map[string]any{"phase": p.Phase})
		return t.event(ctx, m, p.RunID, 0, starflowtype.EventPhase, "", "", payload)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: record phase: %w", err)
	}
	return nil
}

// OnRunComplete implements state.Adapter.
func (s *Store) OnRunComplete(ctx context.Context, p *state.RunCompleteParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "OnRunComplete", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, "run_succeeded", jsonOrNull(p.Output, "null"), p.RunID); err != nil {
			return translate(err)
		}
		if err := t.event(ctx, m, p.RunID, 0, starflowtype.EventRunSucceeded, "", "", nil); err != nil {
			return err
		}
		return s.endRun(ctx, t, p.RunID)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: run complete: %w", err)
	}
	return run, nil
}

// OnRunError implements state.Adapter.
func (s *Store) OnRunError(ctx context.Context, p *state.RunErrorParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "OnRunError", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		var attempt, maxAttempts int
		var mode string
		if err := t.queryRow(ctx, "run_attempts", p.RunID).Scan(&attempt, &maxAttempts, &mode); err != nil {
			return translate(err)
		}
		switch {
		case p.Retry && starflowtype.RecoveryMode(mode) == starflowtype.RecoveryManual:
			if err := s.endAttempt(ctx, t, p.RunID, attempt); err != nil {
				return err
			}
			if _, err := t.exec(ctx, "run_hold", p.Error, p.RunID); err != nil {
				return translate(err)
			}
			payload, _ := json.Marshal(map[string]any{"error": p.Error, "recovery_mode": mode})
			return t.event(ctx, m, p.RunID, 0, starflowtype.EventRunInterrupted, "", "", payload)
		case p.Retry && attempt < maxAttempts:
			if err := s.endAttempt(ctx, t, p.RunID, attempt); err != nil {
				return err
			}
			if _, err := t.exec(ctx, "run_requeue", sqliteOffset(p.Backoff), p.Error, p.RunID); err != nil {
				return translate(err)
			}
			payload, _ := json.Marshal(map[string]any{"error": p.Error, "next_attempt": attempt + 1, "backoff_ms": p.Backoff.Milliseconds()})
			return t.event(ctx, m, p.RunID, 0, starflowtype.EventRunInterrupted, "", "", payload)
		default:
			dead := p.Retry // retryable, but attempts ran out
			if _, err := t.exec(ctx, "run_failed", p.Error, dead, p.RunID); err != nil {
				return translate(err)
			}
			payload, _ := json.Marshal(map[string]any{"error": p.Error})
			if err := t.event(ctx, m, p.RunID, 0, starflowtype.EventRunFailed, "", "", payload); err != nil {
				return err
			}
			if dead {
				if err := t.event(ctx, m, p.RunID, 0, starflowtype.EventRunDeadLettered, "", "", nil); err != nil {
					return err
				}
			}
			return s.endRun(ctx, t, p.RunID)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: run error: %w", err)
	}
	return run, nil
}

// ClearLease implements state.Adapter.
func (s *Store) ClearLease(ctx context.Context, p *state.ClearLeaseParams) error {
	_, err := s.inTx(ctx, "ClearLease", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, "clear_lease", p.RunID); err != nil {
			return translate(err)
		}
		payload, _ := json.Marshal(map[string]any{"reason": "lease_released", "runner_id": p.Lease.RunnerID})
		return t.event(ctx, m, p.RunID, 0, starflowtype.EventRunQueued, "", "", payload)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: clear lease: %w", err)
	}
	return nil
}

// translate maps driver errors to the sentinel errors of starflowtype.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return fmt.Errorf("%w: %v", starflowtype.ErrConflict, err)
	}
	return err
}

func mustAffect(res sql.Result, err error) error {
	if err != nil {
		return translate(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return starflowtype.ErrConflict
	}
	return nil
}

func tryPayload(try int, extra json.RawMessage) json.RawMessage {
	m := map[string]any{"try": try}
	if len(extra) > 0 {
		m["input"] = extra
	}
	b, _ := json.Marshal(m)
	return b
}
