-- +goose Up
-- Traces (issue 16).
--
-- workflow_runs.trace_id: the OpenTelemetry trace the run's spans belong
-- to (32 lowercase hex digits), chosen when the run is enqueued: the
-- caller's trace (its context, or the API request's traceparent header)
-- or a new one. trace_parent: the W3C traceparent value
-- (00-<trace id>-<span id>-<flags>) of the run's enqueue span, the parent
-- of every execution's span, so an attempt resumed after a wait or
-- recovered after a crash stays in the same trace. Both NULL when the
-- enqueuing process had tracing off, and for runs enqueued before this
-- migration. Extra columns (SPEC appendix A); adding nullable columns
-- without a default is instant.
ALTER TABLE workflow_runs ADD COLUMN trace_id text;
ALTER TABLE workflow_runs ADD COLUMN trace_parent text;

-- +goose Down
ALTER TABLE workflow_runs DROP COLUMN trace_parent;
ALTER TABLE workflow_runs DROP COLUMN trace_id;
