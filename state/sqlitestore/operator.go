package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// OnRunCancelled implements state.Adapter.
func (s *Store) OnRunCancelled(ctx context.Context, p *state.RunCancelledParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "OnRunCancelled", p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, "run_cancelled", p.RunID); err != nil {
			return translate(err)
		}
		if _, err := t.exec(ctx, "steps_cancelled", p.RunID, m.attempt); err != nil {
			return translate(err)
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
		return nil, fmt.Errorf("sqlitestore: run cancelled: %w", err)
	}
	return run, nil
}

// runState reads what an operator action checks, inside its transaction.
func (t *txn) runState(ctx context.Context, workspace, id string) (runMeta, starflowtype.RunStatus, starflowtype.ClaimState, error) {
	var m runMeta
	var status, claim string
	err := t.queryRow(ctx, "run_state", id, workspace).Scan(&m.workspace, &m.env, &m.attempt, &status, &claim)
	if errors.Is(err, sql.ErrNoRows) {
		return m, "", "", fmt.Errorf("run %s: %w", id, starflowtype.ErrNotFound)
	}
	if err != nil {
		return m, "", "", translate(err)
	}
	return m, starflowtype.RunStatus(status), starflowtype.ClaimState(claim), nil
}

// CancelRun implements state.Adapter. An immediate cancel also ends the
// run's waits and session variables and tells its parent (endRun); either
// way the run's non-terminal children are cancelled too, recursively.
func (s *Store) CancelRun(ctx context.Context, p *state.CancelRunParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "CancelRun", p.RunID, true, func(t *txn) error {
		return s.cancelTree(ctx, t, p.WorkspaceID, p.RunID, true, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: cancel: %w", err)
	}
	return run, nil
}

// RequeueRun implements state.Adapter.
func (s *Store) RequeueRun(ctx context.Context, p *state.RequeueRunParams) (*starflowtype.Run, error) {
	run, err := s.inTx(ctx, "RequeueRun", p.RunID, true, func(t *txn) error {
		m, status, claim, err := t.runState(ctx, p.WorkspaceID, p.RunID)
		if err != nil {
			return err
		}
		if claim == starflowtype.ClaimClaimed || claim == starflowtype.ClaimRunning ||
			(p.Reason != "retrigger" && status == starflowtype.RunSucceeded) ||
			status == starflowtype.RunQueued || status == starflowtype.RunPaused {
			return fmt.Errorf("run %s is %s (%s); only a run that stopped can be %s: %w",
				p.RunID, status, claim, reasonVerb(p.Reason), starflowtype.ErrConflict)
		}
		if _, err := t.exec(ctx, "run_requeued", string(p.RecoveryMode), p.DefinitionID, p.WorkflowRevision, p.RunID); err != nil {
			return translate(err)
		}
		payload, _ := json.Marshal(map[string]any{"reason": p.Reason, "recovery_mode": p.RecoveryMode,
			"revision": p.WorkflowRevision, "attempt": m.attempt + 1})
		return t.event(ctx, m, p.RunID, m.attempt+1, starflowtype.EventRunQueued, "", "", payload)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: requeue: %w", err)
	}
	return run, nil
}

func reasonVerb(reason string) string {
	if reason == "retrigger" {
		return "retriggered"
	}
	return "resumed"
}
