-- +goose Up
-- Durable waits, the wake inbox, session variables and wake-token keys
-- (SPEC §6, Appendix A), column for column as SQLite's 00005_waits.sql.
-- JSON columns are json (kept as written, see 00004). seq keeps insertion
-- order where SQLite uses its rowid.

CREATE TABLE workflow_waits (
    id              uuid PRIMARY KEY,
    run_id          uuid NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    workspace_id    text NOT NULL DEFAULT 'default',
    attempt         integer NOT NULL,
    scope_path      text NOT NULL DEFAULT '',
    step_id         text NOT NULL,
    kind            text NOT NULL,   -- signal, timer, approval, child
    signal          text,
    correlation_key text,
    token_hash      text,            -- hex sha256 of the wake token
    key_id          text,
    wake_at         timestamptz,     -- timer deadline
    expires_at      timestamptz,     -- the wait's timeout
    status          text NOT NULL DEFAULT 'pending', -- pending, woken, timed_out, cancelled
    payload_json    json,
    notify_json     json,            -- rendered notify request, NULL when none
    notified_at     timestamptz,
    notify_tries    integer NOT NULL DEFAULT 0,
    next_notify_at  timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    consumed_at     timestamptz,
    seq             bigserial NOT NULL
);
-- One wait per step instance and attempt (a re-entered wait is found again).
CREATE UNIQUE INDEX idx_workflow_waits_step
    ON workflow_waits (run_id, attempt, scope_path, step_id);
-- The timer poller: due timers and due timeouts of pending waits.
CREATE INDEX idx_workflow_waits_wake_at
    ON workflow_waits (wake_at) WHERE status = 'pending' AND wake_at IS NOT NULL;
CREATE INDEX idx_workflow_waits_expires_at
    ON workflow_waits (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
-- Signals by correlation key.
CREATE INDEX idx_workflow_waits_correlation
    ON workflow_waits (workspace_id, signal, correlation_key) WHERE status = 'pending';
-- Notify deliveries not yet done.
CREATE INDEX idx_workflow_waits_notify
    ON workflow_waits (next_notify_at) WHERE status = 'pending' AND notified_at IS NULL AND notify_json IS NOT NULL;

CREATE TABLE workflow_wake_inbox (
    id              uuid PRIMARY KEY,
    workspace_id    text NOT NULL DEFAULT 'default',
    run_id          uuid REFERENCES workflow_runs (id) ON DELETE CASCADE, -- NULL: by correlation
    signal          text NOT NULL,
    correlation_key text,
    payload_json    json,
    created_at      timestamptz NOT NULL DEFAULT now(),
    consumed_at     timestamptz,
    seq             bigserial NOT NULL
);
-- Matching at registration: by run and signal, or by signal and key.
CREATE INDEX idx_workflow_wake_inbox_run
    ON workflow_wake_inbox (run_id, signal) WHERE consumed_at IS NULL;
CREATE INDEX idx_workflow_wake_inbox_correlation
    ON workflow_wake_inbox (workspace_id, signal, correlation_key) WHERE consumed_at IS NULL AND run_id IS NULL;

CREATE TABLE workflow_session_vars (
    workspace_id  text NOT NULL DEFAULT 'default',
    session_id    text NOT NULL,
    key           text NOT NULL,
    value_json    json NOT NULL,
    origin_run_id uuid,
    keep_until    timestamptz,       -- NULL: dropped when origin_run_id ends
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, session_id, key)
);
-- A run's end drops the variables it wrote without keep_until.
CREATE INDEX idx_workflow_session_vars_origin
    ON workflow_session_vars (origin_run_id) WHERE keep_until IS NULL;
-- The session GC.
CREATE INDEX idx_workflow_session_vars_keep_until
    ON workflow_session_vars (keep_until) WHERE keep_until IS NOT NULL;

-- HMAC-SHA256 keys of wake tokens, when none is configured.
CREATE TABLE wake_keys (
    id         text PRIMARY KEY,
    secret     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    seq        bigserial NOT NULL
);

-- A cancel cascades to a run's children.
CREATE INDEX idx_workflow_runs_parent
    ON workflow_runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

-- +goose Down
DROP INDEX idx_workflow_runs_parent;
DROP TABLE wake_keys;
DROP TABLE workflow_session_vars;
DROP TABLE workflow_wake_inbox;
DROP TABLE workflow_waits;
