-- +goose Up
-- The drain lease of mirror_outbox (issue 11: one outbox drainer for both
-- dialects, written once in internal/storecore): one drain pass at a time
-- across every process sharing the schema, holding no transaction while
-- it applies rows to the warm tier. owner is the holder's id, until its
-- expiry (database clock), renewed while a pass runs; a holder that died
-- loses it at until.
CREATE TABLE mirror_drain_lock (
    name  text PRIMARY KEY,
    owner text NOT NULL,
    until timestamptz NOT NULL
);

-- +goose Down
DROP TABLE mirror_drain_lock;
