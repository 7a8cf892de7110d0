#!/usr/bin/env bash
# The pgbench floor of Starflow's per-step writes (docs/benchmarks.md):
# step.sql (the two transactions the engine wrote per step before issue
# 11) and step1tx.sql (the one-transaction floor of today's write path) at 1, 16 and 64
# clients, each client writing its own leased run (seed.sql). The
# side-by-side harness (bench/cmd/sidebyside) runs the same files.
# Usage: bench/pgbench/run.sh [DURATION_S] [CLIENTS...]
# Needs pgbench and psql, and PostgreSQL at $PGURL (default the local test
# database).
set -euo pipefail
cd "$(dirname "$0")/../.."
PGURL="${PGURL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
SCHEMA=sf_pgbench_floor
export PGOPTIONS="-c client_min_messages=warning"
DUR="${1:-10}"
shift || true
CLIENTS=("${@:-1 16 64}")
CLIENTS=(${CLIENTS[*]})
psql "$PGURL" -qc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE"
trap 'psql "$PGURL" -qc "DROP SCHEMA IF EXISTS $SCHEMA CASCADE"' EXIT
go run ./cmd/starflow migrate --store "$PGURL&schema=$SCHEMA" >/dev/null
PGOPTIONS="$PGOPTIONS -c search_path=$SCHEMA" psql "$PGURL" -q -v ON_ERROR_STOP=1 -f bench/pgbench/seed.sql
for script in step step1tx; do
  for clients in "${CLIENTS[@]}"; do
    tps=$(PGOPTIONS="$PGOPTIONS -c search_path=$SCHEMA" pgbench -n -M prepared -f "bench/pgbench/$script.sql" \
          -c "$clients" -j "$clients" -T "$DUR" "$PGURL" | awk '/^tps/ {print $3}')
    echo "script=$script clients=$clients steps/s=$tps"
  done
done
