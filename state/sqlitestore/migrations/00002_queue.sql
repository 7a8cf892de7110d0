-- +goose Up
-- Idempotent enqueue (SPEC §7): one receipt per (workspace, key).
CREATE TABLE idempotency_receipts (
    workspace_id TEXT NOT NULL DEFAULT 'default',
    key          TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    expires_at   TEXT NOT NULL,
    PRIMARY KEY (workspace_id, key)
);

-- +goose Down
DROP TABLE idempotency_receipts;
