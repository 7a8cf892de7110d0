-- +goose Up
-- The transactional outbox of the warm tier (SPEC §8, Appendix A). The
-- mirror's hook appends rows in the same transaction as the cold write
-- they mirror; the drainer applies them to the warm store in id order.
CREATE TABLE mirror_outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL CHECK (kind IN ('run', 'step', 'event', 'session_var')),
    payload    TEXT NOT NULL,
    version    INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    applied_at TEXT
);
-- The drainer's cursor and the lag gauges: unapplied rows by id (and so by
-- age); the sweep's "does this run have rows in flight".
CREATE INDEX mirror_outbox_unapplied ON mirror_outbox (id) WHERE applied_at IS NULL;
CREATE INDEX mirror_outbox_unapplied_run ON mirror_outbox (run_id, id) WHERE applied_at IS NULL;
-- Pruning applied rows after the retention.
CREATE INDEX mirror_outbox_applied ON mirror_outbox (applied_at) WHERE applied_at IS NOT NULL;

-- The run's cold version (monotonic per run, bumped by every mirrored
-- write in its transaction) and the hash of its last mirrored projection
-- (a write that changes nothing the warm tier shows is not mirrored).
ALTER TABLE workflow_runs ADD COLUMN mirror_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_runs ADD COLUMN mirror_hash TEXT;

-- The run's current steps (running or waiting), read by the hook on every
-- mirrored write.
CREATE INDEX workflow_steps_current ON workflow_steps (run_id, attempt) WHERE status IN ('running', 'waiting');

-- +goose Down
DROP INDEX workflow_steps_current;
ALTER TABLE workflow_runs DROP COLUMN mirror_hash;
ALTER TABLE workflow_runs DROP COLUMN mirror_version;
DROP TABLE mirror_outbox;
