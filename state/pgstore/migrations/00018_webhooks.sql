-- +goose Up
-- Webhook triggers (issue 15): which workflows take signed deliveries on
-- POST /api/workflows/{name}/trigger. No secret is kept here: a webhook's
-- secret is derived from the wake-token signing key named by key_id and
-- (workspace_id, workflow_name, generation), so a reader of this table
-- can sign nothing. generation counts the secrets the webhook had (every
-- enable or rotation bumps it); enabled is false after a disable, and the
-- row stays so enabling again moves to a new generation.
CREATE TABLE workflow_webhooks (
    workspace_id  text NOT NULL,
    workflow_name text NOT NULL,
    generation    bigint NOT NULL CHECK (generation >= 1),
    key_id        text NOT NULL,
    enabled       boolean NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, workflow_name)
);

-- +goose Down
DROP TABLE workflow_webhooks;
