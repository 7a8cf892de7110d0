#!/usr/bin/env bash
# shell-worker.sh — a Starflow remote worker written with nothing but bash,
# curl and jq (and mktemp and rm for its scratch directory): it serves `job`
# steps over the HTTP protocol of docs/api.md ("Remote workers"), which is
# all a worker in any language needs.
#
#   STARFLOW_SERVER=http://127.0.0.1:8480 STARFLOW_API_KEY=sf_… \
#   TYPES=uppercase,sleep ./examples/workers/shell-worker.sh
#
# Environment:
#   STARFLOW_SERVER   the server's base URL (default http://127.0.0.1:8480)
#   STARFLOW_API_KEY  a key with role worker (or admin); empty: none (a
#                     loopback server without keys). It is handed to curl
#                     through a file, never on its command line.
#   TYPES             the job types to serve, comma-separated (default
#                     uppercase); each needs a function handle_<type> below
#                     (characters other than letters, digits and _ become _)
#   WORKER_ID         this worker's id (default <hostname>:<pid>)
#   POLL_WAIT         seconds one poll waits for a job, 0-30 (default 30)
#   SHUTDOWN_GRACE    seconds a running job may still take after SIGTERM or
#                     SIGINT (default 30); then it is abandoned unreported:
#                     its lease expires and the server queues it again
#
# One job at a time: poll (a long-poll), run the type's handler in the
# background with the job's input on stdin, heartbeat every third of the
# job's heartbeat_timeout while it runs (with its latest progress), then
# complete the job with the handler's stdout (JSON) or fail it. A heartbeat
# answered 409 or 404 (the lease was lost, the run ended or was cancelled)
# stops the handler and drops its result. Run as many copies as you like.
#
# A handler is a bash function: its stdin is the job's input (JSON), its
# stdout the output (one JSON value; empty means null); exit 0 completes the
# job. A non-zero exit fails it: with a JSON object {"type", "message",
# "details", "retryable"} on stdout, that typed error (retryable defaults to
# true); otherwise type "error", the last line of stderr as message,
# retryable. `progress FRACTION MESSAGE` reports progress; $JOB_ID,
# $JOB_RUN_ID, $JOB_TRY and $JOB_IDEMPOTENCY_KEY describe the job.
set -uo pipefail

STARFLOW_SERVER=${STARFLOW_SERVER:-http://127.0.0.1:8480}
STARFLOW_SERVER=${STARFLOW_SERVER%/}
TYPES=${TYPES:-uppercase}
WORKER_ID=${WORKER_ID:-${HOSTNAME:-worker}:$$}
POLL_WAIT=${POLL_WAIT:-30}
SHUTDOWN_GRACE=${SHUTDOWN_GRACE:-30}

# ---- handlers ---------------------------------------------------------------

# uppercase: {"text": "hello"} → {"text": "HELLO"} (ASCII letters: jq's
# ascii_upcase); any other input fails with error type input_invalid, not
# retried.
handle_uppercase() {
  local in
  in=$(</dev/stdin)
  if ! jq -e '.text | type == "string"' <<<"$in" >/dev/null 2>&1; then
    jq -cn --argjson in "$in" '{type: "input_invalid", message: "uppercase needs input.text, a string",
      details: {got: ($in | if type == "object" then (.text | type) else type end)}, retryable: false}'
    return 1
  fi
  jq -c '{text: (.text | ascii_upcase)}' <<<"$in"
}

# sleep: {"seconds": 3} → {"slept": 3}, reporting progress as it goes.
handle_sleep() {
  local in seconds i fraction
  in=$(</dev/stdin)
  seconds=$(jq -r '.seconds // 1 | floor' <<<"$in") || return 1
  for ((i = 0; i < seconds * 5; i++)); do
    pause 0.2
    if ((i % 5 == 4)); then
      fraction=$(jq -n "($i + 1) / ($seconds * 5)")
      progress "$fraction" "slept $(((i + 1) / 5)) of ${seconds}s"
    fi
  done
  jq -cn --argjson s "$seconds" '{slept: $s}'
}

# ---- the protocol -------------------------------------------------------------

log() { printf '%(%Y-%m-%dT%H:%M:%S)T shell-worker %s: %s\n' -1 "$WORKER_ID" "$*" >&2; }

# now_ms: milliseconds since the epoch, in $now.
now_ms() { local t=${EPOCHREALTIME/./}; now=$((10#$t / 1000)); }

# pause SECONDS: sleep without a subprocess: a read that times out on a
# pipe nobody writes to ($pause_fd, opened once by main); a signal's trap
# runs when it returns.
pause() { read -rt "$1" -u "$pause_fd" || :; }

# progress FRACTION MESSAGE: for handlers; sent with the next heartbeat
# (a heartbeat that reads the file half written sends none this time).
progress() {
  jq -cn --argjson p "$1" --arg m "${2:-}" '{progress: ([[$p, 0] | max, 1] | min), message: $m[0:1000]}' \
    >"$JOB_DIR/progress" 2>/dev/null
}

# request PATH BODY MAXTIME [ABORTABLE]: POST BODY (JSON) to the server;
# sets $status (the HTTP status; 000 when the server could not be reached)
# and $body. ABORTABLE=1: give up at once when a stop signal arrives (the
# long-poll).
request() {
  local path=$1 data=$2 max=$3 abortable=${4:-0} pid rc
  curl -sS -o "$work/body" -w '%{http_code}' --max-time "$max" -X POST \
    -H 'Content-Type: application/json' -H "@$work/auth" --data-binary @- \
    "$STARFLOW_SERVER$path" <<<"$data" >"$work/status" 2>"$work/curl.err" &
  pid=$!
  while :; do
    wait "$pid" && rc=0 || rc=$?
    if kill -0 "$pid" 2>/dev/null; then # a signal interrupted the wait
      if ((abortable && stopping)); then
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        status=000 body=
        return
      fi
      continue
    fi
    break
  done
  status=$(<"$work/status")
  body=$(<"$work/body")
  if ((rc != 0)); then
    status=000
    body=$(<"$work/curl.err")
  fi
}

# fail_body EXIT: the fail request of a handler that exited with EXIT.
fail_body() {
  local out err= line
  out=$(<"$JOB_DIR/stdout")
  while IFS= read -r line; do [[ -n $line ]] && err=$line; done <"$JOB_DIR/stderr"
  if jq -e 'type == "object" and (.type | type == "string")' <<<"$out" >/dev/null 2>&1; then
    jq -c --arg t "$token" '{fencing_token: $t, error: ({type, message: (.message // .type), details} | del(.[] | nulls)),
      retryable: (.retryable != false)}' <<<"$out"
  else
    jq -cn --arg t "$token" --arg m "${err:-the handler exited with status $1}" \
      '{fencing_token: $t, error: {type: "error", message: $m}, retryable: true}'
  fi
}

# heartbeat: extend the lease; sets lost=1 on 409/404.
heartbeat() {
  local req
  if [[ -s $JOB_DIR/progress ]] && req=$(jq -c --arg t "$token" '. + {fencing_token: $t}' "$JOB_DIR/progress" 2>/dev/null); then :; else
    req=$(jq -cn --arg t "$token" '{fencing_token: $t}')
  fi
  hb_sent=$now
  local max
  printf -v max '%d.%03d' $((interval_ms / 1000)) $((interval_ms % 1000)) # one heartbeat takes at most an interval
  request "/api/jobs/$job_id/heartbeat" "$req" "$max"
  case $status in
  200) ((deadline = hb_sent + hold_ms, next_hb = hb_sent + interval_ms)) ;;
  409 | 404)
    log "job $job_id: heartbeat refused ($status): $(jq -r '.detail // .title // empty' <<<"$body" 2>/dev/null); stopping its handler"
    lost=1
    ;;
  *)
    log "job $job_id: heartbeat failed ($status); retrying"
    ((next_hb = now + retry_ms))
    ;;
  esac
}

# run_job JOB: run one claimed job to its report.
run_job() {
  local job=$1 fields type step timeout_ms fn hpid hrc req path out
  # One command substitution per command: bash 5.2 can fail to run a
  # signal's trap that arrives while it expands several in one command.
  fields=$(jq -r '[.id, .type, .fencing_token, (.heartbeat_timeout_ms // 30000), .run_id, .step_id, .tries,
    .idempotency_key] | map(tostring) | join("\u001f")' <<<"$job")
  IFS=$'\x1f' read -r job_id type token timeout_ms JOB_RUN_ID step JOB_TRY JOB_IDEMPOTENCY_KEY <<<"$fields"
  ((interval_ms = timeout_ms / 3, hold_ms = timeout_ms - timeout_ms / 10, retry_ms = timeout_ms / 10))
  ((retry_ms > interval_ms)) && retry_ms=$interval_ms
  now_ms
  ((deadline = now + hold_ms, next_hb = now + interval_ms, lost = 0))
  log "claimed job $job_id (type $type, run $JOB_RUN_ID, step $step, try $JOB_TRY)"

  export JOB_DIR=$work JOB_ID=$job_id JOB_RUN_ID JOB_TRY JOB_IDEMPOTENCY_KEY
  : >"$JOB_DIR/progress"
  jq -c '.input // {}' <<<"$job" >"$JOB_DIR/input"
  fn=handle_${type//[^A-Za-z0-9_]/_}
  "$fn" <"$JOB_DIR/input" >"$JOB_DIR/stdout" 2>"$JOB_DIR/stderr" &
  hpid=$!
  while kill -0 "$hpid" 2>/dev/null; do
    pause 0.1
    now_ms
    if ((stopping && now >= stop_at + SHUTDOWN_GRACE * 1000)); then
      log "job $job_id: the shutdown grace passed; abandoning it (its lease expires and the server queues it again)"
      kill "$hpid" 2>/dev/null
      wait "$hpid" 2>/dev/null
      return
    fi
    if ((now >= deadline)); then
      log "job $job_id: no heartbeat got through in time; stopping its handler"
      lost=1
    elif ((now >= next_hb)); then
      heartbeat
    fi
    if ((lost)); then
      kill "$hpid" 2>/dev/null
      wait "$hpid" 2>/dev/null
      log "job $job_id: lease lost; its result is dropped"
      return
    fi
  done
  wait "$hpid" && hrc=0 || hrc=$?
  if ((hrc == 0)); then
    out=$(<"$JOB_DIR/stdout")
    if [[ -z ${out//[[:space:]]/} ]]; then out=null; fi
    if req=$(jq -cs --arg t "$token" 'if length == 1 then {fencing_token: $t, output: .[0]} else error("not one JSON value") end' \
      <<<"$out" 2>/dev/null); then
      path=complete
    else
      path=fail
      req=$(jq -cn --arg t "$token" '{fencing_token: $t, error: {type: "error", message: "the handler printed something that is not one JSON value"}, retryable: false}')
    fi
  else
    path=fail req=$(fail_body "$hrc")
  fi
  # Report, retrying while the server cannot be reached (the lease holds
  # for hold_ms after the last heartbeat; a retry past it gets 409).
  local tries=0
  while :; do
    request "/api/jobs/$job_id/$path" "$req" 30
    case $status in
    200)
      log "job $job_id: $path → $(jq -r '.status + (if .retry_at then " (retry at " + .retry_at + ")" else "" end)' <<<"$body")"
      return
      ;;
    409) log "job $job_id: $path refused (409: the lease was lost or the job ended); nothing changed" && return ;;
    000 | 5?? | 429) ;;
    *) log "job $job_id: $path refused ($status): $body" && return ;;
    esac
    now_ms
    if ((++tries >= 10 || now >= deadline)); then
      log "job $job_id: giving up reporting it ($status); its lease expires and the server queues it again"
      return
    fi
    pause 1
  done
}

# ---- main loop ------------------------------------------------------------------

# on_stop: SIGTERM or SIGINT: poll no more; the running job gets the grace.
on_stop() {
  if ((!stopping)); then
    stopping=1
    now_ms
    stop_at=$now
    log "stopping: no more polls"
  fi
}

main() {
  local types fails=0 t
  command -v curl >/dev/null && command -v jq >/dev/null || { echo "shell-worker: needs curl and jq" >&2; exit 2; }
  types=$(jq -cn --arg t "$TYPES" '$t | split(",") | map(select(. != ""))')
  for t in $(jq -r '.[]' <<<"$types"); do
    declare -F "handle_${t//[^A-Za-z0-9_]/_}" >/dev/null || { echo "shell-worker: no handler for type $t (define handle_${t//[^A-Za-z0-9_]/_})" >&2; exit 2; }
  done
  [[ $POLL_WAIT =~ ^[0-9]+$ ]] && ((POLL_WAIT <= 30)) || { echo "shell-worker: POLL_WAIT must be 0 to 30 seconds" >&2; exit 2; }
  [[ $SHUTDOWN_GRACE =~ ^[0-9]+$ ]] || { echo "shell-worker: SHUTDOWN_GRACE must be whole seconds" >&2; exit 2; }

  exec {pause_fd}<> <(:)
  work=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/shell-worker.XXXXXX") || exit 1
  trap 'rm -rf "$work"' EXIT
  (umask 077 && if [[ -n ${STARFLOW_API_KEY:-} ]]; then printf 'Authorization: Bearer %s\n' "$STARFLOW_API_KEY"; fi >"$work/auth")
  stopping=0 stop_at=0
  trap on_stop TERM INT

  local poll
  poll=$(jq -cn --argjson types "$types" --arg w "$WORKER_ID" --argjson s "$POLL_WAIT" '{types: $types, worker: $w, wait_s: $s}')
  log "serving $types on $STARFLOW_SERVER"
  while ((!stopping)); do
    request /api/jobs/poll "$poll" "$((POLL_WAIT + 30))" 1
    ((stopping)) && [[ $status == 000 ]] && break
    case $status in
    200) fails=0 && run_job "$body" ;;
    204) fails=0 ;;
    000 | 5?? | 429 | 408)
      ((fails < 5)) && ((fails++))
      log "poll failed ($status): ${body:0:200}; retrying in $((1 << (fails - 1)))s"
      pause $((1 << (fails - 1)))
      ;;
    *)
      log "the server refused the poll ($status): $body"
      exit 1
      ;;
    esac
  done
  log "stopped"
}

main "$@"
