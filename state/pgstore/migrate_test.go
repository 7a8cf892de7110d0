package pgstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// TestMigrationAttemptStartedAtBackfill: migration 00009 gives existing
// runs that have not ended the first start of their current attempt (its
// first run_started event; started_at for a first attempt whose events
// are gone; none when the current attempt has not started), so their
// duration is measured from it when they end; a finished run is left as
// it was (its duration_ms kept, no attempt_started_at). Existing step rows
// are not rewritten: their updated_at column stays NULL and reads show
// their finish or start time (as the SQLite store's test
// of the same name).
func TestMigrationAttemptStartedAtBackfill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := newSchema(t)
	adminExec(t, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	s, err := pgstore.Open(ctx, pgstore.Config{URL: testURL(), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := stdlib.OpenDBFromPool(s.Pool())
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 8); err != nil { // the schema before 00009
		t.Fatal(err)
	}
	const (
		first, second = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
		retrying      = "00000000-0000-0000-0000-000000000003"
		queued        = "00000000-0000-0000-0000-000000000004"
		running       = "00000000-0000-0000-0000-000000000005"
	)
	t1 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC) // first start
	t2 := t1.Add(time.Hour)                            // attempt 2 starts
	t3 := t2.Add(30 * time.Minute)                     // attempt 2 continued by another runner
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO workflow_runs (id, workflow_name, attempt, status, started_at, completed_at, duration_ms) VALUES
		   ($1, 'wf', 1, 'succeeded', $2, $3, 3600000)`, []any{first, t1, t2}},
		{`INSERT INTO workflow_runs (id, workflow_name, attempt, status, started_at) VALUES
		   ($1, 'wf', 1, 'running', $5), ($2, 'wf', 2, 'running', $5),
		   ($3, 'wf', 2, 'interrupted', $5), ($4, 'wf', 1, 'queued', NULL)`, []any{running, second, retrying, queued, t1}},
		{`INSERT INTO workflow_run_events (run_id, attempt, event_type, created_at) VALUES
		   ($1, 1, 'run_started', $3), ($1, 2, 'run_started', $5), ($1, 2, 'run_started', $4),
		   ($2, 1, 'run_started', $3), ($6, 1, 'run_started', $3)`, []any{second, retrying, t1, t2, t3, first}},
		{`INSERT INTO workflow_steps (run_id, attempt, step_id, kind, status, tries, started_at, finished_at) VALUES
		   ($1, 1, 'done', 'noop', 'succeeded', 1, $3, $4), ($2, 2, 'open', 'noop', 'running', 1, $5, NULL)`,
			[]any{first, second, t1, t2, t3}},
	} {
		if _, err := s.Pool().Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]time.Time{first: {}, running: t1, second: t2, retrying: {}, queued: {}} {
		r, err := s.GetRun(ctx, &state.GetRunParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if !r.AttemptStartedAt.Equal(want) {
			t.Errorf("run %s: attempt_started_at %v after the migration, want %v", id, r.AttemptStartedAt, want)
		}
		if id == first && r.DurationMS != 3600000 {
			t.Errorf("finished run: duration_ms %d after the migration, want 3600000 kept", r.DurationMS)
		}
	}
	var rewritten int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM workflow_steps WHERE updated_at IS NOT NULL`).Scan(&rewritten); err != nil || rewritten != 0 {
		t.Errorf("the migration wrote updated_at into %d existing step rows (%v); reads coalesce it", rewritten, err)
	}
	for id, want := range map[string]time.Time{first: t2, second: t3} {
		steps, err := s.ListSteps(ctx, &state.ListStepsParams{RunID: id})
		if err != nil || len(steps) != 1 {
			t.Fatalf("steps of %s: %v %v", id, steps, err)
		}
		if !steps[0].UpdatedAt.Equal(want) {
			t.Errorf("step of %s: updated_at %v after the migration, want %v", id, steps[0].UpdatedAt, want)
		}
	}
}
