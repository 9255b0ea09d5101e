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
# The command line: --kv-keep-all (run, serve, plan, info) does what SLATE_KV_KEEP_ALL=1 does;
# --kv-rollback N changes the bound `slate info` and `slate plan` count as slate.h's formula says
# and lets `run --prompt-cache` reuse a prefix that departs N tokens back, which the default
# reach cannot (the note names the N); info's total is weights + the KV that counts + scratch;
# out-of-range values exit 2 in every command; SLATE_KV_KEEP_ALL=1 makes a --kv-rollback moot, and
# plan and serve say so. When the sliding caches count whole (every row kept, or a window + reach
# that cover the context) plan's and info's KV line says so and why.
source "$(dirname "$0")/lib.sh"
d="$WORK/g3"
$PY "$TOOLS/hfmodel.py" make --variant gemma3 --out "$d" --seed 5 \
  --set max_position_embeddings=1024 >/dev/null
if ! "$SLATE" convert "$d" -o "$d.slate" --kv-dtype fp32 --max-query 4 2>"$d.err"; then
  bad "convert failed: $(cat "$d.err")"
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
check "and says the sliding caches count whole because of SLATE_KV_KEEP_ALL" \
  grep -q "at context 1024: sliding-window caches counted whole, every row kept (SLATE_KV_KEEP_ALL=1)$" \
  "$WORK/plan-all.txt"

# ---- --kv-rollback / --kv-keep-all on the command line ----
# `slate info` prints the plan in bytes: its total is weights + the KV figure that counts +
# scratch, as in `slate plan`; with --kv-rollback N the sliding caches (K and V of layers 0 and
# 2: half of the 8 tensors) count, per kv head, ceil((6 + N + 128 + 4 - 2) x 128 / 4096) + 2
# pages (slate.h, slate_plan_params: window 6, release step 128 rows, max_query 4, 128-byte
# rows), the global ones their reservation.
info_num() { sed -n "s/^  $2 *\([0-9]*\) bytes.*/\1/p" "$1"; }
"$SLATE" info "$d.slate" >"$WORK/info.txt" 2>&1 || bad "info: $(cat "$WORK/info.txt")"
"$SLATE" info "$d.slate" --kv-rollback 300 >"$WORK/info300.txt" 2>&1 ||
  bad "info --kv-rollback 300: $(cat "$WORK/info300.txt")"
"$SLATE" info "$d.slate" --kv-keep-all >"$WORK/info-all.txt" 2>&1 ||
  bad "info --kv-keep-all: $(cat "$WORK/info-all.txt")"
sums() { # sums FILE KVLABEL: total == weights + KV + scratch
  local w k s t
  w=$(info_num "$1" weights) k=$(info_num "$1" "$2") s=$(info_num "$1" scratch)
  t=$(info_num "$1" "total, one state")
  [ -n "$w" ] && [ -n "$k" ] && [ -n "$s" ] && [ "$t" = $((w + k + s)) ]
}
check "info: total, one state = weights + KV resident bound + scratch" sums "$WORK/info.txt" "KV resident bound"
check "info: the reservation is labelled as such beside it" grep -q "^  KV reserved .*address space" "$WORK/info.txt"
check "info --kv-keep-all: no bound; total = weights + KV reserved + scratch" \
  bash -c "! grep -q 'resident bound' '$WORK/info-all.txt' && grep -q 'KV reserved.*; counted' '$WORK/info-all.txt'"
check "info --kv-keep-all: total = weights + KV reserved + scratch" sums "$WORK/info-all.txt" "KV reserved"
check "info --kv-keep-all: says the sliding caches count whole, every row kept" \
  grep -q "^  KV reserved .*; counted: sliding-window caches whole, every row kept$" "$WORK/info-all.txt"
"$SLATE" info "$d.slate" --kv-rollback 1024 >"$WORK/info1024.txt" 2>&1 ||
  bad "info --kv-rollback 1024: $(cat "$WORK/info1024.txt")"
check "info --kv-rollback 1024: whole, and the line names the reach" \
  grep -q "^  KV reserved .*; counted: sliding-window caches whole, window + 1024 positions (and a release step) cover the context$" \
  "$WORK/info1024.txt"
check "info --kv-rollback 1024: total = weights + KV reserved + scratch" sums "$WORK/info1024.txt" "KV reserved"
check "info --kv-rollback 300: the resident bound follows slate.h's formula" \
  $PY - "$(info_num "$WORK/info300.txt" "KV reserved")" "$(info_num "$WORK/info300.txt" "KV resident bound")" \
  "$(info_num "$WORK/info.txt" "KV resident bound")" <<'PYEOF'
import sys
reserved, bound, default = (int(x) for x in sys.argv[1:4])
per_tensor = reserved // 8            # 8 caches of 1024 rows, all of one width
heads = per_tensor // (1024 * 128)    # head_dim 32, f32: 128-byte rows
pages = -(-(6 + 300 + 128 + 4 - 2) * 128 // 4096) + 2
want = 4 * per_tensor + 4 * heads * min(pages * 4096, 1024 * 128)
print("kv heads %d: bound %d, formula %d, default reach %d" % (heads, bound, want, default))
sys.exit(0 if bound == want and bound > default else 1)
PYEOF
check "info --kv-rollback 300: total = weights + that bound + scratch" sums "$WORK/info300.txt" "KV resident bound"
"$SLATE" plan "$d.slate" --kv-rollback 300 >"$WORK/plan300.txt" 2>&1 || true
check "plan --kv-rollback 300 plans that reach" \
  grep -q "resident bound, sliding-window caches keep about window + 300 rollback" "$WORK/plan300.txt"
SLATE_KV_KEEP_ALL=1 "$SLATE" plan "$d.slate" --kv-rollback 300 >"$WORK/plan-env.txt" 2>&1 || true
check "plan --kv-rollback under SLATE_KV_KEEP_ALL=1 says the reach has no effect" \
  grep -q "SLATE_KV_KEEP_ALL is set, so every row is kept and --kv-rollback 300 has no effect" \
  "$WORK/plan-env.txt"
# serve says it too, once its backend accepted the options and before it listens: an address
# that is no IPv4 address stops it right after (exit 1), so no server has to be stopped.
rc=0
SLATE_KV_KEEP_ALL=1 timeout 60 "$SLATE" serve "$d.slate" --host no.such.address --port 1 \
  --slots 1 -t 1 --kv-rollback 300 >/dev/null 2>"$WORK/serve-env.err" || rc=$?
check "serve --kv-rollback under SLATE_KV_KEEP_ALL=1 says the reach has no effect (exit $rc)" \
  grep -q "slate serve: note: SLATE_KV_KEEP_ALL is set, so every row is kept and --kv-rollback 300 has no effect" \
  "$WORK/serve-env.err"
check "and stops at the address, not at the options" \
  grep -q "slate serve: --host must be an IPv4 address, not 'no.such.address'" "$WORK/serve-env.err"
"$SLATE" plan "$d.slate" --kv-keep-all >"$WORK/plan-flag.txt" 2>&1 || true
reserved=$(sed -n 's/.*(reserved \([0-9.]* [KMG]*i*B\);.*/\1/p' "$WORK/plan.txt")
check "plan --kv-keep-all counts the whole reservation ($reserved) and says why" \
  grep -qE "^  KV per state +$reserved  at context 1024: sliding-window caches counted whole, every row kept \(--kv-keep-all\)$" \
  "$WORK/plan-flag.txt"
# A reach that, with the window and a release step, covers the context: whole again, and the
# line names the reach (test_plan.sh: a package without windows says nothing of them).
"$SLATE" plan "$d.slate" --kv-rollback 1024 >"$WORK/plan1024.txt" 2>&1 || true
check "plan --kv-rollback 1024 counts the whole reservation ($reserved) and names the reach" \
  grep -qE "^  KV per state +$reserved  at context 1024: sliding-window caches counted whole, window \+ 1024 rollback positions \(and a release step\) cover the context$" \
  "$WORK/plan1024.txt"
"$SLATE" plan "$d.slate" --context 64 >"$WORK/plan64.txt" 2>&1 || true
check "plan --context 64 (under window + reach + a release step): whole, with the default reach 4" \
  grep -q "at context 64: sliding-window caches counted whole, window + 4 rollback positions" \
  "$WORK/plan64.txt"
# run: --kv-keep-all holds as many rows as SLATE_KV_KEEP_ALL=1, with the same logits.
"$SLATE" run "$d.slate" --ids "$prompt" -n 60 --temp 0 --kv-keep-all --dump-logits "$WORK/flag.f32" \
  --mem-stats >"$WORK/flag.out" 2>"$WORK/flag.err" || bad "run --kv-keep-all: $(cat "$WORK/flag.err")"
check "run --kv-keep-all: resident KV ($(res "$WORK/flag.err") MiB) as with SLATE_KV_KEEP_ALL=1 ($off MiB)" \
  test "$(res "$WORK/flag.err")" = "$off"
check "run --kv-keep-all: the same logits" cmp -s "$WORK/flag.f32" "$WORK/off.f32"
# --kv-rollback 300: the sliding caches keep about 300 more rows than the default reach (4), so
# the resident KV lies strictly between the two runs above, with the same logits.
"$SLATE" run "$d.slate" --ids "$prompt" -n 60 --temp 0 --kv-rollback 300 --dump-logits "$WORK/r300.f32" \
  --mem-stats >"$WORK/r300.out" 2>"$WORK/r300.err" || bad "run --kv-rollback 300: $(cat "$WORK/r300.err")"
r300=$(res "$WORK/r300.err")
check "run --kv-rollback 300: resident KV ($r300 MiB) between the default reach ($on) and every row ($off)" \
  $PY -c "import sys; sys.exit(0 if $on < ${r300:-0} < $off else 1)"
check "run --kv-rollback 300: the same logits" cmp -s "$WORK/r300.f32" "$WORK/off.f32"
# run --prompt-cache: a prompt departing 200 tokens before the end of the cached 500 reuses
# nothing with the default reach (4: rows up to 384 or so are gone, a 128-row step at a time),
# and the note names --kv-rollback 200; with --kv-rollback 200 or --kv-keep-all given to both
# runs (the one that saves, the one that loads) the 300-token prefix is reused.
edited="$($PY -c 'print(",".join(str(3 + (i * 37) % 250) for i in range(300)))'),7,8,9"
pc() { # pc NAME [flags of both runs]: save the 500-id prompt, then run the edited one
  rm -f "$WORK/$1.state"
  "$SLATE" run "$d.slate" --ids "$prompt" -n 1 --temp 0 --prompt-cache "$WORK/$1.state" "${@:2}" \
    >/dev/null 2>"$WORK/$1.save.err" || bad "prompt cache save ($1): $(cat "$WORK/$1.save.err")"
  "$SLATE" run "$d.slate" --ids "$edited" -n 1 --temp 0 --prompt-cache "$WORK/$1.state" "${@:2}" \
    >/dev/null 2>"$WORK/$1.err" || bad "prompt cache reuse ($1): $(cat "$WORK/$1.err")"
}
pc pc-default
check "prompt cache beyond the reach: nothing reused" grep -q "reused 0 of 303 prompt tokens" "$WORK/pc-default.err"
check "and the note says why and suggests --kv-rollback 200 or --kv-keep-all" \
  grep -q "not used: reusing its first 300 tokens (of 500 cached) means going back 200 positions.*--kv-rollback 200 (or more) or --kv-keep-all to every run" "$WORK/pc-default.err"
pc pc-rollback --kv-rollback 200
check "prompt cache with --kv-rollback 200: the 300-token prefix is reused" \
  grep -q "reused 300 of 303 prompt tokens" "$WORK/pc-rollback.err"
pc pc-all --kv-keep-all
check "prompt cache with --kv-keep-all: the 300-token prefix is reused" \
  grep -q "reused 300 of 303 prompt tokens" "$WORK/pc-all.err"
# Bad values: exit 2 with the range, as other usage errors.
usage_err() { # usage_err DESCRIPTION PATTERN command...
  local d=$1 pat=$2 rc=0; shift 2
  "$@" >/dev/null 2>"$WORK/usage.err" || rc=$?
  if [ "$rc" -eq 2 ] && grep -q -- "$pat" "$WORK/usage.err"; then ok "$d"
  else bad "$d: exit $rc: $(cat "$WORK/usage.err")"; fi
}
usage_err "run --kv-rollback 0 is refused" "--kv-rollback must be an integer in 1..the context" \
  "$SLATE" run "$d.slate" --ids 1,2 --kv-rollback 0
usage_err "run --kv-rollback x is refused" "--kv-rollback must be an integer" \
  "$SLATE" run "$d.slate" --ids 1,2 --kv-rollback x
usage_err "run --kv-rollback beyond the context is refused" "--kv-rollback must be in 1..1024 (the package's context), not 1025" \
  "$SLATE" run "$d.slate" --ids 1,2 --kv-rollback 1025
usage_err "run --kv-rollback beyond --context is refused" "--kv-rollback must be in 1..64 (the --context), not 65" \
  "$SLATE" run "$d.slate" --ids 1,2 --context 64 --kv-rollback 65
usage_err "run --kv-rollback with --kv-keep-all is refused" "exclude each other" \
  "$SLATE" run "$d.slate" --ids 1,2 --kv-rollback 8 --kv-keep-all
usage_err "chat --kv-rollback beyond the context is refused" "--kv-rollback must be in 1..1024" \
  "$SLATE" chat "$d.slate" --kv-rollback 5000
usage_err "plan --kv-rollback beyond the context is refused" "--kv-rollback must be in 1..1024" \
  "$SLATE" plan "$d.slate" --kv-rollback 1025
usage_err "plan --kv-rollback beyond --context is refused" "--kv-rollback must be in 1..100 (the --context)" \
  "$SLATE" plan "$d.slate" --context 100 --kv-rollback 101
usage_err "info --kv-rollback beyond the context is refused" "--kv-rollback must be in 1..1024" \
  "$SLATE" info "$d.slate" --kv-rollback 1025
usage_err "info --kv-rollback -3 is refused" "--kv-rollback must be an integer" \
  "$SLATE" info "$d.slate" --kv-rollback -3
usage_err "bench --kv-rollback beyond the context is refused" "--kv-rollback must be in 1..1024" \
  "$SLATE" bench "$d.slate" --mode state --prompt 8 -n 2 --kv-rollback 1025
usage_err "bench --mode kv-io --kv-rollback is refused (kv-io keeps every row)" "kv-io exports every row" \
  "$SLATE" bench "$d.slate" --mode kv-io --prompt 8 -n 2 --kv-rollback 8
# serve refuses what run refuses, in run's words (before it listens: --port 1 is never bound).
usage_err "serve --kv-rollback beyond the context is refused as run does" \
  "slate serve: --kv-rollback must be in 1..1024 (the package's context), not 2000" \
  "$SLATE" serve "$d.slate" --port 1 --kv-rollback 2000
usage_err "serve --kv-rollback beyond --ctx is refused, naming --ctx" \
  "slate serve: --kv-rollback must be in 1..64 (the --ctx), not 65" \
  "$SLATE" serve "$d.slate" --port 1 --ctx 64 --kv-rollback 65
usage_err "serve --kv-rollback 0 is refused as run does" \
  "slate serve: --kv-rollback must be an integer in 1..the context (positions a sliding-window cache keeps behind its window), not '0'" \
  "$SLATE" serve "$d.slate" --port 1 --kv-rollback 0
usage_err "serve --kv-rollback x is refused" "slate serve: --kv-rollback must be an integer" \
  "$SLATE" serve "$d.slate" --port 1 --kv-rollback x
usage_err "serve --kv-rollback with --kv-keep-all is refused as run does" \
  "slate serve: --kv-rollback and --kv-keep-all exclude each other" \
  "$SLATE" serve "$d.slate" --port 1 --kv-rollback 8 --kv-keep-all

# ---- server: a prefix edit beyond the reach ----
if command -v curl >/dev/null; then
  long=$($PY -c 'print(" ".join("word%d" % (i % 37) for i in range(150)))')
  p1=$($PY -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 1, "temperature": 0}))' "$long")
  p2=$($PY -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1][:120] + " and then", "max_tokens": 6, "temperature": 0, "ignore_eos": True}))' "$long")
  serve() { # serve OUT [VAR=VALUE or option...]: two completions on one slot; the second one's body to OUT
    local port pid envs=() opts=()
    for a in "${@:2}"; do if [[ $a == *=* ]]; then envs+=("$a"); else opts+=("$a"); fi; done
    port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    env "${envs[@]}" "$SLATE" serve "$d.slate" --port "$port" --slots 1 -t 1 "${opts[@]}" 2>"$1.log" &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
    curl -s -o "$1.first" -H "Content-Type: application/json" --data-binary "$p1" \
      "http://127.0.0.1:$port/v1/completions" || true
    curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^slate_kv_bytes_used //p' >"$1.kv" || true
    curl -s -o "$1" -w '%{http_code}' -H "Content-Type: application/json" --data-binary "$p2" \
      "http://127.0.0.1:$port/v1/completions" >"$1.status" || true
    curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^slate_prefix_reuse_released_total //p' \
      >"$1.released" || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  }
  serve "$WORK/srv-on"
  serve "$WORK/srv-off" SLATE_KV_KEEP_ALL=1
  serve "$WORK/srv-flag" --kv-keep-all
  text() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$1"; }
  check "server: an edit beyond the reach is answered (200)" test "$(cat "$WORK/srv-on.status")" = 200
  check "server: /metrics counts the request whose prefix the window released ($(cat "$WORK/srv-on.released"))" \
    test "$(cat "$WORK/srv-on.released")" = 1
  check "server keeping every row: no such request ($(cat "$WORK/srv-off.released"))" \
    test "$(cat "$WORK/srv-off.released")" = 0
  check "server: /metrics counts the KV rows held ($(cat "$WORK/srv-on.kv") vs $(cat "$WORK/srv-off.kv") bytes)" \
    test "$(cat "$WORK/srv-on.kv")" -lt "$(cat "$WORK/srv-off.kv")"
  check "server: with the same text as a server keeping every row" \
    test "$(text "$WORK/srv-on" 2>&1)" = "$(text "$WORK/srv-off" 2>&1)"
  check "server --kv-keep-all: holds every row, as with SLATE_KV_KEEP_ALL=1 ($(cat "$WORK/srv-flag.kv") bytes)" \
    test "$(cat "$WORK/srv-flag.kv")" = "$(cat "$WORK/srv-off.kv")"
  check "server --kv-keep-all: the same text" \
    test "$(text "$WORK/srv-flag" 2>&1)" = "$(text "$WORK/srv-off" 2>&1)"
else
  echo "skipping the server part: curl missing"
fi
finish
