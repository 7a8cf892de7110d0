package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// OnRunCancelled implements state.Adapter.
func (s *Store) OnRunCancelled(ctx context.Context, p *state.RunCancelledParams) (*starflowtype.Run, error) {
	run, err := s.inTxRetry(ctx, "OnRunCancelled", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, q("run_cancelled"), p.RunID); err != nil {
			return err
		}
		if _, err := t.exec(ctx, q("steps_cancelled"), p.RunID, m.attempt); err != nil {
			return err
		}
		if err := t.event(ctx, m, p.RunID, 0, starflowtype.EventRunCancelled, "", "", nil); err != nil {
			return err
		}
		if err := s.endRun(ctx, t, p.RunID); err != nil {
			return err
		}
		return s.cancelChildren(ctx, t, p.RunID, 0) // started after CancelRun cascaded
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: run cancelled: %w", err)
	}
	return run, nil
}

// runState locks and reads the run an operator action acts on.
func (t *txn) runState(ctx context.Context, workspace, id string) (runMeta, starflowtype.RunStatus, starflowtype.ClaimState, string, error) {
	var m runMeta
	var status, claim, pool string
	notFound := fmt.Errorf("run %s: %w", id, starflowtype.ErrNotFound)
	if !isUUID(id) {
		return m, "", "", "", notFound
	}
	err := t.tx.QueryRow(ctx, q("run_state"), id, workspace).Scan(&m.workspace, &m.env, &m.attempt, &status, &claim, &pool)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, "", "", "", notFound
	}
	if err != nil {
		return m, "", "", "", translate(err)
	}
	return m, starflowtype.RunStatus(status), starflowtype.ClaimState(claim), pool, nil
}

// CancelRun implements state.Adapter. An immediate cancel also ends the
// run's waits and session variables and tells its parent (endRun); either
// way the run's non-terminal children are cancelled too, recursively.
func (s *Store) CancelRun(ctx context.Context, p *state.CancelRunParams) (*starflowtype.Run, error) {
	run, err := s.inTxRetry(ctx, "CancelRun", p.RunID, true, func(t *txn) error {
		return s.cancelTree(ctx, t, p.WorkspaceID, p.RunID, true, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: cancel: %w", err)
	}
	return run, nil
}

// RequeueRun implements state.Adapter.
func (s *Store) RequeueRun(ctx context.Context, p *state.RequeueRunParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "RequeueRun", p.RunID, true, func(t *txn) error {
		m, status, claim, pool, err := t.runState(ctx, p.WorkspaceID, p.RunID)
		if err != nil {
			return err
		}
		if claim == starflowtype.ClaimClaimed || claim == starflowtype.ClaimRunning ||
			(p.Reason != "retrigger" && status == starflowtype.RunSucceeded) ||
			status == starflowtype.RunQueued || status == starflowtype.RunPaused {
			verb := "resumed"
			if p.Reason == "retrigger" {
				verb = "retriggered"
			}
			return fmt.Errorf("run %s is %s (%s); only a run that stopped can be %s: %w", p.RunID, status, claim, verb, starflowtype.ErrConflict)
		}
		if _, err := t.exec(ctx, q("run_requeued"), string(p.RecoveryMode), p.DefinitionID, p.WorkflowRevision, p.RunID); err != nil {
			return err
		}
		t.notify = append(t.notify, pool)
		payload, _ := json.Marshal(map[string]any{"reason": p.Reason, "recovery_mode": p.RecoveryMode,
			"revision": p.WorkflowRevision, "attempt": m.attempt + 1})
		return t.event(ctx, m, p.RunID, m.attempt+1, starflowtype.EventRunQueued, "", "", payload)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: requeue: %w", err)
	}
	return run, nil
}
