-- +goose Up
-- Step writes update their run row in place (issue 11, decision 237).
--
-- Every step write's fence writes workflow_runs.updated_at. PostgreSQL
-- can make that a heap-only (HOT) update, with no new entry in any index
-- of the table, only when no index covers a column whose value changes
-- and the row's page has room. idx_workflow_runs_retention covered
-- updated_at (through coalesce(completed_at, updated_at)), so every step
-- write added an entry to each of the table's indexes. The retention walk
-- now reads ended_at, a stored generated column that is NULL while the
-- run has not ended (it does not change under step writes), and the
-- table's pages keep a fifth free for the new row versions.
--
-- Adding a stored generated column rewrites workflow_runs under an
-- exclusive lock (docs/operations.md, "Upgrading to migration 00021").
ALTER TABLE workflow_runs ADD COLUMN ended_at timestamptz GENERATED ALWAYS AS (
    CASE WHEN claim_state IN ('complete', 'failed', 'abandoned') THEN coalesce(completed_at, updated_at) END) STORED;
DROP INDEX IF EXISTS idx_workflow_runs_retention;
CREATE INDEX IF NOT EXISTS idx_workflow_runs_ended ON workflow_runs (ended_at, id) WHERE ended_at IS NOT NULL;
ALTER TABLE workflow_runs SET (fillfactor = 80);

-- +goose Down
ALTER TABLE workflow_runs RESET (fillfactor);
CREATE INDEX IF NOT EXISTS idx_workflow_runs_retention
    ON workflow_runs ((coalesce(completed_at, updated_at)), id)
    WHERE claim_state IN ('complete', 'failed', 'abandoned');
DROP INDEX IF EXISTS idx_workflow_runs_ended;
ALTER TABLE workflow_runs DROP COLUMN ended_at;
