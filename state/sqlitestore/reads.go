package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// timeLayout is how every timestamp is stored: RFC 3339 UTC with
// milliseconds, the same text strftime('%Y-%m-%dT%H:%M:%fZ') produces.
const timeLayout = "2006-01-02T15:04:05.000Z"

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// GetDefinition implements state.Adapter.
func (s *Store) GetDefinition(ctx context.Context, p *state.GetDefinitionParams) (*starflowtype.Definition, error) {
	var row *sql.Row
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	switch {
	case p.ID != "":
		row = s.read.QueryRowContext(ctx, q("get_definition_by_id"), p.ID, p.WorkspaceID, p.WorkspaceID)
	case p.Revision != "":
		row = s.read.QueryRowContext(ctx, q("get_definition_by_revision"), ws, p.Name, p.Revision)
	default:
		row = s.read.QueryRowContext(ctx, q("get_definition_latest"), ws, p.Name)
	}
	var d starflowtype.Definition
	var spec, created string
	err := row.Scan(&d.ID, &d.WorkspaceID, &d.Name, &d.Revision, &spec, &d.Source, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("definition %s%s: %w", p.Name, p.ID, starflowtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get definition: %w", err)
	}
	d.Spec = json.RawMessage(spec)
	d.CreatedAt = parseTime(created)
	return &d, nil
}

// GetRun implements state.Adapter.
func (s *Store) GetRun(ctx context.Context, p *state.GetRunParams) (*starflowtype.Run, error) {
	return getRun(ctx, s.read, p.WorkspaceID, p.ID)
}

func getRun(ctx context.Context, db querier, workspace, id string) (*starflowtype.Run, error) {
	r, err := scanRun(db.QueryRowContext(ctx, q("get_run"), id, workspace, workspace))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, starflowtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns implements state.Adapter.
func (s *Store) ListRuns(ctx context.Context, p *state.ListRunsParams) ([]*starflowtype.Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	statuses, _ := json.Marshal(orEmpty(p.Status))
	rows, err := s.read.QueryContext(ctx, q("list_runs"), p.WorkspaceID, p.WorkflowName, string(statuses), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list runs: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: list runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ListSteps implements state.Adapter.
func (s *Store) ListSteps(ctx context.Context, p *state.ListStepsParams) ([]*starflowtype.Step, error) {
	rows, err := s.read.QueryContext(ctx, q("list_steps"), p.RunID, p.Attempt, p.Attempt)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list steps: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: list steps: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// ListEvents implements state.Adapter.
func (s *Store) ListEvents(ctx context.Context, p *state.ListEventsParams) ([]*starflowtype.Event, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.read.QueryContext(ctx, q("list_events"), p.RunID, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list events: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.Event
	for rows.Next() {
		var e starflowtype.Event
		var typ, created string
		var payload sql.NullString
		if err := rows.Scan(&e.ID, &e.RunID, &e.Attempt, &typ, &e.NodeID, &e.ScopePath, &payload, &created); err != nil {
			return nil, fmt.Errorf("sqlitestore: list events: %w", err)
		}
		e.Type = starflowtype.EventType(typ)
		e.Payload = rawJSON(payload)
		e.CreatedAt = parseTime(created)
		out = append(out, &e)
	}
	return out, rows.Err()
}

// ListCheckpoints implements state.Adapter.
func (s *Store) ListCheckpoints(ctx context.Context, p *state.ListCheckpointsParams) ([]*starflowtype.Checkpoint, error) {
	rows, err := s.read.QueryContext(ctx, q("list_checkpoints"), p.RunID, p.Attempt, p.Attempt)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list checkpoints: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.Checkpoint
	for rows.Next() {
		var c starflowtype.Checkpoint
		var ctxJSON, outJSON, created string
		var ctxBlob, outBlob sql.NullString
		if err := rows.Scan(&c.RunID, &c.ScopePath, &c.StepID, &c.Attempt, &ctxJSON, &outJSON, &c.PreviousBodyRef, &created, &ctxBlob, &outBlob); err != nil {
			return nil, fmt.Errorf("sqlitestore: list checkpoints: %w", err)
		}
		c.Context = json.RawMessage(ctxJSON)
		c.Output = json.RawMessage(outJSON)
		// Only the blob columns mark a reference: a value shaped like one
		// is returned as written (issue 10 item 3).
		for _, b := range []struct {
			sum sql.NullString
			v   *json.RawMessage
		}{{ctxBlob, &c.Context}, {outBlob, &c.Output}} {
			if !b.sum.Valid {
				continue
			}
			var data []byte
			if err := s.read.QueryRowContext(ctx, q("get_blob"), b.sum.String).Scan(&data); err != nil {
				return nil, fmt.Errorf("sqlitestore: checkpoint %s/%s: blob %s: %w", c.ScopePath, c.StepID, b.sum.String, err)
			}
			*b.v = data
		}
		c.CreatedAt = parseTime(created)
		out = append(out, &c)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (*starflowtype.Run, error) {
	var r starflowtype.Run
	var status, claim, mode, trigger, created, updated, available string
	var leaseUntil, heartbeat, started, completed, attemptStarted sql.NullString
	var input, output, checkpoint sql.NullString
	err := sc.Scan(&r.ID, &r.WorkspaceID, &r.Env, &r.DefinitionID, &r.WorkflowName,
		&r.WorkflowRevision, &r.TemplateID, &status, &claim, &r.RunnerPool,
		&r.Priority, &r.LeasedBy, &leaseUntil, &r.LeaseEpoch, &heartbeat, &r.ClaimAttempts,
		&r.Attempt, &r.MaxAttempts, &available, &mode, &trigger, &r.ParentRunID,
		&r.IdempotencyKey, &input, &output, &checkpoint, &r.Phase,
		&r.Error, &r.DeadLettered, &r.CancelRequested, &created, &started, &completed,
		&r.DurationMS, &updated, &attemptStarted)
	if err != nil {
		return nil, err
	}
	r.Status = starflowtype.RunStatus(status)
	r.ClaimState = starflowtype.ClaimState(claim)
	r.RecoveryMode = starflowtype.RecoveryMode(mode)
	r.TriggerType = starflowtype.TriggerType(trigger)
	r.LeaseUntil = parseNullTime(leaseUntil)
	r.LastHeartbeat = parseNullTime(heartbeat)
	r.AvailableAt = parseTime(available)
	r.CreatedAt = parseTime(created)
	r.StartedAt = parseNullTime(started)
	r.AttemptStartedAt = parseNullTime(attemptStarted)
	r.CompletedAt = parseNullTime(completed)
	r.UpdatedAt = parseTime(updated)
	r.Input = rawJSON(input)
	r.Output = rawJSON(output)
	r.Checkpoint = rawJSON(checkpoint)
	return &r, nil
}

func scanStep(sc scanner) (*starflowtype.Step, error) {
	var st starflowtype.Step
	var status string
	var started, finished, updated sql.NullString
	if err := sc.Scan(&st.RunID, &st.Attempt, &st.ScopePath, &st.StepID, &st.Kind, &status, &st.Tries,
		&started, &finished, &st.DurationMS, &st.Error, &updated); err != nil {
		return nil, err
	}
	st.Status = starflowtype.StepStatus(status)
	st.StartedAt = parseNullTime(started)
	st.FinishedAt = parseNullTime(finished)
	st.UpdatedAt = parseNullTime(updated)
	return &st, nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func parseNullTime(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	return parseTime(s.String)
}

func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func jsonOrNull(b json.RawMessage, empty string) string {
	if len(b) == 0 {
		return empty
	}
	return string(b)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// sqliteOffset renders d as a strftime modifier: "+1.500 seconds".
func sqliteOffset(d time.Duration) string {
	return fmt.Sprintf("%+.3f seconds", d.Seconds())
}
