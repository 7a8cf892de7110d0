package pgtest

import (
	"context"
	"testing"
)

// FillParent is the parent run of every thousandth run FillRuns inserts.
const FillParent = "11111111-1111-4111-8111-111111111111"

// FillRuns inserts n runs (workflow_runs rows only) the way a busy
// deployment's table looks to the run listing: 80% in workspace default,
// the rest in acme and five small workspaces; mostly succeeded, some
// failed (a third of those dead-lettered), running, queued and paused,
// and one in a thousand cancelled; three runs to a created_at, one second
// apart; every thousandth a child of FillParent. It then ANALYZEs the
// table. exec runs one statement in the store's schema (its pool's Exec).
func FillRuns(tb testing.TB, exec func(ctx context.Context, sql string, args ...any) error, n int) {
	tb.Helper()
	ctx := context.Background()
	if err := exec(ctx, `
INSERT INTO workflow_runs (id, workspace_id, env, workflow_name, status, claim_state, leased_by, lease_until,
                           lease_epoch, created_at, started_at, last_heartbeat, dead_lettered, parent_run_id)
SELECT gen_random_uuid(),
       CASE WHEN i % 10 = 0 THEN 'acme' WHEN i % 10 = 1 THEN 'ws-' || (i % 50) ELSE 'default' END,
       CASE WHEN i % 4 = 0 THEN 'staging' ELSE 'prod' END,
       'wf-' || (i % 7),
       CASE k WHEN 'queued' THEN 'queued' WHEN 'parked' THEN 'paused' WHEN 'complete' THEN 'succeeded'
              WHEN 'failed' THEN 'failed' WHEN 'cancel' THEN 'cancelled' ELSE 'running' END,
       CASE k WHEN 'cancel' THEN 'complete' ELSE k END,
       CASE WHEN k = 'running' THEN 'runner-' || (i % 16) END,
       CASE WHEN k = 'running' THEN now() + interval '30 seconds' END,
       CASE WHEN k = 'queued' THEN 0 ELSE 1 END,
       now() - ((i / 3) || ' seconds')::interval,
       CASE WHEN k <> 'queued' THEN now() - ((i / 3) || ' seconds')::interval END,
       CASE WHEN k = 'running' THEN now() - (i || ' seconds')::interval END,
       k = 'failed' AND i % 3 = 0,
       CASE WHEN i % 1000 = 7 THEN $2::uuid END
  FROM generate_series(1, $1) AS i,
       LATERAL (SELECT CASE
           WHEN i % 1000 = 999 THEN 'cancel'
           WHEN i % 100 < 60 THEN 'complete'
           WHEN i % 100 < 65 THEN 'failed'
           WHEN i % 100 < 80 THEN 'running'
           WHEN i % 100 < 97 THEN 'queued'
           ELSE 'parked' END AS k) AS states`, n, FillParent); err != nil {
		tb.Fatalf("filling %d runs: %v", n, err)
	}
	if err := exec(ctx, `ANALYZE workflow_runs`); err != nil {
		tb.Fatal(err)
	}
}
