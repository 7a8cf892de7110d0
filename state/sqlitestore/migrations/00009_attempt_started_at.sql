-- +goose Up
-- When the run's current attempt first started (its first OnRunStart):
-- duration_ms of a finished run is measured from it, so a resumed or
-- retriggered run reports the duration of its last attempt, while
-- started_at keeps the run's first start. Cleared when the attempt is
-- bumped; kept when a run is continued in the same attempt (after a wake
-- or a graceful release). Existing runs get the time of their current
-- attempt's run_started event (or started_at for a first attempt).
ALTER TABLE workflow_runs ADD COLUMN attempt_started_at TEXT;
UPDATE workflow_runs
   SET attempt_started_at = coalesce(
         (SELECT min(e.created_at) FROM workflow_run_events e
           WHERE e.run_id = workflow_runs.id AND e.attempt = workflow_runs.attempt
             AND e.event_type = 'run_started'),
         CASE WHEN attempt = 1 THEN started_at END);

-- When the step row was last written (database clock): what live views
-- show as a current step's updated_at. Existing rows get their finish or
-- start time.
ALTER TABLE workflow_steps ADD COLUMN updated_at TEXT;
UPDATE workflow_steps SET updated_at = coalesce(finished_at, started_at);

-- +goose Down
ALTER TABLE workflow_steps DROP COLUMN updated_at;
ALTER TABLE workflow_runs DROP COLUMN attempt_started_at;
