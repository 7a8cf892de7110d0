-- +goose Up
-- Issue 10 (hardening), items 1 and 3.
--
-- 1. wake_keys keeps a wake-token key's id and fingerprint, never its
-- secret: whoever can read the database must not be able to sign tokens.
-- The secrets come from STARFLOW_WAKE_KEYS or the key file beside the
-- database (PATH.wakekeys, mode 0600). Store.Migrate copies the secrets a
-- database older than this migration holds into that key file before this
-- runs (so the tokens they signed keep verifying), and rewrites the table
-- with secure_delete on, so the secrets do not linger in free pages. A
-- migrated key has fingerprint '' until a process registers it again.
CREATE TABLE wake_keys_v8 (
    id          TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL DEFAULT '', -- waketoken.Fingerprint: 64 hex
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
INSERT INTO wake_keys_v8 (id, created_at)
    SELECT id, created_at FROM wake_keys ORDER BY created_at, rowid;
DROP TABLE wake_keys;
ALTER TABLE wake_keys_v8 RENAME TO wake_keys;

-- 3. A checkpoint's value stored in workflow_blobs is marked by these
-- columns (the blob's sha256), never by the shape of the JSON column,
-- which then holds only a placeholder: a step output shaped like a
-- reference is never dereferenced. NULL: the JSON column holds the value.
ALTER TABLE workflow_run_checkpoints ADD COLUMN context_blob TEXT;
ALTER TABLE workflow_run_checkpoints ADD COLUMN outputs_blob TEXT;
-- Rows written before this migration: a JSON column that is exactly the
-- placeholder Starflow wrote ({"__celestialBlob":"<sha256>","size_bytes":N},
-- byte for byte) of a blob that exists with that size is taken to be one.
UPDATE workflow_run_checkpoints
   SET outputs_blob = substr(outputs_json, 21, 64)
 WHERE outputs_json LIKE '{"\_\_celestialBlob":"%' ESCAPE '\'
   AND EXISTS (SELECT 1 FROM workflow_blobs b
                WHERE b.sha256 = substr(outputs_json, 21, 64)
                  AND outputs_json = '{"__celestialBlob":"' || b.sha256 || '","size_bytes":' || b.size_bytes || '}');
UPDATE workflow_run_checkpoints
   SET context_blob = substr(context_json, 21, 64)
 WHERE context_json LIKE '{"\_\_celestialBlob":"%' ESCAPE '\'
   AND EXISTS (SELECT 1 FROM workflow_blobs b
                WHERE b.sha256 = substr(context_json, 21, 64)
                  AND context_json = '{"__celestialBlob":"' || b.sha256 || '","size_bytes":' || b.size_bytes || '}');

-- +goose Down
-- Going back loses the blob marks (the older code recognises references by
-- their shape again) and the key registrations: an older Starflow then
-- generates a new stored key, and tokens signed with the key file's keys
-- no longer verify.
ALTER TABLE workflow_run_checkpoints DROP COLUMN outputs_blob;
ALTER TABLE workflow_run_checkpoints DROP COLUMN context_blob;
DROP TABLE wake_keys;
CREATE TABLE wake_keys (
    id         TEXT PRIMARY KEY,
    secret     BLOB NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
