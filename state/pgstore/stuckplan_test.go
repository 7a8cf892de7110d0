package pgstore_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/starflow/starflow/state"
)

// TestStuckCountsPlan (issue 13): the watchdog's aggregate, over 200 000
// runs of which 2 000 have not ended, reads the unfinished runs through
// the (workspace, status) index — in the plan for its arguments and in
// the generic plan — and never scans workflow_runs sequentially, so its
// cost follows the unfinished runs, not the table; and it counts them
// right.
func TestStuckCountsPlan(t *testing.T) {
	t.Parallel()
	s := fresh(t)
	ctx := t.Context()
	_, err := s.Pool().Exec(ctx, `
INSERT INTO workflow_runs (id, workspace_id, workflow_name, status, claim_state, available_at, created_at,
                           updated_at, leased_by, lease_until, recovery_mode)
SELECT gen_random_uuid(), 'ws-' || (i % 5), 'wf',
       CASE WHEN i % 100 = 0 THEN 'queued' WHEN i % 100 = 1 THEN 'running' WHEN i % 100 = 2 THEN 'interrupted'
            WHEN i % 100 < 70 THEN 'succeeded' WHEN i % 100 < 90 THEN 'failed' ELSE 'cancelled' END,
       CASE WHEN i % 100 = 0 THEN 'queued' WHEN i % 100 = 1 THEN 'running' WHEN i % 100 = 2 THEN 'abandoned'
            WHEN i % 100 < 70 THEN 'complete' ELSE 'failed' END,
       now() - interval '2 minutes', now() - (i || ' seconds')::interval, now() - interval '2 minutes',
       CASE WHEN i % 100 = 1 THEN 'gone' END,
       CASE WHEN i % 100 = 1 THEN now() - interval '1 minute' END,
       CASE WHEN i % 100 = 2 THEN 'manual' ELSE 'replay' END
  FROM generate_series(1, 200000) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE workflow_runs`); err != nil {
		t.Fatal(err)
	}
	p := &state.StuckCountsParams{Buckets: []float64{10, 60, 300}}
	plan, err := s.ExplainStuckCounts(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	for kind, raw := range map[string]json.RawMessage{"custom": plan.Custom, "generic": plan.Generic} {
		var indexes []string
		seq := false
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			if n["Relation Name"] == "workflow_runs" {
				seq = seq || n["Node Type"] == "Seq Scan"
			}
			if ix, ok := n["Index Name"].(string); ok {
				indexes = append(indexes, ix)
			}
			for _, c := range asNodes(n["Plans"]) {
				walk(c)
			}
		}
		var top []struct {
			Plan map[string]any `json:"Plan"`
		}
		if err := json.Unmarshal(raw, &top); err != nil || len(top) != 1 {
			t.Fatalf("%s plan: %v\n%s", kind, err, raw)
		}
		walk(top[0].Plan)
		t.Logf("%s plan: indexes %v", kind, indexes)
		found := false
		for _, ix := range indexes {
			found = found || ix == "idx_workflow_runs_workspace_status_list"
		}
		if seq || !found {
			t.Errorf("%s plan of stuck_counts scans workflow_runs (%v) or skips the status index (%v):\n%s", kind, seq, indexes, raw)
		}
	}
	start := time.Now()
	counts, err := s.StuckCounts(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StuckCounts over 200 000 runs: %v", time.Since(start))
	got := map[string]int64{}
	for _, c := range counts {
		got[c.Class] += c.Count
		if c.Bucket != 2 {
			t.Errorf("%+v: bucket %d, want 2 (each is a minute or two old)", c, c.Bucket)
		}
	}
	if got[state.ClassQueued] != 2000 || got[state.ClassLeaseStale] != 2000 || got[state.ClassInterrupted] != 2000 || len(got) != 3 {
		t.Errorf("StuckCounts by class = %v, want 2000 each of queued, lease_stale and interrupted", got)
	}
}

func asNodes(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
