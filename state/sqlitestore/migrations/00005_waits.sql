-- +goose Up
-- Durable waits, the wake inbox, session variables and wake-token keys
-- (SPEC §6, Appendix A). Names and columns of the first three tables are
-- the contract; the extra columns (workspace_id on waits, the notify_*
-- columns) are allowed by the appendix.

CREATE TABLE workflow_waits (
    id              TEXT PRIMARY KEY,
    run_id          TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    workspace_id    TEXT NOT NULL DEFAULT 'default',
    attempt         INTEGER NOT NULL,
    scope_path      TEXT NOT NULL DEFAULT '',
    step_id         TEXT NOT NULL,
    kind            TEXT NOT NULL,   -- signal, timer, approval, child
    signal          TEXT,
    correlation_key TEXT,
    token_hash      TEXT,            -- hex sha256 of the wake token
    key_id          TEXT,
    wake_at         TEXT,            -- timer deadline
    expires_at      TEXT,            -- the wait's timeout
    status          TEXT NOT NULL DEFAULT 'pending', -- pending, woken, timed_out, cancelled
    payload_json    TEXT,
    notify_json     TEXT,            -- rendered notify request, NULL when none
    notified_at     TEXT,
    notify_tries    INTEGER NOT NULL DEFAULT 0,
    next_notify_at  TEXT,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    consumed_at     TEXT
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
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL DEFAULT 'default',
    run_id          TEXT REFERENCES workflow_runs (id) ON DELETE CASCADE, -- NULL: by correlation
    signal          TEXT NOT NULL,
    correlation_key TEXT,
    payload_json    TEXT,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    consumed_at     TEXT
);
-- Matching at registration: by run and signal, or by signal and key.
CREATE INDEX idx_workflow_wake_inbox_run
    ON workflow_wake_inbox (run_id, signal) WHERE consumed_at IS NULL;
CREATE INDEX idx_workflow_wake_inbox_correlation
    ON workflow_wake_inbox (workspace_id, signal, correlation_key) WHERE consumed_at IS NULL AND run_id IS NULL;

CREATE TABLE workflow_session_vars (
    workspace_id  TEXT NOT NULL DEFAULT 'default',
    session_id    TEXT NOT NULL,
    key           TEXT NOT NULL,
    value_json    TEXT NOT NULL,
    origin_run_id TEXT,
    keep_until    TEXT,              -- NULL: dropped when origin_run_id ends
    updated_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
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
    id         TEXT PRIMARY KEY,
    secret     BLOB NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
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
