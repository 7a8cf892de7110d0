package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestMigration22BackfillsDepth: runs enqueued before migration 00022 get
// the depth of their place in their tree (a run whose parent row is gone
// counts as 1), and a child enqueued after it under an old run counts on
// from its parent's.
func TestMigration22BackfillsDepth(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "starflow.db")
	old, err := sqlitestore.Open(sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitestore.MigrateUpTo(ctx, old, 21); err != nil {
		t.Fatal(err)
	}
	const (
		root       = "00000000-0000-0000-0000-00000000000a"
		child      = "00000000-0000-0000-0000-00000000000b"
		grandchild = "00000000-0000-0000-0000-00000000000c"
		orphan     = "00000000-0000-0000-0000-00000000000d"
		orphanKid  = "00000000-0000-0000-0000-00000000000e"
		gone       = "00000000-0000-0000-0000-0000000000ff"
	)
	for _, r := range [][2]any{{root, nil}, {child, root}, {grandchild, child}, {orphan, gone}, {orphanKid, orphan}} {
		if _, err := sqlitestore.WriteDB(old).ExecContext(ctx, `INSERT INTO workflow_runs (id, workflow_name, parent_run_id) VALUES (?, 'wf', ?)`, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.Open(sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{root: 0, child: 1, grandchild: 2, orphan: 1, orphanKid: 2} {
		r, err := s.GetRun(ctx, &state.GetRunParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if r.Depth != want {
			t.Errorf("run %s: depth %d after the migration, want %d", id, r.Depth, want)
		}
	}
	next, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf", ParentRunID: grandchild})
	if err != nil {
		t.Fatal(err)
	}
	if next.Depth != 3 {
		t.Errorf("child of an old run at depth 2: depth %d, want 3", next.Depth)
	}
}
