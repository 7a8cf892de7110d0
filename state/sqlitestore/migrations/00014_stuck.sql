-- +goose Up
-- "Why is it stuck?" (issue 13).
--
-- workflow_runners: one row per live runner, upserted by the runner at
-- start and on every heartbeat tick (RunnerSeen) and removed when it stops
-- cleanly (RunnerGone). A run is served when a live row (expires_at in the
-- future: last_seen plus the runner's lease TTL) claims from its
-- workspace ('' = every workspace) and serves its pool (pools, a JSON
-- array; a run with no pool is served by every runner). only_run is the
-- one run a `starflow run` runner executes ('' = any). Rows expired for
-- an hour are removed by the next RunnerSeen. Times are RFC 3339 UTC text
-- with milliseconds, as in every table.
CREATE TABLE workflow_runners (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL DEFAULT '',
    pools        TEXT NOT NULL DEFAULT '[]',
    only_run     TEXT NOT NULL DEFAULT '',
    concurrency  INTEGER NOT NULL DEFAULT 0,
    runs_held    INTEGER NOT NULL DEFAULT 0,
    started_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    last_seen    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    expires_at   TEXT NOT NULL
);

-- When an operator asked to cancel a run in flight (cancel_requested):
-- the "since" of its cancel_requested reason. NULL for requests made
-- before this migration (updated_at stands in for them).
ALTER TABLE workflow_runs ADD COLUMN cancel_requested_at TEXT;

-- +goose Down
ALTER TABLE workflow_runs DROP COLUMN cancel_requested_at;
DROP TABLE workflow_runners;
