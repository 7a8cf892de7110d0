#!/usr/bin/env bash
# The pgbench floor of BenchmarkPostgresSteps (docs/benchmarks.md): the same
# per-step transactions, hand-written, at 1, 4 and 16 clients, each client
# writing its own leased run. Usage: bench/pgbench/run.sh [DURATION_S]
# Needs pgbench and psql, and PostgreSQL at $PGURL (default the local test
# database).
set -euo pipefail
cd "$(dirname "$0")/../.."
PGURL="${PGURL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
SCHEMA=sf_pgbench_floor
export PGOPTIONS="-c client_min_messages=warning"
DUR="${1:-10}"
psql "$PGURL" -qc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE"
go run ./cmd/starflow migrate --store "$PGURL&schema=$SCHEMA" >/dev/null
psql "$PGURL" -q <<SQL
SET search_path = $SCHEMA;
INSERT INTO workflow_definitions (id, name, revision, spec_json) VALUES ('00000000-0000-0000-0000-00000000aaaa', 'floor', 'r', '{}');
INSERT INTO workflow_runs (id, definition_id, workflow_name, status, claim_state, leased_by, lease_until, lease_epoch)
SELECT ('00000000-0000-0000-0000-' || lpad(c::text, 12, '0'))::uuid, '00000000-0000-0000-0000-00000000aaaa', 'floor',
       'running', 'running', 'pgbench', now() + interval '1 hour', 1
  FROM generate_series(0, 63) c;
SQL
for clients in 1 4 16; do
  tps=$(PGOPTIONS="$PGOPTIONS -c search_path=$SCHEMA" pgbench -n -M prepared -f bench/pgbench/step.sql -c "$clients" -j "$clients" -T "$DUR" "$PGURL" \
        | awk '/^tps/ {print $3}')
  echo "clients=$clients steps/s=$tps"
done
psql "$PGURL" -qc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE"
