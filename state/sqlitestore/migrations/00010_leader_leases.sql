-- +goose Up
-- Leader election among the processes sharing the file (state.Elector):
-- one row per leadership name (e.g. 'maintenance'); owner holds it until
-- `until` (UTC, strftime('%Y-%m-%dT%H:%M:%fZ'), the file's clock), and
-- renews it every TTL/5. A holder that died loses it at until; one that
-- stops gracefully deletes its row. elected_at is when the current
-- owner's term began.
CREATE TABLE leader_leases (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    until      TEXT NOT NULL,
    elected_at TEXT NOT NULL
);

-- +goose Down
DROP TABLE leader_leases;
