-- +goose Up
-- The HTTP API's tables and the run listing's indexes (issue 12).
--
-- api_keys (SPEC Appendix A): one row per key; key_hash is the sha256 hex
-- of the whole key text (the key itself is never stored); env '' is every
-- env of the workspace; revoked_at NULL while the key is valid. A revoked
-- row stays: APIKeysConfigured counts it. Times are RFC 3339 UTC text
-- with milliseconds, as in every table.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    env          TEXT NOT NULL DEFAULT '',
    role         TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    key_hash     TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    revoked_at   TEXT
);

-- The request an idempotency key answered (EnqueueRunParams.RequestHash):
-- NULL when the enqueue gave none.
ALTER TABLE idempotency_receipts ADD COLUMN request_hash TEXT;

-- ListRuns is keyset-paged in (created_at, id) descending order. Each
-- index's key is a listing's WHERE equality columns followed by exactly
-- that order, so a page (the first, or one after a cursor deep in the
-- table) reads only its own rows. The first replaces
-- idx_workflow_runs_workspace_created, which had no id to break ties.
CREATE INDEX idx_workflow_runs_workspace_list
    ON workflow_runs (workspace_id, created_at DESC, id DESC);
CREATE INDEX idx_workflow_runs_workspace_status_list
    ON workflow_runs (workspace_id, status, created_at DESC, id DESC);
DROP INDEX idx_workflow_runs_workspace_created;

-- +goose Down
CREATE INDEX idx_workflow_runs_workspace_created
    ON workflow_runs (workspace_id, created_at DESC);
DROP INDEX idx_workflow_runs_workspace_status_list;
DROP INDEX idx_workflow_runs_workspace_list;
ALTER TABLE idempotency_receipts DROP COLUMN request_hash;
DROP TABLE api_keys;
