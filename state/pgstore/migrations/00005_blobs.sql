-- +goose Up
-- Large checkpoint values, stored once by content (SPEC §4, Appendix A).
CREATE TABLE workflow_blobs (
    sha256     text PRIMARY KEY,
    size_bytes bigint NOT NULL,
    data       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE workflow_blobs;
