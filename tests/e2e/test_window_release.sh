#!/usr/bin/env bash
# Sliding-window caches hand back the rows behind the window (docs/design.md "Sliding windows").
# A Gemma 3 shaped random HF model (tests/tools/hfmodel.py: sliding layers 0 and 2 with window 6,
# global layers 1 and 3), converted with context 1024, max_query 4 and f32 caches (head_dim 32:
# 128-byte rows, a release step of 128 rows), is fed a 500-id prompt and decodes greedily: the
# logits of every step are bit-identical to those of the same run with SLATE_KV_KEEP_ALL=1 and
# match the NumPy reference, while the state's resident KV (--mem-stats) is smaller; `slate plan`
# counts the sliding layers at their resident bound unless SLATE_KV_KEEP_ALL is set. A server
# whose slot holds a long completion answers a second one that shares only an early prefix
# (beyond the rollback reach, so the slot cannot truncate to it) by prefilling again: the same
# text as a server keeping every row, which reuses the prefix.
source "$(dirname "$0")/lib.sh"
d="$WORK/g3"
$PY "$TOOLS/hfmodel.py" make --variant gemma3 --out "$d" --seed 5 \
  --set max_position_embeddings=1024 >/dev/null
if ! "$SLATE" convert "$d" -o "$d.slate" --kv-dtype fp32 --max-query 4 2>"$d.err"; then
  bad "convert failed: $(cat "$d.err")"
  
# ---- server: a prefix edit beyond the reach ----
if command -v curl >/dev/null; then
  long=$($PY -c 'print(" ".join("word%d" % (i % 37) for i in range(150)))')
  p1=$($PY -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 1, "temperature": 0}))' "$long")
  p2=$($PY -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1][:120] + " and then", "max_tokens": 6, "temperature": 0, "ignore_eos": True}))' "$long")
  serve() { # serve OUT [env...]: two completions on one slot; the second one's body to OUT
    local port pid
    port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    env "${@:2}" "$SLATE" serve "$d.slate" --port "$port" --slots 1 -t 1 2>"$1.log" &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
    curl -s -o "$1.first" -H "Content-Type: application/json" --data-binary "$p1" \
      "http://127.0.0.1:$port/v1/completions" || true
    curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^slate_kv_bytes_used //p' >"$1.kv" || true
    curl -s -o "$1" -w '%{http_code}' -H "Content-Type: application/json" --data-binary "$p2" \
      "http://127.0.0.1:$port/v1/completions" >"$1.status" || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  }
  serve "$WORK/srv-on"
  serve "$WORK/srv-off" SLATE_KV_KEEP_ALL=1
  text() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$1"; }
  check "server: an edit beyond the reach is answered (200)" test "$(cat "$WORK/srv-on.status")" = 200
  check "server: /metrics counts the KV rows held ($(cat "$WORK/srv-on.kv") vs $(cat "$WORK/srv-off.kv") bytes)" \
    test "$(cat "$WORK/srv-on.kv")" -lt "$(cat "$WORK/srv-off.kv")"
  check "server: with the same text as a server keeping every row" \
    test "$(text "$WORK/srv-on" 2>&1)" = "$(text "$WORK/srv-off" 2>&1)"
else
  echo "skipping the server part: curl missing"
fi
finish
fi
prompt=$($PY -c 'print(",".join(str(3 + (i * 37) % 250) for i in range(500)))')
"$SLATE" run "$d.slate" --ids "$prompt" -n 60 --temp 0 --dump-logits "$WORK/on.f32" \
  --mem-stats >"$WORK/on.out" 2>"$WORK/on.err" || bad "run with release: $(cat "$WORK/on.err")"
SLATE_KV_KEEP_ALL=1 "$SLATE" run "$d.slate" --ids "$prompt" -n 60 --temp 0 \
  --dump-logits "$WORK/off.f32" --mem-stats >"$WORK/off.out" 2>"$WORK/off.err" ||
  bad "run keeping every row: $(cat "$WORK/off.err")"
check "decode past 500 positions: logits with release are bit-identical to keeping every row" \
  cmp -s "$WORK/on.f32" "$WORK/off.f32"
check "and at least 2 steps were decoded" test "$(stat -c %s "$WORK/on.f32")" -ge $((2 * 320 * 4))
check "decode steps match the NumPy reference (atol 1e-4)" \
  $PY - "$TOOLS" "$d" "$WORK/on.f32" "$prompt" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import hfmodel
rows = np.fromfile(sys.argv[3], dtype="<f4").reshape(-1, 320)
prompt = [int(x) for x in sys.argv[4].split(",")]
toks = prompt + [int(np.argmax(r)) for r in rows[:-1]]
ref = hfmodel.forward(sys.argv[2], toks)[len(prompt) - 1:]
err = float(np.max(np.abs(ref - rows)))
print("max |diff| %.3g over %d steps" % (err, len(rows)))
sys.exit(0 if err < 1e-4 else 1)
PYEOF
# "after generate ... KV 2.0 MiB reserved, 0.6 MiB resident": the sliding layers (half of the
# cache) hold about window + reach + a release step of rows, the global ones all 560.
res() { sed -n 's/.*after generate.*KV [0-9.]* MiB reserved, \([0-9.]*\) MiB resident.*/\1/p' "$1"; }
on=$(res "$WORK/on.err") off=$(res "$WORK/off.err")
check "resident KV with release ($on MiB) is below keeping every row ($off MiB) by a sliding half" \
  $PY -c "import sys; sys.exit(0 if $on > 0 and $on < 0.7 * $off else 1)"
"$SLATE" plan "$d.slate" >"$WORK/plan.txt" 2>&1 || true
check "plan counts the sliding caches at their resident bound" \
  grep -q "resident bound, sliding-window caches keep about window + 4 rollback" "$WORK/plan.txt"
check "info's memory plan shows the resident bound" \
  bash -c "'$SLATE' info '$d.slate' | grep -q 'KV resident bound .* window + 4 positions'"
SLATE_KV_KEEP_ALL=1 "$SLATE" plan "$d.slate" >"$WORK/plan-all.txt" 2>&1 || true
check "plan with SLATE_KV_KEEP_ALL=1 counts every row" \
  bash -c "! grep -q 'resident bound' '$WORK/plan-all.txt' && grep -q 'KV per state' '$WORK/plan-all.txt'"

# ---- server: a prefix edit beyond the reach ----
if command -v curl >/dev/null; then
  long=$($PY -c 'print(" ".join("word%d" % (i % 37) for i in range(150)))')
  p1=$($PY -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 1, "temperature": 0}))' "$long")
  p2=$($PY -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1][:120] + " and then", "max_tokens": 6, "temperature": 0, "ignore_eos": True}))' "$long")
  serve() { # serve OUT [env...]: two completions on one slot; the second one's body to OUT
    local port pid
    port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    env "${@:2}" "$SLATE" serve "$d.slate" --port "$port" --slots 1 -t 1 2>"$1.log" &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
    curl -s -o "$1.first" -H "Content-Type: application/json" --data-binary "$p1" \
      "http://127.0.0.1:$port/v1/completions" || true
    curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^slate_kv_bytes_used //p' >"$1.kv" || true
    curl -s -o "$1" -w '%{http_code}' -H "Content-Type: application/json" --data-binary "$p2" \
      "http://127.0.0.1:$port/v1/completions" >"$1.status" || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  }
  serve "$WORK/srv-on"
  serve "$WORK/srv-off" SLATE_KV_KEEP_ALL=1
  text() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$1"; }
  check "server: an edit beyond the reach is answered (200)" test "$(cat "$WORK/srv-on.status")" = 200
  check "server: /metrics counts the KV rows held ($(cat "$WORK/srv-on.kv") vs $(cat "$WORK/srv-off.kv") bytes)" \
    test "$(cat "$WORK/srv-on.kv")" -lt "$(cat "$WORK/srv-off.kv")"
  check "server: with the same text as a server keeping every row" \
    test "$(text "$WORK/srv-on" 2>&1)" = "$(text "$WORK/srv-off" 2>&1)"
else
  echo "skipping the server part: curl missing"
fi
finish
