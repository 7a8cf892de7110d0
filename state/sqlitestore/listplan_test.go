package sqlitestore

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestListingQueriesUseTheirIndexes checks with EXPLAIN QUERY PLAN that
// the run listing reads a workspace's runs through
// idx_workflow_runs_workspace_list in the listing's order (no sort, from
// the page's position on), a status listing through
// idx_workflow_runs_workspace_status_list, a parent's children through
// idx_workflow_runs_parent, every workspace's listing the workspace
// index once per workspace, and that an id prefix is a range of the
// primary key. (A listing that reads ranges sorts what they return, at
// most a page from each.) Recent recoveries read their partial index in
// order.
func TestListingQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "plan.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	listArgs := func(ws, statuses, parent any, at, id any) []any {
		return []any{ws, "", statuses, "", parent, nil, nil, false, at, id, 50}
	}
	for _, c := range []struct {
		name, query string
		args        []any
		want        string
		sorts       bool
	}{
		{"first page", "list_runs", listArgs("default", "[]", nil, nil, nil), "idx_workflow_runs_workspace_list", false},
		{"after a cursor", "list_runs", listArgs("default", "[]", nil, "2026-01-02T03:04:05.678Z", "abcdef01-2345-4678-9abc-def012345678"),
			"idx_workflow_runs_workspace_list (workspace_id=? AND created_at>? AND (created_at,id)<(?,?))", false},
		{"statuses", "list_runs_status", listArgs("default", `["failed", "paused"]`, nil, nil, nil),
			"idx_workflow_runs_workspace_status_list (workspace_id=? AND status=? AND created_at>? AND (created_at,id)<(?,?))", true},
		{"every workspace", "list_runs_any", listArgs("", "[]", nil, nil, nil),
			"idx_workflow_runs_workspace_list (workspace_id=? AND created_at>? AND (created_at,id)<(?,?))", true},
		{"children", "list_runs_children", listArgs("", "[]", "abcdef01-2345-4678-9abc-def012345678", nil, nil), "idx_workflow_runs_parent", true},
		{"id prefix", "find_run_ids", []any{"abcdef01-0000-0000-0000-000000000000", "abcdef01-ffff-ffff-ffff-ffffffffffff", "default", 2},
			"USING INDEX sqlite_autoindex_workflow_runs_1 (id>? AND id<?)", false},
		// The partial index of recovery events, read in id order.
		{"recent recoveries", "recent_recoveries", []any{"default", "", 50}, "USING INDEX idx_workflow_run_events_recovery (workspace_id=?)", false},
		{"recent recoveries of an env", "recent_recoveries", []any{"default", "prod", 50}, "USING INDEX idx_workflow_run_events_recovery (workspace_id=?)", false},
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
		t.Logf("%s (%s):\n%s", c.name, c.query, text)
		if !strings.Contains(text, c.want) {
			t.Errorf("%s: %s does not use %s:\n%s", c.name, c.query, c.want, text)
		}
		if !c.sorts && strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s: %s sorts:\n%s", c.name, c.query, text)
		}
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN workflow_") {
				t.Errorf("%s: %s scans a table: %q\n%s", c.name, c.query, line, text)
			}
		}
	}
}
