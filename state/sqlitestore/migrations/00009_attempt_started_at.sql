-- +goose Up
-- When the run's current attempt first started (its first OnRunStart):
-- duration_ms of a finished run is measured from it, so a resumed or
-- retriggered run reports the duration of its last attempt, while
-- started_at keeps the run's first start. Cleared when the attempt is
-- bumped; kept when a run is continued in the same attempt (after a wake
-- or a graceful release). Runs that can still complete in their current
-- attempt (completed_at unset) get the time of its first run_started
-- event (or started_at for a first attempt): their duration_ms is
-- computed from it when they end. Finished runs are left as they are:
-- they keep the duration_ms they were given, and nothing is computed from
-- attempt_started_at once a run has ended (a resume or retrigger starts a
-- new attempt, which clears it).
ALTER TABLE workflow_runs ADD COLUMN attempt_started_at TEXT;
UPDATE workflow_runs
   SET attempt_started_at = coalesce(
         (SELECT min(e.created_at) FROM workflow_run_events e
           WHERE e.run_id = workflow_runs.id AND e.attempt = workflow_runs.attempt
             AND e.event_type = 'run_started'),
         CASE WHEN attempt = 1 THEN started_at END)
 WHERE completed_at IS NULL AND started_at IS NOT NULL;

-- When the step row was last written (database clock): what live views
-- show as a current step's updated_at. Existing rows keep it NULL: every
-- read is coalesce(updated_at, finished_at, started_at), so rewriting the
-- largest table (on PostgreSQL under this migration's exclusive lock)
-- would change nothing anyone sees.
ALTER TABLE workflow_steps ADD COLUMN updated_at TEXT;

-- +goose Down
ALTER TABLE workflow_steps DROP COLUMN updated_at;
ALTER TABLE workflow_runs DROP COLUMN attempt_started_at;
