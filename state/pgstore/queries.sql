-- PostgreSQL queries of the cold tier, one block per `-- name:` line, with
-- the same names and arguments ($1, $2, … in the order internal/storecore
-- passes them) as state/sqlitestore/queries.sql, and the step writes'
-- one-statement forms (sw_*) of the StepBatcher. Every time comes from the
-- database clock: now(), the start of the transaction, so every row one
-- write touches carries the same time. Durations are bound as whole
-- microseconds ($n::bigint * interval '1 microsecond').

-- name: fence
-- The conditional write that fences every runner write (SPEC §4). It must
-- match exactly one row or the transaction rolls back with ErrLeaseLost.
-- It is the first statement of the transaction and takes the run's row
-- lock, so the runner's writes to one run are serialised.
UPDATE workflow_runs
   SET updated_at = now()
 WHERE id = $1 AND leased_by = $2 AND lease_epoch = $3
   AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, cancel_requested, status, coalesce(parent_run_id::text, ''),
          max_attempts, recovery_mode, coalesce(runner_pool, '');

-- name: fence_mark
-- fence, also marking what the run's end must clean up (end_work |= $4).
UPDATE workflow_runs
   SET updated_at = now(), end_work = end_work | $4
 WHERE id = $1 AND leased_by = $2 AND lease_epoch = $3
   AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, cancel_requested, status, coalesce(parent_run_id::text, ''),
          max_attempts, recovery_mode, coalesce(runner_pool, '');

-- name: fence_run
-- The fence for a write that changes the run only through the fence (the
-- step writes) in a store with hooks: it returns the whole run row as it
-- commits, which becomes Change.Run instead of a read-back.
UPDATE workflow_runs
   SET updated_at = now()
 WHERE id = $1 AND leased_by = $2 AND lease_epoch = $3
   AND claim_state IN ('claimed', 'running')
RETURNING /*run_columns*/;

-- name: now
SELECT now();

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

-- name: _insert_run
INSERT INTO workflow_runs (
    id, workspace_id, env, definition_id, workflow_name, workflow_revision, template_id,
    status, claim_state, runner_pool, priority, max_attempts, available_at,
    recovery_mode, trigger_type, parent_run_id, idempotency_key, input_json, trace_id, trace_parent, depth)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', 'queued', $8, $9, $10,
        now() + $11::bigint * interval '1 microsecond', $12, $13, $14::uuid, $15, $16, $17, $18,
        -- depth: 0 without a parent, the parent's depth + 1 (1 when the
        -- parent's row is gone).
        CASE WHEN $14::uuid IS NULL THEN 0
             ELSE coalesce((SELECT p.depth + 1 FROM workflow_runs p WHERE p.id = $14::uuid), 1) END)

-- name: insert_run
/*_insert_run*/
RETURNING /*run_columns*/;

-- name: insert_run_event
-- insert_run and the run's event in one statement ($19 its type, $20 its
-- payload): the run's columns, then the event's id and created_at.
WITH r AS (/*_insert_run*/ RETURNING *),
     e AS (INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, payload_json)
           SELECT id, workspace_id, env, attempt, $19, $20 FROM r
           RETURNING id AS event_id, created_at AS event_at)
SELECT /*run_columns*/, e.event_id, e.event_at FROM r, e;

-- name: _claimable
-- The runs a claim may take: queued, due, of one of the runner's pools
-- ($3; a run with a NULL pool matches any runner) and of its workspace
-- ($4, '' = any).
claim_state = 'queued'
          AND available_at <= now()
          AND (runner_pool IS NULL OR runner_pool = ANY ($3::text[]))
          AND ($4::text = '' OR workspace_id = $4)

-- name: claim_run
-- One atomic conditional write of up to $5 runs. The subquery walks
-- idx_workflow_runs_claim_pool in claim order and locks the first claimable
-- runs, skipping rows other claimers hold, so concurrent claims never wait
-- on each other and never take the same run. Pools: a run with a NULL pool
-- matches any runner. (= ANY (ARRAY(…)): the runs are found first, then
-- updated by primary key, whatever the plan's estimate of $5.)
UPDATE workflow_runs
   SET claim_state    = 'claimed',
       leased_by      = $1,
       lease_until    = now() + $2::bigint * interval '1 microsecond',
       last_heartbeat = now(),
       lease_epoch    = lease_epoch + 1,
       claim_attempts = claim_attempts + 1,
       updated_at     = now()
 WHERE id = ANY (ARRAY(
       SELECT id FROM workflow_runs
        WHERE /*_claimable*/
        ORDER BY priority DESC, available_at, seq
        LIMIT $5
          FOR UPDATE SKIP LOCKED))
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
          AND /*_claimable*/
          FOR UPDATE SKIP LOCKED)
RETURNING /*run_columns*/;

-- name: claim_run_family
-- claim_run limited to run $5 and the runs descending from it
-- (parent_run_id chain, any depth; idx_workflow_runs_parent), best first.
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
        WHERE id IN (WITH RECURSIVE family(id) AS (
                          SELECT $5::uuid
                          UNION
                          SELECT r.id FROM workflow_runs r JOIN family f ON r.parent_run_id = f.id)
                     SELECT id FROM family)
          AND /*_claimable*/
        ORDER BY priority DESC, available_at, seq
        LIMIT 1
          FOR UPDATE SKIP LOCKED)
RETURNING /*run_columns*/;

-- name: _claim_start
-- The claim and run_start in one write (ClaimRunParams.Start), with the
-- run_claimed and run_started (or run_resumed) events: the runs found by
-- the c CTE of a claim_run*_start query (their ids locked, and their
-- status before, as prior_status) become claimed and running in one new
-- row version each, not two (u; by primary key, = ANY (ARRAY(…)), as in
-- claim_run), and each run's two events are inserted in claim order (e;
-- their payload: the run's new epoch and the runner, $6 as a JSON string,
-- in the bytes the core's encoding of {lease_epoch, runner_id} gives). One row a run: its
-- columns, prior_status (a paused run resumes: run_resumed), its events'
-- ids in order, their created_at and their payloads as stored.
u AS (
     UPDATE workflow_runs r
        SET claim_state        = 'running',
            status             = 'running',
            leased_by          = $1,
            lease_until        = now() + $2::bigint * interval '1 microsecond',
            last_heartbeat     = now(),
            lease_epoch        = r.lease_epoch + 1,
            claim_attempts     = r.claim_attempts + 1,
            started_at         = coalesce(r.started_at, now()),
            attempt_started_at = coalesce(r.attempt_started_at, now()),
            error              = NULL,
            error_json         = NULL,
            checkpoint_json    = NULL,
            updated_at         = now()
       FROM c
      WHERE r.id = c.claimed_id AND r.id = ANY (ARRAY(SELECT claimed_id FROM c))
     RETURNING r.*, c.prior_status),
e AS (
     INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, payload_json)
     SELECT u.id, u.workspace_id, u.env, u.attempt, x.typ,
            ('{"lease_epoch":' || u.lease_epoch || ',"runner_id":' || $6::text || '}')::json
       FROM u, LATERAL (VALUES (1, 'run_claimed'),
                               (2, CASE WHEN u.prior_status = 'paused' THEN 'run_resumed' ELSE 'run_started' END)) AS x(o, typ)
      ORDER BY u.priority DESC, u.available_at, u.seq, x.o
     RETURNING run_id, id, created_at, payload_json)
SELECT /*run_columns*/, u.prior_status, ev.ids, ev.at, ev.payloads
  FROM u JOIN (SELECT run_id, array_agg(id ORDER BY id) AS ids, min(created_at) AS at,
                      array_agg(payload_json::text ORDER BY id) AS payloads
                 FROM e GROUP BY run_id) ev
         ON ev.run_id = u.id

-- name: claim_run_start
-- claim_run, the runs started (_claim_start).
WITH c AS MATERIALIZED (
       SELECT id AS claimed_id, status AS prior_status FROM workflow_runs
        WHERE /*_claimable*/
        ORDER BY priority DESC, available_at, seq
        LIMIT $5
          FOR UPDATE SKIP LOCKED),
/*_claim_start*/;

-- name: claim_run_id_start
-- claim_run_id, the run started (_claim_start).
WITH c AS MATERIALIZED (
       SELECT id AS claimed_id, status AS prior_status FROM workflow_runs
        WHERE id = $5::uuid
          AND /*_claimable*/
          FOR UPDATE SKIP LOCKED),
/*_claim_start*/;

-- name: claim_run_family_start
-- claim_run_family, the run started (_claim_start).
WITH RECURSIVE family(id) AS (
       SELECT $5::uuid
       UNION
       SELECT r.id FROM workflow_runs r JOIN family f ON r.parent_run_id = f.id),
     c AS MATERIALIZED (
       SELECT id AS claimed_id, status AS prior_status FROM workflow_runs
        WHERE id IN (SELECT id FROM family)
          AND /*_claimable*/
        ORDER BY priority DESC, available_at, seq
        LIMIT 1
          FOR UPDATE SKIP LOCKED),
/*_claim_start*/;

-- name: run_start
-- Also a paused run's resume: the snapshot is cleared (the claim returned
-- it to the runner).
UPDATE workflow_runs
   SET status          = 'running',
       claim_state     = 'running',
       started_at      = coalesce(started_at, now()),
       attempt_started_at = coalesce(attempt_started_at, now()),
       error           = NULL,
       error_json      = NULL,
       checkpoint_json = NULL,
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
-- Opens a step row for a try, or re-opens it for the next try (after a
-- retry, or in a run continued in the same attempt). A succeeded row is
-- final within its attempt (it has a checkpoint), and a try is started
-- once: a try not above the row's tries changes nothing either, and the
-- caller reports ErrConflict. seq (start order) comes from its sequence;
-- re-opening a row keeps it.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', $8, now(), now())
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
VALUES ($1, $2, $3, $4, $5, $6, $7, 'succeeded', $8, now(), now(), 0, now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'succeeded', tries = excluded.tries, error = NULL,
       started_at = excluded.started_at, finished_at = excluded.finished_at,
       duration_ms = 0, updated_at = excluded.updated_at
 WHERE workflow_steps.status <> 'succeeded' AND workflow_steps.tries < excluded.tries
RETURNING /*step_columns*/;

-- name: step_retry
UPDATE workflow_steps SET tries = $1, error = $2, updated_at = now()
 WHERE run_id = $3 AND attempt = $4 AND scope_path = $5 AND step_id = $6 AND status = 'running'
RETURNING /*step_columns*/;

-- name: step_finish
UPDATE workflow_steps
   SET status      = $1,
       tries       = $2,
       error       = $3,
       finished_at = now(),
       updated_at  = now(),
       duration_ms = round(extract(epoch FROM now() - started_at) * 1000)::bigint
 WHERE run_id = $4 AND attempt = $5 AND scope_path = $6 AND step_id = $7
   AND status IN ('running', 'waiting')
RETURNING /*step_columns*/;

-- name: step_failed_unstarted
-- A step that failed with no open row: it failed before it started (e.g.
-- its `when` did not evaluate), possibly again in a run continued in the
-- same attempt. A succeeded row is final and is left alone: the caller
-- reports ErrConflict. $10 is the status: failed, or cancelled.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, finished_at, duration_ms, error, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $10, $8, now(), now(), 0, $9, now())
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
VALUES ($1, $2, $3, $4, $5, $6, $7, 'skipped', 0, now(), now(), 0, NULL, now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'skipped', finished_at = excluded.finished_at, updated_at = excluded.updated_at
 WHERE workflow_steps.status NOT IN ('succeeded', 'skipped')
RETURNING /*step_columns*/;

-- name: insert_event
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id,
                                 scope_path, payload_json)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING id, created_at;

-- name: insert_checkpoint
-- context_blob / outputs_blob: the sha256 of the workflow_blobs row holding
-- the value when the JSON column holds only its placeholder; NULL when the
-- JSON column holds the value itself (only these columns mark a blob).
INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id,
                                      env, context_json, outputs_json, context_blob, outputs_blob)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: set_phase
-- NULL and '' both mean "no phase" (GetRun reads NULL as ''), so setting ''
-- on a run without a phase is no change.
UPDATE workflow_runs SET phase = $1
 WHERE id = $2 AND coalesce(phase, '') <> $1;

-- name: _run_succeeded
UPDATE workflow_runs
   SET status          = 'succeeded',
       claim_state     = 'complete',
       output_json     = $1,
       error           = NULL,
       error_json      = NULL,
       checkpoint_json = NULL,
       leased_by       = NULL,
       lease_until     = NULL,
       completed_at    = now(),
       duration_ms     = round(extract(epoch FROM now() - coalesce(attempt_started_at, now())) * 1000)::bigint,
       updated_at      = now()
 WHERE id = $2 AND leased_by = $3 AND lease_epoch = $4
   AND claim_state IN ('claimed', 'running')

-- name: run_succeeded
-- The end of a run as succeeded, fenced: it matches only while the lease
-- ($3 runner, $4 epoch) holds, and is OnRunComplete's fence.
/*_run_succeeded*/
RETURNING /*run_columns*/, end_work;

-- name: run_succeeded_event
-- run_succeeded and the run's event in one statement ($5 its type, $6 its
-- payload): the run's columns, end_work, then the event's id and
-- created_at.
WITH r AS (/*_run_succeeded*/ RETURNING *),
     e AS (INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, payload_json)
           SELECT id, workspace_id, env, attempt, $5, $6 FROM r
           RETURNING id AS event_id, created_at AS event_at)
SELECT /*run_columns*/, end_work, e.event_id, e.event_at FROM r, e;

-- name: run_requeue
-- A retryable failure with attempts left: a new attempt after a backoff.
-- $4 the typed error object (NULL: none).
UPDATE workflow_runs
   SET status       = 'interrupted',
       claim_state  = 'queued',
       attempt      = attempt + 1,
       attempt_started_at = NULL,
       available_at = now() + $1::bigint * interval '1 microsecond',
       error        = $2,
       error_json   = $4,
       leased_by    = NULL,
       lease_until  = NULL,
       updated_at   = now()
 WHERE id = $3;

-- name: run_hold
-- A retryable failure in manual recovery mode: interrupted until an operator acts.
-- $3 the typed error object (NULL: none).
UPDATE workflow_runs
   SET status      = 'interrupted',
       claim_state = 'abandoned',
       error       = $1,
       error_json  = $3,
       leased_by   = NULL,
       lease_until = NULL,
       updated_at  = now()
 WHERE id = $2;

-- name: run_failed
-- $4 the typed error object (NULL: none, as for the sweep's dead letter).
UPDATE workflow_runs
   SET status          = 'failed',
       claim_state     = 'failed',
       error           = $1,
       error_json      = $4,
       dead_lettered   = $2,
       leased_by       = NULL,
       lease_until     = NULL,
       checkpoint_json = NULL,
       completed_at    = now(),
       duration_ms     = round(extract(epoch FROM now() - coalesce(attempt_started_at, now())) * 1000)::bigint,
       updated_at      = now()
 WHERE id = $3;

-- name: clear_lease
-- A graceful release, fenced: it matches only while the lease holds.
UPDATE workflow_runs
   SET status       = CASE WHEN status = 'running' THEN 'queued' ELSE status END,
       claim_state  = 'queued',
       leased_by    = NULL,
       lease_until  = NULL,
       available_at = now(),
       updated_at   = now()
 WHERE id = $1 AND leased_by = $2 AND lease_epoch = $3
   AND claim_state IN ('claimed', 'running')
RETURNING workspace_id, env, attempt, coalesce(runner_pool, '');

-- name: get_run
SELECT /*run_columns*/ FROM workflow_runs WHERE id = $1 AND ($2::text = '' OR workspace_id = $2);

-- The run listing (ListRuns), newest first: (created_at, id) descending,
-- keyset-paged. Every variant takes the same arguments: $1 workspace, $2
-- workflow name, $3 statuses, $4 env, $5 parent run (NULL: any), $6 stale
-- before (NULL: any), $7 created at or after (NULL: any), $8 dead-lettered
-- only, $9 $10 the position to list below (created_at, id; NULL: the top),
-- $11 the limit. The core picks the variant whose index serves the
-- filters it was given: list_runs (a workspace), list_runs_status (a
-- workspace and statuses), list_runs_any (every workspace), list_runs_children
-- (a parent run). The leading columns of each variant's index are plain
-- equalities, and the position is a row comparison on the index's order,
-- so a page starts at its first row however deep it is. Filters a variant
-- does not lead with are written CASE WHEN <not given> THEN true ELSE …
-- END: a custom plan folds them away, and the generic plan a cached
-- statement may switch to does not multiply their guessed selectivities
-- (as it does for `$n = '' OR col = $n`) into an estimate so small that a
-- full sort looks cheaper than reading the index in order. The outer
-- ORDER BY names its columns with the table: a bare id would be the
-- output column id::text, whose order is text's, not the index's.

-- name: _runs_filter
   AND CASE WHEN $2::text = '' THEN true ELSE workflow_name = $2::text END
   AND CASE WHEN $4::text = '' THEN true ELSE env = $4::text END
   AND CASE WHEN $6::timestamptz IS NULL THEN true
            ELSE status = 'running' AND coalesce(last_heartbeat, started_at) < $6::timestamptz END
   AND CASE WHEN $8::boolean THEN dead_lettered ELSE true END
   AND created_at >= coalesce($7::timestamptz, '-infinity')
   AND (created_at, id) < (coalesce($9::timestamptz, 'infinity'),
                           coalesce($10::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))

-- name: list_runs
-- A workspace's runs: idx_workflow_runs_workspace_list, in order.
SELECT /*run_columns*/ FROM workflow_runs
 WHERE workspace_id = $1::text
   AND CASE WHEN cardinality($3::text[]) = 0 THEN true ELSE status = ANY ($3::text[]) END
   AND CASE WHEN $5::uuid IS NULL THEN true ELSE parent_run_id = $5::uuid END
/*_runs_filter*/
 ORDER BY workflow_runs.created_at DESC, workflow_runs.id DESC
 LIMIT $11;

-- name: list_runs_status
-- A workspace's runs in statuses $3 (distinct): one ordered range of
-- idx_workflow_runs_workspace_status_list per status, each cut at the
-- limit, then the newest of them (an index range per status instead of
-- every run of those statuses sorted).
SELECT /*run_columns*/ FROM workflow_runs
 WHERE id IN (
       SELECT r.id
         FROM unnest($3::text[]) AS s(status),
              LATERAL (SELECT id, created_at FROM workflow_runs
                        WHERE workspace_id = $1::text AND status = s.status
                          AND CASE WHEN $5::uuid IS NULL THEN true ELSE parent_run_id = $5::uuid END
/*_runs_filter*/
                        ORDER BY created_at DESC, id DESC
                        LIMIT $11) AS r
        ORDER BY r.created_at DESC, r.id DESC
        LIMIT $11)
 ORDER BY workflow_runs.created_at DESC, workflow_runs.id DESC
 LIMIT $11;

-- name: list_runs_any
-- Every workspace's runs ($1 is ''): the workspaces are found by a loose
-- scan (one index probe each), then each one's newest runs are read as
-- list_runs reads them, and the newest of those returned; no sort of the
-- whole table.
WITH RECURSIVE ws(w) AS (
       (SELECT workspace_id FROM workflow_runs ORDER BY workspace_id LIMIT 1)
       UNION ALL
       SELECT (SELECT workspace_id FROM workflow_runs WHERE workspace_id > ws.w ORDER BY workspace_id LIMIT 1)
         FROM ws WHERE ws.w IS NOT NULL)
SELECT /*run_columns*/ FROM workflow_runs
 WHERE id IN (
       SELECT r.id
         FROM ws,
              LATERAL (SELECT id, created_at FROM workflow_runs
                        WHERE workspace_id = ws.w
                          AND CASE WHEN $1::text = '' THEN true ELSE workspace_id = $1::text END
                          AND CASE WHEN cardinality($3::text[]) = 0 THEN true ELSE status = ANY ($3::text[]) END
                          AND CASE WHEN $5::uuid IS NULL THEN true ELSE parent_run_id = $5::uuid END
/*_runs_filter*/
                        ORDER BY created_at DESC, id DESC
                        LIMIT $11) AS r
        ORDER BY r.created_at DESC, r.id DESC
        LIMIT $11)
 ORDER BY workflow_runs.created_at DESC, workflow_runs.id DESC
 LIMIT $11;

-- name: list_runs_children
-- The child runs of run $5 (idx_workflow_runs_parent), sorted.
SELECT /*run_columns*/ FROM workflow_runs
 WHERE parent_run_id = $5::uuid
   AND CASE WHEN $1::text = '' THEN true ELSE workspace_id = $1::text END
   AND CASE WHEN cardinality($3::text[]) = 0 THEN true ELSE status = ANY ($3::text[]) END
/*_runs_filter*/
 ORDER BY workflow_runs.created_at DESC, workflow_runs.id DESC
 LIMIT $11;

-- name: list_steps
SELECT /*step_columns*/ FROM workflow_steps
 WHERE run_id = $1 AND ($2::int = 0 OR attempt = $2)
 ORDER BY attempt, seq;

-- name: get_step
SELECT /*step_columns*/ FROM workflow_steps
 WHERE run_id = $1 AND attempt = $2 AND scope_path = $3 AND step_id = $4;

-- name: steps_of
-- A run's steps of one attempt in given statuses (the mirror hook's
-- current and ended steps; the workflow_steps_current partial index).
SELECT /*step_columns*/ FROM workflow_steps
 WHERE run_id = $1 AND attempt = $2 AND status = ANY ($3::text[])
 ORDER BY scope_path, step_id
 LIMIT $4;

-- name: list_events
-- LIMIT NULL is no limit.
SELECT id, run_id::text, attempt, event_type, coalesce(node_id, ''), scope_path, payload_json, created_at
  FROM workflow_run_events
 WHERE run_id = $1 AND id > $2
 ORDER BY id
 LIMIT $3;

-- name: recent_recoveries
-- The newest recovery events of workspace $1 (of env $2; '' = every env),
-- at most $3: idx_workflow_run_events_recovery read in id order (the
-- event_type term is the index's predicate), each joined to its run by
-- primary key for the workflow's name.
SELECT e.id, e.run_id::text, e.attempt, e.event_type, coalesce(e.node_id, ''), e.scope_path, e.payload_json,
       e.created_at, e.env, r.workflow_name
  FROM workflow_run_events e
  JOIN workflow_runs r ON r.id = e.run_id
 WHERE e.workspace_id = $1 AND ($2 = '' OR e.env = $2)
   AND e.event_type IN ('runner_lost', 'lease_lost', 'run_interrupted', 'run_dead_lettered')
 ORDER BY e.id DESC
 LIMIT $3;

-- name: list_checkpoints
-- seq is the creation order: the fence serialises a run's writes, so it
-- also orders checkpoints written by concurrent transactions of one run.
SELECT run_id::text, scope_path, step_id, attempt, context_json, outputs_json,
       coalesce(previous_body_ref, ''), created_at, coalesce(context_blob, ''), coalesce(outputs_blob, '')
  FROM workflow_run_checkpoints
 WHERE run_id = $1 AND ($2::int = 0 OR attempt = $2)
 ORDER BY seq;

-- name: upsert_receipt
-- Takes the key unless an unexpired receipt holds it. A concurrent
-- duplicate waits here for the holder's transaction: when it commits, the
-- conflict leaves the receipt as it is (and locks it); when it rolls back,
-- this insert takes the key.
-- request_hash ($5, NULL when none) is the request the key answers.
INSERT INTO idempotency_receipts (workspace_id, key, run_id, expires_at, request_hash)
VALUES ($1, $2, $3, now() + $4::bigint * interval '1 microsecond', $5)
ON CONFLICT (workspace_id, key) DO UPDATE
   SET run_id = excluded.run_id, created_at = excluded.created_at, expires_at = excluded.expires_at,
       request_hash = excluded.request_hash
 WHERE idempotency_receipts.expires_at < now();

-- name: receipt_run
SELECT run_id::text, coalesce(request_hash, '') FROM idempotency_receipts WHERE workspace_id = $1 AND key = $2;

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
-- The sweep's reason replaces the run's error; it has no typed object.
UPDATE workflow_runs
   SET status      = 'interrupted',
       claim_state = 'abandoned',
       error       = $1,
       error_json  = NULL,
       leased_by   = NULL,
       lease_until = NULL,
       updated_at  = now()
 WHERE id = $2;

-- name: run_lost_requeue
UPDATE workflow_runs
   SET claim_state  = 'queued',
       attempt      = attempt + 1,
       attempt_started_at = NULL,
       available_at = now() + $1::bigint * interval '1 microsecond',
       updated_at   = now()
 WHERE id = $2;

-- name: steps_lost
-- The step instances a lost runner left running end with the attempt.
UPDATE workflow_steps
   SET status      = 'failed',
       error       = $1,
       finished_at = now(),
       updated_at  = now(),
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
       duration_ms     = round(extract(epoch FROM now() - coalesce(attempt_started_at, now())) * 1000)::bigint,
       updated_at      = now()
 WHERE id = $1;

-- name: steps_cancelled
UPDATE workflow_steps
   SET status = 'cancelled', finished_at = now(), updated_at = now()
 WHERE run_id = $1 AND attempt = $2 AND status IN ('running', 'waiting');

-- name: run_state
-- The run an operator action acts on, locked for the transaction.
SELECT workspace_id, env, attempt, status, claim_state, coalesce(runner_pool, '') FROM workflow_runs
 WHERE id = $1 AND ($2::text = '' OR workspace_id = $2)
   FOR UPDATE;

-- name: run_cancel_requested
-- cancel_requested_at: the first request (the reason's "since").
UPDATE workflow_runs
   SET cancel_requested = true, cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
 WHERE id = $1;

-- name: run_requeued
UPDATE workflow_runs
   SET status            = 'queued',
       claim_state       = 'queued',
       attempt           = attempt + 1,
       attempt_started_at = NULL,
       max_attempts      = greatest(max_attempts, attempt + 1),
       available_at      = now(),
       recovery_mode     = coalesce(nullif($1, ''), recovery_mode),
       definition_id     = coalesce(nullif($2, '')::uuid, definition_id),
       workflow_revision = coalesce(nullif($3, ''), workflow_revision),
       error             = NULL,
       error_json        = NULL,
       dead_lettered     = false,
       cancel_requested  = false,
       cancel_requested_at = NULL,
       completed_at      = NULL,
       duration_ms       = NULL,
       leased_by         = NULL,
       lease_until       = NULL,
       updated_at        = now()
 WHERE id = $4;

-- name: insert_event_pair
-- Two events of one step in one statement (a step's start and success).
INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id,
                                 scope_path, payload_json)
VALUES ($1, $2, $3, $4, $7, $5, $6, $8), ($1, $2, $3, $4, $9, $5, $6, $10)
RETURNING id, created_at;

-- name: insert_blob
-- A blob that exists already (shared by content) and is older than a
-- minute gets written_at, which also locks it until the checkpoint that
-- references it commits: the orphan collection (gc_orphan_blobs) never
-- takes it meanwhile (00019_retention.sql).
INSERT INTO workflow_blobs AS wb (sha256, size_bytes, data) VALUES ($1, $2, $3)
ON CONFLICT (sha256) DO UPDATE SET written_at = now()
 WHERE coalesce(wb.written_at, wb.created_at) < now() - interval '1 minute';

-- name: get_blob
SELECT data FROM workflow_blobs WHERE sha256 = $1;

-- Durable waits (SPEC §6) -------------------------------------------------

-- name: run_paused
-- Commit boundary 1: paused with the context snapshot; the lease is kept.
UPDATE workflow_runs
   SET status = 'paused', checkpoint_json = $1, updated_at = now()
 WHERE id = $2;

-- name: step_waiting
-- The wait's step row becomes waiting (opened when it was not). A
-- succeeded row is final: the caller reports ErrConflict.
INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, workspace_id, env,
                            kind, status, tries, started_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'waiting', 1, now(), now())
ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
   SET status = 'waiting', finished_at = NULL, duration_ms = NULL, updated_at = excluded.updated_at
 WHERE workflow_steps.status <> 'succeeded'
RETURNING /*step_columns*/;

-- name: get_wait
SELECT /*wait_columns*/ FROM workflow_waits WHERE id = $1;

-- name: get_wait_by_step
SELECT /*wait_columns*/ FROM workflow_waits
 WHERE run_id = $1 AND attempt = $2 AND scope_path = $3 AND step_id = $4;

-- name: list_waits
SELECT /*wait_columns*/ FROM workflow_waits
 WHERE ($1::text = '' OR run_id = nullif($1, '')::uuid)
   AND (cardinality($2::text[]) = 0 OR status = ANY ($2::text[]))
 ORDER BY seq
 LIMIT $3;

-- name: insert_wait
-- Deadlines: an absolute time ($10, $12) or an offset from now in
-- microseconds ($11, $13), NULL when neither is given.
INSERT INTO workflow_waits (id, run_id, workspace_id, attempt, scope_path, step_id, kind,
                            signal, correlation_key, token_hash, key_id,
                            wake_at, expires_at, notify_json, next_notify_at, form_json)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $14, $15,
        coalesce($10::timestamptz, now() + $11::bigint * interval '1 microsecond'),
        coalesce($12::timestamptz, now() + $13::bigint * interval '1 microsecond'),
        $16::json, CASE WHEN $16::json IS NULL THEN NULL ELSE now() + $17::bigint * interval '1 microsecond' END,
        $18::json);

-- name: inbox_match
-- The oldest unconsumed inbox entry for a wait being registered: addressed
-- to its run (and, when the entry has a key, to its key), or addressed by
-- key alone in its workspace.
SELECT id::text, coalesce(payload_json::text, 'null') FROM workflow_wake_inbox
 WHERE consumed_at IS NULL
   AND signal = $3
   AND ((run_id = $1 AND (correlation_key IS NULL OR correlation_key = $4::text))
     OR (run_id IS NULL AND workspace_id = $2 AND $4::text <> '' AND correlation_key = $4::text))
 ORDER BY created_at, seq
 LIMIT 1
   FOR UPDATE SKIP LOCKED;

-- name: inbox_consume
UPDATE workflow_wake_inbox SET consumed_at = now() WHERE id = $1 AND consumed_at IS NULL;

-- name: insert_inbox
INSERT INTO workflow_wake_inbox (id, workspace_id, run_id, signal, correlation_key, payload_json)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING created_at;

-- name: lock_run
-- The run a wake acts on, locked first (ParkRun's fence locks it too, so
-- a wake and a park serialise).
SELECT workspace_id, env, attempt FROM workflow_runs WHERE id = $1 FOR UPDATE;

-- name: wake_wait
-- Completes a pending wait (the exactly-once point of every wake). A wait
-- whose timeout passed is closed even before the poller fired it.
UPDATE workflow_waits
   SET status = $2, payload_json = $3, consumed_at = now()
 WHERE id = $1 AND status = 'pending'
   AND (NOT $4::boolean OR expires_at IS NULL OR expires_at > now());

-- name: requeue_parked
-- A wake re-queues a parked run (available now), unless the woken wait's
-- step no longer waits (the engine gave it up): nothing would resume it.
UPDATE workflow_runs
   SET claim_state = 'queued', available_at = now(), updated_at = now()
 WHERE id = $1 AND claim_state = 'parked'
   AND EXISTS (SELECT 1 FROM workflow_steps
                WHERE run_id = $1 AND attempt = $2 AND scope_path = $3 AND step_id = $4
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
 WHERE id = $1 AND status = 'paused'
RETURNING claim_state, coalesce(runner_pool, '');

-- name: pending_wait_for_signal
-- The oldest pending signal or approval wait a signal wakes: of the run
-- (with the key when one is given), or by key in the workspace.
SELECT id::text FROM workflow_waits
 WHERE status = 'pending' AND kind IN ('signal', 'approval') AND signal = $3
   AND (($1::text <> '' AND run_id = nullif($1, '')::uuid AND ($4::text = '' OR correlation_key = $4::text))
     OR ($1::text = '' AND workspace_id = $2 AND correlation_key = $4::text))
   AND (expires_at IS NULL OR expires_at > now())
 ORDER BY created_at, seq
 LIMIT 1;

-- name: pending_child_wait
SELECT id::text FROM workflow_waits
 WHERE run_id = $1 AND kind = 'child' AND correlation_key = $2 AND status = 'pending'
 ORDER BY created_at, seq
 LIMIT 1;

-- name: due_waits
-- The poller's selection: pending waits whose timer or timeout is due,
-- earliest deadline first. Each branch walks its partial index.
SELECT id::text FROM (
       SELECT id, wake_at AS due, seq FROM workflow_waits
        WHERE status = 'pending' AND wake_at IS NOT NULL AND wake_at <= now()
       UNION ALL
       SELECT id, expires_at, seq FROM workflow_waits
        WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= now()) d
 GROUP BY id
 ORDER BY min(due), min(seq)
 LIMIT $1;

-- name: pending_notifies
SELECT /*wait_columns*/ FROM workflow_waits
 WHERE status = 'pending' AND notify_json IS NOT NULL AND notified_at IS NULL
   AND next_notify_at <= now()
 ORDER BY next_notify_at, seq
 LIMIT $1;

-- name: mark_notified
UPDATE workflow_waits
   SET notified_at    = CASE WHEN $2::boolean THEN now() ELSE notified_at END,
       notify_tries   = notify_tries + CASE WHEN $2::boolean THEN 0 ELSE 1 END,
       next_notify_at = CASE WHEN $2::boolean THEN next_notify_at
                             ELSE now() + $3::bigint * interval '1 microsecond' END
 WHERE id = $1
RETURNING run_id::text;

-- name: cancel_waits
-- A run's end: its pending waits (every attempt) are cancelled.
UPDATE workflow_waits SET status = 'cancelled', consumed_at = now()
 WHERE run_id = $1 AND status = 'pending'
RETURNING id::text;

-- name: cancel_attempt_waits
-- An attempt's end (sweep, retry): its pending waits are cancelled.
UPDATE workflow_waits SET status = 'cancelled', consumed_at = now()
 WHERE run_id = $1 AND attempt = $2 AND status = 'pending'
RETURNING id::text;

-- name: unresumed_wakes
-- Wakes an ending attempt received but never resumed (the step still
-- waits): they go back to the inbox for the next attempt's wait.
SELECT w.workspace_id, coalesce(w.signal, ''), coalesce(w.correlation_key, ''),
       coalesce(w.payload_json::text, 'null'), w.kind
  FROM workflow_waits w
  JOIN workflow_steps s
    ON s.run_id = w.run_id AND s.attempt = w.attempt
   AND s.scope_path = w.scope_path AND s.step_id = w.step_id
 WHERE w.run_id = $1 AND w.attempt = $2 AND w.status = 'woken'
   AND w.kind IN ('signal', 'approval', 'child', 'job') AND s.status = 'waiting'
 ORDER BY w.consumed_at, w.seq;

-- name: run_end_info
SELECT coalesce(parent_run_id::text, ''), status, coalesce(output_json::text, 'null'),
       coalesce(error, ''), error_json, end_work
  FROM workflow_runs WHERE id = $1;

-- name: child_end
-- A child run's end, read when its parent's child wait registers and no
-- inbox entry holds it: the end went to an earlier attempt's wait, or to
-- no one (the parent had ended). Only a child of that parent that ended.
SELECT status, coalesce(output_json::text, 'null'), coalesce(error, ''), error_json
  FROM workflow_runs
 WHERE id = $1 AND parent_run_id = $2 AND status IN ('succeeded', 'failed', 'cancelled');

-- name: children
SELECT id::text FROM workflow_runs
 WHERE parent_run_id = $1 AND status NOT IN ('succeeded', 'failed', 'cancelled')
 ORDER BY created_at, seq;

-- name: session_get
SELECT workspace_id, session_id, key, value_json::text, coalesce(origin_run_id::text, ''), keep_until, updated_at
  FROM workflow_session_vars
 WHERE workspace_id = $1 AND session_id = $2 AND key = $3
   AND (keep_until IS NULL OR keep_until >= now());

-- name: session_set
-- keep_until: $6 (an instant), or the database's now plus $7 microseconds
-- when $7 is not NULL (a keep_until duration is measured on the database's
-- clock, the one the session GC compares with).
INSERT INTO workflow_session_vars (workspace_id, session_id, key, value_json, origin_run_id, keep_until, updated_at)
VALUES ($1, $2, $3, $4, $5,
        CASE WHEN $7::bigint IS NULL THEN $6::timestamptz ELSE now() + $7::bigint * interval '1 microsecond' END,
        now())
ON CONFLICT (workspace_id, session_id, key) DO UPDATE
   SET value_json = excluded.value_json, origin_run_id = excluded.origin_run_id,
       keep_until = excluded.keep_until, updated_at = excluded.updated_at
RETURNING workspace_id, session_id, key, value_json::text, coalesce(origin_run_id::text, ''), keep_until, updated_at;

-- name: session_drop_run
-- A run's end drops the variables it wrote without keep_until.
DELETE FROM workflow_session_vars WHERE origin_run_id = $1 AND keep_until IS NULL
RETURNING workspace_id, session_id, key;

-- name: session_gc
DELETE FROM workflow_session_vars
 WHERE (workspace_id, session_id, key) IN (
       SELECT workspace_id, session_id, key FROM workflow_session_vars
        WHERE keep_until < now()
        ORDER BY keep_until
        LIMIT $1
          FOR UPDATE SKIP LOCKED)
RETURNING workspace_id, session_id, key;

-- name: wake_keys
-- Ids and fingerprints only: the secrets never reach the database.
SELECT id, fingerprint, created_at FROM wake_keys ORDER BY created_at DESC, seq DESC;

-- name: insert_wake_key
-- A known id keeps its first fingerprint, unless it has none (a key whose
-- secret migration 00008 removed).
INSERT INTO wake_keys (id, fingerprint) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint WHERE wake_keys.fingerprint = '';

-- name: get_wake_key
SELECT id, fingerprint, created_at FROM wake_keys WHERE id = $1;

-- name: session_list
-- A session's variables by key (the primary key's order), expired ones
-- left out.
SELECT workspace_id, session_id, key, value_json::text, coalesce(origin_run_id::text, ''), keep_until, updated_at
  FROM workflow_session_vars
 WHERE workspace_id = $1 AND session_id = $2
   AND (keep_until IS NULL OR keep_until >= now())
 ORDER BY key;

-- name: session_delete
-- An operator's delete of one variable; an expired one is absent (the GC
-- removes it).
DELETE FROM workflow_session_vars
 WHERE workspace_id = $1 AND session_id = $2 AND key = $3
   AND (keep_until IS NULL OR keep_until >= now())
RETURNING workspace_id, session_id, key;

-- The operator API (state.Operator) --------------------------------------

-- name: insert_api_key
INSERT INTO api_keys (id, workspace_id, env, role, key_hash, name)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id::text, workspace_id, env, role, name, created_at, revoked_at;

-- name: list_api_keys
-- Oldest first; revoked keys only when $2.
SELECT id::text, workspace_id, env, role, name, created_at, revoked_at FROM api_keys
 WHERE ($1::text = '' OR workspace_id = $1) AND ($2::boolean OR revoked_at IS NULL)
 ORDER BY created_at, id;

-- name: revoke_api_key
-- A key already revoked keeps its revoked_at.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
 WHERE id = $1 AND ($2::text = '' OR workspace_id = $2)
RETURNING id::text, workspace_id, env, role, name, created_at, revoked_at;

-- name: api_key_by_hash
SELECT id::text, workspace_id, env, role, name, created_at, revoked_at FROM api_keys WHERE key_hash = $1;

-- name: api_keys_configured
SELECT EXISTS (SELECT 1 FROM api_keys);

-- name: list_definitions
-- A workspace's workflows by name, each at its current revision (the most
-- recently applied, as get_definition_latest): one ordered walk of
-- idx_workflow_definitions_current.
SELECT DISTINCT ON (name) id::text, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE workspace_id = $1
 ORDER BY name, applied_at DESC, seq DESC;

-- name: list_revisions
-- One workflow's revisions, the current one first.
SELECT id::text, workspace_id, name, revision, spec_json, source, created_at
  FROM workflow_definitions WHERE workspace_id = $1 AND name = $2
 ORDER BY applied_at DESC, seq DESC;

-- name: find_run_ids
-- The runs whose id starts with a prefix: ids from $1 to $2 (the prefix
-- padded with 0s and with fs to a whole uuid), a range of the primary key
-- read in its order (workflow_runs.id: a bare id is the text column).
SELECT id::text FROM workflow_runs
 WHERE id BETWEEN $1::uuid AND $2::uuid
   AND CASE WHEN $3::text = '' THEN true ELSE workspace_id = $3::text END
 ORDER BY workflow_runs.id
 LIMIT $4;

-- The watchdog (state.Watchdog, issue 13) -----------------------------------

-- name: runner_seen
-- A runner's heartbeat: its row, live until now + $7 (its lease TTL).
INSERT INTO workflow_runners (id, workspace_id, pools, only_run, concurrency, runs_held,
                              started_at, last_seen, expires_at)
VALUES ($1, $2, $3::jsonb, $4, $5, $6, now(), now(), now() + $7::bigint * interval '1 microsecond')
ON CONFLICT (id) DO UPDATE
   SET workspace_id = excluded.workspace_id, pools = excluded.pools, only_run = excluded.only_run,
       concurrency = excluded.concurrency, runs_held = excluded.runs_held,
       last_seen = excluded.last_seen, expires_at = excluded.expires_at;

-- name: runners_forget
-- Rows of runners that expired long ago ($1: now moved back by how long).
DELETE FROM workflow_runners WHERE expires_at < now() + $1::bigint * interval '1 microsecond';

-- name: runner_gone
DELETE FROM workflow_runners WHERE id = $1;

-- name: list_runners
-- $1 workspace ('' = any: else the runners that claim from it); $2 live only.
SELECT id, workspace_id, pools, only_run, concurrency, runs_held, started_at, last_seen, expires_at
  FROM workflow_runners
 WHERE ($1::text = '' OR workspace_id IN ('', $1::text))
   AND (NOT $2::boolean OR expires_at > now())
 ORDER BY id;

-- The stuck class of a run (state.StuckRow.Class), decided on the
-- database clock from the run row r, its oldest pending wait w of the
-- current attempt (paused runs) and one open step st of the current
-- attempt (held runs: one between two tries, else the one written last).
-- _stuck_joins joins w and st to r (and n.t, now); _stuck_class is the
-- class, _stuck_since when the run entered it, both over the columns of
-- the select they appear in (r_*, w_*, st_*).

-- name: _stuck_joins
  CROSS JOIN (SELECT now() AS t) n
  LEFT JOIN LATERAL (
       SELECT w.kind, w.signal, w.correlation_key, w.step_id, w.scope_path, w.wake_at,
              w.expires_at, w.created_at
         FROM workflow_waits w
        WHERE r.status = 'paused' AND w.run_id = r.id AND w.attempt = r.attempt AND w.status = 'pending'
        ORDER BY w.created_at, w.seq
        LIMIT 1) w ON true
  LEFT JOIN LATERAL (
       SELECT st.step_id, st.scope_path, st.tries, coalesce(st.updated_at, st.started_at) AS updated_at,
              coalesce(st.error, '') <> '' AS retrying
         FROM workflow_steps st
        WHERE r.claim_state IN ('claimed', 'running')
          AND st.run_id = r.id AND st.attempt = r.attempt AND st.status = 'running'
        ORDER BY coalesce(st.error, '') <> '' DESC, coalesce(st.updated_at, st.started_at) DESC, st.seq DESC
        LIMIT 1) st ON true

-- name: _stuck_columns
       r.id::text AS r_id, r.workspace_id AS r_workspace, r.env AS r_env,
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
       coalesce(st.tries, 0) AS st_tries, st.updated_at AS st_updated_at,
       CASE
         WHEN r.status IN ('succeeded', 'failed', 'cancelled') THEN ''
         WHEN r.claim_state IN ('claimed', 'running') THEN
              CASE WHEN r.lease_until < n.t THEN 'lease_stale'
                   WHEN r.cancel_requested THEN 'cancel_requested'
                   WHEN w.kind IS NOT NULL THEN 'waiting_' || w.kind
                   WHEN coalesce(st.retrying, false) THEN 'retry_step'
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
-- The stuck class of runs $1 (ids) and what their reasons are made of;
-- for a step between two tries, its last node_retry (when it was written
-- and its backoff_ms).
SELECT s.r_id, s.r_workspace, s.r_env, s.r_pool, s.r_status, s.class, /*_stuck_since*/,
       s.r_attempt, s.r_max_attempts, s.r_mode, s.r_error, s.r_leased_by, s.r_heartbeat,
       s.r_available_at, s.w_kind, s.w_signal, s.w_key, s.w_step, s.w_scope, s.w_wake_at,
       s.w_expires_at, s.st_step, s.st_scope, s.st_tries, e.created_at, coalesce(e.backoff_ms, 0)
  FROM (SELECT /*_stuck_columns*/
          FROM workflow_runs r
/*_stuck_joins*/
         WHERE r.id = ANY ($1::uuid[])) s
  LEFT JOIN LATERAL (
       SELECT e.created_at, (e.payload_json ->> 'backoff_ms')::bigint AS backoff_ms
         FROM workflow_run_events e
        WHERE s.class = 'retry_step' AND e.run_id = s.r_id::uuid AND e.attempt = s.r_attempt
          AND e.event_type = 'node_retry' AND e.node_id = s.st_step AND e.scope_path = s.st_scope
        ORDER BY e.id DESC
        LIMIT 1) e ON true;

-- name: queue_head
-- The claimable runs of workspace $1, env $2 and pool $3 ('' = none) in
-- claim order, as claim_run reads them (idx_workflow_runs_claim_pool).
SELECT id::text, priority, available_at, created_at
  FROM workflow_runs
 WHERE claim_state = 'queued' AND available_at <= now()
   AND workspace_id = $1 AND env = $2 AND coalesce(runner_pool, '') = $3
 ORDER BY priority DESC, available_at, seq
 LIMIT $4;

-- name: queue_depths
-- The claimable runs counted by pool (every workspace when $1 = ''), with
-- the age in seconds of the oldest: one pass over the queued runs of
-- idx_workflow_runs_claim_pool (partial: claim_state = 'queued'), so the
-- cost follows the queue, not the table.
SELECT coalesce(runner_pool, ''), count(*),
       greatest(extract(epoch FROM now() - min(available_at))::float8, 0)
  FROM workflow_runs
 WHERE claim_state = 'queued' AND available_at <= now()
   AND ($1::text = '' OR workspace_id = $1)
 GROUP BY 1;

-- name: stuck_counts
-- Every unfinished run counted by stuck class (queued ones per workspace
-- and pool), binned by age in seconds over the bounds $1 (width_bucket:
-- the number of bounds at or below the age). The workspaces are found by
-- a loose scan (one index probe each) and each one's unfinished runs read
-- from idx_workflow_runs_workspace_status_list: the cost follows the
-- unfinished runs, not the table. OFFSET 0 keeps the planner from pulling
-- the lateral subquery up into a join over a scan of every run.
WITH RECURSIVE ws(w) AS (
       (SELECT workspace_id FROM workflow_runs ORDER BY workspace_id LIMIT 1)
       UNION ALL
       SELECT (SELECT workspace_id FROM workflow_runs WHERE workspace_id > ws.w ORDER BY workspace_id LIMIT 1)
         FROM ws WHERE ws.w IS NOT NULL),
s AS (
       SELECT /*_stuck_columns*/
         FROM ws
        CROSS JOIN LATERAL (
              SELECT * FROM workflow_runs
               WHERE workspace_id = ws.w AND status IN ('queued', 'running', 'paused', 'interrupted')
              OFFSET 0) r
/*_stuck_joins*/),
a AS (
       SELECT class,
              CASE WHEN class = 'queued' THEN r_workspace ELSE '' END AS workspace,
              CASE WHEN class = 'queued' THEN r_pool ELSE '' END AS pool,
              greatest(extract(epoch FROM db_now - /*_stuck_since*/)::float8, 0) AS age
         FROM s
        WHERE class <> '')
SELECT class, workspace, pool, width_bucket(age, $1::float8[]), count(*), sum(age)
  FROM a
 GROUP BY 1, 2, 3, 4;

-- The outbox (SPEC §8) -----------------------------------------------------

-- name: mirror_bump
UPDATE workflow_runs SET mirror_version = mirror_version + 1, mirror_hash = $2
 WHERE id = $1 AND ($3 OR mirror_hash IS DISTINCT FROM $2)
RETURNING mirror_version;

-- name: outbox_append
-- The rows in the order given (ids ascend with it).
INSERT INTO mirror_outbox (run_id, kind, payload, version)
SELECT r, k, p::json, v
  FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY AS x(r, k, p, v, ord)
 ORDER BY ord;

-- name: outbox_any
SELECT 1 FROM mirror_outbox WHERE applied_at IS NULL LIMIT 1;

-- name: outbox_unapplied
SELECT id, run_id, kind, payload::text, version, created_at
  FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id LIMIT $1;

-- name: outbox_mark_applied
UPDATE mirror_outbox SET applied_at = clock_timestamp() WHERE id = ANY ($1::bigint[]);

-- name: outbox_prune
DELETE FROM mirror_outbox WHERE id IN (
       SELECT id FROM mirror_outbox
        WHERE applied_at IS NOT NULL AND applied_at < now() + $1::bigint * interval '1 microsecond'
        LIMIT $2);

-- name: outbox_window
-- OutboxStats: of the $1 newest unapplied rows their count, the oldest's
-- age and the highest id; the lowest unapplied id and its age (seconds).
-- Both walk the partial index mirror_outbox_unapplied under a limit.
WITH newest AS (
       SELECT id, extract(epoch FROM clock_timestamp() - created_at)::float8 AS age
         FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id DESC LIMIT $1),
     oldest AS (
       SELECT id, extract(epoch FROM clock_timestamp() - created_at)::float8 AS age
         FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id LIMIT 1)
SELECT count(*), coalesce(max(newest.age), 0)::float8, coalesce(max(newest.id), 0),
       coalesce((SELECT id FROM oldest), 0), coalesce((SELECT age FROM oldest), 0)::float8
  FROM newest;

-- name: outbox_buckets
-- OutboxStats' age buckets of the $1 newest unapplied rows: bucket i
-- holds the ages at least bound i-1 and below bound i ($2, ascending).
WITH newest AS (
       SELECT extract(epoch FROM clock_timestamp() - created_at)::float8 AS age
         FROM mirror_outbox WHERE applied_at IS NULL ORDER BY id DESC LIMIT $1)
SELECT (SELECT count(*) FROM unnest($2::float8[]) AS b WHERE b <= newest.age) AS bucket, count(*)
  FROM newest GROUP BY bucket;

-- name: mirror_runs_ids
SELECT r.id::text, r.mirror_version,
       (SELECT count(*) FROM mirror_outbox o WHERE o.applied_at IS NULL AND o.run_id = r.id::text)
  FROM workflow_runs r WHERE r.id = ANY ($1::uuid[]) ORDER BY r.id;

-- name: mirror_runs_page
SELECT r.id::text, r.mirror_version,
       (SELECT count(*) FROM mirror_outbox o WHERE o.applied_at IS NULL AND o.run_id = r.id::text)
  FROM workflow_runs r
 WHERE (r.status NOT IN ('succeeded', 'failed', 'cancelled')
        OR coalesce(r.completed_at, r.updated_at) >= now() + $1::bigint * interval '1 microsecond')
   AND r.id > $2::uuid
 ORDER BY r.id LIMIT $3;

-- name: drain_lease_take
-- The drain lease is taken when free, expired or already the owner's.
INSERT INTO mirror_drain_lock (name, owner, until)
VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until
 WHERE mirror_drain_lock.owner = excluded.owner OR mirror_drain_lock.until < clock_timestamp();

-- name: drain_lease_renew
UPDATE mirror_drain_lock SET until = clock_timestamp() + $3::bigint * interval '1 microsecond'
 WHERE name = $1 AND owner = $2;

-- name: drain_lease_release
DELETE FROM mirror_drain_lock WHERE name = $1 AND owner = $2;

-- The step writes in one statement each (the StepBatcher) -----------------
--
-- Each sw_* statement is one fenced step write (storecore.StepWrite). f
-- locks the run row when the lease matches (FOR UPDATE: held to commit,
-- and re-checked against the committed row if another transaction
-- changed it meanwhile); the step row's transition (s), the conditional
-- write of the run row (u: updated_at), the events (e) and, for a
-- success, the blobs (b) and the checkpoint (c) each draw their rows from
-- the ones before, so a stale lease, a refused cancel or a step transition
-- that changes nothing writes nothing at all. Its one result row says what
-- happened. $1 … $6 are always the run, runner, epoch, attempt, scope path
-- and step id; the rest are the write's own (stepbatch.go lists them).
-- /*_sw_fence*/, /*_sw_run*/ and /*_sw_result*/ are shared parts
-- (substituted at load); /*run_returning*/, /*run_select*/ and /*step_*/
-- are column lists, with the whole run row in the *_run variant the
-- dialect derives.

-- name: _sw_fence
WITH f AS (
     SELECT r.workspace_id, r.env, r.attempt AS f_attempt, r.cancel_requested
       FROM workflow_runs r
      WHERE r.id = $1::uuid AND r.leased_by = $2::text AND r.lease_epoch = $3::bigint
        AND r.claim_state IN ('claimed', 'running')
        FOR UPDATE OF r),

-- name: _sw_run
u AS (
     UPDATE workflow_runs r SET updated_at = now()
      WHERE r.id = $1::uuid AND EXISTS (SELECT 1 FROM s)
     RETURNING /*run_returning*/),

-- name: _sw_result
SELECT f.workspace_id IS NOT NULL, f.workspace_id, f.env, f.f_attempt, f.cancel_requested /*run_select*/,
       s.s0 IS NOT NULL /*step_select*/, (SELECT status FROM prior),
       (SELECT array_agg(id ORDER BY id) FROM e), (SELECT min(created_at) FROM e)
  FROM (SELECT 1) AS one LEFT JOIN f ON true LEFT JOIN s ON true LEFT JOIN u ON true;

-- name: sw_start
-- $7 kind, $8 try, $9 refuse a cancel request, $10 node_start payload.
/*_sw_fence*/
prior AS (SELECT NULL::text AS status WHERE false),
s AS (
     INSERT INTO workflow_steps AS st (run_id, attempt, scope_path, step_id, workspace_id, env,
                                       kind, status, tries, started_at, updated_at)
     SELECT $1::uuid, $4::int, $5::text, $6::text, f.workspace_id, f.env, $7::text, 'running', $8::int, now(), now()
       FROM f WHERE NOT ($9::bool AND f.cancel_requested)
     ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
        SET status = 'running', tries = excluded.tries, error = NULL,
            finished_at = NULL, duration_ms = NULL, updated_at = excluded.updated_at
      WHERE st.status <> 'succeeded' AND st.tries < excluded.tries
     RETURNING /*step_returning*/),
/*_sw_run*/
e AS (
     INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
     SELECT $1::uuid, f.workspace_id, f.env, $4::int, 'node_start', $6::text, $5::text, $10::json
       FROM f, s
     RETURNING id, created_at)
/*_sw_result*/

-- name: sw_start_succeed
-- $7 kind, $8 try, $9 refuse a cancel request, $10 node_start and $11
-- node_complete payloads, $12 $13 the checkpoint's context and output
-- (or placeholders), $14 $15 their blob sums (NULL: inline), $16 $17 the
-- blobs' sums and data.
/*_sw_fence*/
prior AS (SELECT NULL::text AS status WHERE false),
s AS (
     INSERT INTO workflow_steps AS st (run_id, attempt, scope_path, step_id, workspace_id, env,
                                       kind, status, tries, started_at, finished_at, duration_ms, updated_at)
     SELECT $1::uuid, $4::int, $5::text, $6::text, f.workspace_id, f.env, $7::text, 'succeeded', $8::int,
            now(), now(), 0, now()
       FROM f WHERE NOT ($9::bool AND f.cancel_requested)
     ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
        SET status = 'succeeded', tries = excluded.tries, error = NULL, started_at = excluded.started_at,
            finished_at = excluded.finished_at, duration_ms = 0, updated_at = excluded.updated_at
      WHERE st.status <> 'succeeded' AND st.tries < excluded.tries
     RETURNING /*step_returning*/),
/*_sw_run*/
e AS (
     INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
     SELECT $1::uuid, f.workspace_id, f.env, $4::int, x.typ, $6::text, $5::text, x.payload
       FROM f, s, (VALUES (1, 'node_start', $10::json), (2, 'node_complete', $11::json)) AS x(ord, typ, payload)
      ORDER BY x.ord
     RETURNING id, created_at),
b AS (
     INSERT INTO workflow_blobs AS wb (sha256, size_bytes, data)
     SELECT DISTINCT ON (x.sum) x.sum, length(x.data), x.data FROM s, unnest($16::text[], $17::bytea[]) AS x(sum, data)
     ON CONFLICT (sha256) DO UPDATE SET written_at = now()
      WHERE coalesce(wb.written_at, wb.created_at) < now() - interval '1 minute'),
c AS (
     INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id, env,
                                           context_json, outputs_json, context_blob, outputs_blob)
     SELECT $1::uuid, $5::text, $6::text, $4::int, f.workspace_id, f.env, $12::json, $13::json, $14::text, $15::text
       FROM f, s)
/*_sw_result*/

-- name: sw_start_succeed_many
-- Many writes at once: the StepStartSucceed writes of a batch (steps
-- without external side effects), two or more, in one statement, so the batch's pure
-- steps cost one statement's planning and executor start-up. Each array
-- holds one element per write, in batch order: $1 run ids (canonical
-- text), $2 runners, $3 epochs, $4 attempts, $5 scope paths, $6 step ids,
-- $7 kinds, $8 tries, $9 refuse a cancel request, $10 node_start and $11
-- node_complete payloads, $12 $13 the checkpoints' context and output (or
-- placeholders), $14 $15 their blob sums (NULL: inline); $16 $17 $18 the
-- blobs, flattened: each one's write (its ordinal, from 1), sum and data.
-- Each write is fenced by its own run's lease (f: the runs locked in id
-- order), so a stale lease writes nothing for that write's run and the
-- others are written. One result row per write, in batch order, with the
-- columns of the one-write statements.
WITH w AS (
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[], $5::text[], $6::text[], $7::text[],
                          $8::int[], $9::bool[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[])
            WITH ORDINALITY AS w(run_id, runner, epoch, attempt, scope_path, step_id, kind, try, refuse,
                                 p_start, p_complete, cp_context, cp_output, context_blob, output_blob, ord)),
f AS (
     SELECT w.ord, r.workspace_id, r.env, r.attempt AS f_attempt, r.cancel_requested
       FROM w JOIN workflow_runs r ON r.id = w.run_id::uuid AND r.leased_by = w.runner AND r.lease_epoch = w.epoch
      WHERE r.claim_state IN ('claimed', 'running')
      ORDER BY r.id
        FOR UPDATE OF r),
s AS (
     INSERT INTO workflow_steps AS st (run_id, attempt, scope_path, step_id, workspace_id, env,
                                       kind, status, tries, started_at, finished_at, duration_ms, updated_at)
     SELECT w.run_id::uuid, w.attempt, w.scope_path, w.step_id, f.workspace_id, f.env, w.kind, 'succeeded', w.try,
            now(), now(), 0, now()
       FROM w JOIN f ON f.ord = w.ord WHERE NOT (w.refuse AND f.cancel_requested)
     ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
        SET status = 'succeeded', tries = excluded.tries, error = NULL, started_at = excluded.started_at,
            finished_at = excluded.finished_at, duration_ms = 0, updated_at = excluded.updated_at
      WHERE st.status <> 'succeeded' AND st.tries < excluded.tries
     RETURNING /*step_returning*/),
ws AS (
     SELECT w.ord, s.* FROM s JOIN w ON (w.run_id, w.attempt, w.scope_path, w.step_id) = (s.s0, s.s1, s.s2, s.s3)),
u AS (
     UPDATE workflow_runs r SET updated_at = now()
      WHERE r.id IN (SELECT s0::uuid FROM s)
     RETURNING r.id::text AS u_id, /*run_returning*/),
e AS (
     INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
     SELECT w.run_id::uuid, f.workspace_id, f.env, w.attempt, x.typ, w.step_id, w.scope_path, x.payload::json
       FROM ws JOIN w ON w.ord = ws.ord JOIN f ON f.ord = w.ord,
            LATERAL (VALUES (1, 'node_start', w.p_start), (2, 'node_complete', w.p_complete)) AS x(o, typ, payload)
      ORDER BY w.ord, x.o
     RETURNING id, run_id::text AS run_id, attempt, scope_path, node_id, created_at),
b AS (
     INSERT INTO workflow_blobs AS wb (sha256, size_bytes, data)
     SELECT DISTINCT ON (x.sum) x.sum, length(x.data), x.data
       FROM unnest($16::bigint[], $17::text[], $18::bytea[]) AS x(ord, sum, data)
      WHERE x.ord IN (SELECT ord FROM ws)
     ON CONFLICT (sha256) DO UPDATE SET written_at = now()
      WHERE coalesce(wb.written_at, wb.created_at) < now() - interval '1 minute'),
c AS (
     INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id, env,
                                           context_json, outputs_json, context_blob, outputs_blob)
     SELECT w.run_id::uuid, w.scope_path, w.step_id, w.attempt, f.workspace_id, f.env,
            w.cp_context::json, w.cp_output::json, w.context_blob, w.output_blob
       FROM ws JOIN w ON w.ord = ws.ord JOIN f ON f.ord = w.ord)
SELECT f.ord IS NOT NULL, f.workspace_id, f.env, f.f_attempt, f.cancel_requested /*run_select*/,
       s.s0 IS NOT NULL /*step_select*/, NULL::text, ev.ids, ev.at
  FROM w LEFT JOIN f ON f.ord = w.ord
         LEFT JOIN ws AS s ON s.ord = w.ord
         LEFT JOIN u ON u.u_id = w.run_id AND s.ord IS NOT NULL
         LEFT JOIN (SELECT run_id, attempt, scope_path, node_id, array_agg(id ORDER BY id) AS ids, min(created_at) AS at
                      FROM e GROUP BY run_id, attempt, scope_path, node_id) AS ev
                ON (ev.run_id, ev.attempt, ev.scope_path, ev.node_id) = (w.run_id, w.attempt, w.scope_path, w.step_id)
 ORDER BY w.ord;

-- name: sw_retry
-- $7 try, $8 error, $9 node_retry payload.
/*_sw_fence*/
prior AS (SELECT NULL::text AS status WHERE false),
s AS (
     UPDATE workflow_steps st SET tries = $7::int, error = $8::text, updated_at = now()
       FROM f
      WHERE st.run_id = $1::uuid AND st.attempt = $4::int AND st.scope_path = $5::text
        AND st.step_id = $6::text AND st.status = 'running'
     RETURNING /*step_returning*/),
/*_sw_run*/
e AS (
     INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
     SELECT $1::uuid, f.workspace_id, f.env, $4::int, 'node_retry', $6::text, $5::text, $9::json
       FROM f, s
     RETURNING id, created_at)
/*_sw_result*/

-- name: sw_succeed
-- $7 try, $8 node_complete payload, $9 … $14 as sw_start_succeed's $12 … $17.
/*_sw_fence*/
prior AS (SELECT NULL::text AS status WHERE false),
s AS (
     UPDATE workflow_steps st
        SET status = 'succeeded', tries = $7::int, error = NULL, finished_at = now(), updated_at = now(),
            duration_ms = round(extract(epoch FROM now() - st.started_at) * 1000)::bigint
       FROM f
      WHERE st.run_id = $1::uuid AND st.attempt = $4::int AND st.scope_path = $5::text
        AND st.step_id = $6::text AND st.status IN ('running', 'waiting')
     RETURNING /*step_returning*/),
/*_sw_run*/
e AS (
     INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
     SELECT $1::uuid, f.workspace_id, f.env, $4::int, 'node_complete', $6::text, $5::text, $8::json
       FROM f, s
     RETURNING id, created_at),
b AS (
     INSERT INTO workflow_blobs AS wb (sha256, size_bytes, data)
     SELECT DISTINCT ON (x.sum) x.sum, length(x.data), x.data FROM s, unnest($13::text[], $14::bytea[]) AS x(sum, data)
     ON CONFLICT (sha256) DO UPDATE SET written_at = now()
      WHERE coalesce(wb.written_at, wb.created_at) < now() - interval '1 minute'),
c AS (
     INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, workspace_id, env,
                                           context_json, outputs_json, context_blob, outputs_blob)
     SELECT $1::uuid, $5::text, $6::text, $4::int, f.workspace_id, f.env, $9::json, $10::json, $11::text, $12::text
       FROM f, s)
/*_sw_result*/

-- name: sw_fail
-- An open row fails; with none, a failed row of its own (the step failed
-- before it started), unless the row succeeded. $7 kind, $8 try, $9
-- error, $10 node_error payload, $11 the status written: failed, or
-- cancelled (NodeErrorParams.Cancelled).
/*_sw_fence*/
prior AS (
     SELECT st.status FROM workflow_steps st
      WHERE st.run_id = $1::uuid AND st.attempt = $4::int AND st.scope_path = $5::text AND st.step_id = $6::text),
s1 AS (
     UPDATE workflow_steps st
        SET status = $11::text, tries = $8::int, error = $9::text, finished_at = now(), updated_at = now(),
            duration_ms = round(extract(epoch FROM now() - st.started_at) * 1000)::bigint
       FROM f
      WHERE st.run_id = $1::uuid AND st.attempt = $4::int AND st.scope_path = $5::text
        AND st.step_id = $6::text AND st.status IN ('running', 'waiting')
     RETURNING /*step_returning*/),
s2 AS (
     INSERT INTO workflow_steps AS st (run_id, attempt, scope_path, step_id, workspace_id, env,
                                       kind, status, tries, started_at, finished_at, duration_ms, error, updated_at)
     SELECT $1::uuid, $4::int, $5::text, $6::text, f.workspace_id, f.env, $7::text, $11::text, $8::int,
            now(), now(), 0, $9::text, now()
       FROM f
      WHERE NOT EXISTS (SELECT 1 FROM prior WHERE prior.status IN ('running', 'waiting'))
     ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
        SET status = excluded.status, kind = excluded.kind, tries = excluded.tries, error = excluded.error,
            finished_at = excluded.finished_at, duration_ms = 0, updated_at = excluded.updated_at
      WHERE st.status <> 'succeeded'
     RETURNING /*step_returning*/),
s AS (SELECT * FROM s1 UNION ALL SELECT * FROM s2),
/*_sw_run*/
e AS (
     INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
     SELECT $1::uuid, f.workspace_id, f.env, $4::int, 'node_error', $6::text, $5::text, $10::json
       FROM f, s
     RETURNING id, created_at)
/*_sw_result*/

-- name: sw_skip
-- $7 kind, $8 node_skipped payload (NULL: none).
/*_sw_fence*/
prior AS (
     SELECT st.status FROM workflow_steps st
      WHERE st.run_id = $1::uuid AND st.attempt = $4::int AND st.scope_path = $5::text AND st.step_id = $6::text),
s AS (
     INSERT INTO workflow_steps AS st (run_id, attempt, scope_path, step_id, workspace_id, env,
                                       kind, status, tries, started_at, finished_at, duration_ms, error, updated_at)
     SELECT $1::uuid, $4::int, $5::text, $6::text, f.workspace_id, f.env, $7::text, 'skipped', 0,
            now(), now(), 0, NULL, now()
       FROM f
     ON CONFLICT (run_id, attempt, scope_path, step_id) DO UPDATE
        SET status = 'skipped', finished_at = excluded.finished_at, updated_at = excluded.updated_at
      WHERE st.status NOT IN ('succeeded', 'skipped')
     RETURNING /*step_returning*/),
/*_sw_run*/
e AS (
     INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
     SELECT $1::uuid, f.workspace_id, f.env, $4::int, 'node_skipped', $6::text, $5::text, $8::json
       FROM f, s
     RETURNING id, created_at)
/*_sw_result*/

-- Remote workers' jobs (issue 15; storecore/jobs.go). Every change of a
-- running job is conditional on its fencing token, its status and its
-- lease (the database's clock): the exactly-once points of the protocol.

-- name: _job_columns
id::text, workspace_id, run_id::text, attempt, scope_path, step_id, step_type, status,
coalesce(leased_by, ''), lease_until, lease_epoch, coalesce(lease_token, ''), tries, max_tries,
heartbeat_ms, retry_json, available_at, idempotency_key, input_json, output_json,
coalesce(error, ''), error_json, created_at, updated_at

-- name: insert_job
INSERT INTO worker_jobs (id, workspace_id, run_id, attempt, scope_path, step_id, step_type,
                         max_tries, heartbeat_ms, retry_json, idempotency_key, input_json, env)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::json, $11, $12::json, $13);

-- name: get_job
SELECT /*_job_columns*/ FROM worker_jobs WHERE id = $1 AND ($2::text = '' OR workspace_id = $2)
   AND ($3::text = '' OR env = $3);

-- name: pick_job
-- The oldest claimable job of the types a worker serves; a job another
-- poll is claiming is skipped, not waited for.
SELECT id::text, heartbeat_ms FROM worker_jobs
 WHERE workspace_id = $1 AND status = 'queued' AND step_type = ANY ($2::text[])
   AND available_at <= now() AND ($3::text = '' OR env = $3)
 ORDER BY available_at, created_at
 LIMIT 1
   FOR UPDATE SKIP LOCKED;

-- name: claim_job
UPDATE worker_jobs
   SET status = 'running', leased_by = $2, lease_token = $3, lease_epoch = lease_epoch + 1,
       tries = tries + 1, lease_until = now() + $4::bigint * interval '1 microsecond', updated_at = now()
 WHERE id = $1 AND status = 'queued'
RETURNING /*_job_columns*/;

-- name: record_job_poll
INSERT INTO worker_job_pollers (workspace_id, step_type, worker, last_poll_at)
SELECT $1, t, $3, now() FROM unnest($2::text[]) AS t
ON CONFLICT (workspace_id, step_type, worker) DO UPDATE SET last_poll_at = excluded.last_poll_at;

-- name: job_pollers
SELECT workspace_id, step_type, worker, last_poll_at FROM worker_job_pollers
 WHERE workspace_id = $1 AND step_type = ANY ($2::text[])
   AND last_poll_at >= now() + $3::bigint * interval '1 microsecond'
 ORDER BY last_poll_at DESC
 LIMIT 100;

-- name: heartbeat_job
UPDATE worker_jobs SET lease_until = now() + $3::bigint * interval '1 microsecond', updated_at = now()
 WHERE id = $1 AND lease_token = $2 AND status = 'running' AND lease_until >= now()
RETURNING /*_job_columns*/;

-- name: complete_job
UPDATE worker_jobs SET status = 'succeeded', output_json = $3::json, lease_until = NULL, updated_at = now()
 WHERE id = $1 AND lease_token = $2 AND status = 'running' AND lease_until >= now()
RETURNING /*_job_columns*/;

-- name: fail_job
-- A failed try: queued again after $6 (microseconds) when $5, else failed.
UPDATE worker_jobs
   SET status = CASE WHEN $5::boolean THEN 'queued' ELSE 'failed' END,
       error = $3, error_json = $4::json, lease_until = NULL,
       lease_token = CASE WHEN $5::boolean THEN NULL ELSE lease_token END,
       available_at = CASE WHEN $5::boolean THEN now() + $6::bigint * interval '1 microsecond' ELSE available_at END,
       updated_at = now()
 WHERE id = $1 AND lease_token = $2 AND status = 'running' AND lease_until >= now()
RETURNING /*_job_columns*/;

-- name: expired_jobs
SELECT id::text FROM worker_jobs WHERE status = 'running' AND lease_until < now()
 ORDER BY lease_until LIMIT $1;

-- name: expire_job
-- The job sweep: a lease that passed, queued again after $5 when $4, else
-- failed with the timeout error ($2, $3).
UPDATE worker_jobs
   SET status = CASE WHEN $4::boolean THEN 'queued' ELSE 'failed' END,
       error = $2, error_json = $3::json, lease_until = NULL, lease_token = NULL,
       available_at = CASE WHEN $4::boolean THEN now() + $5::bigint * interval '1 microsecond' ELSE available_at END,
       updated_at = now()
 WHERE id = $1 AND status = 'running' AND lease_until < now()
RETURNING /*_job_columns*/;

-- name: abandon_job
-- The job of a step instance the engine gave up (a try caught a sibling's
-- failure, its lane lost a race): cancelled, its wait left as it is.
UPDATE worker_jobs SET status = 'cancelled', lease_until = NULL, updated_at = now()
 WHERE run_id = $1 AND attempt = $2 AND scope_path = $3 AND step_id = $4 AND status IN ('queued', 'running');

-- name: close_job
-- The job's wait closed without it (run ended, attempt interrupted, the
-- job's timeout): the job is cancelled; a worker holding it gets 409.
UPDATE worker_jobs SET status = 'cancelled', lease_until = NULL, updated_at = now()
 WHERE id = $1 AND status IN ('queued', 'running');

-- name: enable_webhook
-- A new generation: 1 for a workflow's first webhook, the stored one + 1
-- otherwise (a rotation, or enabling again after a disable), so a secret
-- of an earlier generation never verifies again.
INSERT INTO workflow_webhooks AS w (workspace_id, workflow_name, generation, key_id, enabled)
VALUES ($1, $2, 1, $3, true)
ON CONFLICT (workspace_id, workflow_name) DO UPDATE
   SET generation = w.generation + 1, key_id = excluded.key_id, enabled = true, updated_at = now()
RETURNING workspace_id, workflow_name, generation, key_id, enabled, created_at, updated_at;

-- name: get_webhook
SELECT workspace_id, workflow_name, generation, key_id, enabled, created_at, updated_at
  FROM workflow_webhooks WHERE workspace_id = $1 AND workflow_name = $2;

-- name: disable_webhook
-- The generation stays: enabling again moves past it.
UPDATE workflow_webhooks SET enabled = false, updated_at = now()
 WHERE workspace_id = $1 AND workflow_name = $2 AND enabled
RETURNING workspace_id, workflow_name, generation, key_id, enabled, created_at, updated_at;
-- Workflow schedules (state.Schedules, issue 15) ---------------------------

-- name: schedule_put
-- One schedule of the revision becoming current ($1 workspace, $2 workflow,
-- $3 index, $4 env, $5 definition id, $6 revision, $7 cron, $8 timezone,
-- $9 overlap, $10 catchup, $11 input). A row whose cron and timezone are
-- unchanged keeps its ticks (anchor, last tick, next fire time, last run);
-- another starts anew, anchored at now.
INSERT INTO workflow_schedules AS s (workspace_id, workflow_name, schedule_index, env, definition_id, revision,
                                     cron, timezone, overlap, catchup, input_json)
VALUES ($1, $2, $3, $4, $5::uuid, $6, $7, $8, $9, $10, $11::json)
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
DELETE FROM workflow_schedules WHERE workspace_id = $1 AND workflow_name = $2 AND schedule_index >= $3;

-- name: list_schedules
SELECT s.workspace_id, s.env, s.workflow_name, s.schedule_index, s.revision, coalesce(s.definition_id::text, ''),
       s.cron, s.timezone, s.overlap, s.catchup, s.input_json::text,
       EXISTS (SELECT 1 FROM workflow_schedule_pauses p
                WHERE p.workspace_id = s.workspace_id AND p.workflow_name = s.workflow_name),
       s.anchor_at, s.last_tick_at, s.next_fire_at, coalesce(s.last_run_id::text, ''), s.version, s.updated_at
  FROM workflow_schedules s
 WHERE ($1::text = '' OR s.workspace_id = $1) AND ($2::text = '' OR s.workflow_name = $2)
 ORDER BY s.workspace_id, s.workflow_name, s.schedule_index;

-- name: definition_exists
SELECT EXISTS (SELECT 1 FROM workflow_definitions WHERE workspace_id = $1 AND name = $2);

-- name: schedules_pause
INSERT INTO workflow_schedule_pauses (workspace_id, workflow_name) VALUES ($1, $2)
ON CONFLICT (workspace_id, workflow_name) DO NOTHING;

-- name: schedules_unpause
DELETE FROM workflow_schedule_pauses WHERE workspace_id = $1 AND workflow_name = $2;

-- name: schedules_reanchor
-- A resume: ticks that fell due while paused never fire.
UPDATE workflow_schedules
   SET anchor_at = now(), next_fire_at = NULL, version = version + 1, updated_at = now()
 WHERE workspace_id = $1 AND workflow_name = $2;

-- name: due_schedules
-- Served by idx_workflow_schedules_next_fire (NULLs first: rows the
-- scheduler has not computed yet).
SELECT s.workspace_id, s.env, s.workflow_name, s.schedule_index, s.revision, coalesce(s.definition_id::text, ''),
       s.cron, s.timezone, s.overlap, s.catchup, s.input_json::text, false,
       s.anchor_at, s.last_tick_at, s.next_fire_at, coalesce(s.last_run_id::text, ''), s.version, s.updated_at
  FROM workflow_schedules s
 WHERE (s.next_fire_at IS NULL OR s.next_fire_at <= now())
   AND NOT EXISTS (SELECT 1 FROM workflow_schedule_pauses p
                    WHERE p.workspace_id = s.workspace_id AND p.workflow_name = s.workflow_name)
 ORDER BY s.next_fire_at NULLS FIRST
 LIMIT $1;

-- name: schedule_advance
-- The scheduler's compare-and-set ($4 the version it read; $5 the tick,
-- NULL: none; $6 the next fire time). The row lock serialises two
-- schedulers: the second finds the version changed and writes nothing.
UPDATE workflow_schedules s
   SET last_tick_at = coalesce($5::timestamptz, s.last_tick_at), next_fire_at = $6::timestamptz,
       version = s.version + 1, updated_at = now()
 WHERE s.workspace_id = $1 AND s.workflow_name = $2 AND s.schedule_index = $3 AND s.version = $4
   AND NOT EXISTS (SELECT 1 FROM workflow_schedule_pauses p
                    WHERE p.workspace_id = s.workspace_id AND p.workflow_name = s.workflow_name)
RETURNING s.workspace_id, s.env, s.workflow_name, s.schedule_index, s.revision, coalesce(s.definition_id::text, ''),
       s.cron, s.timezone, s.overlap, s.catchup, s.input_json::text, false,
       s.anchor_at, s.last_tick_at, s.next_fire_at, coalesce(s.last_run_id::text, ''), s.version, s.updated_at;

-- name: schedule_last_run
UPDATE workflow_schedules SET last_run_id = $4::uuid
 WHERE workspace_id = $1 AND workflow_name = $2 AND schedule_index = $3;

-- Retention (state.Retention, issue 16) ------------------------------------
-- Every statement touches one batch; the runs and rows it takes are locked
-- with SKIP LOCKED, so a pass never waits on a runner or another pass.

-- name: gc_retention
-- The retention field of every workflow's current revision that has one.
SELECT workspace_id, name, (spec_json -> 'retention')::text
  FROM (SELECT DISTINCT ON (workspace_id, name) workspace_id, name, spec_json
          FROM workflow_definitions ORDER BY workspace_id, name, applied_at DESC, seq DESC) d
 WHERE spec_json -> 'retention' IS NOT NULL;

-- name: gc_runs
-- The next $4 ended runs after the cursor ($1 instant, $2 id) that ended
-- before now + $3 (the shortest retention) and have no parent: a walk of
-- idx_workflow_runs_ended (ended_at: coalesce(completed_at, updated_at)
-- once the claim state is complete, failed or abandoned; migration 00021).
-- The core decides which of them are due.
SELECT r.id::text, r.workspace_id, r.workflow_name, r.status, r.dead_lettered,
       r.ended_at, now()
  FROM workflow_runs r
 WHERE r.ended_at IS NOT NULL
   AND r.ended_at < now() + $3::bigint * interval '1 microsecond'
   AND (r.ended_at, r.id) > ($1::timestamptz, $2::uuid)
   AND (r.parent_run_id IS NULL
        OR NOT EXISTS (SELECT 1 FROM workflow_runs p WHERE p.id = r.parent_run_id))
 ORDER BY r.ended_at, r.id
 LIMIT $4
   FOR UPDATE OF r SKIP LOCKED;

-- name: gc_tree
-- Every descendant of the runs $1 (parent_run_id, any depth): root, id and
-- claim_state.
WITH RECURSIVE tree (root, id) AS (
       SELECT r, r FROM unnest($1::uuid[]) AS r
       UNION ALL
       SELECT t.root, c.id FROM tree t JOIN workflow_runs c ON c.parent_run_id = t.id)
SELECT t.root::text, t.id::text, r.claim_state
  FROM tree t JOIN workflow_runs r ON r.id = t.id
 WHERE t.id <> t.root;

-- name: gc_lock
-- Of the runs $1, those that ended, locked (the descendants of due runs).
SELECT id::text FROM workflow_runs
 WHERE id = ANY ($1::uuid[]) AND claim_state IN ('complete', 'failed', 'abandoned')
   FOR UPDATE SKIP LOCKED;

-- name: gc_blob_refs
-- The blobs the checkpoints of the runs $1 reference.
SELECT DISTINCT x FROM workflow_run_checkpoints c,
       LATERAL (VALUES (c.context_blob), (c.outputs_blob)) AS v(x)
 WHERE c.run_id = ANY ($1::uuid[]) AND x IS NOT NULL;

-- name: gc_delete_steps
DELETE FROM workflow_steps WHERE run_id = ANY ($1::uuid[]);

-- name: gc_delete_events
DELETE FROM workflow_run_events WHERE run_id = ANY ($1::uuid[]);

-- name: gc_delete_checkpoints
DELETE FROM workflow_run_checkpoints WHERE run_id = ANY ($1::uuid[]);

-- name: gc_delete_waits
DELETE FROM workflow_waits WHERE run_id = ANY ($1::uuid[]);

-- name: gc_delete_inbox
DELETE FROM workflow_wake_inbox WHERE run_id = ANY ($1::uuid[]);

-- name: gc_delete_jobs
DELETE FROM worker_jobs WHERE run_id = ANY ($1::uuid[]);

-- name: gc_delete_receipts
DELETE FROM idempotency_receipts WHERE run_id = ANY ($1::uuid[]);

-- name: gc_delete_runs
DELETE FROM workflow_runs WHERE id = ANY ($1::uuid[]);

-- name: gc_blobs_of
-- Of the blobs $1, those no checkpoint references any more and untouched
-- since now + $2 (the grace age). A blob a writer is inserting again is
-- locked by it (insert_blob) and skipped; one it wrote again meanwhile
-- fails the age test when the lock is taken.
DELETE FROM workflow_blobs WHERE sha256 IN (
       SELECT b.sha256 FROM workflow_blobs b
        WHERE b.sha256 = ANY ($1::text[])
          AND coalesce(b.written_at, b.created_at) < now() + $2::bigint * interval '1 microsecond'
          AND NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints c WHERE c.context_blob = b.sha256)
          AND NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints c WHERE c.outputs_blob = b.sha256)
          FOR UPDATE SKIP LOCKED);

-- name: gc_orphan_blobs
-- gc_blobs_of over the whole table: the next $3 orphan blobs after the
-- cursor $1, in sha256 order.
DELETE FROM workflow_blobs WHERE sha256 IN (
       SELECT b.sha256 FROM workflow_blobs b
        WHERE b.sha256 > $1
          AND coalesce(b.written_at, b.created_at) < now() + $2::bigint * interval '1 microsecond'
          AND NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints c WHERE c.context_blob = b.sha256)
          AND NOT EXISTS (SELECT 1 FROM workflow_run_checkpoints c WHERE c.outputs_blob = b.sha256)
        ORDER BY b.sha256
        LIMIT $3
          FOR UPDATE SKIP LOCKED)
RETURNING sha256;

-- name: gc_consumed_waits
-- The next $4 consumed waits after the cursor ($1 consumed_at, $2 id),
-- consumed before now + $3, whose step instance no longer reads them: the
-- run ended, the attempt is not its current one, or the step instance
-- succeeded. Each of the three stays true once true.
DELETE FROM workflow_waits WHERE id IN (
       SELECT w.id FROM workflow_waits w JOIN workflow_runs r ON r.id = w.run_id
        WHERE w.consumed_at IS NOT NULL AND w.status <> 'pending'
          AND w.consumed_at < now() + $3::bigint * interval '1 microsecond'
          AND (w.consumed_at, w.id) > ($1::timestamptz, $2::uuid)
          AND (r.claim_state IN ('complete', 'failed', 'abandoned') OR w.attempt < r.attempt
               OR EXISTS (SELECT 1 FROM workflow_steps s
                           WHERE s.run_id = w.run_id AND s.attempt = w.attempt AND s.scope_path = w.scope_path
                             AND s.step_id = w.step_id AND s.status = 'succeeded'))
        ORDER BY w.consumed_at, w.id
        LIMIT $4
          FOR UPDATE OF w SKIP LOCKED)
RETURNING consumed_at, id::text;

-- name: gc_consumed_inbox
DELETE FROM workflow_wake_inbox WHERE id IN (
       SELECT id FROM workflow_wake_inbox
        WHERE consumed_at < now() + $1::bigint * interval '1 microsecond'
        ORDER BY consumed_at
        LIMIT $2
          FOR UPDATE SKIP LOCKED);

-- name: gc_receipts
-- Expired idempotency receipts; one an enqueue is taking over is locked by
-- it and skipped.
DELETE FROM idempotency_receipts WHERE (workspace_id, key) IN (
       SELECT workspace_id, key FROM idempotency_receipts
        WHERE expires_at < now()
        ORDER BY expires_at
        LIMIT $1
          FOR UPDATE SKIP LOCKED);
