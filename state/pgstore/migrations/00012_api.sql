-- +goose Up
-- The HTTP API's tables and the run listing's indexes (issue 12).
--
-- api_keys (SPEC Appendix A): one row per key; key_hash is the sha256 hex
-- of the whole key text (the key itself is never stored); env '' is every
-- env of the workspace; revoked_at NULL while the key is valid. A revoked
-- row stays: APIKeysConfigured counts it.
CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    workspace_id text NOT NULL,
    env          text NOT NULL DEFAULT '',
    role         text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    key_hash     text NOT NULL UNIQUE,
    name         text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

-- The request an idempotency key answered (EnqueueRunParams.RequestHash):
-- NULL when the enqueue gave none.
ALTER TABLE idempotency_receipts ADD COLUMN request_hash text;

-- ListRuns is keyset-paged in (created_at, id) descending order. Each
-- index's key is a listing's WHERE equality columns followed by exactly
-- that order, so a page (the first, or one after a cursor deep in the
-- table) reads only its own rows: one for a workspace's runs, one for
-- its runs in one status (the status listing reads one range per status
-- asked for). The first replaces idx_workflow_runs_workspace_created,
-- whose tie-break (seq) no listing orders by any more.
CREATE INDEX idx_workflow_runs_workspace_list
    ON workflow_runs (workspace_id, created_at DESC, id DESC);
CREATE INDEX idx_workflow_runs_workspace_status_list
    ON workflow_runs (workspace_id, status, created_at DESC, id DESC);
DROP INDEX idx_workflow_runs_workspace_created;

-- +goose Down
CREATE INDEX idx_workflow_runs_workspace_created
    ON workflow_runs (workspace_id, created_at DESC, seq DESC);
DROP INDEX idx_workflow_runs_workspace_status_list;
DROP INDEX idx_workflow_runs_workspace_list;
ALTER TABLE idempotency_receipts DROP COLUMN request_hash;
DROP TABLE api_keys;
