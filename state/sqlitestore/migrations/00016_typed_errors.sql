-- +goose Up
-- Typed errors (issue 14).
--
-- workflow_runs.error_json: the run's error as a typed object
-- (starflowtype.ErrorInfo: {type, message, step_id, scope_path, status,
-- body, cause, details}), scrubbed of secrets by the engine before it is
-- written; error keeps its message. Written with error by every write of
-- OnRunError and cleared wherever error is; NULL when the run has no
-- error, when the error has no object (the sweep's runner_lost, a run
-- that failed before this migration), and for runs that never failed. A
-- child's end hands it to its parent as the wake payload's error_detail.
-- JSON text, as the other *_json columns. An extra column (SPEC
-- appendix A).
ALTER TABLE workflow_runs ADD COLUMN error_json TEXT;

-- +goose Down
ALTER TABLE workflow_runs DROP COLUMN error_json;
