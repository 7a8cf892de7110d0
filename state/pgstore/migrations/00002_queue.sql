-- +goose Up
-- Idempotent enqueue (SPEC §7): one receipt per (workspace, key).
CREATE TABLE idempotency_receipts (
    workspace_id text NOT NULL DEFAULT 'default',
    key          text NOT NULL,
    run_id       uuid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, key)
);

-- +goose Down
DROP TABLE idempotency_receipts;
