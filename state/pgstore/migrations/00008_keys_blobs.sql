-- +goose Up
-- Issue 10 (hardening), items 1 and 3.
--
-- 1. wake_keys keeps a wake-token key's id and fingerprint, never its
-- secret: whoever can read the database must not be able to sign tokens.
-- Every process is given the secrets (STARFLOW_WAKE_KEYS or
-- STARFLOW_WAKE_KEY_FILE). A secret a database older than this migration
-- holds is dropped with the old table (Store.Migrate warns, naming the key
-- ids): the tokens it signed verify only if STARFLOW_WAKE_KEYS holds it
-- (docs/operations.md, "Upgrading to migration 00008"). A migrated key has
-- fingerprint '' until a process registers it again. The table is copied
-- rather than altered: DROP COLUMN would leave the secrets in the rows.
CREATE TABLE wake_keys_v8 (
    id          text PRIMARY KEY,
    fingerprint text NOT NULL DEFAULT '', -- waketoken.Fingerprint: 64 hex
    created_at  timestamptz NOT NULL DEFAULT now(),
    seq         bigserial NOT NULL
);
INSERT INTO wake_keys_v8 (id, created_at)
    SELECT id, created_at FROM wake_keys ORDER BY created_at, seq;
DROP TABLE wake_keys;
ALTER TABLE wake_keys_v8 RENAME TO wake_keys;
ALTER INDEX wake_keys_v8_pkey RENAME TO wake_keys_pkey;

-- 3. A checkpoint's value stored in workflow_blobs is marked by these
-- columns (the blob's sha256), never by the shape of the JSON column,
-- which then holds only a placeholder: a step output shaped like a
-- reference is never dereferenced. NULL: the JSON column holds the value.
ALTER TABLE workflow_run_checkpoints
    ADD COLUMN context_blob text,
    ADD COLUMN outputs_blob text;
-- Rows written before this migration: a JSON column that is exactly the
-- placeholder Starflow wrote ({"__celestialBlob":"<sha256>","size_bytes":N},
-- byte for byte) of a blob that exists with that size is taken to be one.
UPDATE workflow_run_checkpoints c
   SET outputs_blob = b.sha256
  FROM workflow_blobs b
 WHERE c.outputs_json::text LIKE '{"\_\_celestialBlob":"%'
   AND b.sha256 = substr(c.outputs_json::text, 21, 64)
   AND c.outputs_json::text = '{"__celestialBlob":"' || b.sha256 || '","size_bytes":' || b.size_bytes || '}';
UPDATE workflow_run_checkpoints c
   SET context_blob = b.sha256
  FROM workflow_blobs b
 WHERE c.context_json::text LIKE '{"\_\_celestialBlob":"%'
   AND b.sha256 = substr(c.context_json::text, 21, 64)
   AND c.context_json::text = '{"__celestialBlob":"' || b.sha256 || '","size_bytes":' || b.size_bytes || '}';

-- +goose Down
-- Going back loses the blob marks (the older code recognises references by
-- their shape again) and the key registrations.
ALTER TABLE workflow_run_checkpoints
    DROP COLUMN outputs_blob,
    DROP COLUMN context_blob;
DROP TABLE wake_keys;
CREATE TABLE wake_keys (
    id         text PRIMARY KEY,
    secret     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    seq        bigserial NOT NULL
);
