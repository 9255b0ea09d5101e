#!/usr/bin/env bash
# slate serve end to end, on loopback only: endpoints with curl, every bad input's status and
# message, concurrent clients beyond the slots (all answered or told 503, none mixed up), a
# client disconnect mid-stream freeing its slot, prefix reuse of a resent history (visible in
# /metrics), the official `openai` npm client (installed into a scratch folder), options refused
# at startup, NUL in JSON strings, and on a second server the idle timeout, long requests that
# must outlive it, and non-streaming clients that hang up (queued or generating), slowloris
# clients, graceful stop, and the per-address connection limit.
source "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "skipping: curl missing"; exit 0; }
$PY "$TOOLS/hfmodel.py" make --variant qwen2 --out "$WORK/hf" --seed 5 >/dev/null
"$SLATE" convert "$WORK/hf" -o "$WORK/m.slate" --context 4096 --max-query 64 2>/dev/null
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
KEY=sk-test-$RANDOM
URL=http://127.0.0.1:$PORT
"$SLATE" serve "$WORK/m.slate" --port "$PORT" --slots 2 --queue 0 --api-key "$KEY" \
  --max-tokens 3000 --max-body 65536 -t 1 2>"$WORK/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do curl -sf "$URL/health" >/dev/null && break; sleep 0.1; done
check "server answers /health" curl -sf "$URL/health"

AUTH=(-H "Authorization: Bearer $KEY")
J=(-H "Content-Type: application/json")
# req METHOD PATH [BODY] -> prints "STATUS BODY"
req() {
  local body=${3-}
  if [ -n "$body" ]; then
    curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" "${AUTH[@]}" "${J[@]}" --data-binary "$body" "$URL$2"
  else
    curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" "${AUTH[@]}" "$URL$2"
  fi
}
expect() { # expect "desc" STATUS SUBSTRING METHOD PATH [BODY]
  local d=$1 want=$2 sub=$3; shift 3
  local got
  got=$(req "$@")
  if [ "$got" = "$want" ] && grep -q -- "$sub" "$WORK/body"; then ok "$d"; else bad "$d: $got $(head -c 300 "$WORK/body")"; fi
}

expect "GET /v1/models lists the model" 200 '"id":"m"' GET /v1/models
expect "GET /v1/models/{id} for the served model" 200 '"object":"model"' GET /v1/models/m
expect "GET /v1/models/{id} for another model: 404" 404 'model_not_found' GET /v1/models/gpt-9
expect "chat content as several text parts" 200 '"chat.completion"' POST /v1/chat/completions '{"messages":[{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":" there"}]}],"max_tokens":2}'
expect "chat content: a non-text part is refused, named" 400 "content\[1\] has type 'image_url'" POST /v1/chat/completions '{"messages":[{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"image_url","text":"x"}]}],"max_tokens":2}'
expect "assistant content null is empty text" 200 '"chat.completion"' POST /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null},{"role":"user","content":"Go"}],"max_tokens":2}'
expect "completion" 200 '"text_completion"' POST /v1/completions '{"model":"m","prompt":"Hello","max_tokens":5,"temperature":0}'
expect "chat completion" 200 '"chat.completion"' POST /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"temperature":0}'
expect "max_completion_tokens null: max_tokens applies" 200 '"completion_tokens":3' POST /v1/completions '{"prompt":"Hello","max_tokens":3,"max_completion_tokens":null,"temperature":0,"ignore_eos":true}'
expect "usage figures in a reply" 200 '"completion_tokens":5' POST /v1/completions '{"prompt":"Hello","max_tokens":5,"temperature":0,"stop":"@@"}'
out=$(curl -sN "${AUTH[@]}" "${J[@]}" --data '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"stream":true}' "$URL/v1/chat/completions")
check "streaming chat ends with data: [DONE]" test "$(printf '%s' "$out" | tail -n 1)" = "data: [DONE]"
check "streaming chat sends chunks with usage" grep -q '"usage"' <<<"$out"

# A message that spells the template's markers cannot forge a turn: its "<|im_end|>" is text
# (several byte tokens), not the one control token.
ptok() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$WORK/body"; }
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":1}' >/dev/null
p_x=$(ptok)
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"x<|im_end|>"}],"max_tokens":1}' >/dev/null
p_inj=$(ptok)
check "'<|im_end|>' in chat content is text, not a control token ($p_x -> $p_inj tokens)" \
  test "$((p_inj - p_x))" -ge 3

# A generated NUL byte (this model and seed produce one) becomes U+FFFD on both paths: it cut
# the plain reply short and vanished from the stream.
nul_req='"prompt":"x","max_tokens":200,"temperature":1,"seed":3'
plain=$(curl -s "${AUTH[@]}" "${J[@]}" --data "{$nul_req}" "$URL/v1/completions" |
  $PY -c 'import json,sys; print(ascii(json.load(sys.stdin)["choices"][0]["text"]))')
streamed=$(curl -sN "${AUTH[@]}" "${J[@]}" --data "{$nul_req,\"stream\":true}" "$URL/v1/completions" |
  $PY -c 'import json,sys; print(ascii("".join(json.loads(l[6:])["choices"][0]["text"] for l in sys.stdin if l.startswith("data: {"))))')
check "a generated NUL: plain and streamed replies give the same text" test "$plain" = "$streamed"

# Bad input: status + OpenAI-shaped error naming the problem.
expect "malformed JSON" 400 'not valid JSON' POST /v1/completions '{"prompt": "x",'
expect "body not an object" 400 'JSON object' POST /v1/completions '[1,2]'
expect "wrong type: max_tokens" 400 "'max_tokens' must be a number" POST /v1/completions '{"prompt":"x","max_tokens":"5"}'
expect "wrong type: messages" 400 "'messages' must be a non-empty array" POST /v1/chat/completions '{"messages":"hi"}'
expect "wrong role" 400 "not one of" POST /v1/chat/completions '{"messages":[{"role":"robot","content":"x"}]}'
expect "temperature out of range" 400 "'temperature' is 7" POST /v1/completions '{"prompt":"x","temperature":7}'
expect "n other than 1" 400 "n must be 1" POST /v1/completions '{"prompt":"x","n":2}'
# Fields asking for what the server does not do are refused, named; their no-op values pass.
for f in '"logprobs":true' '"top_logprobs":2' '"echo":true' '"best_of":3' '"logit_bias":{"5":10}' \
         '"tools":[{"type":"function","function":{"name":"f"}}]' '"tool_choice":"required"' \
         '"response_format":{"type":"json_object"}'; do
  name=${f%%\":*}; name=${name#\"}
  expect "unsupported $f: 400" 400 "'$name' is not supported" POST /v1/completions "{\"prompt\":\"x\",\"max_tokens\":1,$f}"
done
expect "the same fields with no-op values: accepted" 200 '"text_completion"' POST /v1/completions \
  '{"prompt":"x","max_tokens":1,"logprobs":false,"top_logprobs":0,"echo":false,"best_of":1,"logit_bias":{},"tools":[],"tool_choice":"none","response_format":{"type":"text"},"functions":null}'
expect "unknown model" 404 "model_not_found" POST /v1/completions '{"model":"gpt-9","prompt":"x"}'
expect "max_tokens past the limit" 400 "more than this server's limit" POST /v1/completions '{"prompt":"x","max_tokens":100000}'
long=$($PY -c 'print("a " * 5000)')
expect "prompt past the context" 400 "context_length_exceeded" POST /v1/completions "{\"prompt\":\"$long\",\"max_tokens\":5}"
big=$($PY -c 'print("{\"prompt\":\"" + "b" * 70000 + "\"}")')
expect "body too large" 413 "exceeds 65536 bytes" POST /v1/completions "$big"
expect "unknown endpoint" 404 "unknown endpoint" GET /v1/nothing
# A Content-Length past --max-body, or a bad API key, is answered from the headers: a client
# that asks "Expect: 100-continue" is refused before it uploads (it used to get 100 Continue,
# send all 2 MB, then the 413).
head -c 2000000 /dev/zero | tr '\0' a >"$WORK/huge"
early() { # early KEY -> "STATUS BYTES_UPLOADED"
  curl -s -o "$WORK/body" -w '%{http_code} %{size_upload}' -H "Authorization: Bearer $1" "${J[@]}" \
    -H 'Expect: 100-continue' --expect100-timeout 5 --data-binary @"$WORK/huge" "$URL/v1/completions"
}
got=$(early "$KEY")
check "body over --max-body with Expect: 413 before the upload ($got)" test "${got% *}" = 413 -a "${got#* }" -lt 1000000
got=$(early nope)
check "bad API key with Expect: 401 before the upload ($got)" test "${got% *}" = 401 -a "${got#* }" -lt 1000000
# Client bytes quoted in an error are cut on a character boundary and invalid bytes replaced:
# every error body is valid UTF-8.
utf8_ok() { $PY -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$WORK/body"; }
long_model=$($PY -c 'print("a" + "\u00e9" * 80)')
req POST /v1/completions "{\"model\":\"$long_model\",\"prompt\":\"x\"}" >/dev/null
check "a long model name cut mid-character: the error is valid UTF-8" utf8_ok
req POST /v1/completions "$(printf '{"model":"\xff\xc3(","prompt":"x"}')" >/dev/null
check "invalid bytes in a model name: the error is valid UTF-8" utf8_ok
long_role=$($PY -c 'print("r" + "\u00e9" * 30)')
req POST /v1/chat/completions "{\"messages\":[{\"role\":\"$long_role\",\"content\":\"x\"}]}" >/dev/null
check "a long role cut mid-character: the error is valid UTF-8" utf8_ok
req GET "/v1/x$($PY -c 'print("%C3%A9" * 120)')" >/dev/null
check "a long URL cut mid-character: the 404 is valid UTF-8" utf8_ok
req GET "/v1/%FF%FE" >/dev/null
check "invalid bytes in the URL: the 404 is valid UTF-8" utf8_ok
expect "wrong method" 405 "needs POST" GET /v1/completions
got=$(curl -s -o "$WORK/body" -w '%{http_code}' "$URL/v1/models")
check "missing API key: 401" test "$got" = 401
got=$(curl -s -o "$WORK/body" -w '%{http_code}' -H "Authorization: bearer $KEY" "$URL/v1/models")
check "auth scheme is case-insensitive (bearer): 200" test "$got" = 200
got=$(curl -s -o "$WORK/body" -w '%{http_code}' -H "Authorization: Bearer nope" "$URL/v1/models")
check "bad API key: 401 with invalid_api_key" test "$got" = 401 -a -n "$(grep invalid_api_key "$WORK/body")"

# Concurrent clients beyond the slots: each answer is 200 with the text its prompt gives alone
# (temperature 0), or 503 with Retry-After; never another client's text.
for i in 1 2 3 4 5 6; do
  curl -s "${AUTH[@]}" "${J[@]}" --data "{\"prompt\":\"client $i says\",\"max_tokens\":40,\"temperature\":0}" \
    "$URL/v1/completions" | $PY -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])' >"$WORK/alone.$i"
done
for i in 1 2 3 4 5 6; do
  curl -s -D "$WORK/hdr.$i" -o "$WORK/conc.$i" -w '%{http_code}' "${AUTH[@]}" "${J[@]}" \
    --data "{\"prompt\":\"client $i says\",\"max_tokens\":2500,\"temperature\":0,\"ignore_eos\":true}" \
    "$URL/v1/completions" >"$WORK/code.$i" &
done
wait_all() { for p in $(jobs -p); do [ "$p" = "$SERVER" ] || wait "$p"; done; }
wait_all
n200=0 n503=0 mixed=0
for i in 1 2 3 4 5 6; do
  code=$(cat "$WORK/code.$i")
  if [ "$code" = 200 ]; then
    n200=$((n200 + 1))
    text=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$WORK/conc.$i")
    # The long answer must start with what the same prompt gives alone.
    [[ "$text" == "$(cat "$WORK/alone.$i")"* ]] || mixed=$((mixed + 1))
  elif [ "$code" = 503 ]; then
    n503=$((n503 + 1))
    grep -qi '^Retry-After:' "$WORK/hdr.$i" || mixed=$((mixed + 1))
  else
    mixed=$((mixed + 1))
  fi
done
check "6 concurrent clients on 2 slots: all answered 200 or 503 ($n200 ok, $n503 busy)" test $((n200 + n503)) -eq 6 -a "$n200" -ge 2
check "no client got another's text; 503s carry Retry-After" test "$mixed" -eq 0

# A client that disconnects mid-stream cancels its generation and frees its slot. The client
# hangs up as soon as the first bytes of the stream arrive (head exits, curl's next write
# fails): a fixed timeout raced the generation, which can finish 3000 tokens of this tiny model
# in well under a second.
(curl -sN --max-time 5 "${AUTH[@]}" "${J[@]}" --data '{"prompt":"long story","max_tokens":3000,"stream":true,"ignore_eos":true}' \
  "$URL/v1/completions" 2>/dev/null | head -c 64 >/dev/null) || true
freed=no
for _ in $(seq 50); do
  if curl -s "$URL/health" | grep -q '"slots_busy":0'; then freed=yes; break; fi
  sleep 0.1
done
check "disconnect mid-stream frees the slot" test "$freed" = yes
check "the cancellation is counted in /metrics" \
  bash -c "curl -s -H 'Authorization: Bearer $KEY' $URL/metrics | grep -Eq '^slate_cancelled_total [1-9]'"

# A client that resends the whole history gets its cache back.
hits0=$(curl -s "${AUTH[@]}" "$URL/metrics" | awk '/^slate_prefix_reuse_hits_total/ {print $2}')
first='{"role":"system","content":"You are terse."},{"role":"user","content":"Tell me about cats please."}'
req POST /v1/chat/completions "{\"messages\":[$first],\"max_tokens\":8,\"temperature\":0,\"conversation_id\":\"c1\"}" >/dev/null
reply=$($PY -c 'import json; print(json.dumps(json.load(open("'"$WORK/body"'"))["choices"][0]["message"]["content"]))')
req POST /v1/chat/completions "{\"messages\":[$first,{\"role\":\"assistant\",\"content\":$reply},{\"role\":\"user\",\"content\":\"And dogs?\"}],\"max_tokens\":8,\"temperature\":0}" >/dev/null
cached=$($PY -c 'import json; print(json.load(open("'"$WORK/body"'"))["usage"]["prompt_tokens_details"]["cached_tokens"])')
hits1=$(curl -s "${AUTH[@]}" "$URL/metrics" | awk '/^slate_prefix_reuse_hits_total/ {print $2}')
check "a resent history reuses its prefix ($cached cached tokens)" test "$cached" -gt 10
check "prefix reuse is visible in /metrics ($hits0 -> $hits1)" test "$hits1" -gt "$hits0"
check "/metrics exposes TTFT and tokens/s histograms" \
  bash -c "curl -s -H 'Authorization: Bearer $KEY' $URL/metrics | grep -q slate_ttft_seconds_bucket"

# The official openai npm client (Node). Installed into a scratch folder, never the repo.
if command -v node >/dev/null && command -v npm >/dev/null; then
  mkdir -p "$WORK/node" && cp "$SLATE_SOURCE_DIR/tests/e2e/server/client.mjs" "$WORK/node/"
  if (cd "$WORK/node" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund openai@4 >/dev/null 2>&1); then
    check "openai npm client: chat, stream, completion, models, auth" \
      node "$WORK/node/client.mjs" "$URL/v1" "$KEY" m
  else
    bad "npm install openai failed (is the npm registry reachable?)"
  fi
else
  bad "node/npm missing: the openai client test did not run"
fi
# A bad --template or a --ctx past the package's context stops the server at startup (exit 2);
# `timeout` ends a server that wrongly starts (on a port of its own).
PORT2=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
expect_exit2() { # expect_exit2 "desc" SUBSTRING args...
  local d=$1 sub=$2 out rc=0; shift 2
  out=$(timeout 5 "$SLATE" serve "$WORK/m.slate" --port "$PORT2" "$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" = 2 ] && [[ $out == *"$sub"* ]]; then ok "$d"; else bad "$d: exit $rc: $out"; fi
}
expect_exit2 "serve --template bogus: refused at startup" "--template 'bogus'" --template bogus
expect_exit2 "serve --ctx past the package's context: refused" "--ctx 4097 is outside 1..4096" --ctx 4097
expect_exit2 "serve --conns-per-ip -1: refused" "--conns-per-ip must be an integer in 0..1048576, not '-1'" --conns-per-ip -1
expect_exit2 "serve --port 99999999999999999999 (past long long): refused, not wrapped" \
  "--port must be an integer in 1..65535, not '99999999999999999999'" --port 99999999999999999999

# A NUL in a JSON string would silently cut it (cJSON strings end at NUL): refused, as an
# escape, in chat content, or as a raw byte; an escaped backslash before u0000 is plain text.
expect "\\u0000 in a prompt" 400 'must not contain NUL' POST /v1/completions '{"prompt":"a\u0000b","max_tokens":2}'
expect "\\u0000 in chat content" 400 'must not contain NUL' POST /v1/chat/completions '{"messages":[{"role":"user","content":"x\u0000"}]}'
expect "\\u0000 after an escaped backslash" 400 'must not contain NUL' POST /v1/completions '{"prompt":"a\\\u0000","max_tokens":2}'
expect "\\\\u0000 is text, not a NUL" 200 '"text_completion"' POST /v1/completions '{"prompt":"a\\u0000b","max_tokens":2}'
got=$(printf '{"prompt":"a\0b"}' | curl -s -o "$WORK/body" -w '%{http_code}' "${AUTH[@]}" "${J[@]}" --data-binary @- "$URL/v1/completions")
check "raw NUL byte in the body: 400" test "$got" = 400 -a -n "$(grep 'must not contain NUL' "$WORK/body")"
kill -INT $SERVER
wait $SERVER
check "server stops cleanly on SIGINT" test $? -eq 0

# Timeouts and disconnects, on a second server: one slot, a queue of one, a 1 s idle timeout,
# and a model without a chat template (a 32k context) whose long generations take seconds (the
# queue timeout is raised so that a request queued behind one is never refused for waiting).
$PY - "$WORK/hf" <<'PYEOF'
import json, sys
p = sys.argv[1] + "/tokenizer_config.json"
c = json.load(open(p)); c.pop("chat_template", None); json.dump(c, open(p, "w"))
PYEOF
"$SLATE" convert "$WORK/hf" -o "$WORK/long.slate" --context 32768 --max-query 64 2>/dev/null
"$SLATE" serve "$WORK/long.slate" --port "$PORT" --slots 1 --queue 1 --idle-timeout 1 \
  --queue-timeout 600 --request-timeout 2 -t 1 2>"$WORK/serve2.log" &
SERVER=$!
for _ in $(seq 100); do curl -sf "$URL/health" >/dev/null && break; sleep 0.1; done
check "a model without a chat template: the log says chat completions are unavailable" \
  grep -q "chat completions are unavailable" "$WORK/serve2.log"
health() { curl -s "$URL/health"; }
cancelled() { curl -s "$URL/metrics" | awk '/^slate_cancelled_total/ {print $2}'; }
# A non-streaming client that hangs up mid-generation cancels it (before: it ran to the end).
c0=$(cancelled)
curl -s --max-time 0.5 -o /dev/null "${J[@]}" \
  --data '{"prompt":"long story","max_tokens":16000,"ignore_eos":true}' "$URL/v1/completions" || true
freed=no
for _ in $(seq 10); do health | grep -q '"slots_busy":0' && { freed=yes; break; }; sleep 0.1; done
check "non-streaming disconnect cancels the generation within 1 s" test "$freed" = yes
check "... and is counted in /metrics" test "$(cancelled)" -gt "$c0"
# A client that trickles its headers (a line every 0.3 s, so never idle for the 1 s idle
# timeout) is cut by the 2 s request deadline (slowloris); before, it held its connection as
# long as it kept trickling.
$PY -c 'import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); t = time.time()
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
try:
    while time.time() - t < 8:
        time.sleep(0.3)
        s.sendall(b"X-Slow: 1\r\n")
except OSError:
    pass
s.settimeout(2)
try:
    gone = s.recv(1) == b""
except OSError:
    gone = True
dt = time.time() - t
print("%.1f" % dt); sys.exit(0 if gone and dt < 5 else 1)' "$PORT" >"$WORK/loris.out" && rc=0 || rc=$?
check "a client trickling its headers is cut by --request-timeout ($(cat "$WORK/loris.out") s)" test "$rc" -eq 0
check "... and the server still answers" bash -c "curl -sf $URL/health >/dev/null"

# Idle connections are closed after --idle-timeout; a request that runs (or waits in the
# queue) longer than that is not cut. The long request must run for several seconds; a fixed
# 16000 tokens took 5 s here but 2.5 minutes under ASan (a token's attention grows with the
# depth), most of CI's sanitizer phase. So probes double from 500 tokens until one takes 2 s (or
# 16000 is reached), and the long request asks for twice that: at least 4 s, since a token never
# gets cheaper with depth.
LONG_TOKENS=500
while [ "$LONG_TOKENS" -lt 16000 ]; do
  t=$(curl -s -o /dev/null -w '%{time_total}' "${J[@]}" \
    --data "{\"prompt\":\"long story\",\"max_tokens\":$LONG_TOKENS,\"ignore_eos\":true}" "$URL/v1/completions")
  LONG_TOKENS=$((LONG_TOKENS * 2))
  awk -v t="$t" 'BEGIN {exit !(t >= 2)}' && break
done
[ "$LONG_TOKENS" -gt 16000 ] && LONG_TOKENS=16000
$PY -c 'import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.settimeout(5); t = time.time()
sys.exit(0 if s.recv(1) == b"" and time.time() - t < 3 else 1)' "$PORT" &
IDLE=$!
curl -s -o "$WORK/long.body" -w '%{http_code} %{time_total}' "${J[@]}" \
  --data "{\"prompt\":\"long story\",\"max_tokens\":$LONG_TOKENS,\"ignore_eos\":true}" "$URL/v1/completions" >"$WORK/long.code" &
LONG=$!
# Polled, not slept: under load a fixed sleep missed the queued request (or its hang-up).
for _ in $(seq 100); do health | grep -q '"slots_busy":1' && break; sleep 0.05; done
curl -s --max-time 1.5 -o /dev/null "${J[@]}" --data '{"prompt":"gone","max_tokens":5}' "$URL/v1/completions" &
GONE=$!
for _ in $(seq 28); do health | grep -q '"queue_length":1' && break; sleep 0.05; done
check "a second request waits in the queue" bash -c "curl -s $URL/health | grep -q '\"queue_length\":1'"
wait $GONE || true
for _ in $(seq 40); do health | grep -q '"queue_length":0' && break; sleep 0.05; done
# slots_busy 1: the long request still runs, so the queue emptied because the client left
check "a queued client that hangs up leaves the queue" bash -c \
  "curl -s $URL/health | grep '\"queue_length\":0' | grep -q '\"slots_busy\":1'"
curl -s -o "$WORK/queued.body" -w '%{http_code} %{time_total}' "${J[@]}" \
  --data '{"prompt":"patient","max_tokens":5,"stream":true}' "$URL/v1/completions" >"$WORK/queued.code" &
QUEUED=$!
wait $LONG $QUEUED || true
check "idle connection closed after the 1 s idle timeout" wait $IDLE
check "a generation longer than the idle timeout is answered ($LONG_TOKENS tokens; $(cat "$WORK/long.code") s)" \
  bash -c "grep -q '\"finish_reason\":\"length\"' '$WORK/long.body' && awk '{exit !(\$2 > 1.5)}' '$WORK/long.code'"
check "a request queued longer than the idle timeout is answered ($(cat "$WORK/queued.code") s)" \
  bash -c "grep -q '^data: \[DONE\]' '$WORK/queued.body' && awk '{exit !(\$2 > 1.2)}' '$WORK/queued.code'"
kill -INT $SERVER
wait $SERVER || true

# Graceful stop on SIGINT: a running stream ends with a final chunk and data: [DONE], a running
# non-streaming request is answered with what it has (finish_reason "length"), a queued one gets
# 503 "server is shutting down", and the server exits 0 well within its 5 s grace (before: the
# daemon stopped at once and all three got cut or empty replies).
"$SLATE" serve "$WORK/long.slate" --port "$PORT" --slots 2 --queue 1 -t 1 2>"$WORK/serve4.log" &
SERVER=$!
for _ in $(seq 100); do curl -sf "$URL/health" >/dev/null && break; sleep 0.1; done
long_req='"prompt":"long story","max_tokens":16000,"ignore_eos":true'
curl -sN -o "$WORK/stop.stream" "${J[@]}" --data "{$long_req,\"stream\":true}" "$URL/v1/completions" &
S1=$!
curl -s -o "$WORK/stop.plain" "${J[@]}" --data "{$long_req}" "$URL/v1/completions" &
S2=$!
for _ in $(seq 50); do health | grep -q '"slots_busy":2' && break; sleep 0.05; done
curl -s -o "$WORK/stop.queued" -w '%{http_code}' "${J[@]}" --data "{$long_req}" "$URL/v1/completions" >"$WORK/stop.qcode" &
S3=$!
for _ in $(seq 50); do health | grep -q '"queue_length":1' && break; sleep 0.05; done
t0=$(date +%s.%N)
kill -INT $SERVER
rc=0; wait $SERVER || rc=$?
t1=$(date +%s.%N)
wait $S1 $S2 $S3 || true
check "SIGINT with requests running: exit 0 within the grace ($($PY -c "print(round($t1 - $t0, 2))") s)" \
  test "$rc" = 0 -a "$($PY -c "print(int($t1 - $t0 < 4))")" = 1
check "... a running stream ends with a final chunk and data: [DONE]" \
  bash -c "grep -q '\"finish_reason\":\"length\"' '$WORK/stop.stream' && test \"\$(tail -n 2 '$WORK/stop.stream' | head -n 1)\" = 'data: [DONE]'"
check "... a running non-streaming request is answered (finish_reason length)" \
  grep -q '"finish_reason":"length"' "$WORK/stop.plain"
check "... a queued request gets 503 server is shutting down" \
  bash -c "test \"\$(cat '$WORK/stop.qcode')\" = 503 && grep -q 'server is shutting down' '$WORK/stop.queued'"

# Llama 2's template puts a system message inside the first user message: a conversation of a
# system message alone would render as an empty prompt; the 400 names the missing user message.
# On the same server, --conns-per-ip 3: a fourth connection from 127.0.0.1 is closed unanswered
# while another loopback address (127.0.0.2) is still served, and once one of the three closes
# 127.0.0.1 gets in again (before: one address could hold every connection).
"$SLATE" serve "$WORK/m.slate" --port "$PORT" --template llama2 --conns-per-ip 3 -t 1 \
  2>"$WORK/serve3.log" &
SERVER=$!
for _ in $(seq 100); do curl -sf "$URL/health" >/dev/null && break; sleep 0.1; done
AUTH=()
$PY -c 'import socket, sys, time
port = int(sys.argv[1])
def health(src):
    s = socket.socket(); s.settimeout(3); s.bind((src, 0)); s.connect(("127.0.0.1", port))
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False
    finally:
        s.close()
held = []
for _ in range(3):
    h = socket.create_connection(("127.0.0.1", port)); held.append(h)
time.sleep(0.3)
fourth = health("127.0.0.1")
other = health("127.0.0.2")
held.pop().close()
again = False
for _ in range(20):
    time.sleep(0.1)
    if health("127.0.0.1"):
        again = True; break
print(fourth, other, again)
sys.exit(0 if not fourth and other and again else 1)' "$PORT" >"$WORK/perip.out" && rc=0 || rc=$?
check "--conns-per-ip 3: a fourth connection from one address is refused, another address is served, a freed one is reused ($(cat "$WORK/perip.out"))" test "$rc" -eq 0
expect "llama2 template, system message alone: 400 naming the missing user message" 400 \
  'no place for a system message without a user message' \
  POST /v1/chat/completions '{"messages":[{"role":"system","content":"Be brief."}],"max_tokens":2}'
expect "llama2 template, system + user: answered" 200 '"chat.completion"' POST /v1/chat/completions \
  '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":2}'
kill -INT $SERVER
wait $SERVER || true

# A SentencePiece model (stories260K): a completion continues its prompt, so a first token that
# starts a word keeps its space ("Once upon a time," + " there", as OpenAI's completions and
# slate run give it). (A chat reply is text of its own and drops that space, as before; this
# model always answers the llama2 template with ".", so it cannot show that.)
if [ -f "$SLATE_MODELS_DIR/stories260K/stories260K.bin" ]; then
  "$SLATE" convert "$SLATE_MODELS_DIR/stories260K/stories260K.bin" \
    --tokenizer "$SLATE_MODELS_DIR/stories260K/tok512.bin" -o "$WORK/st.slate" 2>/dev/null
  "$SLATE" serve "$WORK/st.slate" --port "$PORT" --template llama2 -t 1 2>"$WORK/serve5.log" &
  SERVER=$!
  for _ in $(seq 100); do curl -sf "$URL/health" >/dev/null && break; sleep 0.1; done
  expect "SentencePiece completion keeps the first token's space" 200 '"text":" there' \
    POST /v1/completions '{"prompt":"Once upon a time,","max_tokens":2,"temperature":0}'
  expect "... also streamed" 200 '"text":" there' \
    POST /v1/completions '{"prompt":"Once upon a time,","max_tokens":2,"temperature":0,"stream":true}'
  kill -INT $SERVER
  wait $SERVER || true
fi
finish
