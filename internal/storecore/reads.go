package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// GetDefinition implements state.Adapter.
func (s *Store) GetDefinition(ctx context.Context, p *state.GetDefinitionParams) (*starflowtype.Definition, error) {
	notFound := fmt.Errorf("definition %s%s: %w", p.Name, p.ID, starflowtype.ErrNotFound)
	var row Row
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	switch {
	case p.ID != "":
		id, ok := CanonicalID(p.ID)
		if !ok {
			return nil, notFound
		}
		row = s.reader().QueryRow(ctx, "get_definition_by_id", id, p.WorkspaceID)
	case p.Revision != "":
		row = s.reader().QueryRow(ctx, "get_definition_by_revision", ws, p.Name, p.Revision)
	default:
		row = s.reader().QueryRow(ctx, "get_definition_latest", ws, p.Name)
	}
	d, err := scanDefinition(row)
	if isNoRows(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, s.errorf("get definition: %w", err)
	}
	return d, nil
}

// ListDefinitions implements state.Operator.
func (s *Store) ListDefinitions(ctx context.Context, p *state.ListDefinitionsParams) ([]*starflowtype.Definition, error) {
	out, err := s.definitions(ctx, "list_definitions", orDefault(p.WorkspaceID, state.DefaultWorkspace))
	if err != nil {
		return nil, s.errorf("list definitions: %w", err)
	}
	return out, nil
}

// ListRevisions implements state.Operator.
func (s *Store) ListRevisions(ctx context.Context, p *state.ListRevisionsParams) ([]*starflowtype.Definition, error) {
	out, err := s.definitions(ctx, "list_revisions", orDefault(p.WorkspaceID, state.DefaultWorkspace), p.Name)
	if err != nil {
		return nil, s.errorf("list revisions of %s: %w", p.Name, err)
	}
	return out, nil
}

// definitions runs a query of definition rows.
func (s *Store) definitions(ctx context.Context, name string, args ...any) ([]*starflowtype.Definition, error) {
	rows, err := s.reader().Query(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*starflowtype.Definition
	for rows.Next() {
		d, err := scanDefinition(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// scanDefinition reads a definition row (id, workspace_id, name,
// revision, spec_json, source, created_at).
func scanDefinition(row Row) (*starflowtype.Definition, error) {
	var d starflowtype.Definition
	var spec []byte
	if err := row.Scan(&d.ID, &d.WorkspaceID, &d.Name, &d.Revision, &spec, &d.Source, &d.CreatedAt); err != nil {
		return nil, err
	}
	d.Spec = spec
	return &d, nil
}

// GetRun implements state.Adapter.
func (s *Store) GetRun(ctx context.Context, p *state.GetRunParams) (*starflowtype.Run, error) {
	r, err := getRun(ctx, s.reader(), p.WorkspaceID, p.ID)
	if err != nil && !isNotFound(err) {
		return nil, s.errorf("%w", err)
	}
	return r, err
}

func getRun(ctx context.Context, q Querier, workspace, runID string) (*starflowtype.Run, error) {
	notFound := fmt.Errorf("run %s: %w", runID, starflowtype.ErrNotFound)
	id, ok := CanonicalID(runID)
	if !ok {
		return nil, notFound
	}
	r, err := scanRun(q.QueryRow(ctx, "get_run", id, workspace))
	if isNoRows(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", runID, err)
	}
	return r, nil
}

// ListSteps implements state.Adapter.
func (s *Store) ListSteps(ctx context.Context, p *state.ListStepsParams) ([]*starflowtype.Step, error) {
	id, ok := CanonicalID(p.RunID)
	if !ok {
		return nil, nil
	}
	out, err := listSteps(ctx, s.reader(), "list_steps", id, p.Attempt)
	if err != nil {
		return nil, s.errorf("list steps: %w", err)
	}
	return out, nil
}

func listSteps(ctx context.Context, q Querier, name string, args ...any) ([]*starflowtype.Step, error) {
	rows, err := q.Query(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*starflowtype.Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// ListEvents implements state.Adapter.
func (s *Store) ListEvents(ctx context.Context, p *state.ListEventsParams) ([]*starflowtype.Event, error) {
	id, ok := CanonicalID(p.RunID)
	if !ok {
		return nil, nil
	}
	var limit any
	if p.Limit > 0 {
		limit = p.Limit
	}
	rows, err := s.reader().Query(ctx, "list_events", id, p.AfterID, limit)
	if err != nil {
		return nil, s.errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.Event
	for rows.Next() {
		var e starflowtype.Event
		if err := scanEvent(rows, &e); err != nil {
			return nil, s.errorf("list events: %w", err)
		}
		out = append(out, &e)
	}
	return out, rows.Err()
}

// scanEvent reads an event row (id, run_id, attempt, event_type, node_id,
// scope_path, payload_json, created_at) into e, then the columns a query
// selects after it into more.
func scanEvent(row Row, e *starflowtype.Event, more ...any) error {
	var typ string
	dest := append([]any{&e.ID, &e.RunID, &e.Attempt, &typ, &e.NodeID, &e.ScopePath, &e.Payload, &e.CreatedAt}, more...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	e.Type = starflowtype.EventType(typ)
	return nil
}

// ListCheckpoints implements state.Adapter. Only the blob columns mark a
// reference (issue 10 item 3): a value shaped like one is returned as
// written.
func (s *Store) ListCheckpoints(ctx context.Context, p *state.ListCheckpointsParams) ([]*starflowtype.Checkpoint, error) {
	id, ok := CanonicalID(p.RunID)
	if !ok {
		return nil, nil
	}
	type blobbed struct {
		c              *starflowtype.Checkpoint
		ctxSum, outSum string
	}
	var all []blobbed
	err := func() error {
		rows, err := s.reader().Query(ctx, "list_checkpoints", id, p.Attempt)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			b := blobbed{c: &starflowtype.Checkpoint{}}
			c := b.c
			if err := rows.Scan(&c.RunID, &c.ScopePath, &c.StepID, &c.Attempt, &c.Context, &c.Output, &c.PreviousBodyRef,
				&c.CreatedAt, &b.ctxSum, &b.outSum); err != nil {
				return err
			}
			all = append(all, b)
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, s.errorf("list checkpoints: %w", err)
	}
	out := make([]*starflowtype.Checkpoint, len(all))
	for i, b := range all {
		for _, ref := range []struct {
			sum string
			v   *json.RawMessage
		}{{b.ctxSum, &b.c.Context}, {b.outSum, &b.c.Output}} {
			if ref.sum == "" {
				continue
			}
			var data []byte
			if err := s.reader().QueryRow(ctx, "get_blob", ref.sum).Scan(&data); err != nil {
				return nil, s.errorf("checkpoint %s/%s: blob %s: %w", b.c.ScopePath, b.c.StepID, ref.sum, err)
			}
			*ref.v = data
		}
		out[i] = b.c
	}
	return out, nil
}

func isNotFound(err error) bool {
	return err != nil && errors.Is(err, starflowtype.ErrNotFound)
}

// scanRun reads the run_columns list of the dialects' queries, then the
// columns a query selects after it into more.
func scanRun(row Row, more ...any) (*starflowtype.Run, error) {
	var r starflowtype.Run
	if err := row.Scan(append(runFields(&r), more...)...); err != nil {
		return nil, err
	}
	return &r, nil
}

// scanStep reads the step_columns list of the dialects' queries.
func scanStep(row Row) (*starflowtype.Step, error) {
	var st starflowtype.Step
	if err := row.Scan(stepFields(&st)...); err != nil {
		return nil, err
	}
	return &st, nil
}

// scanWait reads the wait_columns list of the dialects' queries.
func scanWait(row Row) (*starflowtype.Wait, error) {
	var w starflowtype.Wait
	var kind, status string
	err := row.Scan(&w.ID, &w.RunID, &w.WorkspaceID, &w.Attempt, &w.ScopePath, &w.StepID, &kind,
		&w.Signal, &w.CorrelationKey, &w.TokenHash, &w.KeyID, &w.WakeAt, &w.ExpiresAt, &status,
		&w.Payload, &w.Notify, &w.NotifiedAt, &w.NotifyTries, &w.CreatedAt, &w.ConsumedAt, &w.Form)
	if err != nil {
		return nil, err
	}
	w.Kind = starflowtype.WaitKind(kind)
	w.Status = starflowtype.WaitStatus(status)
	return &w, nil
}

// scanSessionVar reads a session variable row (session_get, session_set).
func scanSessionVar(row Row) (*starflowtype.SessionVar, error) {
	var v starflowtype.SessionVar
	if err := row.Scan(&v.WorkspaceID, &v.SessionID, &v.Key, &v.Value, &v.OriginRunID, &v.KeepUntil, &v.UpdatedAt); err != nil {
		return nil, err
	}
	return &v, nil
}
