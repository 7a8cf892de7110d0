package mirror

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// SessionVarPayload is the payload of a session_var outbox row.
type SessionVarPayload struct {
	WorkspaceID string          `json:"workspace_id"`
	SessionID   string          `json:"session_id"`
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value,omitempty"`
	Deleted     bool            `json:"deleted,omitempty"`
}

// Hook returns the state.TxHook that appends mirror_outbox rows inside
// every write transaction of a SQL adapter (SPEC §8). Install it in the
// adapter's Config.Hooks when opening it (sqlitestore.Config.Hooks,
// pgstore.Config.Hooks), then wrap the adapter with New. The adapter's
// schema must include mirror_outbox (Migrate applies it).
//
// For every run a write changed (Change.Run, or Change.Runs for the lease
// sweep) the hook reads the run's current steps (running or waiting in
// its current attempt), projects the run to a warm.RunEntry and, when the
// projection differs from the last one mirrored (workflow_runs.mirror_hash)
// or the write also changed steps, appended events or changed session
// variables of the run, bumps workflow_runs.mirror_version and appends:
// one `step` row per step row the write changed, one `event` row per event
// it appended (payload warm.EventEntry: the event as stored), one `run`
// row (the entry, self-contained), one `session_var` row per session
// variable it set or removed (step and event rows first, then the run row,
// so the run entry lands after its steps and events). Every row of that
// run carries the bumped version. A write that changes nothing the warm
// tier shows (a lease refresh) appends nothing. The lease sweep and
// cancellation end a run's left-running steps in bulk; for them the hook
// also sends the failed and cancelled steps of the ended attempt. Waits
// are not mirrored (the run's status and current steps show them).
//
// The UPDATE of the run row makes the hook take the run's row lock before
// it inserts, so a run's rows get ids in commit order even with concurrent
// writers on PostgreSQL.
//
// An error (including a missing mirror_outbox table) rolls the write back.
func Hook() state.TxHook {
	return hook
}

func hook(ctx context.Context, tx state.Tx, dialect string, ch *state.Change) error {
	var d sqlDialect
	switch dialect {
	case "postgres":
		d = pgDialect
	case "sqlite":
		d = sqliteDialect
	default:
		return fmt.Errorf("mirror: hook: unsupported dialect %q", dialect)
	}
	runs := ch.Runs
	if ch.Run != nil {
		runs = append([]*starflowtype.Run{ch.Run}, runs...)
	}
	if len(runs) == 0 && len(ch.SessionVars) == 0 {
		return nil
	}
	stepsOf := map[string][]*starflowtype.Step{}
	for _, s := range ch.Steps {
		stepsOf[s.RunID] = append(stepsOf[s.RunID], s)
	}
	eventsOf := map[string][]*starflowtype.Event{}
	for _, e := range ch.Events {
		eventsOf[e.RunID] = append(eventsOf[e.RunID], e)
	}
	varsOf := map[string][]*starflowtype.SessionVar{}
	for _, v := range ch.SessionVars {
		id := v.OriginRunID
		if id == "" {
			id = ch.RunID
		}
		varsOf[id] = append(varsOf[id], v)
	}
	var ins outboxInsert
	versions := map[string]int64{}
	for _, r := range runs {
		if _, done := versions[r.ID]; done {
			continue
		}
		if ended, ok := endedAttempt(ch.Op, r); ok {
			more, err := endedSteps(ctx, tx, d, r.ID, ended, stepsOf[r.ID])
			if err != nil {
				return err
			}
			stepsOf[r.ID] = append(stepsOf[r.ID], more...)
		}
		force := len(stepsOf[r.ID]) > 0 || len(eventsOf[r.ID]) > 0 || len(varsOf[r.ID]) > 0
		if d.pg {
			if err := pgRun(ctx, tx, r, stepsOf[r.ID], eventsOf[r.ID], varsOf[r.ID], force); err != nil {
				return err
			}
			versions[r.ID] = -1 // its session variables went with it
			continue
		}
		current, err := currentSteps(ctx, tx, d, r)
		if err != nil {
			return err
		}
		e := RunEntry(r, current, 0)
		ph, err := projectionHash(e)
		if err != nil {
			return fmt.Errorf("mirror: hook: run %s: %w", r.ID, err)
		}
		var v int64
		err = tx.QueryRow(ctx, d.bump, r.ID, ph, force).Scan(&v)
		if isNoRows(err) {
			versions[r.ID] = 0
			continue // nothing the warm tier shows changed
		}
		if err != nil {
			return fmt.Errorf("mirror: hook: bump version of run %s: %w", r.ID, err)
		}
		versions[r.ID] = v
		e.Version = v
		e.Hash = Hash(e)
		for _, s := range stepsOf[r.ID] {
			if err := ins.add(r.ID, state.OutboxKindStep, StepEntry(s), v); err != nil {
				return err
			}
		}
		for _, ev := range eventsOf[r.ID] {
			if err := ins.add(r.ID, state.OutboxKindEvent, EventEntry(ev), v); err != nil {
				return err
			}
		}
		if err := ins.add(r.ID, state.OutboxKindRun, e, v); err != nil {
			return err
		}
	}
	for _, v := range ch.SessionVars {
		id := v.OriginRunID
		if id == "" {
			id = ch.RunID
		}
		if versions[id] < 0 {
			continue
		}
		if err := ins.add(id, state.OutboxKindSessionVar, sessionVarPayload(v), versions[id]); err != nil {
			return err
		}
	}
	if len(ins.args) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, ins.sql(d), ins.args...); err != nil {
		return fmt.Errorf("mirror: hook: insert mirror_outbox rows: %w", err)
	}
	return nil
}

func sessionVarPayload(v *starflowtype.SessionVar) *SessionVarPayload {
	return &SessionVarPayload{WorkspaceID: v.WorkspaceID, SessionID: v.SessionID, Key: v.Key, Value: v.Value, Deleted: v.Value == nil}
}

// pgRun is the hook's work for one run on PostgreSQL in one statement
// (pgMirrorRun): read the current steps, bump the version unless the
// projection is unchanged (and not forced), and insert the rows — step
// rows, event rows, the run row with the current steps and version merged in, the
// session-variable rows — in that order. The run payload carries no
// hash; the drainer computes it (Hash) from the entry and the row's
// version.
func pgRun(ctx context.Context, tx state.Tx, r *starflowtype.Run, steps []*starflowtype.Step, events []*starflowtype.Event, vars []*starflowtype.SessionVar, force bool) error {
	e := RunEntry(r, nil, 0)
	e.Hash = ""
	proj := *e
	proj.UpdatedAt = time.Time{}
	projJSON, err := json.Marshal(&proj)
	if err != nil {
		return fmt.Errorf("mirror: hook: run %s: %w", r.ID, err)
	}
	var kinds, payloads []string
	add := func(kind string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("mirror: hook: %s row of run %s: %w", kind, r.ID, err)
		}
		kinds, payloads = append(kinds, kind), append(payloads, string(b))
		return nil
	}
	for _, s := range steps {
		if err := add(state.OutboxKindStep, StepEntry(s)); err != nil {
			return err
		}
	}
	for _, ev := range events {
		if err := add(state.OutboxKindEvent, EventEntry(ev)); err != nil {
			return err
		}
	}
	if err := add(state.OutboxKindRun, e); err != nil {
		return err
	}
	for _, v := range vars {
		if err := add(state.OutboxKindSessionVar, sessionVarPayload(v)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, pgMirrorRun, r.ID, r.Attempt, string(projJSON), force, kinds, payloads); err != nil {
		return fmt.Errorf("mirror: hook: mirror_outbox rows of run %s: %w", r.ID, err)
	}
	return nil
}

// pgMirrorRun: $1 run id, $2 attempt, $3 the projection's JSON without
// current steps and updated_at, $4 force, $5/$6 the rows' kinds and
// payloads in order. mirror_hash is md5 of the projection and the current
// steps.
const pgMirrorRun = `WITH cur AS (
  SELECT coalesce(json_agg(json_build_object('run_id', s.run_id::text, 'attempt', s.attempt,
      'scope_path', s.scope_path, 'step_id', s.step_id, 'kind', s.kind, 'status', s.status,
      'tries', s.tries, 'error', coalesce(s.error, ''),
      'updated_at', to_char(coalesce(s.updated_at, s.finished_at, s.started_at) AT TIME ZONE 'UTC',
          'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) ORDER BY s.scope_path, s.step_id), '[]'::json) AS steps
  FROM workflow_steps s
  WHERE s.run_id = $1::text::uuid AND s.attempt = $2::int AND s.status IN ('running', 'waiting')
), b AS (
  UPDATE workflow_runs r SET mirror_version = r.mirror_version + 1, mirror_hash = md5($3::text || cur.steps::text)
  FROM cur
  WHERE r.id = $1::text::uuid AND ($4::bool OR r.mirror_hash IS DISTINCT FROM md5($3::text || cur.steps::text))
  RETURNING r.mirror_version, cur.steps
)
INSERT INTO mirror_outbox (run_id, kind, payload, version)
SELECT $1::text, v.kind,
  CASE WHEN v.kind = 'run'
    THEN (v.payload::jsonb || jsonb_build_object('current_steps', b.steps, 'version', b.mirror_version))::json
    ELSE v.payload::json END,
  b.mirror_version
FROM b CROSS JOIN unnest($5::text[], $6::text[]) WITH ORDINALITY AS v(kind, payload, ord)
ORDER BY v.ord`

// endedAttempt names the attempt whose left-running steps a write ended
// in bulk without listing them in Change.Steps: the lease sweep (steps of
// the lost attempt fail; a re-queued run is already on the next attempt)
// and cancellation (they become cancelled).
func endedAttempt(op string, r *starflowtype.Run) (int, bool) {
	switch op {
	case "ExpireOldLeases":
		if r.ClaimState == starflowtype.ClaimQueued {
			return r.Attempt - 1, true
		}
		return r.Attempt, true
	case "OnRunCancelled", "CancelRun":
		return r.Attempt, true
	}
	return 0, false
}

// endedSteps reads the failed and cancelled steps of attempt not already
// in have (re-sending one that an earlier write mirrored is harmless).
func endedSteps(ctx context.Context, tx state.Tx, d sqlDialect, runID string, attempt int, have []*starflowtype.Step) ([]*starflowtype.Step, error) {
	rows, err := tx.Query(ctx, d.ended, runID, attempt)
	if err != nil {
		return nil, fmt.Errorf("mirror: hook: ended steps of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []*starflowtype.Step
	for rows.Next() {
		s := &starflowtype.Step{RunID: runID}
		var at string
		if err := rows.Scan(&s.Attempt, &s.ScopePath, &s.StepID, &s.Kind, &s.Status, &s.Tries, &s.Error, &at); err != nil {
			return nil, fmt.Errorf("mirror: hook: ended steps of run %s: %w", runID, err)
		}
		if s.UpdatedAt, err = parseStepTime(at); err != nil {
			return nil, fmt.Errorf("mirror: hook: ended steps of run %s: %w", runID, err)
		}
		if !slices.ContainsFunc(have, func(h *starflowtype.Step) bool {
			return h.Attempt == s.Attempt && h.ScopePath == s.ScopePath && h.StepID == s.StepID
		}) {
			out = append(out, s)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mirror: hook: ended steps of run %s: %w", runID, err)
	}
	return out, nil
}

// currentSteps reads the run's running or waiting steps of its attempt
// (the workflow_steps_current partial index).
func currentSteps(ctx context.Context, tx state.Tx, d sqlDialect, r *starflowtype.Run) ([]warm.StepEntry, error) {
	rows, err := tx.Query(ctx, d.current, r.ID, r.Attempt)
	if err != nil {
		return nil, fmt.Errorf("mirror: hook: current steps of run %s: %w", r.ID, err)
	}
	defer rows.Close()
	var out []warm.StepEntry
	for rows.Next() {
		s := warm.StepEntry{RunID: r.ID}
		var at string
		if err := rows.Scan(&s.Attempt, &s.ScopePath, &s.StepID, &s.Kind, &s.Status, &s.Tries, &s.Error, &at); err != nil {
			return nil, fmt.Errorf("mirror: hook: current steps of run %s: %w", r.ID, err)
		}
		if s.UpdatedAt, err = parseStepTime(at); err != nil {
			return nil, fmt.Errorf("mirror: hook: current steps of run %s: %w", r.ID, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mirror: hook: current steps of run %s: %w", r.ID, err)
	}
	return out, nil
}

// parseStepTime parses a step row's time as the dialects' step queries
// select it (RFC 3339 UTC text; "" for none).
func parseStepTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("step time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// isNoRows matches database/sql's (SQLite) and pgx's "no rows" errors.
func isNoRows(err error) bool {
	return errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows)
}

type sqlDialect struct {
	pg                   bool
	bump, current, ended string
	ph                   func(n int) string
}

// pgStepTime selects a step row's last write as RFC 3339 UTC text
// (microseconds), "" for none (parseStepTime).
const pgStepTime = `coalesce(to_char(coalesce(updated_at, finished_at, started_at) AT TIME ZONE 'UTC',
'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '')`

var pgDialect = sqlDialect{
	pg: true,
	bump: `UPDATE workflow_runs SET mirror_version = mirror_version + 1, mirror_hash = $2
WHERE id = $1 AND ($3 OR mirror_hash IS DISTINCT FROM $2) RETURNING mirror_version`,
	current: `SELECT attempt, scope_path, step_id, kind, status, tries, coalesce(error, ''), ` + pgStepTime + ` FROM workflow_steps
WHERE run_id = $1 AND attempt = $2 AND status IN ('running', 'waiting') ORDER BY scope_path, step_id LIMIT 1000`,
	ended: `SELECT attempt, scope_path, step_id, kind, status, tries, coalesce(error, ''), ` + pgStepTime + ` FROM workflow_steps
WHERE run_id = $1 AND attempt = $2 AND status IN ('failed', 'cancelled') ORDER BY scope_path, step_id`,
	ph: func(n int) string { return fmt.Sprintf("$%d", n) },
}

var sqliteDialect = sqlDialect{
	bump: `UPDATE workflow_runs SET mirror_version = mirror_version + 1, mirror_hash = ?2
WHERE id = ?1 AND (?3 OR mirror_hash IS NOT ?2) RETURNING mirror_version`,
	current: `SELECT attempt, scope_path, step_id, kind, status, tries, coalesce(error, ''),
coalesce(updated_at, finished_at, started_at, '') FROM workflow_steps
WHERE run_id = ?1 AND attempt = ?2 AND status IN ('running', 'waiting') ORDER BY scope_path, step_id LIMIT 1000`,
	ended: `SELECT attempt, scope_path, step_id, kind, status, tries, coalesce(error, ''),
coalesce(updated_at, finished_at, started_at, '') FROM workflow_steps
WHERE run_id = ?1 AND attempt = ?2 AND status IN ('failed', 'cancelled') ORDER BY scope_path, step_id`,
	ph: func(n int) string { return fmt.Sprintf("?%d", n) },
}

// outboxInsert accumulates the rows of one multi-row INSERT.
type outboxInsert struct{ args []any }

func (o *outboxInsert) add(runID, kind string, payload any, version int64) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("mirror: hook: %s row of run %s: %w", kind, runID, err)
	}
	o.args = append(o.args, runID, kind, string(b), version)
	return nil
}

func (o *outboxInsert) sql(d sqlDialect) string {
	var b strings.Builder
	b.WriteString("INSERT INTO mirror_outbox (run_id, kind, payload, version) VALUES ")
	for i := 0; i < len(o.args); i += 4 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%s, %s, %s, %s)", d.ph(i+1), d.ph(i+2), d.ph(i+3), d.ph(i+4))
	}
	return b.String()
}
