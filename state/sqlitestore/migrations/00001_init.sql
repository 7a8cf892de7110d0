-- +goose Up
-- Starflow cold tier, SQLite dialect. Names and columns are the contract of
-- SPEC Appendix A. Timestamps are TEXT in RFC 3339 UTC with milliseconds
-- ('2006-01-02T15:04:05.000Z'), so they sort as text; JSON is TEXT.

CREATE TABLE workflow_definitions (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL DEFAULT 'default',
    name         TEXT NOT NULL,
    revision     TEXT NOT NULL,
    spec_json    TEXT NOT NULL,
    source       TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    UNIQUE (workspace_id, name, revision)
);

CREATE TABLE workflow_runs (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL DEFAULT 'default',
    env               TEXT NOT NULL DEFAULT 'prod',
    definition_id     TEXT REFERENCES workflow_definitions (id),
    workflow_name     TEXT NOT NULL,
    workflow_revision TEXT NOT NULL DEFAULT '',
    template_id       TEXT,
    status            TEXT NOT NULL DEFAULT 'queued',
    claim_state       TEXT NOT NULL DEFAULT 'queued',
    runner_pool       TEXT,
    priority          INTEGER NOT NULL DEFAULT 0,
    leased_by         TEXT,
    lease_until       TEXT,
    lease_epoch       INTEGER NOT NULL DEFAULT 0,
    last_heartbeat    TEXT,
    claim_attempts    INTEGER NOT NULL DEFAULT 0,
    attempt           INTEGER NOT NULL DEFAULT 1,
    max_attempts      INTEGER NOT NULL DEFAULT 3,
    available_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    recovery_mode     TEXT NOT NULL DEFAULT 'replay',
    trigger_type      TEXT NOT NULL DEFAULT 'api',
    parent_run_id     TEXT,
    idempotency_key   TEXT,
    input_json        TEXT,
    output_json       TEXT,
    checkpoint_json   TEXT,
    phase             TEXT,
    error             TEXT,
    dead_lettered     INTEGER NOT NULL DEFAULT 0,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    created_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    started_at        TEXT,
    completed_at      TEXT,
    duration_ms       INTEGER,
    updated_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

-- Dashboard list (seed 000).
CREATE INDEX idx_workflow_runs_workspace_started
    ON workflow_runs (workspace_id, env, started_at DESC);
-- Run listing newest first.
CREATE INDEX idx_workflow_runs_workspace_created
    ON workflow_runs (workspace_id, created_at DESC);
-- Sweep target (seed 000).
CREATE INDEX idx_workflow_runs_lease_until
    ON workflow_runs (lease_until) WHERE lease_until IS NOT NULL;
-- Claim path (seed 000, ordered the way ClaimRun orders).
CREATE INDEX idx_workflow_runs_claim_pool
    ON workflow_runs (claim_state, runner_pool, priority DESC, available_at)
    WHERE claim_state = 'queued';

CREATE TABLE workflow_steps (
    run_id       TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    attempt      INTEGER NOT NULL,
    scope_path   TEXT NOT NULL DEFAULT '',
    step_id      TEXT NOT NULL,
    workspace_id TEXT NOT NULL DEFAULT 'default',
    env          TEXT NOT NULL DEFAULT 'prod',
    kind         TEXT NOT NULL,
    status       TEXT NOT NULL,
    tries        INTEGER NOT NULL DEFAULT 0,
    started_at   TEXT,
    finished_at  TEXT,
    duration_ms  INTEGER,
    error        TEXT,
    seq          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, attempt, scope_path, step_id)
);

CREATE TABLE workflow_run_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL DEFAULT 'default',
    env          TEXT NOT NULL DEFAULT 'prod',
    attempt      INTEGER NOT NULL DEFAULT 1,
    event_type   TEXT NOT NULL,
    node_id      TEXT,
    scope_path   TEXT NOT NULL DEFAULT '',
    payload_json TEXT,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
CREATE INDEX idx_workflow_run_events_run ON workflow_run_events (run_id, id);

CREATE TABLE workflow_run_checkpoints (
    run_id            TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    scope_path        TEXT NOT NULL DEFAULT '',
    step_id           TEXT NOT NULL,
    attempt           INTEGER NOT NULL DEFAULT 1,
    workspace_id      TEXT NOT NULL DEFAULT 'default',
    env               TEXT NOT NULL DEFAULT 'prod',
    context_json      TEXT NOT NULL,
    outputs_json      TEXT NOT NULL,
    previous_body_ref TEXT,
    created_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    PRIMARY KEY (run_id, scope_path, step_id, attempt)
);

-- +goose Down
DROP TABLE workflow_run_checkpoints;
DROP TABLE workflow_run_events;
DROP TABLE workflow_steps;
DROP TABLE workflow_runs;
DROP TABLE workflow_definitions;
