package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

const gcWorkflow = `name: tidy
steps:
  - id: a
    context_set: {x: 1}
  - id: b
    context_set: {y: 2}
`

// TestCLIGCRetention: `starflow gc --dry-run` counts the runs older than
// --retain-succeeded and removes nothing; `gc` removes exactly those, with
// their rows, and says so by kind; a bad age is a usage error.
func TestCLIGCRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "tidy.yaml", gcWorkflow)
	for range 2 {
		if r := starflowCmd(t, dir, nil, "run", "tidy.yaml", "--db", "gc.db"); r.code != 0 {
			t.Fatalf("run: %s%s", r.stdout, r.stderr)
		}
	}
	// Age one run by 8 days (the database clock is the file's).
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "gc.db")})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := s.ListRuns(t.Context(), &state.ListRunsParams{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("ListRuns = %d runs, %v", len(runs), err)
	}
	old, kept := runs[1].ID, runs[0].ID
	events, err := s.ListEvents(t.Context(), &state.ListEventsParams{RunID: old})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(t.Context(), `UPDATE workflow_runs
		SET completed_at = strftime('%Y-%m-%dT%H:%M:%fZ', completed_at, '-8 days') WHERE id = ?1`, old); err != nil {
		t.Fatal(err)
	}
	s.Close()
	want := "1 run, 2 steps, " + strconv.Itoa(len(events)) + " events, 2 checkpoints"

	r := starflowCmd(t, dir, nil, "gc", "--db", "gc.db", "--dry-run")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "gc: dry run: would remove "+want {
		t.Fatalf("gc --dry-run: exit %d %q %s; want %q", r.code, r.stdout, r.stderr, want)
	}
	r = starflowCmd(t, dir, nil, "gc", "--db", "gc.db", "--retain-succeeded", "9d")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "gc: nothing was due" {
		t.Fatalf("gc --retain-succeeded 9d: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = starflowCmd(t, dir, nil, "gc", "--db", "gc.db")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "gc: removed "+want {
		t.Fatalf("gc: exit %d %q %s; want %q", r.code, r.stdout, r.stderr, want)
	}
	r = starflowCmd(t, dir, nil, "gc", "--db", "gc.db", "--json")
	var rep state.GCReport
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep != (state.GCReport{}) {
		t.Fatalf("gc --json after: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := starflowCmd(t, dir, nil, "runs", "show", old, "--db", "gc.db"); r.code == 0 {
		t.Errorf("the removed run %s still shows: %s", old, r.stdout)
	}
	if r := starflowCmd(t, dir, nil, "runs", "show", kept, "--db", "gc.db"); r.code != 0 {
		t.Errorf("the kept run %s is gone: %s%s", kept, r.stdout, r.stderr)
	}

	r = starflowCmd(t, dir, nil, "gc", "--db", "gc.db", "--retain-failed", "7x")
	if r.code != exitUsage || !strings.Contains(r.stderr, `invalid age "7x": write it like 7d, 1d12h, 36h or 90m, or never`) {
		t.Fatalf("gc --retain-failed 7x: exit %d, stderr %q", r.code, r.stderr)
	}
}
