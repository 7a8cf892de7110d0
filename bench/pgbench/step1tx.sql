-- The one-transaction floor (issue 11): a side-effect-free step with its
-- start and completion in one fenced transaction, 1 update + 3 inserts
-- (fence, ledger row already succeeded, node_complete event, checkpoint),
-- as plain statements. The engine writes the same rows (and a node_start
-- event beside node_complete) in one CTE statement per step
-- (state/pgstore/stepbatch.go), so this is the data-model floor it is
-- measured against. Same seed and clients as step.sql.
\set step random(1, 9000000000000000000)
BEGIN;
UPDATE workflow_runs SET updated_at = now()
 WHERE id = ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid
   AND leased_by = 'pgbench' AND lease_epoch = 1 AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, cancel_requested, status, coalesce(parent_run_id::text, '');
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env, kind, status, tries, started_at, finished_at, duration_ms)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, 1, '', 's' || :step, 'default', 'prod', 'context_set', 'succeeded', 1, now(), now(), 0);
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, 'default', 'prod', 1, 'node_complete', 's' || :step, '', '{"try":1}');
INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id, env, context_json, outputs_json)
VALUES (('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid, '', 's' || :step, 1, 'default', 'prod', '{"v":1}', '{"v":1}');
COMMIT;
