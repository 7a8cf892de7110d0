-- +goose Up
-- The transactional outbox of the warm tier (SPEC §8, Appendix A). The
-- mirror's hook appends rows in the same transaction as the cold write
-- they mirror; drainers apply them to the warm store in id order per run.
-- run_id is text, not a uuid reference: session-variable GC rows belong to
-- no run ('') and rows outlive pruned runs until their own retention.
CREATE TABLE mirror_outbox (
    id         bigserial PRIMARY KEY,
    run_id     text NOT NULL DEFAULT '',
    kind       text NOT NULL CHECK (kind IN ('run', 'step', 'event', 'session_var')),
    payload    json NOT NULL,
    version    bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    applied_at timestamptz
);
-- The drainers' cursor and the lag gauges: unapplied rows by id (and so by
-- age); per run for the claim by run and the sweep's "rows in flight".
CREATE INDEX mirror_outbox_unapplied ON mirror_outbox (id) WHERE applied_at IS NULL;
CREATE INDEX mirror_outbox_unapplied_run ON mirror_outbox (run_id, id) WHERE applied_at IS NULL;
-- Pruning applied rows after the retention.
CREATE INDEX mirror_outbox_applied ON mirror_outbox (applied_at) WHERE applied_at IS NOT NULL;

-- The run's cold version (monotonic per run, bumped by every mirrored
-- write in its transaction, which also serialises a run's outbox rows in
-- id order) and the hash of its last mirrored projection.
ALTER TABLE workflow_runs ADD COLUMN mirror_version bigint NOT NULL DEFAULT 0;
ALTER TABLE workflow_runs ADD COLUMN mirror_hash text;

-- The run's current steps (running or waiting), read by the hook on every
-- mirrored write.
CREATE INDEX workflow_steps_current ON workflow_steps (run_id, attempt) WHERE status IN ('running', 'waiting');

-- +goose Down
DROP INDEX workflow_steps_current;
ALTER TABLE workflow_runs DROP COLUMN mirror_hash;
ALTER TABLE workflow_runs DROP COLUMN mirror_version;
DROP TABLE mirror_outbox;
