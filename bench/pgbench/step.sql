-- The PostgreSQL floor of Starflow's per-step writes before issue 11: one
-- durable step written by hand as the engine committed it then, in two
-- transactions (OnNodeStart, then OnNodeComplete) — open the step (fence,
-- ledger upsert, node_start event) and complete it (fence, ledger update,
-- node_complete event, checkpoint) — on the same tables, indexes and
-- RETURNING lists. Kept as the baseline the one-transaction write path is
-- measured against; today's engine writes a side-effect-free step in one
-- fenced statement (state/pgstore/stepbatch.go, sw_* in queries.sql), whose
-- floor is step1tx.sql. Each pgbench client owns one leased run (see
-- seed.sql); step ids are random 63-bit numbers, so they do not collide.
\set step random(1, 9000000000000000000)
BEGIN;
UPDATE workflow_runs SET updated_at = now()
 WHERE id = ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid
   AND leased_by = 'pgbench' AND lease_epoch = 1 AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, cancel_requested, status, coalesce(parent_run_id::text, '');
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env, kind, status, tries, started_at)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, 1, '', 's' || :step, 'default', 'prod', 'context_set', 'running', 1, now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'running', tries = excluded.tries, error = NULL, finished_at = NULL, duration_ms = NULL
 WHERE workflow_steps.status <> 'succeeded'
RETURNING run_id::text, attempt, scope_path, step_id, kind, status, tries, started_at, finished_at,
          coalesce(duration_ms, 0), coalesce(error, '');
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, 'default', 'prod', 1, 'node_start', 's' || :step, '', '{"try":1}')
RETURNING id, created_at;
COMMIT;
BEGIN;
UPDATE workflow_runs SET updated_at = now()
 WHERE id = ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid
   AND leased_by = 'pgbench' AND lease_epoch = 1 AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, cancel_requested, status, coalesce(parent_run_id::text, '');
UPDATE workflow_steps
   SET status = 'succeeded', tries = 1, error = NULL, finished_at = now(),
       duration_ms = round(extract(epoch FROM now() - started_at) * 1000)::bigint
 WHERE run_id = ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid
   AND attempt = 1 AND scope_path = '' AND step_id = 's' || :step AND status IN ('running', 'waiting')
RETURNING run_id::text, attempt, scope_path, step_id, kind, status, tries, started_at, finished_at,
          coalesce(duration_ms, 0), coalesce(error, '');
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, 'default', 'prod', 1, 'node_complete', 's' || :step, '', '{"try":1}')
RETURNING id, created_at;
INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id, env, context_json, outputs_json)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, '', 's' || :step, 1, 'default', 'prod', '{"v":1}', '{"v":1}');
COMMIT;
