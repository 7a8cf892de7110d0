-- +goose Up
-- Large checkpoint values, stored once by content (SPEC §4, Appendix A).
CREATE TABLE workflow_blobs (
    sha256     TEXT PRIMARY KEY,
    size_bytes INTEGER NOT NULL,
    data       BLOB NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

-- +goose Down
DROP TABLE workflow_blobs;
