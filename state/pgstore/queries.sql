-- PostgreSQL queries of the cold tier, one block per `-- name:` line. They
-- mirror state/sqlitestore/queries.sql statement for statement. Every time
-- comes from the database clock: now(), the start of the transaction, so
-- every row one write touches carries the same time. Durations are bound
-- as whole microseconds ($n::bigint * interval '1 microsecond').

-- name: fence
-- The conditional write that fences every runner write (SPEC §4). It must
-- match exactly one row or the transaction rolls back with ErrLeaseLost.
-- It is the first statement of the transaction and takes the run's row
-- lock, so the runner's writes to one run are serialised.
UPDATE workflow_runs
   SET updated_at = now()
 WHERE id = $1 AND leased_by = $2 AND lease_epoch = $3
   AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, cancel_requested;

-- name: insert_definition
-- Storing a revision again keeps its row and makes it the current one.
INSERT INTO workflow_definitions (id, workspace_id, name, revision, spec_json, source, applied_at)
VALUES ($1, $2, $3, $4, $5, $6, now())
ON CONFLICT (workspace_id, name, revision) DO UPDATE SET applied_at = excluded.applied_at;

-- name: get_definition_by_id
SELECT id::text, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE id = $1 AND ($2::text = '' OR workspace_id = $2);

-- name: get_definition_by_revision
SELECT id::text, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE workspace_id = $1 AND name = $2 AND revision = $3;

-- name: get_definition_latest
-- The current revision: the most recently applied.
SELECT id::text, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE workspace_id = $1 AND name = $2
 ORDER BY applied_at DESC, seq DESC LIMIT 1;

-- name: insert_run
INSERT INTO workflow_runs (
    id, workspace_id, env, definition_id, workflow_name, workflow_revision, template_id,
    status, claim_state, runner_pool, priority, max_attempts, available_at,
    recovery_mode, trigger_type, parent_run_id, idempotency_key, input_json)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', 'queued', $8, $9, $10,
        now() + $11::bigint * interval '1 microsecond', $12, $13, $14, $15, $16)
RETURNING /*run_columns*/;

-- name: claim_run
-- One atomic conditional write. The subquery walks
-- idx_workflow_runs_claim_pool in claim order and locks the first claimable
-- run, skipping rows other claimers hold, so concurrent claims never wait
-- on each other and never take the same run. Pools: a run with a NULL pool
-- matches any runner.
UPDATE workflow_runs
   SET claim_state    = 'claimed',
       leased_by      = $1,
       lease_until    = now() + $2::bigint * interval '1 microsecond',
       last_heartbeat = now(),
       lease_epoch    = lease_epoch + 1,
       claim_attempts = claim_attempts + 1,
       updated_at     = now()
 WHERE id = (
       SELECT id FROM workflow_runs
        WHERE claim_state = 'queued'
          AND available_at <= now()
          AND (runner_pool IS NULL OR runner_pool = ANY ($3::text[]))
          AND ($4::text = '' OR workspace_id = $4)
        ORDER BY priority DESC, available_at, seq
        LIMIT 1
          FOR UPDATE SKIP LOCKED)
RETURNING /*run_columns*/;

-- name: claim_run_id
-- claim_run limited to one run (by primary key).
UPDATE workflow_runs
   SET claim_state    = 'claimed',
       leased_by      = $1,
       lease_until    = now() + $2::bigint * interval '1 microsecond',
       last_heartbeat = now(),
       lease_epoch    = lease_epoch + 1,
       claim_attempts = claim_attempts + 1,
       updated_at     = now()
 WHERE id = (
       SELECT id FROM workflow_runs
        WHERE id = $5::uuid
          AND claim_state = 'queued'
          AND available_at <= now()
          AND (runner_pool IS NULL OR runner_pool = ANY ($3::text[]))
          AND ($4::text = '' OR workspace_id = $4)
          FOR UPDATE SKIP LOCKED)
RETURNING /*run_columns*/;

-- name: run_start
UPDATE workflow_runs
   SET status      = 'running',
       claim_state = 'running',
       started_at  = coalesce(started_at, now()),
       error       = NULL,
       updated_at  = now()
 WHERE id = $1
RETURNING /*run_columns*/;

-- name: refresh_lease
UPDATE workflow_runs
   SET lease_until    = now() + $1::bigint * interval '1 microsecond',
       last_heartbeat = now(),
       updated_at     = now()
 WHERE id = $2 AND leased_by = $3 AND lease_epoch = $4
   AND claim_state IN ('claimed', 'running')
RETURNING lease_until;

-- name: step_start
-- Opens a step row, or re-opens it for the next try or for a run continued
-- in the same attempt. A succeeded row is final within its attempt (it has
-- a checkpoint): the upsert then changes nothing and the caller reports
-- ErrConflict. seq (start order) comes from its sequence; re-opening a
-- row keeps it.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', $8, now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'running', tries = excluded.tries, error = NULL,
       finished_at = NULL, duration_ms = NULL
 WHERE workflow_steps.status <> 'succeeded';

-- name: step_retry
UPDATE workflow_steps SET tries = $1, error = $2
 WHERE run_id = $3 AND attempt = $4 AND scope_path = $5 AND step_id = $6 AND status = 'running';

-- name: step_finish
UPDATE workflow_steps
   SET status      = $1,
       tries       = $2,
       error       = $3,
       finished_at = now(),
       duration_ms = round(extract(epoch FROM now() - started_at) * 1000)::bigint
 WHERE run_id = $4 AND attempt = $5 AND scope_path = $6 AND step_id = $7
   AND status IN ('running', 'waiting');

-- name: step_failed_unstarted
-- A step that failed with no open row: it failed before it started (e.g.
-- its `when` did not evaluate), possibly again in a run continued in the
-- same attempt. A succeeded row is final and is left alone: the caller
-- reports ErrConflict.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, finished_at, duration_ms, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'failed', $8, now(), now(), 0, $9)
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'failed', kind = excluded.kind, tries = excluded.tries, error = excluded.error,
       finished_at = excluded.finished_at, duration_ms = 0
 WHERE workflow_steps.status <> 'succeeded';

-- name: step_skipped
-- A succeeded row is final within its attempt (it has a checkpoint): the
-- upsert then changes nothing and the caller reports ErrConflict.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, finished_at, duration_ms, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'skipped', 0, now(), now(), 0, NULL)
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'skipped', finished_at = excluded.finished_at
 WHERE workflow_steps.status <> 'succeeded';

-- name: insert_event
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id,
                                 scope_path, payload_json)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING id, created_at;

-- name: insert_checkpoint
INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id,
                                      env, context_json, outputs_json)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: set_phase
-- NULL and '' both mean "no phase" (GetRun reads NULL as ''), so setting ''
-- on a run without a phase is no change.
UPDATE workflow_runs SET phase = $1
 WHERE id = $2 AND coalesce(phase, '') <> $1;

-- name: run_succeeded
UPDATE workflow_runs
   SET status          = 'succeeded',
       claim_state     = 'complete',
       output_json     = $1,
       error           = NULL,
       checkpoint_json = NULL,
       leased_by       = NULL,
       lease_until     = NULL,
       completed_at    = now(),
       duration_ms     = round(extract(epoch FROM now() - started_at) * 1000)::bigint,
       updated_at      = now()
 WHERE id = $2;

-- name: run_attempts
SELECT attempt, max_attempts, recovery_mode, coalesce(runner_pool, '') FROM workflow_runs WHERE id = $1;

-- name: run_requeue
-- A retryable failure with attempts left: a new attempt after a backoff.
UPDATE workflow_runs
   SET status       = 'interrupted',
       claim_state  = 'queued',
       attempt      = attempt + 1,
       available_at = now() + $1::bigint * interval '1 microsecond',
       error        = $2,
       leased_by    = NULL,
       lease_until  = NULL,
       updated_at   = now()
 WHERE id = $3;

-- name: run_hold
-- A retryable failure in manual recovery mode: interrupted until an operator acts.
UPDATE workflow_runs
   SET status      = 'interrupted',
       claim_state = 'abandoned',
       error       = $1,
       leased_by   = NULL,
       lease_until = NULL,
       updated_at  = now()
 WHERE id = $2;

-- name: run_failed
UPDATE workflow_runs
   SET status          = 'failed',
       claim_state     = 'failed',
       error           = $1,
       dead_lettered   = $2,
       leased_by       = NULL,
       lease_until     = NULL,
       checkpoint_json = NULL,
       completed_at    = now(),
       duration_ms     = round(extract(epoch FROM now() - coalesce(started_at, created_at)) * 1000)::bigint,
       updated_at      = now()
 WHERE id = $3;

-- name: clear_lease
UPDATE workflow_runs
   SET status       = CASE WHEN status = 'running' THEN 'queued' ELSE status END,
       claim_state  = 'queued',
       leased_by    = NULL,
       lease_until  = NULL,
       available_at = now(),
       updated_at   = now()
 WHERE id = $1
RETURNING coalesce(runner_pool, '');

-- name: notify
-- Wakes idle runners (SPEC §7). Delivered when the transaction commits, and
-- never when it rolls back; the payload is the run's pool ('' = any).
SELECT pg_notify($1, $2);

-- name: get_run
SELECT /*run_columns*/ FROM workflow_runs WHERE id = $1 AND ($2::text = '' OR workspace_id = $2);

-- name: list_runs
SELECT /*run_columns*/ FROM workflow_runs
 WHERE ($1::text = '' OR workspace_id = $1)
   AND ($2::text = '' OR workflow_name = $2)
   AND (cardinality($3::text[]) = 0 OR status = ANY ($3::text[]))
 ORDER BY created_at DESC, seq DESC
 LIMIT $4;

-- name: list_steps
SELECT run_id::text, attempt, scope_path, step_id, kind, status, tries, started_at, finished_at,
       coalesce(duration_ms, 0), coalesce(error, '')
  FROM workflow_steps
 WHERE run_id = $1 AND ($2::int = 0 OR attempt = $2)
 ORDER BY attempt, seq;

-- name: get_step
SELECT run_id::text, attempt, scope_path, step_id, kind, status, tries, started_at, finished_at,
       coalesce(duration_ms, 0), coalesce(error, '')
  FROM workflow_steps
 WHERE run_id = $1 AND attempt = $2 AND scope_path = $3 AND step_id = $4;

-- name: list_events
-- LIMIT NULL is no limit.
SELECT id, run_id::text, attempt, event_type, coalesce(node_id, ''), scope_path, payload_json, created_at
  FROM workflow_run_events
 WHERE run_id = $1 AND id > $2
 ORDER BY id
 LIMIT $3;

-- name: list_checkpoints
-- seq is the creation order: the fence serialises a run's writes, so it
-- also orders checkpoints written by concurrent transactions of one run.
SELECT run_id::text, scope_path, step_id, attempt, context_json, outputs_json,
       coalesce(previous_body_ref, ''), created_at
  FROM workflow_run_checkpoints
 WHERE run_id = $1 AND ($2::int = 0 OR attempt = $2)
 ORDER BY seq;

-- name: upsert_receipt
-- Takes the key unless an unexpired receipt holds it. A concurrent
-- duplicate waits here for the holder's transaction: when it commits, the
-- conflict leaves the receipt as it is (and locks it); when it rolls back,
-- this insert takes the key.
INSERT INTO idempotency_receipts (workspace_id, key, run_id, expires_at)
VALUES ($1, $2, $3, now() + $4::bigint * interval '1 microsecond')
ON CONFLICT (workspace_id, key) DO UPDATE
   SET run_id = excluded.run_id, created_at = excluded.created_at, expires_at = excluded.expires_at
 WHERE idempotency_receipts.expires_at < now();

-- name: receipt_run
SELECT run_id::text FROM idempotency_receipts WHERE workspace_id = $1 AND key = $2;

-- name: expired_leases
-- The sweep's selection: walks idx_workflow_runs_lease_until in lease order
-- and locks what it returns, skipping runs another transaction holds (a
-- runner mid-write, a frozen runner, another sweeper), so a sweep never
-- waits on a row and several sweepers change disjoint runs.
SELECT id::text, workspace_id, env, attempt, max_attempts, recovery_mode,
       coalesce(leased_by, ''), lease_epoch, coalesce(runner_pool, '')
  FROM workflow_runs
 WHERE lease_until < now()
   AND claim_state IN ('claimed', 'running')
 ORDER BY lease_until
 LIMIT $1
   FOR UPDATE SKIP LOCKED;

-- name: run_lost
UPDATE workflow_runs
   SET status      = 'interrupted',
       claim_state = 'abandoned',
       error       = $1,
       leased_by   = NULL,
       lease_until = NULL,
       updated_at  = now()
 WHERE id = $2;

-- name: run_lost_requeue
UPDATE workflow_runs
   SET claim_state  = 'queued',
       attempt      = attempt + 1,
       available_at = now() + $1::bigint * interval '1 microsecond',
       updated_at   = now()
 WHERE id = $2;

-- name: steps_lost
-- The step instances a lost runner left running end with the attempt.
UPDATE workflow_steps
   SET status      = 'failed',
       error       = $1,
       finished_at = now(),
       duration_ms = round(extract(epoch FROM now() - started_at) * 1000)::bigint
 WHERE run_id = $2 AND attempt = $3 AND status IN ('running', 'waiting');

-- name: run_cancelled
UPDATE workflow_runs
   SET status          = 'cancelled',
       claim_state     = 'complete',
       leased_by       = NULL,
       lease_until     = NULL,
       checkpoint_json = NULL,
       completed_at    = now(),
       duration_ms     = round(extract(epoch FROM now() - coalesce(started_at, created_at)) * 1000)::bigint,
       updated_at      = now()
 WHERE id = $1;

-- name: steps_cancelled
UPDATE workflow_steps
   SET status = 'cancelled', finished_at = now()
 WHERE run_id = $1 AND attempt = $2 AND status IN ('running', 'waiting');

-- name: run_state
-- The run an operator action acts on, locked for the transaction.
SELECT workspace_id, env, attempt, status, claim_state, coalesce(runner_pool, '') FROM workflow_runs
 WHERE id = $1 AND ($2::text = '' OR workspace_id = $2)
   FOR UPDATE;

-- name: run_cancel_requested
UPDATE workflow_runs SET cancel_requested = true, updated_at = now() WHERE id = $1;

-- name: run_requeued
UPDATE workflow_runs
   SET status            = 'queued',
       claim_state       = 'queued',
       attempt           = attempt + 1,
       max_attempts      = greatest(max_attempts, attempt + 1),
       available_at      = now(),
       recovery_mode     = coalesce(nullif($1, ''), recovery_mode),
       definition_id     = coalesce(nullif($2, '')::uuid, definition_id),
       workflow_revision = coalesce(nullif($3, ''), workflow_revision),
       error             = NULL,
       dead_lettered     = false,
       cancel_requested  = false,
       completed_at      = NULL,
       duration_ms       = NULL,
       leased_by         = NULL,
       lease_until       = NULL,
       updated_at        = now()
 WHERE id = $4;

-- name: insert_blob
INSERT INTO workflow_blobs (sha256, size_bytes, data) VALUES ($1, $2, $3)
ON CONFLICT (sha256) DO NOTHING;

-- name: get_blob
SELECT data FROM workflow_blobs WHERE sha256 = $1;
