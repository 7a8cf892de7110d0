package sqlitestore

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestWaitQueriesUseTheirIndexes checks with EXPLAIN QUERY PLAN that the
// lookups of durable waits walk their indexes instead of scanning every
// pending wait, inbox entry or run (10,000 paused runs must cost the poller
// nothing).
func TestWaitQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "plan.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query string
		args  []any
		want  []string
	}{
		{"due_waits", []any{5}, []string{"idx_workflow_waits_wake_at", "idx_workflow_waits_expires_at"}},
		{"inbox_match", []any{"r", "w", "go", "k"}, []string{"idx_workflow_wake_inbox_run", "idx_workflow_wake_inbox_correlation"}},
		{"pending_wait_for_signal", []any{"r", "w", "go", "k"}, []string{"idx_workflow_waits_step", "idx_workflow_waits_correlation"}},
		{"pending_notifies", []any{5}, []string{"idx_workflow_waits_notify"}},
		{"session_drop_run", []any{"r"}, []string{"idx_workflow_session_vars_origin"}},
		{"session_gc", []any{5}, []string{"idx_workflow_session_vars_keep_until"}},
		{"children", []any{"r"}, []string{"idx_workflow_runs_parent"}},
		{"cancel_waits", []any{"r"}, []string{"idx_workflow_waits_step"}},
	} {
		rows, err := s.read.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+Queries[c.query], c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		for _, idx := range c.want {
			if !strings.Contains(text, idx) {
				t.Errorf("%s does not use %s:\n%s", c.query, idx, text)
			}
		}
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN workflow_") {
				t.Errorf("%s scans a table: %q\n%s", c.query, line, text)
			}
		}
	}
}
