#!/usr/bin/env bash
# redlite-server driven with curl, the way a user tries it first. Needs REDLITE_SERVER and
# REDLITE_MODEL (set by CTest).
set -euo pipefail
log=$(mktemp)
"$REDLITE_SERVER" -m "$REDLITE_MODEL" --host 127.0.0.1 --port 0 -t 1 --api-key sekrit 2> "$log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; rm -f "$log"; }
trap cleanup EXIT
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; echo "server did not start"; exit 1; }
base="http://127.0.0.1:$port"
fail() { echo "FAIL: $*"; exit 1; }
expect_status() {  # expected, then curl arguments
  local want=$1; shift
  local got
  got=$(curl -s -o /dev/null -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || fail "expected $want, got $got for: $*"
}
auth=(-H 'Authorization: Bearer sekrit')

expect_status 200 "$base/health"
expect_status 401 "$base/v1/models"
expect_status 200 "${auth[@]}" "$base/v1/models"
expect_status 404 "${auth[@]}" "$base/v1/nothing"
expect_status 405 "${auth[@]}" "$base/v1/chat/completions"

# Plain curl -d (form content type) with a JSON body still works.
out=$(curl -s "${auth[@]}" "$base/v1/chat/completions" \
  -d '{"model": "tiny-f32", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 5}')
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["object"] == "chat.completion", d; assert d["usage"]["completion_tokens"] <= 5'

# Streaming: SSE lines, the last data line is [DONE].
stream=$(curl -sN "${auth[@]}" -H 'Content-Type: application/json' "$base/v1/chat/completions" \
  -d '{"model": "tiny-f32", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "stream": true}')
[ "$(echo "$stream" | grep '^data: ' | tail -1)" = "data: [DONE]" ] || fail "stream did not end with [DONE]: $stream"
echo "$stream" | grep -q '"chat.completion.chunk"' || fail "no chunk objects in: $stream"

# Anthropic style: x-api-key and anthropic-version headers.
msg=$(curl -s "$base/v1/messages" -H 'x-api-key: sekrit' -H 'anthropic-version: 2023-06-01' \
  -H 'content-type: application/json' \
  -d '{"model": "tiny-f32", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}')
echo "$msg" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["type"] == "message", d'
events=$(curl -sN "$base/v1/messages" -H 'x-api-key: sekrit' -H 'content-type: application/json' \
  -d '{"model": "tiny-f32", "max_tokens": 5, "stream": true, "messages": [{"role": "user", "content": "Hi"}]}')
[ "$(echo "$events" | grep '^event: ' | head -1)" = "event: message_start" ] || fail "bad first event: $events"
[ "$(echo "$events" | grep '^event: ' | tail -1)" = "event: message_stop" ] || fail "bad last event: $events"

# Tokenize round trip and metrics.
toks=$(curl -s "${auth[@]}" "$base/tokenize" -d '{"content": "hello world"}')
back=$(curl -s "${auth[@]}" "$base/detokenize" -d "$toks")
[ "$(echo "$back" | python3 -c 'import json,sys; print(json.load(sys.stdin)["content"])')" = "hello world" ] || fail "detokenize: $back"
curl -s "${auth[@]}" "$base/metrics" | grep -q '^redlite_generated_tokens_total [1-9]' || fail "metrics"

# Orderly stop on SIGTERM.
kill -TERM "$pid"
wait "$pid" || fail "server exited with $?"
trap - EXIT
rm -f "$log"
echo "curl_test: all passed"
