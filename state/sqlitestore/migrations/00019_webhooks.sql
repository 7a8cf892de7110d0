-- +goose Up
-- Webhook triggers (issue 15): which workflows take signed deliveries on
-- POST /api/workflows/{name}/trigger. No secret is kept here: a webhook's
-- secret is derived from the wake-token signing key named by key_id and
-- (workspace_id, workflow_name, generation), so a reader of this table
-- can sign nothing. generation counts the secrets the webhook had (every
-- enable or rotation bumps it); enabled is 0 after a disable, and the row
-- stays so enabling again moves to a new generation. Times are RFC 3339
-- UTC text with milliseconds, as in every table.
CREATE TABLE workflow_webhooks (
    workspace_id  TEXT NOT NULL,
    workflow_name TEXT NOT NULL,
    generation    INTEGER NOT NULL CHECK (generation >= 1),
    key_id        TEXT NOT NULL,
    enabled       INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    updated_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    PRIMARY KEY (workspace_id, workflow_name)
);

-- +goose Down
DROP TABLE workflow_webhooks;
