package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// querier is what reads need: the pool, or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// GetDefinition implements state.Adapter.
func (s *Store) GetDefinition(ctx context.Context, p *state.GetDefinitionParams) (*starflowtype.Definition, error) {
	notFound := fmt.Errorf("definition %s%s: %w", p.Name, p.ID, starflowtype.ErrNotFound)
	var row pgx.Row
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	switch {
	case p.ID != "":
		if !isUUID(p.ID) {
			return nil, notFound
		}
		row = s.pool.QueryRow(ctx, q("get_definition_by_id"), p.ID, p.WorkspaceID)
	case p.Revision != "":
		row = s.pool.QueryRow(ctx, q("get_definition_by_revision"), ws, p.Name, p.Revision)
	default:
		row = s.pool.QueryRow(ctx, q("get_definition_latest"), ws, p.Name)
	}
	var d starflowtype.Definition
	var spec []byte
	err := row.Scan(&d.ID, &d.WorkspaceID, &d.Name, &d.Revision, &spec, &d.Source, &d.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: get definition: %w", err)
	}
	d.Spec = json.RawMessage(spec)
	d.CreatedAt = d.CreatedAt.UTC()
	return &d, nil
}

// GetRun implements state.Adapter.
func (s *Store) GetRun(ctx context.Context, p *state.GetRunParams) (*starflowtype.Run, error) {
	return getRun(ctx, s.pool, p.WorkspaceID, p.ID)
}

func getRun(ctx context.Context, db querier, workspace, id string) (*starflowtype.Run, error) {
	notFound := fmt.Errorf("run %s: %w", id, starflowtype.ErrNotFound)
	if !isUUID(id) {
		return nil, notFound
	}
	r, err := scanRun(db.QueryRow(ctx, q("get_run"), id, workspace))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: get run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns implements state.Adapter.
func (s *Store) ListRuns(ctx context.Context, p *state.ListRunsParams) ([]*starflowtype.Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	statuses := make([]string, len(p.Status))
	for i, st := range p.Status {
		statuses[i] = string(st)
	}
	rows, err := s.pool.Query(ctx, q("list_runs"), p.WorkspaceID, p.WorkflowName, statuses, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*starflowtype.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: list runs: %w", err)
	}
	return out, nil
}

// ListSteps implements state.Adapter.
func (s *Store) ListSteps(ctx context.Context, p *state.ListStepsParams) ([]*starflowtype.Step, error) {
	if !isUUID(p.RunID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, q("list_steps"), p.RunID, p.Attempt)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list steps: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*starflowtype.Step, error) { return scanStep(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: list steps: %w", err)
	}
	return out, nil
}

// ListEvents implements state.Adapter.
func (s *Store) ListEvents(ctx context.Context, p *state.ListEventsParams) ([]*starflowtype.Event, error) {
	if !isUUID(p.RunID) {
		return nil, nil
	}
	var limit any // NULL: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	rows, err := s.pool.Query(ctx, q("list_events"), p.RunID, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*starflowtype.Event, error) {
		var e starflowtype.Event
		var typ string
		var payload []byte
		if err := row.Scan(&e.ID, &e.RunID, &e.Attempt, &typ, &e.NodeID, &e.ScopePath, &payload, &e.CreatedAt); err != nil {
			return nil, err
		}
		e.Type = starflowtype.EventType(typ)
		e.Payload = rawJSON(payload)
		e.CreatedAt = e.CreatedAt.UTC()
		return &e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list events: %w", err)
	}
	return out, nil
}

// ListCheckpoints implements state.Adapter.
func (s *Store) ListCheckpoints(ctx context.Context, p *state.ListCheckpointsParams) ([]*starflowtype.Checkpoint, error) {
	if !isUUID(p.RunID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, q("list_checkpoints"), p.RunID, p.Attempt)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list checkpoints: %w", err)
	}
	type blobs struct{ ctx, out *string }
	var refs []blobs
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*starflowtype.Checkpoint, error) {
		var c starflowtype.Checkpoint
		var ctxJSON, outJSON []byte
		var b blobs
		if err := row.Scan(&c.RunID, &c.ScopePath, &c.StepID, &c.Attempt, &ctxJSON, &outJSON, &c.PreviousBodyRef, &c.CreatedAt, &b.ctx, &b.out); err != nil {
			return nil, err
		}
		c.Context = json.RawMessage(ctxJSON)
		c.Output = json.RawMessage(outJSON)
		c.CreatedAt = c.CreatedAt.UTC()
		refs = append(refs, b)
		return &c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list checkpoints: %w", err)
	}
	// Only the blob columns mark a reference: a value shaped like one is
	// returned as written (issue 10 item 3).
	for i, c := range out {
		for _, b := range []struct {
			sum *string
			v   *json.RawMessage
		}{{refs[i].ctx, &c.Context}, {refs[i].out, &c.Output}} {
			if b.sum == nil {
				continue
			}
			var data []byte
			if err := s.pool.QueryRow(ctx, q("get_blob"), *b.sum).Scan(&data); err != nil {
				return nil, fmt.Errorf("pgstore: checkpoint %s/%s: blob %s: %w", c.ScopePath, c.StepID, *b.sum, err)
			}
			*b.v = data
		}
	}
	return out, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (*starflowtype.Run, error) {
	var r starflowtype.Run
	var status, claim, mode, trigger string
	var leaseUntil, heartbeat, started, completed, attemptStarted *time.Time
	var input, output, checkpoint []byte
	err := sc.Scan(&r.ID, &r.WorkspaceID, &r.Env, &r.DefinitionID, &r.WorkflowName,
		&r.WorkflowRevision, &r.TemplateID, &status, &claim, &r.RunnerPool,
		&r.Priority, &r.LeasedBy, &leaseUntil, &r.LeaseEpoch, &heartbeat, &r.ClaimAttempts,
		&r.Attempt, &r.MaxAttempts, &r.AvailableAt, &mode, &trigger, &r.ParentRunID,
		&r.IdempotencyKey, &input, &output, &checkpoint, &r.Phase,
		&r.Error, &r.DeadLettered, &r.CancelRequested, &r.CreatedAt, &started, &completed,
		&r.DurationMS, &r.UpdatedAt, &attemptStarted)
	if err != nil {
		return nil, err
	}
	r.Status = starflowtype.RunStatus(status)
	r.ClaimState = starflowtype.ClaimState(claim)
	r.RecoveryMode = starflowtype.RecoveryMode(mode)
	r.TriggerType = starflowtype.TriggerType(trigger)
	r.LeaseUntil = utc(leaseUntil)
	r.LastHeartbeat = utc(heartbeat)
	r.AvailableAt = r.AvailableAt.UTC()
	r.CreatedAt = r.CreatedAt.UTC()
	r.StartedAt = utc(started)
	r.AttemptStartedAt = utc(attemptStarted)
	r.CompletedAt = utc(completed)
	r.UpdatedAt = r.UpdatedAt.UTC()
	r.Input = rawJSON(input)
	r.Output = rawJSON(output)
	r.Checkpoint = rawJSON(checkpoint)
	return &r, nil
}

func scanStep(sc scanner) (*starflowtype.Step, error) {
	var st starflowtype.Step
	var status string
	var started, finished, updated *time.Time
	if err := sc.Scan(&st.RunID, &st.Attempt, &st.ScopePath, &st.StepID, &st.Kind, &status, &st.Tries,
		&started, &finished, &st.DurationMS, &st.Error, &updated); err != nil {
		return nil, err
	}
	st.Status = starflowtype.StepStatus(status)
	st.StartedAt = utc(started)
	st.FinishedAt = utc(finished)
	st.UpdatedAt = utc(updated)
	return &st, nil
}

// utc is *t in UTC, or the zero time for NULL.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// rawJSON is b as JSON, nil for NULL.
func rawJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}
