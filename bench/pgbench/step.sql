-- The PostgreSQL floor for BenchmarkPostgresSteps: one durable step written
-- by hand, the same two transactions the engine commits per step — open the
-- step (fence, ledger upsert, node_start event) and complete it (fence,
-- ledger update, node_complete event, checkpoint) — on the same tables and
-- indexes. Each pgbench client owns one leased run (see run.sh).
\set step random(1, 2000000000)
BEGIN;
UPDATE workflow_runs SET updated_at = now()
 WHERE id = ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid
   AND leased_by = 'pgbench' AND lease_epoch = 1 AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt;
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env, kind, status, tries, started_at)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, 1, '', 's' || :step, 'default', 'prod', 'context_set', 'running', 1, now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'running', tries = excluded.tries, error = NULL, finished_at = NULL, duration_ms = NULL
 WHERE workflow_steps.status <> 'succeeded';
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, 'default', 'prod', 1, 'node_start', 's' || :step, '', '{"try":1}')
RETURNING id, created_at;
COMMIT;
BEGIN;
UPDATE workflow_runs SET updated_at = now()
 WHERE id = ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid
   AND leased_by = 'pgbench' AND lease_epoch = 1 AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt;
UPDATE workflow_steps
   SET status = 'succeeded', tries = 1, error = NULL, finished_at = now(),
       duration_ms = round(extract(epoch FROM now() - started_at) * 1000)::bigint
 WHERE run_id = ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid
   AND attempt = 1 AND scope_path = '' AND step_id = 's' || :step AND status IN ('running', 'waiting');
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, 'default', 'prod', 1, 'node_complete', 's' || :step, '', '{"try":1}')
RETURNING id, created_at;
INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id, env, context_json, outputs_json)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, '', 's' || :step, 1, 'default', 'prod', '{"v":1}', '{"v":1}')
ON CONFLICT DO NOTHING;
COMMIT;
