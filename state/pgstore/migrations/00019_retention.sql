-- +goose Up
-- Retention (issue 16): the indexes CollectGarbage walks, so a pass
-- reads what is due and not the tables around it.
--
-- Building them reads each table once, holding a lock that blocks its
-- writes meanwhile; on a large database create them first with CREATE
-- INDEX CONCURRENTLY (docs/operations.md, "Retention"), and this finds
-- them.

-- The ended runs by the instant they ended (for a held run, its last
-- change): the runs phase walks it oldest first from a cursor.
CREATE INDEX IF NOT EXISTS idx_workflow_runs_retention
    ON workflow_runs ((coalesce(completed_at, updated_at)), id)
    WHERE claim_state IN ('complete', 'failed', 'abandoned');
-- A run's rows are removed by run id: the wake inbox and the receipts had
-- no index on it (the inbox's is partial, on unconsumed rows), and a run's
-- delete also probes the inbox through its foreign key.
CREATE INDEX IF NOT EXISTS idx_workflow_wake_inbox_run_all ON workflow_wake_inbox (run_id);
CREATE INDEX IF NOT EXISTS idx_idempotency_receipts_run ON idempotency_receipts (run_id);
CREATE INDEX IF NOT EXISTS idx_idempotency_receipts_expires ON idempotency_receipts (expires_at);
-- Consumed waits and inbox rows by age.
CREATE INDEX IF NOT EXISTS idx_workflow_waits_consumed
    ON workflow_waits (consumed_at, id) WHERE consumed_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_workflow_wake_inbox_consumed
    ON workflow_wake_inbox (consumed_at) WHERE consumed_at IS NOT NULL;
-- Is a blob still referenced? Few checkpoints hold one.
CREATE INDEX IF NOT EXISTS idx_workflow_run_checkpoints_context_blob
    ON workflow_run_checkpoints (context_blob) WHERE context_blob IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_workflow_run_checkpoints_outputs_blob
    ON workflow_run_checkpoints (outputs_blob) WHERE outputs_blob IS NOT NULL;
-- workflow_blobs.written_at: when a write last inserted the blob again
-- (it exists already: blobs are shared by content). NULL: never since
-- created_at. A writer that finds the blob older than a minute sets it,
-- which also locks the row until its checkpoint commits, so the orphan
-- collection, which takes only rows untouched for its grace age and skips
-- locked ones, never removes a blob a concurrent checkpoint is about to
-- reference.
ALTER TABLE workflow_blobs ADD COLUMN written_at timestamptz;

-- +goose Down
ALTER TABLE workflow_blobs DROP COLUMN written_at;
DROP INDEX IF EXISTS idx_workflow_run_checkpoints_outputs_blob;
DROP INDEX IF EXISTS idx_workflow_run_checkpoints_context_blob;
DROP INDEX IF EXISTS idx_workflow_wake_inbox_consumed;
DROP INDEX IF EXISTS idx_workflow_waits_consumed;
DROP INDEX IF EXISTS idx_idempotency_receipts_expires;
DROP INDEX IF EXISTS idx_idempotency_receipts_run;
DROP INDEX IF EXISTS idx_workflow_wake_inbox_run_all;
DROP INDEX IF EXISTS idx_workflow_runs_retention;
