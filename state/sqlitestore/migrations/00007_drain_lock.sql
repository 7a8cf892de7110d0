-- +goose Up
-- The cross-process drain lease of mirror_outbox: several processes may
-- open one SQLite file (`starflow server` and `starflow worker`), and a
-- run's step and session-variable rows carry no version, so only the
-- holder of this lease drains. One row per lease name; owner is the
-- holder's id, until its expiry (UTC, strftime('%Y-%m-%dT%H:%M:%fZ')),
-- renewed while a pass runs. A holder that died loses it at until.
CREATE TABLE mirror_drain_lock (
    name  TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    until TEXT NOT NULL
);

-- +goose Down
DROP TABLE mirror_drain_lock;
