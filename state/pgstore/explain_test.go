package pgstore_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// fillRuns inserts n runs in mixed claim states in one statement, the way
// a busy deployment's table looks: most runs finished, some running (a few
// with expired leases), some queued (part of them delayed or in a pool),
// a few parked.
func fillRuns(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	_, err := s.Pool().Exec(t.Context(), `
INSERT INTO workflow_runs (id, workflow_name, status, claim_state, runner_pool, priority,
                           leased_by, lease_until, lease_epoch, available_at, created_at, started_at)
SELECT gen_random_uuid(), 'wf-' || (i % 7),
       CASE k WHEN 'queued' THEN 'queued' WHEN 'parked' THEN 'paused'
              WHEN 'complete' THEN 'succeeded' WHEN 'failed' THEN 'failed' ELSE 'running' END,
       k,
       CASE WHEN i % 5 = 0 THEN 'gpu' END,
       i % 4,
       CASE WHEN k IN ('claimed', 'running') THEN 'runner-' || (i % 16) END,
       CASE WHEN k IN ('claimed', 'running') THEN now() + CASE WHEN i % 10 = 0 THEN interval '-1 minute' ELSE interval '30 seconds' END END,
       CASE WHEN k = 'queued' THEN 0 ELSE 1 END,
       now() - interval '1 hour' + CASE WHEN k = 'queued' AND i % 2 = 0 THEN interval '2 hours' ELSE interval '0' END,
       now() - (i || ' seconds')::interval,
       CASE WHEN k <> 'queued' THEN now() - (i || ' seconds')::interval END
  FROM generate_series(1, $1) AS i,
       LATERAL (SELECT CASE
           WHEN i % 100 < 60 THEN 'complete'
           WHEN i % 100 < 65 THEN 'failed'
           WHEN i % 100 < 80 THEN 'running'
           WHEN i % 100 < 82 THEN 'claimed'
           WHEN i % 100 < 97 THEN 'queued'
           ELSE 'parked' END AS k) AS states`, n)
	if err != nil {
		t.Fatalf("filling %d runs: %v", n, err)
	}
	if _, err := s.Pool().Exec(t.Context(), `ANALYZE workflow_runs`); err != nil {
		t.Fatal(err)
	}
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node the test reads.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
}

// tableSorted reports whether a Sort node of plan sorts rows read from a
// table (a scan below it), not only rows a statement produced (a CTE's:
// the events a claim that starts its runs inserts in claim order).
func tableSorted(t *testing.T, plan json.RawMessage) bool {
	t.Helper()
	var top []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &top); err != nil || len(top) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	var scans func(n planNode) bool
	scans = func(n planNode) bool {
		if strings.HasSuffix(n.NodeType, "Scan") && !strings.HasPrefix(n.NodeType, "CTE") &&
			n.NodeType != "Values Scan" && n.NodeType != "Function Scan" && n.NodeType != "Subquery Scan" {
			return true
		}
		return slices.ContainsFunc(n.Plans, scans)
	}
	var sorted func(n planNode) bool
	sorted = func(n planNode) bool {
		if n.NodeType == "Sort" && scans(n) {
			return true
		}
		return slices.ContainsFunc(n.Plans, sorted)
	}
	return sorted(top[0].Plan)
}

// planIndexes returns the indexes a plan reads and its node types.
func planIndexes(t *testing.T, plan json.RawMessage) (indexes, nodes []string) {
	t.Helper()
	var top []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &top); err != nil || len(top) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	var walk func(n planNode)
	walk = func(n planNode) {
		nodes = append(nodes, n.NodeType)
		if n.IndexName != "" {
			indexes = append(indexes, n.IndexName)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(top[0].Plan)
	return indexes, nodes
}

// TestQueryPlans fills a schema with 50 000 runs and checks that the exact
// statements ClaimRun and ExpireOldLeases run use their indexes, both in
// the plan for the given parameters and in the generic plan a cached
// prepared statement switches to: the claim walks
// idx_workflow_runs_claim_pool in claim order (no sort of the queued
// runs), and the sweep walks idx_workflow_runs_lease_until.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	fillRuns(t, s, 50000)
	ctx := t.Context()

	for _, c := range []struct {
		name string
		p    *state.ClaimRunParams
	}{
		{"AnyPool", &state.ClaimRunParams{RunnerID: "r", LeaseTTL: 30 * time.Second}},
		{"Pools", &state.ClaimRunParams{RunnerID: "r", Pools: []string{"gpu", "cpu"}, LeaseTTL: 30 * time.Second}},
		{"Workspace", &state.ClaimRunParams{RunnerID: "r", LeaseTTL: 30 * time.Second, WorkspaceID: "default"}},
		{"Start", &state.ClaimRunParams{RunnerID: "r", LeaseTTL: 30 * time.Second, Start: true}},
		{"StartPools", &state.ClaimRunParams{RunnerID: "r", Pools: []string{"gpu", "cpu"}, LeaseTTL: 30 * time.Second, Start: true}},
	} {
		plan, err := s.ExplainClaim(ctx, c.p)
		if err != nil {
			t.Fatalf("ExplainClaim(%s): %v", c.name, err)
		}
		for kind, p := range map[string]json.RawMessage{"custom": plan.Custom, "generic": plan.Generic} {
			indexes, nodes := planIndexes(t, p)
			t.Logf("claim %s, %s plan: nodes %v, indexes %v", c.name, kind, nodes, indexes)
			if !slices.Contains(indexes, "idx_workflow_runs_claim_pool") {
				t.Errorf("claim %s, %s plan does not use idx_workflow_runs_claim_pool:\n%s", c.name, kind, p)
			}
			if tableSorted(t, p) || slices.Contains(nodes, "Seq Scan") {
				t.Errorf("claim %s, %s plan sorts or scans the table:\n%s", c.name, kind, p)
			}
		}
	}

	plan, err := s.ExplainSweep(ctx, &state.ExpireOldLeasesParams{})
	if err != nil {
		t.Fatalf("ExplainSweep: %v", err)
	}
	for kind, p := range map[string]json.RawMessage{"custom": plan.Custom, "generic": plan.Generic} {
		indexes, nodes := planIndexes(t, p)
		t.Logf("sweep, %s plan: nodes %v, indexes %v", kind, nodes, indexes)
		if !slices.Contains(indexes, "idx_workflow_runs_lease_until") {
			t.Errorf("sweep %s plan does not use idx_workflow_runs_lease_until:\n%s", kind, p)
		}
	}

	// The plans are of statements that work on this data.
	c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r", LeaseTTL: 30 * time.Second})
	if err != nil || c == nil || c.Priority != 3 || c.RunnerPool != "" {
		t.Fatalf("ClaimRun on the filled table = %+v, %v; want a run of priority 3 and no pool", c, err)
	}
	swept, err := s.ExpireOldLeases(ctx, &state.ExpireOldLeasesParams{Limit: 100})
	if err != nil || len(swept) != 100 {
		t.Fatalf("ExpireOldLeases on the filled table = %d runs, %v; want 100", len(swept), err)
	}
}

// TestExplainLeavesNoPreparedStatement: on a one-connection pool, explain
// after explain works (the prepared statement was deallocated) and the
// adapter's own statements still run.
func TestExplainLeavesNoPreparedStatement(t *testing.T) {
	t.Parallel()
	s := openConfig(t, pgstore.Config{Schema: newSchema(t), MaxConns: 1})
	ctx := t.Context()
	for i := range 3 {
		if _, err := s.ExplainClaim(ctx, &state.ClaimRunParams{RunnerID: "r", LeaseTTL: time.Minute}); err != nil {
			t.Fatalf("ExplainClaim #%d: %v", i+1, err)
		}
		if _, err := s.ExplainSweep(ctx, &state.ExpireOldLeasesParams{}); err != nil {
			t.Fatalf("ExplainSweep #%d: %v", i+1, err)
		}
	}
	var prepared int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE name = 'starflow_explain'`).Scan(&prepared); err != nil || prepared != 0 {
		t.Fatalf("%d starflow_explain statements left on the connection (%v)", prepared, err)
	}
	if _, err := s.EnqueueRun(ctx, &state.EnqueueRunParams{WorkflowName: "wf"}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimRun(ctx, &state.ClaimRunParams{RunnerID: "r", LeaseTTL: time.Minute}); err != nil || c == nil {
		t.Fatalf("ClaimRun after explaining = %+v, %v", c, err)
	}
}
