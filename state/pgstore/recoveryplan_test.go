package pgstore_test

import (
	"testing"

	"github.com/starflow/starflow/state"
)

// TestRecentRecoveriesPlan fills a schema with 20,000 runs and 500,000
// events, one in a hundred of them a recovery, and checks that
// RecentRecoveries reads idx_workflow_run_events_recovery in order (no
// scan of the events, no sort) in the custom and the generic plan, with
// and without an env, and answers the newest first.
func TestRecentRecoveriesPlan(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	ctx := t.Context()
	_, err := s.Pool().Exec(ctx, `
WITH runs AS (
  INSERT INTO workflow_runs (id, workspace_id, env, workflow_name, status, claim_state, created_at)
  SELECT gen_random_uuid(), CASE WHEN i % 10 = 0 THEN 'acme' ELSE 'default' END,
         CASE WHEN i % 4 = 0 THEN 'staging' ELSE 'prod' END, 'wf-' || (i % 7), 'succeeded', 'complete',
         now() - (i || ' seconds')::interval
    FROM generate_series(1, 20000) AS i
  RETURNING id, workspace_id, env)
INSERT INTO workflow_run_events (run_id, workspace_id, env, event_type, created_at)
SELECT r.id, r.workspace_id, r.env,
       CASE WHEN n % 100 = 0 THEN 'runner_lost' WHEN n % 100 = 1 THEN 'run_interrupted'
            WHEN n % 2 = 0 THEN 'node_start' ELSE 'node_complete' END,
       now()
  FROM runs r, generate_series(1, 25) AS n`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE workflow_runs; ANALYZE workflow_run_events`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*state.RecentRecoveriesParams{
		{WorkspaceID: "default"},
		{WorkspaceID: "default", Env: "staging", Limit: 500},
		{WorkspaceID: "acme", Limit: 5},
	} {
		plan, err := s.ExplainRecentRecoveries(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, "RecentRecoveries "+p.WorkspaceID+"/"+p.Env, plan, "idx_workflow_run_events_recovery", true)
		evs, err := s.RecentRecoveries(ctx, p)
		want := p.Limit
		if want == 0 {
			want = state.RecentRecoveriesLimitDefault
		}
		if err != nil || len(evs) != want {
			t.Fatalf("RecentRecoveries(%+v) = %d events, %v; want %d", p, len(evs), err, want)
		}
		for i, e := range evs {
			if (p.Env != "" && e.Env != p.Env) || (i > 0 && e.ID >= evs[i-1].ID) || e.WorkflowName == "" {
				t.Fatalf("RecentRecoveries(%+v): event %d: %+v (want its env, newest first, with a workflow)", p, i, e)
			}
		}
	}
}
