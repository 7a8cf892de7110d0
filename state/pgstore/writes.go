package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// stepChanged reads back a step row into the Change (only when hooks need it).
func (s *Store) stepChanged(ctx context.Context, t *txn, k state.StepKey) error {
	if len(s.cfg.Hooks) == 0 {
		return nil
	}
	st, err := scanStep(t.tx.QueryRow(ctx, q("get_step"), k.RunID, k.Attempt, k.ScopePath, k.StepID))
	if err != nil {
		return fmt.Errorf("read back step: %w", err)
	}
	t.ch.Steps = append(t.ch.Steps, st)
	return nil
}

// stepWrite runs a step write whose RETURNING is the step row
// (/*step_columns*/) and reports whether it changed a row. With hooks the
// row goes into the Change as the write left it, with no read-back.
func (s *Store) stepWrite(ctx context.Context, t *txn, query string, args ...any) (bool, error) {
	st, err := scanStep(t.tx.QueryRow(ctx, query, args...))
	if errors.Is(err, pgx.ErrNoRows) {
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
	lost := fmt.Errorf("run %s, runner %s, epoch %d: %w", runID, l.RunnerID, l.Epoch, starflowtype.ErrLeaseLost)
	if !isUUID(runID) {
		return runMeta{}, lost
	}
	r, err := scanRun(t.tx.QueryRow(ctx, q("fence_run"), runID, l.RunnerID, l.Epoch))
	if errors.Is(err, pgx.ErrNoRows) {
		return runMeta{}, lost
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
		_, err := t.exec(ctx, q("insert_definition"), uuid.NewString(), ws, p.Name, p.Revision, jsonOrNull(p.Spec, "null"), p.Source)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: put definition %s: %w", p.Name, err)
	}
	return s.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: ws, Name: p.Name, Revision: p.Revision})
}

// EnqueueRun implements state.Adapter. When a run is inserted, its pool is
// notified on Channel in the same transaction.
func (s *Store) EnqueueRun(ctx context.Context, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	e, err := newEnqueue(p)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue %s: %w", p.WorkflowName, err)
	}
	run, err := s.inTx(ctx, "EnqueueRun", e.id, true, e.write(ctx, p))
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue %s: %w", p.WorkflowName, err)
	}
	return run, nil
}

// EnqueueTx is EnqueueRun inside the caller's transaction tx, so that the
// run commits or rolls back with the caller's own writes. It runs in a
// savepoint of tx: when it fails, tx is left as it was and usable. The
// hooks run and the notification is sent as in EnqueueRun; PostgreSQL
// delivers the notification when tx commits. The returned run is as of
// the end of the savepoint, not yet committed.
//
// tx must use this store's schema: begin it on Pool(), or on a connection
// whose search_path names Config.Schema. A duplicate IdempotencyKey held by
// a concurrent uncommitted transaction makes EnqueueTx wait for that
// transaction.
func (s *Store) EnqueueTx(ctx context.Context, tx pgx.Tx, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	e, err := newEnqueue(p)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue %s: %w", p.WorkflowName, err)
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: enqueue %s: savepoint: %w", p.WorkflowName, translate(err))
	}
	run, err := s.within(ctx, sp, "EnqueueRun", e.id, true, e.write(ctx, p))
	if err != nil {
		_ = sp.Rollback(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pgstore: enqueue %s: %w", p.WorkflowName, err)
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: enqueue %s: release savepoint: %w", p.WorkflowName, translate(err))
	}
	return run, nil
}

// enqueue is one EnqueueRun's arguments with defaults applied and ids
// checked.
type enqueue struct {
	id, definitionID, parentID string
	maxAttempts                int
	mode                       starflowtype.RecoveryMode
	trigger                    starflowtype.TriggerType
	m                          runMeta
}

func newEnqueue(p *state.EnqueueRunParams) (*enqueue, error) {
	e := &enqueue{
		maxAttempts: p.MaxAttempts, mode: p.RecoveryMode, trigger: p.TriggerType,
		m: runMeta{workspace: orDefault(p.WorkspaceID, state.DefaultWorkspace), env: orDefault(p.Env, state.DefaultEnv), attempt: 1},
	}
	var err error
	if p.ID == "" {
		e.id = uuid.NewString()
	} else if e.id, err = canonicalUUID(p.ID); err != nil {
		return nil, fmt.Errorf("run id: %w", err)
	}
	if p.DefinitionID != "" {
		if e.definitionID, err = canonicalUUID(p.DefinitionID); err != nil {
			return nil, fmt.Errorf("definition id: %w", err)
		}
	}
	if p.ParentRunID != "" {
		if e.parentID, err = canonicalUUID(p.ParentRunID); err != nil {
			return nil, fmt.Errorf("parent run id: %w", err)
		}
	}
	if e.maxAttempts <= 0 {
		e.maxAttempts = 3
	}
	if e.mode == "" {
		e.mode = starflowtype.RecoveryReplay
	}
	if e.trigger == "" {
		e.trigger = starflowtype.TriggerAPI
	}
	return e, nil
}

// write is the transaction body of EnqueueRun and EnqueueTx.
func (e *enqueue) write(ctx context.Context, p *state.EnqueueRunParams) func(t *txn) error {
	return func(t *txn) error {
		if p.IdempotencyKey != "" {
			ttl := p.IdempotencyTTL
			if ttl <= 0 {
				ttl = state.IdempotencyTTLDefault
			}
			if _, err := t.exec(ctx, q("upsert_receipt"), e.m.workspace, p.IdempotencyKey, e.id, ttl.Microseconds()); err != nil {
				return err
			}
			var holder string
			if err := t.tx.QueryRow(ctx, q("receipt_run"), e.m.workspace, p.IdempotencyKey).Scan(&holder); err != nil {
				return translate(err)
			}
			if holder != e.id {
				// A duplicate: nothing is written and the first run answers.
				t.ch.RunID = holder
				t.idle = true
				return nil
			}
		}
		run, err := scanRun(t.tx.QueryRow(ctx, q("insert_run"), e.id, e.m.workspace, e.m.env, nullString(e.definitionID),
			p.WorkflowName, p.WorkflowRevision, p.WorkflowName, nullString(p.RunnerPool), p.Priority,
			e.maxAttempts, p.Delay.Microseconds(), string(e.mode), string(e.trigger), nullString(e.parentID),
			nullString(p.IdempotencyKey), nullJSON(p.Input)))
		if err != nil {
			return translate(err)
		}
		t.ch.Run = run
		t.notify = append(t.notify, p.RunnerPool)
		return t.event(ctx, e.m, e.id, 1, starflowtype.EventRunQueued, "", "", nil)
	}
}

// ClaimRun implements state.Adapter: one UPDATE … WHERE id = (SELECT … FOR
// UPDATE SKIP LOCKED) and the run_claimed event, in one transaction.
func (s *Store) ClaimRun(ctx context.Context, p *state.ClaimRunParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "ClaimRun", "", true, func(t *txn) error {
		query, args := q("claim_run"), claimArgs(p)
		if p.RunID != "" {
			query, args = q("claim_run_id"), append(args, p.RunID)
			if p.WithDescendants {
				query = q("claim_run_family")
			}
		}
		r, err := scanRun(t.tx.QueryRow(ctx, query, args...))
		if errors.Is(err, pgx.ErrNoRows) {
			t.idle = true
			return nil
		}
		if err != nil {
			return translate(err)
		}
		t.ch.RunID, t.ch.Run = r.ID, r
		m := runMeta{workspace: r.WorkspaceID, env: r.Env, attempt: r.Attempt}
		payload, _ := json.Marshal(map[string]any{"runner_id": p.RunnerID, "lease_epoch": r.LeaseEpoch})
		return t.event(ctx, m, r.ID, 0, starflowtype.EventRunClaimed, "", "", payload)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	return run, nil
}

// claimArgs are the arguments of claim_run for p (shared with ExplainClaim).
func claimArgs(p *state.ClaimRunParams) []any {
	pools := p.Pools
	if pools == nil {
		pools = []string{}
	}
	return []any{p.RunnerID, p.LeaseTTL.Microseconds(), pools, p.WorkspaceID}
}

// OnRunStart implements state.Adapter.
func (s *Store) OnRunStart(ctx context.Context, p *state.RunStartParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "OnRunStart", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		r, err := scanRun(t.tx.QueryRow(ctx, q("run_start"), p.RunID))
		if err != nil {
			return translate(err)
		}
		t.ch.Run = r
		payload, _ := json.Marshal(map[string]any{"runner_id": p.Lease.RunnerID, "lease_epoch": p.Lease.Epoch})
		typ := starflowtype.EventRunStarted
		if m.status == string(starflowtype.RunPaused) {
			typ = starflowtype.EventRunResumed // a woken run continues its attempt
		}
		return t.event(ctx, m, p.RunID, 0, typ, "", "", payload)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: run start: %w", err)
	}
	return run, nil
}

// RefreshLease implements state.Adapter.
func (s *Store) RefreshLease(ctx context.Context, p *state.RefreshLeaseParams) (time.Time, error) {
	var until time.Time
	_, err := s.inTx(ctx, "RefreshLease", p.RunID, false, func(t *txn) error {
		lost := fmt.Errorf("run %s, runner %s, epoch %d: %w", p.RunID, p.Lease.RunnerID, p.Lease.Epoch, starflowtype.ErrLeaseLost)
		if !isUUID(p.RunID) {
			return lost
		}
		err := t.tx.QueryRow(ctx, q("refresh_lease"), p.LeaseTTL.Microseconds(), p.RunID, p.Lease.RunnerID, p.Lease.Epoch).Scan(&until)
		if errors.Is(err, pgx.ErrNoRows) {
			return lost
		}
		return translate(err)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("pgstore: refresh lease: %w", err)
	}
	return until.UTC(), nil
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
		ok, err := s.stepWrite(ctx, t, q("step_start"), p.RunID, p.Attempt, p.ScopePath, p.StepID,
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
		return fmt.Errorf("pgstore: node start %s: %w", p.StepID, err)
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
		if ok, err := s.stepWrite(ctx, t, q("step_retry"), p.Try, p.Error, p.RunID, p.Attempt, p.ScopePath, p.StepID); err != nil || !ok {
			return fmt.Errorf("step %q is not running: %w", p.StepID, cmp.Or(err, starflowtype.ErrConflict))
		}
		payload, _ := json.Marshal(map[string]any{"try": p.Try, "error": p.Error, "backoff_ms": p.Backoff.Milliseconds()})
		return t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventNodeRetry, p.StepID, p.ScopePath, payload)
	})
	if err != nil {
		return fmt.Errorf("pgstore: node retry %s: %w", p.StepID, err)
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
		if ok, err := s.stepWrite(ctx, t, q("step_finish"), string(starflowtype.StepSucceeded), p.Try, nil,
			p.RunID, p.Attempt, p.ScopePath, p.StepID); err != nil || !ok {
			return fmt.Errorf("step %q is not open: %w", p.StepID, cmp.Or(err, starflowtype.ErrConflict))
		}
		faultpoint.Hit("postgres.OnNodeComplete.after_step")
		if err := t.event(ctx, m, p.RunID, p.Attempt, starflowtype.EventNodeComplete, p.StepID, p.ScopePath, tryPayload(p.Try, nil)); err != nil {
			return err
		}
		faultpoint.Hit("postgres.OnNodeComplete.after_event")
		delta, deltaBlob, err := t.blob(ctx, s.cfg.BlobThreshold, []byte(jsonOrNull(p.Context, "{}")))
		if err != nil {
			return err
		}
		out, outBlob, err := t.blob(ctx, s.cfg.BlobThreshold, []byte(jsonOrNull(p.Output, "null")))
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, q("insert_checkpoint"), p.RunID, p.ScopePath, p.StepID, p.Attempt,
			m.workspace, m.env, string(delta), string(out), deltaBlob, outBlob); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		faultpoint.Hit("postgres.OnNodeComplete.after_checkpoint")
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: node complete %s: %w", p.StepID, err)
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
		ok, err := s.stepWrite(ctx, t, q("step_finish"), string(starflowtype.StepFailed), p.Try, p.Error,
			p.RunID, p.Attempt, p.ScopePath, p.StepID)
		if err != nil {
			return err
		}
		if !ok {
			// No open row: the step failed before it started (e.g. its
			// `when` did not evaluate) and gets a failed row of its own,
			// unless it succeeded, which is final within the attempt.
			if ok, err := s.stepWrite(ctx, t, q("step_failed_unstarted"), p.RunID, p.Attempt, p.ScopePath, p.StepID,
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
		return fmt.Errorf("pgstore: node error %s: %w", p.StepID, err)
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
		ok, err := s.stepWrite(ctx, t, q("step_skipped"), p.RunID, p.Attempt, p.ScopePath, p.StepID,
			m.workspace, m.env, p.Kind)
		if err != nil {
			return err
		}
		if !ok {
			// No row changed: the step is succeeded (a conflict) or already
			// skipped in this attempt (nothing to write, so no hook runs).
			st, err := scanStep(t.tx.QueryRow(ctx, q("get_step"), p.RunID, p.Attempt, p.ScopePath, p.StepID))
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
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
		return fmt.Errorf("pgstore: node skipped %s: %w", p.StepID, err)
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
		n, err := t.exec(ctx, q("set_phase"), p.Phase, p.RunID)
		if err != nil || n == 0 {
			return err
		}
		payload, _ := json.Marshal(map[string]any{"phase": p.Phase})
		return t.event(ctx, m, p.RunID, 0, starflowtype.EventPhase, "", "", payload)
	})
	if err != nil {
		return fmt.Errorf("pgstore: record phase: %w", err)
	}
	return nil
}

// OnRunComplete implements state.Adapter.
func (s *Store) OnRunComplete(ctx context.Context, p *state.RunCompleteParams) (*starflowtype.Run, error) {
	run, err := s.inTxRetry(ctx, "OnRunComplete", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, q("run_succeeded"), jsonOrNull(p.Output, "null"), p.RunID); err != nil {
			return err
		}
		if err := t.event(ctx, m, p.RunID, 0, starflowtype.EventRunSucceeded, "", "", nil); err != nil {
			return err
		}
		return s.endRun(ctx, t, p.RunID)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: run complete: %w", err)
	}
	return run, nil
}

// OnRunError implements state.Adapter. A re-queued run's pool is notified
// on Channel in the same transaction.
func (s *Store) OnRunError(ctx context.Context, p *state.RunErrorParams) (*starflowtype.Run, error) {
	run, err := s.inTxRetry(ctx, "OnRunError", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		var attempt, maxAttempts int
		var mode, pool string
		if err := t.tx.QueryRow(ctx, q("run_attempts"), p.RunID).Scan(&attempt, &maxAttempts, &mode, &pool); err != nil {
			return translate(err)
		}
		switch {
		case p.Retry && starflowtype.RecoveryMode(mode) == starflowtype.RecoveryManual:
			if err := s.endAttempt(ctx, t, p.RunID, attempt); err != nil {
				return err
			}
			if _, err := t.exec(ctx, q("run_hold"), p.Error, p.RunID); err != nil {
				return err
			}
			payload, _ := json.Marshal(map[string]any{"error": p.Error, "recovery_mode": mode})
			return t.event(ctx, m, p.RunID, 0, starflowtype.EventRunInterrupted, "", "", payload)
		case p.Retry && attempt < maxAttempts:
			if err := s.endAttempt(ctx, t, p.RunID, attempt); err != nil {
				return err
			}
			if _, err := t.exec(ctx, q("run_requeue"), p.Backoff.Microseconds(), p.Error, p.RunID); err != nil {
				return err
			}
			t.notify = append(t.notify, pool)
			payload, _ := json.Marshal(map[string]any{"error": p.Error, "next_attempt": attempt + 1, "backoff_ms": p.Backoff.Milliseconds()})
			return t.event(ctx, m, p.RunID, 0, starflowtype.EventRunInterrupted, "", "", payload)
		default:
			dead := p.Retry // retryable, but attempts ran out
			if _, err := t.exec(ctx, q("run_failed"), p.Error, dead, p.RunID); err != nil {
				return err
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
		return nil, fmt.Errorf("pgstore: run error: %w", err)
	}
	return run, nil
}

// ClearLease implements state.Adapter. The released run's pool is
// notified on Channel in the same transaction.
func (s *Store) ClearLease(ctx context.Context, p *state.ClearLeaseParams) error {
	_, err := s.inTx(ctx, "ClearLease", p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		var pool string
		if err := t.tx.QueryRow(ctx, q("clear_lease"), p.RunID).Scan(&pool); err != nil {
			return translate(err)
		}
		t.notify = append(t.notify, pool)
		payload, _ := json.Marshal(map[string]any{"reason": "lease_released", "runner_id": p.Lease.RunnerID})
		return t.event(ctx, m, p.RunID, 0, starflowtype.EventRunQueued, "", "", payload)
	})
	if err != nil {
		return fmt.Errorf("pgstore: clear lease: %w", err)
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
