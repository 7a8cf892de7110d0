package pgstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// listParent is the parent run of every thousandth run fillListing
// inserts.
const listParent = pgtest.FillParent

// fillListing fills s with n runs (pgtest.FillRuns).
func fillListing(t testing.TB, s *pgstore.Store, n int) {
	t.Helper()
	pgtest.FillRuns(t, func(ctx context.Context, sql string, args ...any) error {
		_, err := s.Pool().Exec(ctx, sql, args...)
		return err
	}, n)
}

// TestListingPlans fills a schema with 200 000 runs and checks that the
// exact statements ListRuns and FindRunIDs run read their indexes, both
// in the plan for the given parameters and in the generic plan a cached
// prepared statement may switch to: a workspace's pages (the first, one
// after a cursor deep in the table, one with the rarer filters) walk
// idx_workflow_runs_workspace_list in order and sort nothing; a status
// page reads idx_workflow_runs_workspace_status_list; a parent's children
// idx_workflow_runs_parent; every workspace's page the workspace index
// once per workspace; an id prefix a range of workflow_runs_pkey. None
// scans the table.
func TestListingPlans(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	fillListing(t, s, 200000)
	ctx := t.Context()

	var deep state.RunCursor
	if err := s.Pool().QueryRow(ctx, `SELECT created_at, id::text FROM workflow_runs WHERE workspace_id = 'default'
		ORDER BY created_at DESC, id DESC OFFSET 120000 LIMIT 1`).Scan(&deep.CreatedAt, &deep.ID); err != nil {
		t.Fatal(err)
	}
	status := func(s ...starflowtype.RunStatus) []starflowtype.RunStatus { return s }
	const (
		list       = "idx_workflow_runs_workspace_list"
		statusList = "idx_workflow_runs_workspace_status_list"
		parent     = "idx_workflow_runs_parent"
	)
	for _, c := range []struct {
		name   string
		p      *state.ListRunsParams
		index  string
		noSort bool // the index's order is the listing's: nothing to sort
		runs   int  // what ListRuns returns
	}{
		{"FirstPage", &state.ListRunsParams{WorkspaceID: "default"}, list, true, 50},
		{"DeepCursor", &state.ListRunsParams{WorkspaceID: "default", After: &deep}, list, true, 50},
		{"Filters", &state.ListRunsParams{WorkspaceID: "default", Env: "prod", WorkflowName: "wf-3", After: &deep,
			CreatedAfter: deep.CreatedAt.Add(-24 * time.Hour)}, list, true, 50},
		{"Status", &state.ListRunsParams{WorkspaceID: "default", Status: status(starflowtype.RunFailed)}, statusList, false, 50},
		{"StatusDeepCursor", &state.ListRunsParams{WorkspaceID: "default", Status: status(starflowtype.RunSucceeded), After: &deep}, statusList, false, 50},
		{"RareStatuses", &state.ListRunsParams{WorkspaceID: "default", Status: status(starflowtype.RunCancelled, starflowtype.RunPaused)}, statusList, false, 50},
		{"Stale", &state.ListRunsParams{WorkspaceID: "default", StaleBefore: time.Now().Add(-time.Hour)}, statusList, false, 50},
		{"DeadLettered", &state.ListRunsParams{WorkspaceID: "default", Status: status(starflowtype.RunFailed), DeadLettered: true}, statusList, false, 50},
		{"Children", &state.ListRunsParams{ParentRunID: listParent, Limit: 500}, parent, false, 200},
		{"AnyWorkspace", &state.ListRunsParams{}, list, false, 50},
	} {
		plan, err := s.ExplainListRuns(ctx, c.p)
		if err != nil {
			t.Fatalf("ExplainListRuns(%s): %v", c.name, err)
		}
		checkPlan(t, "ListRuns "+c.name, plan, c.index, c.noSort)
		runs, err := s.ListRuns(ctx, c.p)
		if err != nil || len(runs) != c.runs {
			t.Errorf("ListRuns(%s) = %d runs, %v; want %d", c.name, len(runs), err, c.runs)
		}
	}

	var id string
	if err := s.Pool().QueryRow(ctx, `SELECT id::text FROM workflow_runs OFFSET 777 LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{id[:8], id[:13], id} {
		p := &state.FindRunIDsParams{Prefix: prefix, WorkspaceID: "default"}
		plan, err := s.ExplainFindRunIDs(ctx, p)
		if err != nil {
			t.Fatalf("ExplainFindRunIDs(%s): %v", prefix, err)
		}
		checkPlan(t, "FindRunIDs "+prefix, plan, "workflow_runs_pkey", true)
		ids, err := s.FindRunIDs(ctx, &state.FindRunIDsParams{Prefix: prefix})
		if err != nil || !slices.Contains(ids, id) {
			t.Errorf("FindRunIDs(%s) = %v, %v; want %s among them", prefix, ids, err, id)
		}
	}
}

// checkPlan fails unless both of plan's plans read index and neither
// scans the table (sequentially or through a bitmap) nor, with noSort,
// sorts.
func checkPlan(t *testing.T, what string, plan *pgstore.Plan, index string, noSort bool) {
	t.Helper()
	for kind, p := range map[string]json.RawMessage{"custom": plan.Custom, "generic": plan.Generic} {
		indexes, nodes := planIndexes(t, p)
		t.Logf("%s, %s plan: nodes %v, indexes %v", what, kind, nodes, indexes)
		if !slices.Contains(indexes, index) {
			t.Errorf("%s, %s plan does not read %s:\n%s", what, kind, index, p)
		}
		if slices.Contains(nodes, "Seq Scan") || slices.Contains(nodes, "Bitmap Heap Scan") {
			t.Errorf("%s, %s plan scans the table:\n%s", what, kind, p)
		}
		if noSort && slices.ContainsFunc(nodes, func(n string) bool { return strings.Contains(n, "Sort") }) {
			t.Errorf("%s, %s plan sorts:\n%s", what, kind, p)
		}
	}
}
