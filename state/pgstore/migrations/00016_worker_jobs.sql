-- +goose Up
-- Remote workers (issue 15, SPEC §9 and Appendix A `worker_jobs`),
-- column for column as SQLite's 00017_worker_jobs.sql.
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
    id              uuid PRIMARY KEY,
    workspace_id    text NOT NULL DEFAULT 'default',
    env             text NOT NULL DEFAULT '',
    run_id          uuid NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    attempt         integer NOT NULL,
    scope_path      text NOT NULL DEFAULT '',
    step_id         text NOT NULL,
    step_type       text NOT NULL,
    status          text NOT NULL DEFAULT 'queued',
    leased_by       text,
    lease_until     timestamptz,
    lease_epoch     integer NOT NULL DEFAULT 0,
    lease_token     text,
    tries           integer NOT NULL DEFAULT 0,
    max_tries       integer NOT NULL DEFAULT 1,
    heartbeat_ms    bigint NOT NULL,
    retry_json      json,
    available_at    timestamptz NOT NULL DEFAULT now(),
    idempotency_key text NOT NULL,
    input_json      json,
    output_json     json,
    error           text,
    error_json      json,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
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
    workspace_id text NOT NULL,
    step_type    text NOT NULL,
    worker       text NOT NULL,
    last_poll_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, step_type, worker)
);

-- Role worker (a remote worker's key: it may only poll, heartbeat,
-- complete and fail jobs of its workspace).
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check CHECK (role IN ('viewer', 'operator', 'admin', 'worker'));

-- +goose Down
DELETE FROM api_keys WHERE role = 'worker';
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check CHECK (role IN ('viewer', 'operator', 'admin'));
DROP TABLE worker_job_pollers;
DROP TABLE worker_jobs;
