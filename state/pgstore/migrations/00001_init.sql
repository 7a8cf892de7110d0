-- +goose Up
-- Starflow cold tier, PostgreSQL dialect. Table and column names and their
-- meanings are the contract of SPEC Appendix A and match the SQLite
-- migrations column for column. Types: uuid ids, timestamptz times, jsonb
-- JSON (spec_json is json: it keeps the canonical text whose sha256 is the
-- revision), boolean flags, bigserial event ids. The extra seq columns keep
-- insertion order where SQLite uses its rowid.

CREATE TABLE workflow_definitions (
    id           uuid PRIMARY KEY,
    workspace_id text NOT NULL DEFAULT 'default',
    name         text NOT NULL,
    revision     text NOT NULL,
    spec_json    json NOT NULL,
    source       text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    seq          bigserial NOT NULL,
    UNIQUE (workspace_id, name, revision)
);

CREATE TABLE workflow_runs (
    id                uuid PRIMARY KEY,
    workspace_id      text NOT NULL DEFAULT 'default',
    env               text NOT NULL DEFAULT 'prod',
    definition_id     uuid REFERENCES workflow_definitions (id),
    workflow_name     text NOT NULL,
    workflow_revision text NOT NULL DEFAULT '',
    template_id       text,
    status            text NOT NULL DEFAULT 'queued',
    claim_state       text NOT NULL DEFAULT 'queued',
    runner_pool       text,
    priority          integer NOT NULL DEFAULT 0,
    leased_by         text,
    lease_until       timestamptz,
    lease_epoch       bigint NOT NULL DEFAULT 0,
    last_heartbeat    timestamptz,
    claim_attempts    integer NOT NULL DEFAULT 0,
    attempt           integer NOT NULL DEFAULT 1,
    max_attempts      integer NOT NULL DEFAULT 3,
    available_at      timestamptz NOT NULL DEFAULT now(),
    recovery_mode     text NOT NULL DEFAULT 'replay',
    trigger_type      text NOT NULL DEFAULT 'api',
    parent_run_id     uuid,
    idempotency_key   text,
    input_json        jsonb,
    output_json       jsonb,
    checkpoint_json   jsonb,
    phase             text,
    error             text,
    dead_lettered     boolean NOT NULL DEFAULT false,
    cancel_requested  boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    completed_at      timestamptz,
    duration_ms       bigint,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    seq               bigserial NOT NULL
);

-- Dashboard list (seed 000).
CREATE INDEX idx_workflow_runs_workspace_started
    ON workflow_runs (workspace_id, env, started_at DESC);
-- Run listing newest first.
CREATE INDEX idx_workflow_runs_workspace_created
    ON workflow_runs (workspace_id, created_at DESC, seq DESC);
-- Sweep target (seed 000): ExpireOldLeases scans it in lease_until order.
CREATE INDEX idx_workflow_runs_lease_until
    ON workflow_runs (lease_until) WHERE lease_until IS NOT NULL;
-- Claim path (seed 000). Its key is exactly the ORDER BY of claim_run
-- (priority DESC, available_at, seq), so a claim reads the queued runs in
-- claim order and stops at the first that matches, instead of sorting every
-- queued run. claim_state is the predicate, not a key column; runner_pool
-- and workspace_id are filters (a run with no pool matches every runner, an
-- OR that no btree key can serve).
CREATE INDEX idx_workflow_runs_claim_pool
    ON workflow_runs (priority DESC, available_at, seq)
    WHERE claim_state = 'queued';

CREATE TABLE workflow_steps (
    run_id       uuid NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    scope_path   text NOT NULL DEFAULT '',
    step_id      text NOT NULL,
    workspace_id text NOT NULL DEFAULT 'default',
    env          text NOT NULL DEFAULT 'prod',
    kind         text NOT NULL,
    status       text NOT NULL,
    tries        integer NOT NULL DEFAULT 0,
    started_at   timestamptz,
    finished_at  timestamptz,
    duration_ms  bigint,
    error        text,
    -- Start order (ListSteps). SQLite numbers each run's steps 1, 2, …
    -- with max(seq) + 1; here one sequence serves every run, which orders
    -- a run's steps the same way (the fence serialises a run's writes)
    -- without reading the run's earlier steps on every insert.
    seq          bigserial NOT NULL,
    PRIMARY KEY (run_id, attempt, scope_path, step_id)
);

CREATE TABLE workflow_run_events (
    id           bigserial PRIMARY KEY,
    run_id       uuid NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    workspace_id text NOT NULL DEFAULT 'default',
    env          text NOT NULL DEFAULT 'prod',
    attempt      integer NOT NULL DEFAULT 1,
    event_type   text NOT NULL,
    node_id      text,
    scope_path   text NOT NULL DEFAULT '',
    payload_json jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_workflow_run_events_run ON workflow_run_events (run_id, id);

CREATE TABLE workflow_run_checkpoints (
    run_id            uuid NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    scope_path        text NOT NULL DEFAULT '',
    step_id           text NOT NULL,
    attempt           integer NOT NULL DEFAULT 1,
    workspace_id      text NOT NULL DEFAULT 'default',
    env               text NOT NULL DEFAULT 'prod',
    context_json      jsonb NOT NULL,
    outputs_json      jsonb NOT NULL,
    previous_body_ref text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    seq               bigserial NOT NULL,
    PRIMARY KEY (run_id, scope_path, step_id, attempt)
);

-- +goose Down
DROP TABLE workflow_run_checkpoints;
DROP TABLE workflow_run_events;
DROP TABLE workflow_steps;
DROP TABLE workflow_runs;
DROP TABLE workflow_definitions;
