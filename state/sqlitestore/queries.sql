-- SQLite queries of the cold tier, one block per `-- name:` line, with the
-- same names and arguments (?1, ?2, … in the order internal/storecore
-- passes them) as state/pgstore/queries.sql. Every time comes from the
-- database clock: `now()` stands for strftime('%Y-%m-%dT%H:%M:%fZ','now')
-- and `now(?N)` for the same moved by the modifier ?N ("+1.500 seconds"),
-- substituted when the file is loaded. Times are RFC 3339 UTC text with
-- milliseconds; lists arrive as JSON arrays (json_each).

-- name: fence
-- The conditional write that fences every runner write (SPEC §4). It must
-- match exactly one row or the write returns ErrLeaseLost.
UPDATE workflow_runs
   SET updated_at = now()
 WHERE id = ?1 AND leased_by = ?2 AND lease_epoch = ?3
   AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, cancel_requested, status, coalesce(parent_run_id, ''),
          max_attempts, recovery_mode, coalesce(runner_pool, '');

-- name: fence_mark
-- fence, also marking what the run's end must clean up (end_work |= ?4).
UPDATE workflow_runs
   SET updated_at = now(), end_work = end_work | ?4
 WHERE id = ?1 AND leased_by = ?2 AND lease_epoch = ?3
   AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, cancel_requested, status, coalesce(parent_run_id, ''),
          max_attempts, recovery_mode, coalesce(runner_pool, '');

-- name: fence_run
-- The fence of a write whose hooks need the run: the whole row as the
-- write leaves it (the step writes change the run only through the fence).
UPDATE workflow_runs
   SET updated_at = now()
 WHERE id = ?1 AND leased_by = ?2 AND lease_epoch = ?3
   AND claim_state IN ('claimed', 'running')
RETURNING /*run_columns*/;

-- name: now
SELECT now();

-- name: insert_definition
-- Storing a revision again keeps its row and makes it the current one.
INSERT INTO workflow_definitions (id, workspace_id, name, revision, spec_json, source, applied_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, now())
ON CONFLICT (workspace_id, name, revision) DO UPDATE SET applied_at = excluded.applied_at;

-- name: get_definition_by_id
SELECT id, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE id = ?1 AND (?2 = '' OR workspace_id = ?2);

-- name: get_definition_by_revision
SELECT id, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE workspace_id = ?1 AND name = ?2 AND revision = ?3;

-- name: get_definition_latest
-- The current revision: the most recently applied.
SELECT id, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE workspace_id = ?1 AND name = ?2
 ORDER BY applied_at DESC, rowid DESC LIMIT 1;

-- name: insert_run
INSERT INTO workflow_runs (
    id, workspace_id, env, definition_id, workflow_name, workflow_revision, template_id,
    status, claim_state, runner_pool, priority, max_attempts, available_at,
    recovery_mode, trigger_type, parent_run_id, idempotency_key, input_json, trace_id, trace_parent, depth)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', 'queued', ?8, ?9, ?10, now(?11),
        ?12, ?13, ?14, ?15, ?16, ?17, ?18,
        -- depth: 0 without a parent, the parent's depth + 1 (1 when the
        -- parent's row is gone).
        CASE WHEN ?14 IS NULL THEN 0
             ELSE coalesce((SELECT p.depth + 1 FROM workflow_runs p WHERE p.id = ?14), 1) END)
RETURNING /*run_columns*/;

-- name: claim_run
-- One atomic conditional write of up to ?5 runs, in claim order; the
-- single writer serialises claims.
-- Pools: a run with a NULL pool matches any runner.
UPDATE workflow_runs
   SET claim_state    = 'claimed',
       leased_by      = ?1,
       lease_until    = now(?2),
       last_heartbeat = now(),
       lease_epoch    = lease_epoch + 1,
       claim_attempts = claim_attempts + 1,
       updated_at     = now()
 WHERE id IN (
       SELECT id FROM workflow_runs
        WHERE claim_state = 'queued'
          AND available_at <= now()
          AND (runner_pool IS NULL OR runner_pool IN (SELECT value FROM json_each(?3)))
          AND (?4 = '' OR workspace_id = ?4)
        ORDER BY priority DESC, available_at, rowid
        LIMIT ?5)
RETURNING /*run_columns*/;

-- name: claim_run_id
-- claim_run limited to one run.
UPDATE workflow_runs
   SET claim_state    = 'claimed',
       leased_by      = ?1,
       lease_until    = now(?2),
       last_heartbeat = now(),
       lease_epoch    = lease_epoch + 1,
       claim_attempts = claim_attempts + 1,
       updated_at     = now()
 WHERE id = ?5
   AND claim_state = 'queued'
   AND available_at <= now()
   AND (runner_pool IS NULL OR runner_pool IN (SELECT value FROM json_each(?3)))
   AND (?4 = '' OR workspace_id = ?4)
RETURNING /*run_columns*/;

-- name: claim_run_family
-- claim_run limited to run ?5 and the runs descending from it
-- (parent_run_id chain, any depth; idx_workflow_runs_parent), best first.
UPDATE workflow_runs
   SET claim_state    = 'claimed',
       leased_by      = ?1,
       lease_until    = now(?2),
       last_heartbeat = now(),
       lease_epoch    = lease_epoch + 1,
       claim_attempts = claim_attempts + 1,
       updated_at     = now()
 WHERE id = (
       WITH RECURSIVE family(id) AS (
            SELECT ?5
            UNION
            SELECT r.id FROM workflow_runs r JOIN family f ON r.parent_run_id = f.id)
       SELECT id FROM workflow_runs
        WHERE id IN (SELECT id FROM family)
          AND claim_state = 'queued'
          AND available_at <= now()
          AND (runner_pool IS NULL OR runner_pool IN (SELECT value FROM json_each(?3)))
          AND (?4 = '' OR workspace_id = ?4)
        ORDER BY priority DESC, available_at, rowid
        LIMIT 1)
RETURNING /*run_columns*/;

-- name: run_start
-- Also a paused run's resume: the snapshot is cleared (the claim returned
-- it to the runner).
UPDATE workflow_runs
   SET status             = 'running',
       claim_state        = 'running',
       started_at         = coalesce(started_at, now()),
       attempt_started_at = coalesce(attempt_started_at, now()),
       error              = NULL,
       error_json         = NULL,
       checkpoint_json    = NULL,
       updated_at         = now()
 WHERE id = ?1
RETURNING /*run_columns*/;

-- name: refresh_lease
UPDATE workflow_runs
   SET lease_until = now(?1), last_heartbeat = now(), updated_at = now()
 WHERE id = ?2 AND leased_by = ?3 AND lease_epoch = ?4
   AND claim_state IN ('claimed', 'running')
RETURNING lease_until;

-- name: step_start
-- Opens a step row for a try, or re-opens it for the next try (after a
-- retry, or in a run continued in the same attempt). A succeeded row is
-- final within its attempt (it has a checkpoint), and a try is started
-- once: a try not above the row's tries changes nothing either, and the
-- caller reports ErrConflict. rowid (start order) stays when re-opened.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, now(), now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'running', tries = excluded.tries, error = NULL,
       finished_at = NULL, duration_ms = NULL, updated_at = excluded.updated_at
 WHERE workflow_steps.status <> 'succeeded' AND workflow_steps.tries < excluded.tries
RETURNING /*step_columns*/;

-- name: step_start_succeed
-- A step's start and success in one write (a step without external side
-- effects): step_start's conditions, the row left succeeded.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, finished_at, duration_ms, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'succeeded', ?8, now(), now(), 0, now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'succeeded', tries = excluded.tries, error = NULL,
       started_at = excluded.started_at, finished_at = excluded.finished_at,
       duration_ms = 0, updated_at = excluded.updated_at
 WHERE workflow_steps.status <> 'succeeded' AND workflow_steps.tries < excluded.tries
RETURNING /*step_columns*/;

-- name: step_retry
UPDATE workflow_steps SET tries = ?1, error = ?2, updated_at = now()
 WHERE run_id = ?3 AND attempt = ?4 AND scope_path = ?5 AND step_id = ?6 AND status = 'running'
RETURNING /*step_columns*/;

-- name: step_finish
UPDATE workflow_steps
   SET status      = ?1,
       tries       = ?2,
       error       = ?3,
       finished_at = now(),
       updated_at  = now(),
       duration_ms = CAST(round((julianday(now()) - julianday(started_at)) * 86400000) AS INTEGER)
 WHERE run_id = ?4 AND attempt = ?5 AND scope_path = ?6 AND step_id = ?7
   AND status IN ('running', 'waiting')
RETURNING /*step_columns*/;

-- name: step_failed_unstarted
-- A step that failed with no open row: it failed before it started (e.g.
-- its `when` did not evaluate), possibly again in a run continued in the
-- same attempt. A succeeded row is final and is left alone: the caller
-- reports ErrConflict. ?10 is the status: failed, or cancelled.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, finished_at, duration_ms, error, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?10, ?8, now(), now(), 0, ?9, now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = excluded.status, kind = excluded.kind, tries = excluded.tries, error = excluded.error,
       finished_at = excluded.finished_at, duration_ms = 0, updated_at = excluded.updated_at
 WHERE workflow_steps.status <> 'succeeded'
RETURNING /*step_columns*/;

-- name: step_skipped
-- A succeeded row is final within its attempt (it has a checkpoint): the
-- upsert then changes nothing and the caller reports ErrConflict. A row
-- already skipped is left as it is too (no row returned): the caller writes
-- no second node_skipped event (a continued attempt re-evaluates the step).
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, finished_at, duration_ms, error, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'skipped', 0, now(), now(), 0, NULL, now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'skipped', finished_at = excluded.finished_at, updated_at = excluded.updated_at
 WHERE workflow_steps.status NOT IN ('succeeded', 'skipped')
RETURNING /*step_columns*/;

-- name: get_step
SELECT /*step_columns*/ FROM workflow_steps
 WHERE run_id = ?1 AND attempt = ?2 AND scope_path = ?3 AND step_id = ?4;

-- name: insert_event
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id,
                                 scope_path, payload_json)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
RETURNING id, created_at;

-- name: insert_event_pair
-- Two events of one step in one statement (a step's start and success).
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id,
                                 scope_path, payload_json)
VALUES (?1, ?2, ?3, ?4, ?7, ?5, ?6, ?8), (?1, ?2, ?3, ?4, ?9, ?5, ?6, ?10)
RETURNING id, created_at;

-- name: insert_blob
-- A blob that exists already (shared by content) and is older than a
-- minute gets written_at: the orphan collection counts its grace age from
-- it (as pgstore's does).
INSERT INTO workflow_blobs (sha256, size_bytes, data) VALUES (?1, ?2, ?3)
ON CONFLICT (sha256) DO UPDATE SET written_at = now()
 WHERE coalesce(written_at, created_at) < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-60 seconds');

-- name: get_blob
SELECT data FROM workflow_blobs WHERE sha256 = ?1;

-- name: insert_checkpoint
-- context_blob / outputs_blob: the sha256 of the workflow_blobs row holding
-- the value when the JSON column holds only its placeholder; NULL when the
-- JSON column holds the value itself (only these columns mark a blob).
INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id,
                                      env, context_json, outputs_json, context_blob, outputs_blob)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10);

-- name: set_phase
-- NULL and '' both mean "no phase" (GetRun reads NULL as ''), so setting ''
-- on a run without a phase is no change.
UPDATE workflow_runs SET phase = ?1 WHERE id = ?2 AND coalesce(phase, '') <> ?1;

-- name: run_succeeded
-- The end of a run as succeeded, fenced: it matches only while the lease
-- (?3 runner, ?4 epoch) holds, and is OnRunComplete's fence.
UPDATE workflow_runs
   SET status          = 'succeeded',
       claim_state     = 'complete',
       output_json     = ?1,
       error           = NULL,
       error_json      = NULL,
       checkpoint_json = NULL,
       leased_by       = NULL,
       lease_until     = NULL,
       completed_at    = now(),
       duration_ms     = CAST(round((julianday(now()) - julianday(coalesce(attempt_started_at, now()))) * 86400000) AS INTEGER),
       updated_at      = now()
 WHERE id = ?2 AND leased_by = ?3 AND lease_epoch = ?4
   AND claim_state IN ('claimed', 'running')
RETURNING /*run_columns*/, end_work;

-- name: run_requeue
-- A retryable failure with attempts left: a new attempt after a backoff.
-- ?4 the typed error object (NULL: none).
UPDATE workflow_runs
   SET status             = 'interrupted',
       claim_state        = 'queued',
       attempt            = attempt + 1,
       attempt_started_at = NULL,
       available_at       = now(?1),
       error              = ?2,
       error_json         = ?4,
       leased_by          = NULL,
       lease_until        = NULL,
       updated_at         = now()
 WHERE id = ?3;

-- name: run_hold
-- A retryable failure in manual recovery mode: interrupted until an operator acts.
-- ?3 the typed error object (NULL: none).
UPDATE workflow_runs
   SET status = 'interrupted', claim_state = 'abandoned', error = ?1, error_json = ?3,
       leased_by = NULL, lease_until = NULL, updated_at = now()
 WHERE id = ?2;

-- name: run_failed
-- ?4 the typed error object (NULL: none, as for the sweep's dead letter).
UPDATE workflow_runs
   SET status          = 'failed',
       claim_state     = 'failed',
       error           = ?1,
       error_json      = ?4,
       dead_lettered   = ?2,
       leased_by       = NULL,
       lease_until     = NULL,
       checkpoint_json = NULL,
       completed_at    = now(),
       duration_ms     = CAST(round((julianday(now()) - julianday(coalesce(attempt_started_at, now()))) * 86400000) AS INTEGER),
       updated_at      = now()
 WHERE id = ?3;

-- name: clear_lease
-- A graceful release, fenced: it matches only while the lease holds.
UPDATE workflow_runs
   SET status       = CASE WHEN status = 'running' THEN 'queued' ELSE status END,
       claim_state  = 'queued',
       leased_by    = NULL,
       lease_until  = NULL,
       available_at = now(),
       updated_at   = now()
 WHERE id = ?1 AND leased_by = ?2 AND lease_epoch = ?3
   AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, coalesce(runner_pool, '');

-- name: get_run
SELECT /*run_columns*/ FROM workflow_runs WHERE id = ?1 AND (?2 = '' OR workspace_id = ?2);

-- The run listing (ListRuns), newest first: (created_at, id) descending,
-- keyset-paged. Every variant takes the same arguments: ?1 workspace, ?2
-- workflow name, ?3 statuses, ?4 env, ?5 parent run (NULL: any), ?6 stale
-- before (NULL: any), ?7 created at or after (NULL: any), ?8 dead-lettered
-- only, ?9 ?10 the position to list below (created_at, id; NULL: the top),
-- ?11 the limit. The core picks the variant whose index serves the
-- filters it was given (see state/pgstore/queries.sql, whose CASE forms
-- these follow): the leading
-- columns of each variant's index are plain equalities, and the position
-- is a row comparison on the index's order, so a page starts at its first
-- row however deep it is. Times compare as text: every one is stored and
-- bound as RFC 3339 UTC with milliseconds. INDEXED BY pins the index a
-- variant is written for: without statistics the planner may take the
-- workspace index for a status range (reading past every run of the
-- other statuses), and a schema change that dropped the index fails the
-- statement instead of slowing it.

-- name: _runs_filter
   AND CASE WHEN ?2 = '' THEN 1 ELSE workflow_name = ?2 END
   AND CASE WHEN ?4 = '' THEN 1 ELSE env = ?4 END
   AND CASE WHEN ?6 IS NULL THEN 1
            ELSE status = 'running' AND coalesce(last_heartbeat, started_at) < ?6 END
   AND CASE WHEN ?8 THEN dead_lettered ELSE 1 END
   AND created_at >= coalesce(?7, '')
   AND (created_at, id) < (coalesce(?9, '9999-12-31T23:59:59.999Z'),
                           coalesce(?10, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))

-- name: list_runs
-- A workspace's runs: idx_workflow_runs_workspace_list, in order.
SELECT /*run_columns*/ FROM workflow_runs INDEXED BY idx_workflow_runs_workspace_list
 WHERE workspace_id = ?1
   AND CASE WHEN ?3 = '[]' THEN 1 ELSE status IN (SELECT value FROM json_each(?3)) END
   AND CASE WHEN ?5 IS NULL THEN 1 ELSE parent_run_id = ?5 END
/*_runs_filter*/
 ORDER BY created_at DESC, id DESC
 LIMIT ?11;

-- name: list_runs_status
-- A workspace's runs in statuses ?3 (distinct): one ordered range of
-- idx_workflow_runs_workspace_status_list per status, each cut at the
-- limit (the correlated subquery is SQLite's lateral join), then the
-- newest of them; not every run of those statuses sorted, nor every run
-- of the workspace read past the ones in other statuses.
SELECT /*run_columns*/ FROM workflow_runs
 WHERE rowid IN (
       SELECT r.rowid
         FROM json_each(?3) AS s, workflow_runs AS r
        WHERE r.rowid IN (
              SELECT rowid FROM workflow_runs INDEXED BY idx_workflow_runs_workspace_status_list
               WHERE workspace_id = ?1 AND status = s.value
                 AND CASE WHEN ?5 IS NULL THEN 1 ELSE parent_run_id = ?5 END
/*_runs_filter*/
               ORDER BY created_at DESC, id DESC
               LIMIT ?11))
 ORDER BY created_at DESC, id DESC
 LIMIT ?11;

-- name: list_runs_any
-- Every workspace's runs (?1 is ''): the workspaces are found by a loose
-- scan of idx_workflow_runs_workspace_list (one probe each), then each
-- one's newest runs read as list_runs reads them, and the newest of
-- those returned; no sort of the whole table.
WITH RECURSIVE ws(w) AS (
       SELECT min(workspace_id) FROM workflow_runs
       UNION ALL
       SELECT (SELECT min(workspace_id) FROM workflow_runs WHERE workspace_id > ws.w) FROM ws WHERE ws.w IS NOT NULL)
SELECT /*run_columns*/ FROM workflow_runs
 WHERE rowid IN (
       SELECT r.rowid
         FROM ws, workflow_runs AS r
        WHERE r.rowid IN (
              SELECT rowid FROM workflow_runs INDEXED BY idx_workflow_runs_workspace_list
               WHERE workspace_id = ws.w
                 AND CASE WHEN ?1 = '' THEN 1 ELSE workspace_id = ?1 END
                 AND CASE WHEN ?3 = '[]' THEN 1 ELSE status IN (SELECT value FROM json_each(?3)) END
                 AND CASE WHEN ?5 IS NULL THEN 1 ELSE parent_run_id = ?5 END
/*_runs_filter*/
               ORDER BY created_at DESC, id DESC
               LIMIT ?11))
 ORDER BY created_at DESC, id DESC
 LIMIT ?11;

-- name: list_runs_children
-- The child runs of run ?5 (idx_workflow_runs_parent), sorted.
SELECT /*run_columns*/ FROM workflow_runs
 WHERE parent_run_id = ?5
   AND CASE WHEN ?1 = '' THEN 1 ELSE workspace_id = ?1 END
   AND CASE WHEN ?3 = '[]' THEN 1 ELSE status IN (SELECT value FROM json_each(?3)) END
/*_runs_filter*/
 ORDER BY created_at DESC, id DESC
 LIMIT ?11;

-- name: list_steps
-- rowid: first-start order (an upsert keeps it).
SELECT /*step_columns*/ FROM workflow_steps
 WHERE run_id = ?1 AND (?2 = 0 OR attempt = ?2)
 ORDER BY attempt, rowid;

-- name: steps_of
-- A run's steps of one attempt in given statuses (the mirror hook's
-- current and ended steps; the workflow_steps_current partial index).
SELECT /*step_columns*/ FROM workflow_steps
 WHERE run_id = ?1 AND attempt = ?2 AND status IN (SELECT value FROM json_each(?3))
 ORDER BY scope_path, step_id
 LIMIT coalesce(?4, -1);

-- name: list_events
SELECT id, run_id, attempt, event_type, coalesce(node_id, ''), scope_path, payload_json, created_at
  FROM workflow_run_events
 WHERE run_id = ?1 AND id > ?2
 ORDER BY id
 LIMIT coalesce(?3, -1);

-- name: recent_recoveries
-- The newest recovery events of workspace ?1 (of env ?2; '' = every env),
-- at most ?3: idx_workflow_run_events_recovery read in id order (the
-- event_type term repeats the index's predicate word for word, which
-- SQLite needs), each joined to its run by primary key. No aliases, so
-- a plan names the tables it reads.
SELECT workflow_run_events.id, run_id, workflow_run_events.attempt, event_type, coalesce(node_id, ''), scope_path, payload_json,
       workflow_run_events.created_at, workflow_run_events.env, workflow_name
  FROM workflow_run_events
  JOIN workflow_runs ON workflow_runs.id = run_id
 WHERE workflow_run_events.workspace_id = ?1 AND (?2 = '' OR workflow_run_events.env = ?2)
   AND event_type IN ('runner_lost', 'lease_lost', 'run_interrupted', 'run_dead_lettered')
 ORDER BY workflow_run_events.id DESC
 LIMIT ?3;

-- name: list_checkpoints
SELECT run_id, scope_path, step_id, attempt, context_json, outputs_json,
       coalesce(previous_body_ref, ''), created_at, coalesce(context_blob, ''), coalesce(outputs_blob, '')
  FROM workflow_run_checkpoints
 WHERE run_id = ?1 AND (?2 = 0 OR attempt = ?2)
 ORDER BY created_at, rowid;

-- name: upsert_receipt
-- Takes the key unless an unexpired receipt holds it.
-- request_hash (?5, NULL when none) is the request the key answers.
INSERT INTO idempotency_receipts (workspace_id, key, run_id, expires_at, request_hash)
VALUES (?1, ?2, ?3, now(?4), ?5)
ON CONFLICT (workspace_id, key) DO UPDATE
   SET run_id = excluded.run_id, created_at = excluded.created_at, expires_at = excluded.expires_at,
       request_hash = excluded.request_hash
 WHERE idempotency_receipts.expires_at < now();

-- name: receipt_run
SELECT run_id, coalesce(request_hash, '') FROM idempotency_receipts WHERE workspace_id = ?1 AND key = ?2;

-- name: expired_leases
SELECT id, workspace_id, env, attempt, max_attempts, recovery_mode, coalesce(leased_by, ''),
       lease_epoch, coalesce(runner_pool, '')
  FROM workflow_runs
 WHERE lease_until < now()
   AND claim_state IN ('claimed', 'running')
 ORDER BY lease_until
 LIMIT ?1;

-- name: run_lost
-- The sweep's reason replaces the run's error; it has no typed object.
UPDATE workflow_runs
   SET status = 'interrupted', claim_state = 'abandoned', error = ?1, error_json = NULL,
       leased_by = NULL, lease_until = NULL, updated_at = now()
 WHERE id = ?2;

-- name: run_lost_requeue
UPDATE workflow_runs
   SET claim_state = 'queued', attempt = attempt + 1, attempt_started_at = NULL,
       available_at = now(?1), updated_at = now()
 WHERE id = ?2;

-- name: steps_lost
-- The step instances a lost runner left running end with the attempt.
UPDATE workflow_steps
   SET status      = 'failed',
       error       = ?1,
       finished_at = now(),
       updated_at  = now(),
       duration_ms = CAST(round((julianday(now()) - julianday(started_at)) * 86400000) AS INTEGER)
 WHERE run_id = ?2 AND attempt = ?3 AND status IN ('running', 'waiting');

-- name: run_cancelled
UPDATE workflow_runs
   SET status          = 'cancelled',
       claim_state     = 'complete',
       leased_by       = NULL,
       lease_until     = NULL,
       checkpoint_json = NULL,
       completed_at    = now(),
       duration_ms     = CAST(round((julianday(now()) - julianday(coalesce(attempt_started_at, now()))) * 86400000) AS INTEGER),
       updated_at      = now()
 WHERE id = ?1;

-- name: steps_cancelled
UPDATE workflow_steps
   SET status = 'cancelled', finished_at = now(), updated_at = now()
 WHERE run_id = ?1 AND attempt = ?2 AND status IN ('running', 'waiting');

-- name: run_state
-- The run an operator action or a wake acts on (the single writer
-- serialises them; PostgreSQL locks the row).
SELECT workspace_id, env, attempt, status, claim_state, coalesce(runner_pool, '') FROM workflow_runs
 WHERE id = ?1 AND (?2 = '' OR workspace_id = ?2);

-- name: run_cancel_requested
-- cancel_requested_at: the first request (the reason's "since").
UPDATE workflow_runs
   SET cancel_requested = 1, cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
 WHERE id = ?1;

-- name: run_requeued
UPDATE workflow_runs
   SET status             = 'queued',
       claim_state        = 'queued',
       attempt            = attempt + 1,
       attempt_started_at = NULL,
       max_attempts       = max(max_attempts, attempt + 1),
       available_at       = now(),
       recovery_mode      = coalesce(nullif(?1, ''), recovery_mode),
       definition_id      = coalesce(nullif(?2, ''), definition_id),
       workflow_revision  = coalesce(nullif(?3, ''), workflow_revision),
       error              = NULL,
       error_json         = NULL,
       dead_lettered      = 0,
       cancel_requested   = 0,
       cancel_requested_at = NULL,
       completed_at       = NULL,
       duration_ms        = NULL,
       leased_by          = NULL,
       lease_until        = NULL,
       updated_at         = now()
 WHERE id = ?4;

-- Durable waits (SPEC §6) -------------------------------------------------

-- name: run_paused
-- Commit boundary 1: paused with the context snapshot; the lease is kept.
UPDATE workflow_runs SET status = 'paused', checkpoint_json = ?1, updated_at = now() WHERE id = ?2;

-- name: step_waiting
-- The wait's step row becomes waiting (opened when it was not). A
-- succeeded row is final: the caller reports ErrConflict.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'waiting', 1, now(), now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'waiting', finished_at = NULL, duration_ms = NULL, updated_at = excluded.updated_at
 WHERE workflow_steps.status <> 'succeeded'
RETURNING /*step_columns*/;

-- name: get_wait
SELECT /*wait_columns*/ FROM workflow_waits WHERE id = ?1;

-- name: get_wait_by_step
SELECT /*wait_columns*/ FROM workflow_waits
 WHERE run_id = ?1 AND attempt = ?2 AND scope_path = ?3 AND step_id = ?4;

-- name: list_waits
SELECT /*wait_columns*/ FROM workflow_waits
 WHERE (?1 = '' OR run_id = ?1)
   AND (?2 = '[]' OR status IN (SELECT value FROM json_each(?2)))
 ORDER BY created_at, rowid
 LIMIT ?3;

-- name: insert_wait
-- Deadlines: an absolute time (?10, ?12) or an offset from now (?11, ?13),
-- NULL when neither is given.
INSERT INTO workflow_waits (id, run_id, workspace_id, attempt, scope_path, step_id, kind,
                            signal, correlation_key, token_hash, key_id,
                            wake_at, expires_at, notify_json, next_notify_at, form_json)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?14, ?15,
        coalesce(?10, CASE WHEN ?11 IS NULL THEN NULL ELSE now(?11) END),
        coalesce(?12, CASE WHEN ?13 IS NULL THEN NULL ELSE now(?13) END),
        ?16, CASE WHEN ?16 IS NULL THEN NULL ELSE now(?17) END, ?18);

-- name: inbox_match
-- The oldest unconsumed inbox entry for a wait being registered: addressed
-- to its run (and, when the entry has a key, to its key), or addressed by
-- key alone in its workspace. Each branch walks its partial index.
SELECT id, payload FROM (
       SELECT id, coalesce(payload_json, 'null') AS payload, created_at, rowid AS r
         FROM workflow_wake_inbox
        WHERE consumed_at IS NULL AND run_id = ?1 AND signal = ?3
          AND (correlation_key IS NULL OR correlation_key = ?4)
       UNION ALL
       SELECT id, coalesce(payload_json, 'null'), created_at, rowid
         FROM workflow_wake_inbox
        WHERE consumed_at IS NULL AND run_id IS NULL AND workspace_id = ?2 AND signal = ?3
          AND ?4 <> '' AND correlation_key = ?4)
 ORDER BY created_at, r
 LIMIT 1;

-- name: inbox_consume
UPDATE workflow_wake_inbox SET consumed_at = now() WHERE id = ?1 AND consumed_at IS NULL;

-- name: insert_inbox
INSERT INTO workflow_wake_inbox (id, workspace_id, run_id, signal, correlation_key, payload_json)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
RETURNING created_at;

-- name: lock_run
-- The run a wake acts on (PostgreSQL locks it; the single writer
-- serialises wakes and parks here).
SELECT workspace_id, env, attempt FROM workflow_runs WHERE id = ?1;

-- name: wake_wait
-- Completes a pending wait (the exactly-once point of every wake). A wait
-- whose timeout passed is closed even before the poller fired it.
UPDATE workflow_waits
   SET status = ?2, payload_json = ?3, consumed_at = now()
 WHERE id = ?1 AND status = 'pending'
   AND (?4 = 0 OR expires_at IS NULL OR expires_at > now());

-- name: requeue_parked
-- A wake re-queues a parked run (available now), unless the woken wait's
-- step no longer waits (the engine gave it up): nothing would resume it.
UPDATE workflow_runs
   SET claim_state = 'queued', available_at = now(), updated_at = now()
 WHERE id = ?1 AND claim_state = 'parked'
   AND EXISTS (SELECT 1 FROM workflow_steps
                WHERE run_id = ?1 AND attempt = ?2 AND scope_path = ?3 AND step_id = ?4
                  AND status = 'waiting')
RETURNING coalesce(runner_pool, '');

-- name: park_run
-- Commit boundary 3: the lease is released; queued at once when a wait of
-- the current attempt was woken (or timed out) and its step still waits.
UPDATE workflow_runs
   SET claim_state = CASE WHEN EXISTS (
           SELECT 1 FROM workflow_waits w
             JOIN workflow_steps s
               ON s.run_id = w.run_id AND s.attempt = w.attempt
              AND s.scope_path = w.scope_path AND s.step_id = w.step_id
            WHERE w.run_id = workflow_runs.id AND w.attempt = workflow_runs.attempt
              AND w.status IN ('woken', 'timed_out') AND s.status = 'waiting')
         THEN 'queued' ELSE 'parked' END,
       available_at = now(),
       leased_by    = NULL,
       lease_until  = NULL,
       updated_at   = now()
 WHERE id = ?1 AND status = 'paused'
RETURNING claim_state, coalesce(runner_pool, '');

-- name: pending_wait_for_signal
-- The oldest pending signal or approval wait a signal wakes: of the run
-- (with the key when one is given), or by key in the workspace.
SELECT id FROM (
       SELECT id, created_at, rowid AS r FROM workflow_waits
        WHERE ?1 <> '' AND run_id = ?1 AND status = 'pending'
          AND kind IN ('signal', 'approval') AND signal = ?3
          AND (?4 = '' OR correlation_key = ?4)
          AND (expires_at IS NULL OR expires_at > now())
       UNION ALL
       SELECT id, created_at, rowid FROM workflow_waits
        WHERE ?1 = '' AND status = 'pending' AND workspace_id = ?2 AND signal = ?3
          AND correlation_key = ?4 AND kind IN ('signal', 'approval')
          AND (expires_at IS NULL OR expires_at > now()))
 ORDER BY created_at, r
 LIMIT 1;

-- name: pending_child_wait
SELECT id FROM workflow_waits
 WHERE run_id = ?1 AND kind = 'child' AND correlation_key = ?2 AND status = 'pending'
 ORDER BY created_at, rowid
 LIMIT 1;

-- name: due_waits
-- The poller's selection: pending waits whose timer or timeout is due,
-- earliest deadline first. Each branch walks its partial index.
SELECT id FROM (
       SELECT id, wake_at AS due, rowid AS r FROM workflow_waits
        WHERE status = 'pending' AND wake_at IS NOT NULL AND wake_at <= now()
       UNION ALL
       SELECT id, expires_at AS due, rowid AS r FROM workflow_waits
        WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= now())
 GROUP BY id
 ORDER BY min(due), min(r)
 LIMIT ?1;

-- name: pending_notifies
SELECT /*wait_columns*/ FROM workflow_waits
 WHERE status = 'pending' AND notify_json IS NOT NULL AND notified_at IS NULL
   AND next_notify_at <= now()
 ORDER BY next_notify_at, rowid
 LIMIT ?1;

-- name: mark_notified
UPDATE workflow_waits
   SET notified_at    = CASE WHEN ?2 THEN now() ELSE notified_at END,
       notify_tries   = notify_tries + CASE WHEN ?2 THEN 0 ELSE 1 END,
       next_notify_at = CASE WHEN ?2 THEN next_notify_at ELSE now(?3) END
 WHERE id = ?1
RETURNING run_id;

-- name: cancel_waits
-- A run's end: its pending waits (every attempt) are cancelled.
UPDATE workflow_waits SET status = 'cancelled', consumed_at = now()
 WHERE run_id = ?1 AND status = 'pending'
RETURNING id;

-- name: cancel_attempt_waits
-- An attempt's end (sweep, retry): its pending waits are cancelled.
UPDATE workflow_waits SET status = 'cancelled', consumed_at = now()
 WHERE run_id = ?1 AND attempt = ?2 AND status = 'pending'
RETURNING id;

-- name: unresumed_wakes
-- Wakes an ending attempt received but never resumed (the step still
-- waits): they go back to the inbox for the next attempt's wait.
SELECT w.workspace_id, coalesce(w.signal, ''), coalesce(w.correlation_key, ''),
       coalesce(w.payload_json, 'null'), w.kind
  FROM workflow_waits w
  JOIN workflow_steps s
    ON s.run_id = w.run_id AND s.attempt = w.attempt
   AND s.scope_path = w.scope_path AND s.step_id = w.step_id
 WHERE w.run_id = ?1 AND w.attempt = ?2 AND w.status = 'woken'
   AND w.kind IN ('signal', 'approval', 'child', 'job') AND s.status = 'waiting'
 ORDER BY w.consumed_at, w.rowid;

-- name: run_end_info
SELECT coalesce(parent_run_id, ''), status, coalesce(output_json, 'null'), coalesce(error, ''), error_json,
       end_work
  FROM workflow_runs WHERE id = ?1;

-- name: child_end
-- A child run's end, read when its parent's child wait registers and no
-- inbox entry holds it: the end went to an earlier attempt's wait, or to
-- no one (the parent had ended). Only a child of that parent that ended.
SELECT status, coalesce(output_json, 'null'), coalesce(error, ''), error_json
  FROM workflow_runs
 WHERE id = ?1 AND parent_run_id = ?2 AND status IN ('succeeded', 'failed', 'cancelled');

-- name: children
SELECT id FROM workflow_runs
 WHERE parent_run_id = ?1 AND status NOT IN ('succeeded', 'failed', 'cancelled')
 ORDER BY created_at, rowid;

-- Session variables and wake keys ----------------------------------------

-- name: session_get
SELECT workspace_id, session_id, key, value_json, coalesce(origin_run_id, ''), keep_until, updated_at
  FROM workflow_session_vars
 WHERE workspace_id = ?1 AND session_id = ?2 AND key = ?3
   AND (keep_until IS NULL OR keep_until >= now());

-- name: session_set
-- keep_until: ?6 (an instant), or the database's now moved by the
-- modifier ?7 when it is not NULL (a keep_until duration is measured on
-- the database's clock, the one the session GC compares with).
INSERT INTO workflow_session_vars (workspace_id, session_id, key, value_json, origin_run_id, keep_until, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, CASE WHEN ?7 IS NULL THEN ?6 ELSE now(?7) END, now())
ON CONFLICT (workspace_id, session_id, key) DO UPDATE
   SET value_json = excluded.value_json, origin_run_id = excluded.origin_run_id,
       keep_until = excluded.keep_until, updated_at = excluded.updated_at
RETURNING workspace_id, session_id, key, value_json, coalesce(origin_run_id, ''), keep_until, updated_at;

-- name: session_drop_run
-- A run's end drops the variables it wrote without keep_until.
DELETE FROM workflow_session_vars WHERE origin_run_id = ?1 AND keep_until IS NULL
RETURNING workspace_id, session_id, key;

-- name: session_gc
DELETE FROM workflow_session_vars
 WHERE rowid IN (SELECT rowid FROM workflow_session_vars
                  WHERE keep_until < now() ORDER BY keep_until LIMIT ?1)
RETURNING workspace_id, session_id, key;

-- name: wake_keys
-- Ids and fingerprints only: the secrets never reach the database.
SELECT id, fingerprint, created_at FROM wake_keys ORDER BY created_at DESC, rowid DESC;

-- name: insert_wake_key
-- A known id keeps its first fingerprint, unless it has none (a key whose
-- secret migration 00008 moved to the key file).
INSERT INTO wake_keys (id, fingerprint) VALUES (?1, ?2)
ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint WHERE wake_keys.fingerprint = '';

-- name: get_wake_key
SELECT id, fingerprint, created_at FROM wake_keys WHERE id = ?1;

-- name: session_list
-- A session's variables by key (the primary key's order), expired ones
-- left out.
SELECT workspace_id, session_id, key, value_json, coalesce(origin_run_id, ''), keep_until, updated_at
  FROM workflow_session_vars
 WHERE workspace_id = ?1 AND session_id = ?2
   AND (keep_until IS NULL OR keep_until >= now())
 ORDER BY key;

-- name: session_delete
-- An operator's delete of one variable; an expired one is absent (the GC
-- removes it).
DELETE FROM workflow_session_vars
 WHERE workspace_id = ?1 AND session_id = ?2 AND key = ?3
   AND (keep_until IS NULL OR keep_until >= now())
RETURNING workspace_id, session_id, key;

-- The operator API (state.Operator) --------------------------------------

-- name: insert_api_key
INSERT INTO api_keys (id, workspace_id, env, role, key_hash, name)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
RETURNING id, workspace_id, env, role, name, created_at, revoked_at;

-- name: list_api_keys
-- Oldest first (rowid: insertion order within a millisecond); revoked
-- keys only when ?2.
SELECT id, workspace_id, env, role, name, created_at, revoked_at FROM api_keys
 WHERE (?1 = '' OR workspace_id = ?1) AND (?2 OR revoked_at IS NULL)
 ORDER BY created_at, rowid;

-- name: revoke_api_key
-- A key already revoked keeps its revoked_at.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
 WHERE id = ?1 AND (?2 = '' OR workspace_id = ?2)
RETURNING id, workspace_id, env, role, name, created_at, revoked_at;

-- name: api_key_by_hash
SELECT id, workspace_id, env, role, name, created_at, revoked_at FROM api_keys WHERE key_hash = ?1;

-- name: api_keys_configured
SELECT EXISTS (SELECT 1 FROM api_keys);

-- name: list_definitions
-- A workspace's workflows by name, each at its current revision (the most
-- recently applied, as get_definition_latest).
SELECT id, workspace_id, name, revision, spec_json, source, created_at
  FROM (SELECT id, workspace_id, name, revision, spec_json, source, created_at,
               row_number() OVER (PARTITION BY name ORDER BY applied_at DESC, rowid DESC) AS current
          FROM workflow_definitions WHERE workspace_id = ?1)
 WHERE current = 1
 ORDER BY name;

-- name: list_revisions
-- One workflow's revisions, the current one first.
SELECT id, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE workspace_id = ?1 AND name = ?2
 ORDER BY applied_at DESC, rowid DESC;

-- name: find_run_ids
-- The runs whose id starts with a prefix: ids from ?1 to ?2 (the prefix
-- padded with 0s and with fs to a whole uuid; ids are stored in canonical
-- lower-case text, which sorts as the uuids do), a range of the primary
-- key.
SELECT id FROM workflow_runs
 WHERE id BETWEEN ?1 AND ?2
   AND CASE WHEN ?3 = '' THEN 1 ELSE workspace_id = ?3 END
 ORDER BY id
 LIMIT ?4;

-- The watchdog (state.Watchdog, issue 13) -----------------------------------

-- name: runner_seen
-- A runner's heartbeat: its row, live until now moved by ?7 (its lease TTL).
INSERT INTO workflow_runners (id, workspace_id, pools, only_run, concurrency, runs_held,
                              started_at, last_seen, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, now(), now(), now(?7))
ON CONFLICT (id) DO UPDATE
   SET workspace_id = excluded.workspace_id, pools = excluded.pools, only_run = excluded.only_run,
       concurrency = excluded.concurrency, runs_held = excluded.runs_held,
       last_seen = excluded.last_seen, expires_at = excluded.expires_at;

-- name: runners_forget
-- Rows of runners that expired long ago (?1: how long, a negative modifier).
DELETE FROM workflow_runners WHERE expires_at < now(?1);

-- name: runner_gone
DELETE FROM workflow_runners WHERE id = ?1;

-- name: list_runners
-- ?1 workspace ('' = any: else the runners that claim from it); ?2 live only.
SELECT id, workspace_id, pools, only_run, concurrency, runs_held, started_at, last_seen, expires_at
  FROM workflow_runners
 WHERE (?1 = '' OR workspace_id IN ('', ?1))
   AND (NOT ?2 OR expires_at > now())
 ORDER BY id;

-- The stuck class of a run (state.StuckRow.Class), decided on the
-- database clock from the run row r, its oldest pending wait w of the
-- current attempt (paused runs) and one open step st of the current
-- attempt (held runs: one between two tries, else the one written last),
-- as in state/pgstore/queries.sql (SQLite has no LATERAL: each is joined
-- by the rowid a correlated subquery picks). _stuck_joins joins w and st
-- to r (and n.t, now); _stuck_columns selects the columns and the class,
-- _stuck_since is when the run entered its class, over those columns.

-- name: _stuck_joins
  CROSS JOIN (SELECT now() AS t) n
  LEFT JOIN workflow_waits w
    ON w.rowid = (SELECT x.rowid FROM workflow_waits x
                   WHERE r.status = 'paused' AND x.run_id = r.id AND x.attempt = r.attempt
                     AND x.status = 'pending'
                   ORDER BY x.created_at, x.rowid
                   LIMIT 1)
  LEFT JOIN workflow_steps st
    ON st.rowid = (SELECT x.rowid FROM workflow_steps x
                    WHERE r.claim_state IN ('claimed', 'running')
                      AND x.run_id = r.id AND x.attempt = r.attempt AND x.status = 'running'
                    ORDER BY coalesce(x.error, '') <> '' DESC, coalesce(x.updated_at, x.started_at) DESC,
                             x.rowid DESC
                    LIMIT 1)

-- name: _stuck_columns
       r.id AS r_id, r.workspace_id AS r_workspace, r.env AS r_env,
       coalesce(r.runner_pool, '') AS r_pool, r.status AS r_status, r.attempt AS r_attempt,
       r.max_attempts AS r_max_attempts, r.recovery_mode AS r_mode, coalesce(r.error, '') AS r_error,
       coalesce(r.leased_by, '') AS r_leased_by, r.last_heartbeat AS r_heartbeat,
       r.available_at AS r_available_at, r.lease_until AS r_lease_until, r.created_at AS r_created_at,
       r.updated_at AS r_updated_at, r.cancel_requested_at AS r_cancel_at, n.t AS db_now,
       coalesce(w.kind, '') AS w_kind, coalesce(w.signal, '') AS w_signal,
       coalesce(w.correlation_key, '') AS w_key, coalesce(w.step_id, '') AS w_step,
       coalesce(w.scope_path, '') AS w_scope, w.wake_at AS w_wake_at, w.expires_at AS w_expires_at,
       w.created_at AS w_created_at,
       coalesce(st.step_id, '') AS st_step, coalesce(st.scope_path, '') AS st_scope,
       coalesce(st.tries, 0) AS st_tries, coalesce(st.updated_at, st.started_at) AS st_updated_at,
       CASE
         WHEN r.status IN ('succeeded', 'failed', 'cancelled') THEN ''
         WHEN r.claim_state IN ('claimed', 'running') THEN
              CASE WHEN r.lease_until < n.t THEN 'lease_stale'
                   WHEN r.cancel_requested THEN 'cancel_requested'
                   WHEN w.kind IS NOT NULL THEN 'waiting_' || w.kind
                   WHEN coalesce(st.error, '') <> '' THEN 'retry_step'
                   ELSE '' END
         WHEN r.claim_state = 'parked' THEN coalesce('waiting_' || w.kind, '')
         WHEN r.claim_state = 'queued' THEN
              CASE WHEN r.available_at <= n.t THEN 'queued'
                   WHEN r.status = 'interrupted' THEN 'retry_run'
                   ELSE 'delayed' END
         WHEN r.claim_state = 'abandoned' THEN 'interrupted'
         ELSE '' END AS class

-- name: _stuck_since
CASE class
  WHEN 'lease_stale' THEN r_lease_until
  WHEN 'cancel_requested' THEN coalesce(r_cancel_at, r_updated_at)
  WHEN 'retry_step' THEN st_updated_at
  WHEN 'retry_run' THEN r_updated_at
  WHEN 'delayed' THEN r_created_at
  WHEN 'queued' THEN r_available_at
  WHEN 'interrupted' THEN r_updated_at
  WHEN '' THEN NULL
  ELSE w_created_at END

-- name: runs_stuck
-- The stuck class of runs ?1 (ids) and what their reasons are made of;
-- for a step between two tries, its last node_retry (when it was written
-- and its backoff_ms).
SELECT s.r_id, s.r_workspace, s.r_env, s.r_pool, s.r_status, s.class, /*_stuck_since*/,
       s.r_attempt, s.r_max_attempts, s.r_mode, s.r_error, s.r_leased_by, s.r_heartbeat,
       s.r_available_at, s.w_kind, s.w_signal, s.w_key, s.w_step, s.w_scope, s.w_wake_at,
       s.w_expires_at, s.st_step, s.st_scope, s.st_tries, e.created_at,
       coalesce(json_extract(e.payload_json, '$.backoff_ms'), 0)
  FROM (SELECT /*_stuck_columns*/
          FROM workflow_runs r
/*_stuck_joins*/
         WHERE r.id IN (SELECT value FROM json_each(?1))) s
  LEFT JOIN workflow_run_events e
    ON e.id = (SELECT max(x.id) FROM workflow_run_events x
                WHERE s.class = 'retry_step' AND x.run_id = s.r_id AND x.attempt = s.r_attempt
                  AND x.event_type = 'node_retry' AND x.node_id = s.st_step AND x.scope_path = s.st_scope);

-- name: queue_head
-- The claimable runs of workspace ?1, env ?2 and pool ?3 ('' = none) in
-- claim order, as claim_run reads them (idx_workflow_runs_claim_order).
SELECT id, priority, available_at, created_at
  FROM workflow_runs
 WHERE claim_state = 'queued' AND available_at <= now()
   AND workspace_id = ?1 AND env = ?2 AND coalesce(runner_pool, '') = ?3
 ORDER BY priority DESC, available_at, rowid
 LIMIT ?4;

-- name: queue_depths
-- The claimable runs counted by pool (every workspace when ?1 = ''), with
-- the age in seconds of the oldest: one pass over the queued runs of
-- idx_workflow_runs_claim_order (partial: claim_state = 'queued'), so the
-- cost follows the queue, not the table.
SELECT coalesce(runner_pool, ''), count(*),
       max((julianday(now()) - julianday(min(available_at))) * 86400.0, 0.0)
  FROM workflow_runs
 WHERE claim_state = 'queued' AND available_at <= now()
   AND (?1 = '' OR workspace_id = ?1)
 GROUP BY 1;

-- name: stuck_counts
-- Every unfinished run counted by stuck class (queued ones per workspace
-- and pool), binned by age in seconds over the bounds ?1 (the number of
-- bounds at or below the age). The workspaces are found by a loose scan
-- of idx_workflow_runs_workspace_list (one probe each) and each one's
-- unfinished runs read from idx_workflow_runs_workspace_status_list: the
-- cost follows the unfinished runs, not the table.
WITH RECURSIVE ws(w) AS (
       SELECT min(workspace_id) FROM workflow_runs
       UNION ALL
       SELECT (SELECT min(workspace_id) FROM workflow_runs WHERE workspace_id > ws.w) FROM ws WHERE ws.w IS NOT NULL),
s AS (
       SELECT /*_stuck_columns*/
         FROM ws
         JOIN workflow_runs AS r INDEXED BY idx_workflow_runs_workspace_status_list
           ON r.workspace_id = ws.w AND r.status IN ('queued', 'running', 'paused', 'interrupted')
/*_stuck_joins*/),
a AS (
       SELECT class,
              CASE WHEN class = 'queued' THEN r_workspace ELSE '' END AS workspace,
              CASE WHEN class = 'queued' THEN r_pool ELSE '' END AS pool,
              max((julianday(db_now) - julianday(/*_stuck_since*/)) * 86400.0, 0.0) AS age
         FROM s
        WHERE class <> ''),
b AS (
       SELECT class, workspace, pool, age,
              (SELECT count(*) FROM json_each(?1) WHERE value <= a.age) AS bucket
         FROM a)
SELECT class, workspace, pool, bucket, count(*), sum(age)
  FROM b
 GROUP BY class, workspace, pool, bucket;

-- The outbox (SPEC §8) -----------------------------------------------------

-- name: mirror_bump
UPDATE workflow_runs SET mirror_version = mirror_version + 1, mirror_hash = ?2
 WHERE id = ?1 AND (?3 OR mirror_hash IS NOT ?2)
RETURNING mirror_version;

-- name: outbox_append
-- The rows in the order given (ids ascend with it).
INSERT INTO mirror_outbox (run_id, kind, payload, version)
SELECT r.value, k.value, p.value, v.value
  FROM json_each(?1) r
  JOIN json_each(?2) k ON k.key = r.key
  JOIN json_each(?3) p ON p.key = r.key
  JOIN json_each(?4) v ON v.key = r.key
 ORDER BY r.key;

-- name: outbox_any
SELECT 1 FROM mirror_outbox WHERE applied_at IS NULL LIMIT 1;

-- name: outbox_unapplied
SELECT id, run_id, kind, payload, version, created_at
  FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id LIMIT ?1;

-- name: outbox_mark_applied
UPDATE mirror_outbox SET applied_at = now() WHERE id IN (SELECT value FROM json_each(?1));

-- name: outbox_prune
DELETE FROM mirror_outbox WHERE id IN (
       SELECT id FROM mirror_outbox WHERE applied_at IS NOT NULL AND applied_at < now(?1) LIMIT ?2);

-- name: outbox_window
-- OutboxStats: of the ?1 newest unapplied rows their count, the oldest's
-- age and the highest id; the lowest unapplied id and its age (seconds).
WITH newest AS (
       SELECT id, (julianday('now') - julianday(created_at)) * 86400.0 AS age
         FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id DESC LIMIT ?1),
     oldest AS (
       SELECT id, (julianday('now') - julianday(created_at)) * 86400.0 AS age
         FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id LIMIT 1)
SELECT count(*), coalesce(max(newest.age), 0.0), coalesce(max(newest.id), 0),
       coalesce((SELECT id FROM oldest), 0), coalesce((SELECT age FROM oldest), 0.0)
  FROM newest;

-- name: outbox_buckets
-- OutboxStats' age buckets of the ?1 newest unapplied rows: bucket i
-- holds the ages at least bound i-1 and below bound i (?2, ascending).
WITH newest AS (
       SELECT (julianday('now') - julianday(created_at)) * 86400.0 AS age
         FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id DESC LIMIT ?1)
SELECT (SELECT count(*) FROM json_each(?2) b WHERE b.value <= newest.age) AS bucket, count(*)
  FROM newest GROUP BY bucket;

-- name: mirror_runs_ids
SELECT r.id, r.mirror_version,
       (SELECT count(*) FROM mirror_outbox o WHERE o.applied_at IS NULL AND o.run_id = r.id)
  FROM workflow_runs r WHERE r.id IN (SELECT value FROM json_each(?1)) ORDER BY r.id;

-- name: mirror_runs_page
SELECT r.id, r.mirror_version,
       (SELECT count(*) FROM mirror_outbox o WHERE o.applied_at IS NULL AND o.run_id = r.id)
  FROM workflow_runs r
 WHERE (r.status NOT IN ('succeeded', 'failed', 'cancelled') OR coalesce(r.completed_at, r.updated_at) >= now(?1))
   AND r.id > ?2
 ORDER BY r.id LIMIT ?3;

-- name: drain_lease_take
-- The drain lease is taken when free, expired or already the owner's.
INSERT INTO mirror_drain_lock (name, owner, until) VALUES (?1, ?2, now(?3))
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until
 WHERE mirror_drain_lock.owner = excluded.owner OR mirror_drain_lock.until < now();

-- name: drain_lease_renew
UPDATE mirror_drain_lock SET until = now(?3) WHERE name = ?1 AND owner = ?2;

-- name: drain_lease_release
DELETE FROM mirror_drain_lock WHERE name = ?1 AND owner = ?2;

-- Remote workers' jobs (issue 15; storecore/jobs.go). Every change of a
-- running job is conditional on its fencing token, its status and its
-- lease (the database's clock): the exactly-once points of the protocol.

-- name: _job_columns
id, workspace_id, run_id, attempt, scope_path, step_id, step_type, status,
coalesce(leased_by, ''), lease_until, lease_epoch, coalesce(lease_token, ''), tries, max_tries,
heartbeat_ms, retry_json, available_at, idempotency_key, input_json, output_json,
coalesce(error, ''), error_json, created_at, updated_at

-- name: insert_job
INSERT INTO worker_jobs (id, workspace_id, run_id, attempt, scope_path, step_id, step_type,
                         max_tries, heartbeat_ms, retry_json, idempotency_key, input_json, env)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13);

-- name: get_job
SELECT /*_job_columns*/ FROM worker_jobs WHERE id = ?1 AND (?2 = '' OR workspace_id = ?2)
   AND (?3 = '' OR env = ?3);

-- name: pick_job
-- The oldest claimable job of the types a worker serves (one writer: no
-- other claim runs meanwhile).
SELECT id, heartbeat_ms FROM worker_jobs
 WHERE workspace_id = ?1 AND status = 'queued' AND step_type IN (SELECT value FROM json_each(?2))
   AND available_at <= now() AND (?3 = '' OR env = ?3)
 ORDER BY available_at, created_at
 LIMIT 1;

-- name: claim_job
UPDATE worker_jobs
   SET status = 'running', leased_by = ?2, lease_token = ?3, lease_epoch = lease_epoch + 1,
       tries = tries + 1, lease_until = now(?4), updated_at = now()
 WHERE id = ?1 AND status = 'queued'
RETURNING /*_job_columns*/;

-- name: record_job_poll
INSERT INTO worker_job_pollers (workspace_id, step_type, worker, last_poll_at)
SELECT ?1, value, ?3, now() FROM json_each(?2) WHERE true
ON CONFLICT (workspace_id, step_type, worker) DO UPDATE SET last_poll_at = excluded.last_poll_at;

-- name: job_pollers
SELECT workspace_id, step_type, worker, last_poll_at FROM worker_job_pollers
 WHERE workspace_id = ?1 AND step_type IN (SELECT value FROM json_each(?2))
   AND last_poll_at >= now(?3)
 ORDER BY last_poll_at DESC
 LIMIT 100;

-- name: heartbeat_job
UPDATE worker_jobs SET lease_until = now(?3), updated_at = now()
 WHERE id = ?1 AND lease_token = ?2 AND status = 'running' AND lease_until >= now()
RETURNING /*_job_columns*/;

-- name: complete_job
UPDATE worker_jobs SET status = 'succeeded', output_json = ?3, lease_until = NULL, updated_at = now()
 WHERE id = ?1 AND lease_token = ?2 AND status = 'running' AND lease_until >= now()
RETURNING /*_job_columns*/;

-- name: fail_job
-- A failed try: queued again after ?6 when ?5, else failed.
UPDATE worker_jobs
   SET status = CASE WHEN ?5 THEN 'queued' ELSE 'failed' END,
       error = ?3, error_json = ?4, lease_until = NULL,
       lease_token = CASE WHEN ?5 THEN NULL ELSE lease_token END,
       available_at = CASE WHEN ?5 THEN now(?6) ELSE available_at END,
       updated_at = now()
 WHERE id = ?1 AND lease_token = ?2 AND status = 'running' AND lease_until >= now()
RETURNING /*_job_columns*/;

-- name: expired_jobs
SELECT id FROM worker_jobs WHERE status = 'running' AND lease_until < now()
 ORDER BY lease_until LIMIT ?1;

-- name: expire_job
-- The job sweep: a lease that passed, queued again after ?5 when ?4, else
-- failed with the timeout error (?2, ?3).
UPDATE worker_jobs
   SET status = CASE WHEN ?4 THEN 'queued' ELSE 'failed' END,
       error = ?2, error_json = ?3, lease_until = NULL, lease_token = NULL,
       available_at = CASE WHEN ?4 THEN now(?5) ELSE available_at END,
       updated_at = now()
 WHERE id = ?1 AND status = 'running' AND lease_until < now()
RETURNING /*_job_columns*/;

-- name: abandon_job
-- The job of a step instance the engine gave up (a try caught a sibling's
-- failure, its lane lost a race): cancelled, its wait left as it is.
UPDATE worker_jobs SET status = 'cancelled', lease_until = NULL, updated_at = now()
 WHERE run_id = ?1 AND attempt = ?2 AND scope_path = ?3 AND step_id = ?4 AND status IN ('queued', 'running');

-- name: close_job
-- The job's wait closed without it (run ended, attempt interrupted, the
-- job's timeout): the job is cancelled; a worker holding it gets 409.
UPDATE worker_jobs SET status = 'cancelled', lease_until = NULL, updated_at = now()
 WHERE id = ?1 AND status IN ('queued', 'running');

-- name: enable_webhook
-- A new generation: 1 for a workflow's first webhook, the stored one + 1
-- otherwise (a rotation, or enabling again after a disable), so a secret
-- of an earlier generation never verifies again.
INSERT INTO workflow_webhooks (workspace_id, workflow_name, generation, key_id, enabled)
VALUES (?1, ?2, 1, ?3, 1)
ON CONFLICT (workspace_id, workflow_name) DO UPDATE
   SET generation = workflow_webhooks.generation + 1, key_id = excluded.key_id, enabled = 1, updated_at = now()
RETURNING workspace_id, workflow_name, generation, key_id, enabled, created_at, updated_at;

-- name: get_webhook
SELECT workspace_id, workflow_name, generation, key_id, enabled, created_at, updated_at
  FROM workflow_webhooks WHERE workspace_id = ?1 AND workflow_name = ?2;

-- name: disable_webhook
-- The generation stays: enabling again moves past it.
UPDATE workflow_webhooks SET enabled = 0, updated_at = now()
 WHERE workspace_id = ?1 AND workflow_name = ?2 AND enabled = 1
RETURNING workspace_id, workflow_name, generation, key_id, enabled, created_at, updated_at;
-- Workflow schedules (state.Schedules, issue 15) ---------------------------

-- name: schedule_put
-- One schedule of the revision becoming current (?1 workspace, ?2 workflow,
-- ?3 index, ?4 env, ?5 definition id, ?6 revision, ?7 cron, ?8 timezone,
-- ?9 overlap, ?10 catchup, ?11 input). A row whose cron and timezone are
-- unchanged keeps its ticks (anchor, last tick, next fire time, last run);
-- another starts anew, anchored at now.
INSERT INTO workflow_schedules AS s (workspace_id, workflow_name, schedule_index, env, definition_id, revision,
                                     cron, timezone, overlap, catchup, input_json, anchor_at, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, now(), now(), now())
ON CONFLICT (workspace_id, workflow_name, schedule_index) DO UPDATE
   SET env = excluded.env, definition_id = excluded.definition_id, revision = excluded.revision,
       overlap = excluded.overlap, catchup = excluded.catchup, input_json = excluded.input_json,
       anchor_at = CASE WHEN s.cron = excluded.cron AND s.timezone = excluded.timezone THEN s.anchor_at ELSE now() END,
       last_tick_at = CASE WHEN s.cron = excluded.cron AND s.timezone = excluded.timezone THEN s.last_tick_at END,
       next_fire_at = CASE WHEN s.cron = excluded.cron AND s.timezone = excluded.timezone THEN s.next_fire_at END,
       cron = excluded.cron, timezone = excluded.timezone,
       version = s.version + 1, updated_at = now();

-- name: schedules_trim
-- The schedules beyond the current revision's list.
DELETE FROM workflow_schedules WHERE workspace_id = ?1 AND workflow_name = ?2 AND schedule_index >= ?3;

-- name: list_schedules
SELECT s.workspace_id, s.env, s.workflow_name, s.schedule_index, s.revision, coalesce(s.definition_id, ''),
       s.cron, s.timezone, s.overlap, s.catchup, s.input_json,
       EXISTS (SELECT 1 FROM workflow_schedule_pauses p
                WHERE p.workspace_id = s.workspace_id AND p.workflow_name = s.workflow_name),
       s.anchor_at, s.last_tick_at, s.next_fire_at, coalesce(s.last_run_id, ''), s.version, s.updated_at
  FROM workflow_schedules s
 WHERE (?1 = '' OR s.workspace_id = ?1) AND (?2 = '' OR s.workflow_name = ?2)
 ORDER BY s.workspace_id, s.workflow_name, s.schedule_index;

-- name: definition_exists
SELECT EXISTS (SELECT 1 FROM workflow_definitions WHERE workspace_id = ?1 AND name = ?2);

-- name: schedules_pause
INSERT INTO workflow_schedule_pauses (workspace_id, workflow_name, paused_at) VALUES (?1, ?2, now())
ON CONFLICT (workspace_id, workflow_name) DO NOTHING;

-- name: schedules_unpause
DELETE FROM workflow_schedule_pauses WHERE workspace_id = ?1 AND workflow_name = ?2;

-- name: schedules_reanchor
-- A resume: ticks that fell due while paused never fire.
UPDATE workflow_schedules
   SET anchor_at = now(), next_fire_at = NULL, version = version + 1, updated_at = now()
 WHERE workspace_id = ?1 AND workflow_name = ?2;

-- name: due_schedules
-- Served by idx_workflow_schedules_next_fire (NULLs first: rows the
-- scheduler has not computed yet).
SELECT s.workspace_id, s.env, s.workflow_name, s.schedule_index, s.revision, coalesce(s.definition_id, ''),
       s.cron, s.timezone, s.overlap, s.catchup, s.input_json, 0,
       s.anchor_at, s.last_tick_at, s.next_fire_at, coalesce(s.last_run_id, ''), s.version, s.updated_at
  FROM workflow_schedules s
 WHERE (s.next_fire_at IS NULL OR s.next_fire_at <= now())
   AND NOT EXISTS (SELECT 1 FROM workflow_schedule_pauses p
                    WHERE p.workspace_id = s.workspace_id AND p.workflow_name = s.workflow_name)
 ORDER BY s.next_fire_at NULLS FIRST
 LIMIT ?1;

-- name: schedule_advance
-- The scheduler's compare-and-set (?4 the version it read; ?5 the tick,
-- NULL: none; ?6 the next fire time); the single writer serialises two
-- schedulers, and the second finds the version changed.
UPDATE workflow_schedules
   SET last_tick_at = coalesce(?5, last_tick_at), next_fire_at = ?6,
       version = version + 1, updated_at = now()
 WHERE workspace_id = ?1 AND workflow_name = ?2 AND schedule_index = ?3 AND version = ?4
   AND NOT EXISTS (SELECT 1 FROM workflow_schedule_pauses p
                    WHERE p.workspace_id = ?1 AND p.workflow_name = ?2)
RETURNING workspace_id, env, workflow_name, schedule_index, revision, coalesce(definition_id, ''),
       cron, timezone, overlap, catchup, input_json, 0,
       anchor_at, last_tick_at, next_fire_at, coalesce(last_run_id, ''), version, updated_at;

-- name: schedule_last_run
UPDATE workflow_schedules SET last_run_id = ?4
 WHERE workspace_id = ?1 AND workflow_name = ?2 AND schedule_index = ?3;

-- Retention (state.Retention, issue 16) ------------------------------------
-- Every statement touches one batch, in one brief write transaction.

-- name: gc_retention
-- The retention field of every workflow's current revision that has one.
SELECT workspace_id, name, json_extract(spec_json, '$.retention')
  FROM (SELECT workspace_id, name, spec_json,
               row_number() OVER (PARTITION BY workspace_id, name ORDER BY applied_at DESC, rowid DESC) AS current
          FROM workflow_definitions)
 WHERE current = 1 AND json_extract(spec_json, '$.retention') IS NOT NULL;

-- name: gc_runs
-- The next ?4 ended runs after the cursor (?1 instant, ?2 id) that ended
-- before now(?3) (the shortest retention) and have no parent: a walk of
-- idx_workflow_runs_retention. The core decides which of them are due.
SELECT r.id, r.workspace_id, r.workflow_name, r.status, r.dead_lettered,
       coalesce(r.completed_at, r.updated_at), now()
  FROM workflow_runs r INDEXED BY idx_workflow_runs_retention
 WHERE r.claim_state IN ('complete', 'failed', 'abandoned')
   AND coalesce(r.completed_at, r.updated_at) < now(?3)
   AND (coalesce(r.completed_at, r.updated_at), r.id) > (?1, ?2)
   AND (r.parent_run_id IS NULL
        OR NOT EXISTS (SELECT 1 FROM workflow_runs p WHERE p.id = r.parent_run_id))
 ORDER BY coalesce(r.completed_at, r.updated_at), r.id
 LIMIT ?4;

-- name: gc_tree
-- Every descendant of the runs ?1 (parent_run_id, any depth): root, id and
-- claim_state.
WITH RECURSIVE tree (root, id) AS (
       SELECT value, value FROM json_each(?1)
       UNION ALL
       SELECT t.root, c.id FROM tree t JOIN workflow_runs c ON c.parent_run_id = t.id)
SELECT t.root, t.id, r.claim_state
  FROM tree t JOIN workflow_runs r ON r.id = t.id
 WHERE t.id <> t.root;

-- name: gc_lock
-- Of the runs ?1, those that ended (the single writer holds them).
SELECT id FROM workflow_runs
 WHERE id IN (SELECT value FROM json_each(?1)) AND claim_state IN ('complete', 'failed', 'abandoned');

-- name: gc_blob_refs
-- The blobs the checkpoints of the runs ?1 reference.
SELECT context_blob FROM workflow_run_checkpoints
 WHERE run_id IN (SELECT value FROM json_each(?1)) AND context_blob IS NOT NULL
UNION
SELECT outputs_blob FROM workflow_run_checkpoints
 WHERE run_id IN (SELECT value FROM json_each(?1)) AND outputs_blob IS NOT NULL;

-- name: gc_delete_steps
DELETE FROM workflow_steps WHERE run_id IN (SELECT value FROM json_each(?1));

-- name: gc_delete_events
DELETE FROM workflow_run_events WHERE run_id IN (SELECT value FROM json_each(?1));

-- name: gc_delete_checkpoints
DELETE FROM workflow_run_checkpoints WHERE run_id IN (SELECT value FROM json_each(?1));

-- name: gc_delete_waits
DELETE FROM workflow_waits WHERE run_id IN (SELECT value FROM json_each(?1));

-- name: gc_delete_inbox
DELETE FROM workflow_wake_inbox WHERE run_id IN (SELECT value FROM json_each(?1));

-- name: gc_delete_jobs
DELETE FROM worker_jobs WHERE run_id IN (SELECT value FROM json_each(?1));

-- name: gc_delete_receipts
DELETE FROM idempotency_receipts WHERE run_id IN (SELECT value FROM json_each(?1));

-- name: gc_delete_runs
DELETE FROM workflow_runs WHERE id IN (SELECT value FROM json_each(?1));

-- name: gc_blobs_of
-- Of the blobs ?1, those no checkpoint references any more, untouched
-- since now(?2) (the grace age). Writes are serial: no checkpoint can be
-- on its way meanwhile.
DELETE FROM workflow_blobs
 WHERE sha256 IN (SELECT value FROM json_each(?1))
   AND coalesce(written_at, created_at) < now(?2)
   AND NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints c WHERE c.context_blob = workflow_blobs.sha256)
   AND NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints c WHERE c.outputs_blob = workflow_blobs.sha256);

-- name: gc_orphan_blobs
-- gc_blobs_of over the whole table: the next ?3 orphan blobs after the
-- cursor ?1, in sha256 order.
DELETE FROM workflow_blobs WHERE sha256 IN (
       SELECT b.sha256 FROM workflow_blobs b
        WHERE b.sha256 > ?1
          AND coalesce(b.written_at, b.created_at) < now(?2)
          AND NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints c WHERE c.context_blob = b.sha256)
          AND NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints c WHERE c.outputs_blob = b.sha256)
        ORDER BY b.sha256
        LIMIT ?3)
RETURNING sha256;

-- name: gc_consumed_waits
-- The next ?4 consumed waits after the cursor (?1 consumed_at, ?2 id),
-- consumed before now(?3), whose step instance no longer reads them: the
-- run ended, the attempt is not its current one, or the step instance
-- succeeded.
DELETE FROM workflow_waits WHERE id IN (
       SELECT w.id FROM workflow_waits w JOIN workflow_runs r ON r.id = w.run_id
        WHERE w.consumed_at IS NOT NULL AND w.status <> 'pending'
          AND w.consumed_at < now(?3)
          AND (w.consumed_at, w.id) > (?1, ?2)
          AND (r.claim_state IN ('complete', 'failed', 'abandoned') OR w.attempt < r.attempt
               OR EXISTS (SELECT 1 FROM workflow_steps s
                           WHERE s.run_id = w.run_id AND s.attempt = w.attempt AND s.scope_path = w.scope_path
                             AND s.step_id = w.step_id AND s.status = 'succeeded'))
        ORDER BY w.consumed_at, w.id
        LIMIT ?4)
RETURNING consumed_at, id;

-- name: gc_consumed_inbox
DELETE FROM workflow_wake_inbox WHERE id IN (
       SELECT id FROM workflow_wake_inbox
        WHERE consumed_at IS NOT NULL AND consumed_at < now(?1)
        ORDER BY consumed_at
        LIMIT ?2);

-- name: gc_receipts
-- Expired idempotency receipts.
DELETE FROM idempotency_receipts WHERE rowid IN (
       SELECT rowid FROM idempotency_receipts WHERE expires_at < now() ORDER BY expires_at LIMIT ?1);
