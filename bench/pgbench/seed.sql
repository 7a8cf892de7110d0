-- Seed for the pgbench floor scripts: one definition and 256 runs leased
-- by "pgbench" at epoch 1, one per pgbench client (client N writes run
-- 00000000-0000-0000-0000-<N as 12 digits>). Run with search_path set to
-- a schema migrated by `starflow migrate` (see run.sh).
INSERT INTO workflow_definitions (id, name, revision, spec_json)
VALUES ('00000000-0000-0000-0000-00000000aaaa', 'floor', 'r', '{}');
INSERT INTO workflow_runs (id, definition_id, workflow_name, status, claim_state, leased_by, lease_until, lease_epoch)
SELECT ('00000000-0000-0000-0000-' || lpad(c::text, 12, '0'))::uuid, '00000000-0000-0000-0000-00000000aaaa', 'floor',
       'running', 'running', 'pgbench', now() + interval '1 hour', 1
  FROM generate_series(0, 255) c;
