-- +goose Up
-- The operator dashboard's reads (issue 13).
--
-- workflow_waits.form_json: an approval wait's form, rendered at
-- registration and scrubbed of secrets like notify_json; NULL for other
-- waits and for an approval without a form (an extra column, SPEC
-- appendix A).
ALTER TABLE workflow_waits ADD COLUMN form_json json;

-- The recent recoveries of a workspace (RecentRecoveries: the newest
-- runner_lost, lease_lost, run_interrupted and run_dead_lettered events)
-- read this partial index in id order and stop after the page: it holds
-- only those events, a small part of workflow_run_events. Building it
-- reads the whole events table once, holding a lock that blocks event
-- writes meanwhile; on a large table create it first with CREATE INDEX
-- CONCURRENTLY (docs/operations.md), and this finds it.
CREATE INDEX IF NOT EXISTS idx_workflow_run_events_recovery
    ON workflow_run_events (workspace_id, id DESC)
    WHERE event_type IN ('runner_lost', 'lease_lost', 'run_interrupted', 'run_dead_lettered');

-- +goose Down
DROP INDEX IF EXISTS idx_workflow_run_events_recovery;
ALTER TABLE workflow_waits DROP COLUMN form_json;
