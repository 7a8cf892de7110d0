#!/bin/sh
# Drive Starflow over its HTTP API with nothing but curl (and jq to read
# JSON): apply a definition, enqueue a run idempotently, follow its live
# Server-Sent Events stream until it ends, and read its ledger.
#
#   ./starflow dev &                                   # serves 127.0.0.1:8480
#   export STARFLOW_API_KEY=$(./starflow keys create --name curl --role admin --workspace default)
#   sh examples/api-curl.sh                            # the quickstart
#   sh examples/api-curl.sh FILE.yaml '{"some": "input"}'
#
# STARFLOW_SERVER (default http://127.0.0.1:8480) names the server; with no
# key configured on a loopback server STARFLOW_API_KEY may be left unset.
# The run should end by itself: one that waits for a signal keeps the
# stream open until something signals it.
set -eu

server="${STARFLOW_SERVER:-http://127.0.0.1:8480}"
file="${1:-$(dirname "$0")/quickstart.yaml}"
input="${2:-}"
if [ -z "$input" ]; then
  case "$file" in
    *quickstart.yaml) input='{"customer": "curl", "quantity": 40}' ;;
    *) input='{}' ;;
  esac
fi
# The workflow's name is the definition's `name:` line.
name=$(sed -n 's/^name:[[:space:]]*\([A-Za-z0-9_.-]*\).*/\1/p' "$file" | head -n 1)
auth="X-Starflow-Client: api-curl.sh" # a harmless header when there is no key
if [ -n "${STARFLOW_API_KEY:-}" ]; then
  auth="Authorization: Bearer $STARFLOW_API_KEY"
fi

# curl with the key, failing on an HTTP error and printing its problem.
api() {
  out=$(curl -sS -w '\n%{http_code}' -H "$auth" "$@") || exit 1
  code=$(printf '%s' "$out" | tail -n 1)
  body=$(printf '%s' "$out" | sed '$d')
  case "$code" in
    2??) printf '%s\n' "$body" ;;
    *) printf 'HTTP %s: %s\n' "$code" "$body" >&2; exit 1 ;;
  esac
}

echo "== apply $file as workflow $name"
api -X PUT --data-binary "@$file" -H 'Content-Type: application/yaml' \
  "$server/api/workflows/$name" | jq -r '"revision \(.definition.revision[0:12]) (changed: \(.changed))"'

key="curl-demo-$(date +%s)"
echo "== enqueue (Idempotency-Key: $key; a second call returns the same run)"
# (api's answer is kept before jq reads it: a failed request stops here.)
first=$(api -X POST -H 'Content-Type: application/json' -H "Idempotency-Key: $key" \
  --data "{\"input\": $input}" "$server/run/$name/enqueue")
run=$(printf '%s\n' "$first" | jq -r .id)
second=$(api -X POST -H 'Content-Type: application/json' -H "Idempotency-Key: $key" \
  --data "{\"input\": $input}" "$server/run/$name/enqueue")
again=$(printf '%s\n' "$second" | jq -r .id)
echo "run $run (repeat: $again)"
[ "$run" = "$again" ] || { echo "the idempotent repeat made another run" >&2; exit 1; }

echo "== live events until the run ends"
# The stream ends by itself once the run settles; -N prints as it comes.
curl -sS -N --max-time 120 -H "$auth" -H 'Accept: text/event-stream' "$server/api/live/runs/$run" |
  while IFS= read -r line; do
    case "$line" in
      "event: run") kind=run ;;
      "event: event") kind=event ;;
      data:*)
        data=${line#data: }
        if [ "${kind:-}" = run ]; then
          printf '%s\n' "$data" | jq -r '"  run \(.status)\(if .phase then " (phase \(.phase))" else "" end)"'
        else
          printf '%s\n' "$data" | jq -r '"  #\(.id) \(.event_type) \(.node_id // "")"'
        fi ;;
    esac
  done

echo "== ledger"
ledger=$(api "$server/api/runs/$run/ledger")
printf '%s\n' "$ledger" | jq -r '"status \(.run.status), output \(.run.output | tostring)"'
printf '%s\n' "$ledger" | jq -r '.steps[] | "  \(.step_id)\t\(.status)\t\(.duration_ms) ms"'
status=$(printf '%s\n' "$ledger" | jq -r .run.status)
[ "$status" = succeeded ] || { echo "run $run ended $status" >&2; exit 1; }
