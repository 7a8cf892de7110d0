-- +goose Up
-- Remote workers (issue 15, SPEC §9 and Appendix A `worker_jobs`),
-- column for column as PostgreSQL's 00016_worker_jobs.sql.
--
-- A `job` step instance is a durable wait of kind job (workflow_waits)
-- and a worker_jobs row with the same id, written in the transaction that
-- registers the wait. Workers claim queued jobs over HTTP with a lease
-- (leased_by, lease_until, lease_epoch + 1, a new lease_token: the
-- fencing token the worker sends back); completing or finally failing a
-- job wakes its wait in the same transaction. status: queued, running,
-- succeeded, failed, cancelled (its wait closed without it: the run
-- ended, the attempt was interrupted, the job's timeout passed).
-- Extra columns (allowed by the appendix): workspace_id and env (the
-- run's: a worker key limited to an env serves only that env's jobs), available_at
-- (a retried job's backoff), lease_token, max_tries, heartbeat_ms,
-- retry_json (the step's retry policy: delays and whether an expired
-- lease is tried again), error_json (the typed error), idempotency_key.
CREATE TABLE worker_jobs (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL DEFAULT 'default',
    env             TEXT NOT NULL DEFAULT '',
    run_id          TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    attempt         INTEGER NOT NULL,
    scope_path      TEXT NOT NULL DEFAULT '',
    step_id         TEXT NOT NULL,
    step_type       TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'queued',
    leased_by       TEXT,
    lease_until     TEXT,
    lease_epoch     INTEGER NOT NULL DEFAULT 0,
    lease_token     TEXT,
    tries           INTEGER NOT NULL DEFAULT 0,
    max_tries       INTEGER NOT NULL DEFAULT 1,
    heartbeat_ms    INTEGER NOT NULL,
    retry_json      TEXT,
    available_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    idempotency_key TEXT NOT NULL,
    input_json      TEXT,
    output_json     TEXT,
    error           TEXT,
    error_json      TEXT,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    updated_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
-- The poll: a workspace's queued jobs of the types a worker serves,
-- oldest first.
CREATE INDEX idx_worker_jobs_poll
    ON worker_jobs (workspace_id, step_type, available_at) WHERE status = 'queued';
-- The sweep: leases that expired.
CREATE INDEX idx_worker_jobs_lease
    ON worker_jobs (lease_until) WHERE status = 'running';
CREATE INDEX idx_worker_jobs_run ON worker_jobs (run_id);

-- Who polled for what, and when (one row per workspace, type and worker,
-- refreshed at most every few seconds by a poll): `starflow run` and the
-- run's stuck reason say when a run waits for a type no worker polled
-- for recently.
CREATE TABLE worker_job_pollers (
    workspace_id TEXT NOT NULL,
    step_type    TEXT NOT NULL,
    worker       TEXT NOT NULL,
    last_poll_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    PRIMARY KEY (workspace_id, step_type, worker)
);

-- Role worker (a remote worker's key: it may only poll, heartbeat,
-- complete and fail jobs of its workspace). SQLite cannot change a CHECK
-- constraint: the table is rebuilt with the same columns and rows.
CREATE TABLE api_keys_new (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    env          TEXT NOT NULL DEFAULT '',
    role         TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'worker')),
    key_hash     TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    revoked_at   TEXT
);
INSERT INTO api_keys_new (id, workspace_id, env, role, key_hash, name, created_at, revoked_at)
SELECT id, workspace_id, env, role, key_hash, name, created_at, revoked_at FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_new RENAME TO api_keys;

-- +goose Down
DELETE FROM api_keys WHERE role = 'worker';
DROP TABLE worker_job_pollers;
DROP TABLE worker_jobs;
