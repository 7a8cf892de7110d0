package sqlitestore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestMigrationAttemptStartedAtBackfill: migration 00009 gives existing
// runs that have not ended the first start of their current attempt (its
// first run_started event; started_at for a first attempt whose events
// are gone; none when the current attempt has not started), so their
// duration is measured from it when they end; a finished run is left as
// it was (its duration_ms kept, no attempt_started_at). Existing step rows
// are not rewritten: their updated_at column stays NULL and reads show
// their finish or start time.
func TestMigrationAttemptStartedAtBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "old.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, s.DB(), os.DirFS("migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 8); err != nil { // the schema before 00009
		t.Fatal(err)
	}
	const (
		t1 = "2026-01-01T10:00:00.000Z" // first start
		t2 = "2026-01-01T11:00:00.000Z" // attempt 2 starts
		t3 = "2026-01-01T11:30:00.000Z" // attempt 2 continued by another runner
	)
	for _, q := range []string{
		`INSERT INTO workflow_runs (id, workflow_name, attempt, status, started_at, completed_at, duration_ms) VALUES
		   ('00000000-0000-4000-8000-000000000001', 'wf', 1, 'succeeded', '` + t1 + `', '` + t2 + `', 3600000)`,
		`INSERT INTO workflow_runs (id, workflow_name, attempt, status, started_at) VALUES
		   ('00000000-0000-4000-8000-000000000002', 'wf', 1, 'running', '` + t1 + `'),
		   ('00000000-0000-4000-8000-000000000003', 'wf', 2, 'running', '` + t1 + `'),
		   ('00000000-0000-4000-8000-000000000004', 'wf', 2, 'interrupted', '` + t1 + `'),
		   ('00000000-0000-4000-8000-000000000005', 'wf', 1, 'queued', NULL)`,
		`INSERT INTO workflow_run_events (run_id, attempt, event_type, created_at) VALUES
		   ('00000000-0000-4000-8000-000000000001', 1, 'run_started', '` + t1 + `'),
		   ('00000000-0000-4000-8000-000000000003', 1, 'run_started', '` + t1 + `'),
		   ('00000000-0000-4000-8000-000000000003', 2, 'run_started', '` + t3 + `'),
		   ('00000000-0000-4000-8000-000000000003', 2, 'run_started', '` + t2 + `'),
		   ('00000000-0000-4000-8000-000000000004', 1, 'run_started', '` + t1 + `')`,
		`INSERT INTO workflow_steps (run_id, attempt, step_id, kind, status, tries, started_at, finished_at) VALUES
		   ('00000000-0000-4000-8000-000000000001', 1, 'done', 'noop', 'succeeded', 1, '` + t1 + `', '` + t2 + `'),
		   ('00000000-0000-4000-8000-000000000003', 2, 'open', 'noop', 'running', 1, '` + t3 + `', NULL)`,
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := func(v string) time.Time {
		if v == "" {
			return time.Time{}
		}
		tm, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for id, want := range map[string]string{"00000000-0000-4000-8000-000000000001": "", "00000000-0000-4000-8000-000000000002": t1, "00000000-0000-4000-8000-000000000003": t2, "00000000-0000-4000-8000-000000000004": "", "00000000-0000-4000-8000-000000000005": ""} {
		r, err := s.GetRun(ctx, &state.GetRunParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if !r.AttemptStartedAt.Equal(at(want)) {
			t.Errorf("run %s: attempt_started_at %v after the migration, want %q", id, r.AttemptStartedAt, want)
		}
		if id == "00000000-0000-4000-8000-000000000001" && r.DurationMS != 3600000 {
			t.Errorf("finished run: duration_ms %d after the migration, want 3600000 kept", r.DurationMS)
		}
	}
	var rewritten int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM workflow_steps WHERE updated_at IS NOT NULL`).Scan(&rewritten); err != nil || rewritten != 0 {
		t.Errorf("the migration wrote updated_at into %d existing step rows (%v); reads coalesce it", rewritten, err)
	}
	for id, want := range map[string]string{"00000000-0000-4000-8000-000000000001": t2, "00000000-0000-4000-8000-000000000003": t3} {
		steps, err := s.ListSteps(ctx, &state.ListStepsParams{RunID: id})
		if err != nil || len(steps) != 1 {
			t.Fatalf("steps of %s: %v %v", id, steps, err)
		}
		if !steps[0].UpdatedAt.Equal(at(want)) {
			t.Errorf("step of %s: updated_at %v after the migration, want %s", id, steps[0].UpdatedAt, want)
		}
	}
}

// TestMigrationEndWork: migration 00012 marks every run that has not ended
// as possibly holding session variables and waits (its end cleans both up,
// as before the column existed); ended runs need nothing.
func TestMigrationEndWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "old.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := sqlitestore.MigrateUpTo(ctx, s, 11); err != nil {
		t.Fatal(err)
	}
	const running, done = "00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-0000000000a2"
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO workflow_runs (id, workflow_name, workflow_revision, status, claim_state, available_at)
		VALUES (?, 'wf', 'r', 'running', 'running', '2026-01-01T00:00:00.000Z'), (?, 'wf', 'r', 'succeeded', 'complete', '2026-01-01T00:00:00.000Z')`,
		running, done); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{running: 3, done: 0} {
		var got int
		if err := s.DB().QueryRowContext(ctx, `SELECT end_work FROM workflow_runs WHERE id = ?`, id).Scan(&got); err != nil || got != want {
			t.Errorf("run %s: end_work %d (%v) after the migration, want %d", id, got, err, want)
		}
	}
}
