#!/usr/bin/env bash
# Memory planning, cache dtypes and the prompt cache through the CLI, on stories260K:
# - `slate plan` against this machine, a device from the table and an explicit budget (exit 3
#   when it does not fit), the KV formula check, the device table, an unknown device;
# - the default f16 cache still gives run.c's greedy text; int8 caches run;
# - `slate run --prompt-cache`: a second run with the same prompt reuses every prompt token and
#   prints the same text; a longer prompt reuses the prefix; a cache from another model or a
#   damaged one is not used (a note) and the run still succeeds.
source "$(dirname "$0")/lib.sh"
need_models
M=$SLATE_MODELS_DIR/stories260K
R=$M/reference
prompt=$(cat "$R/once-upon-a-time.prompt.txt")
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" -o "$WORK/m.slate" 2>/dev/null
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --kv-dtype fp32 \
  -o "$WORK/m32.slate" 2>/dev/null

# ---- slate plan ----
"$SLATE" plan "$WORK/m.slate" >"$WORK/plan.txt" 2>&1
check "plan on this machine fits" grep -q "fits: yes" "$WORK/plan.txt"
check "plan: the KV formula agrees with the program's state tensors" grep -q "agrees" "$WORK/plan.txt"
check "plan: new packages declare f16 caches" grep -q "cache f16" "$WORK/plan.txt"
check "plan: 2 x 5 layers x 4 kv heads x 8 head_dim x 2 bytes" \
  grep -q "2 x 5 layers x 4 kv heads x 8 head_dim x 2 = 640 bytes" "$WORK/plan.txt"
"$SLATE" plan "$WORK/m.slate" --kv-keep-all >"$WORK/keep.txt" 2>&1
check "plan --kv-keep-all without sliding windows: the KV line says nothing of windows" \
  grep -qE "^  KV per state +[0-9.]+ [KMG]?i?B  at context 512$" "$WORK/keep.txt"
"$SLATE" plan "$WORK/m.slate" --device phone-6gb --states 4 --kv-dtype int8 >"$WORK/phone.txt" 2>&1
check "plan for a device from the table" grep -q "budget phone-6gb" "$WORK/phone.txt"
check "plan with int8 caches and 4 states" grep -q "4 state(s), cache i8" "$WORK/phone.txt"
set +e
"$SLATE" plan "$WORK/m.slate" --budget 3.7M >"$WORK/small.txt" 2>&1 # weights 1 + scratch 2.55 MiB
rc=$?
set -e
check "plan over budget exits 3" test "$rc" -eq 3
check "plan over budget says so and names the largest context" \
  grep -q "fits: NO" "$WORK/small.txt"
check "plan over budget: largest context that fits is below 512" \
  grep -Eq "largest context that fits: [0-9]+$" "$WORK/small.txt"
check "plan over budget: int8 would fit more" grep -q "int8 KV would fit" "$WORK/small.txt"
"$SLATE" plan --devices >"$WORK/dev.txt"
check "device table lists six devices and this machine" \
  test "$(grep -cE '^(phone-6gb|phone-8gb|rpi5-4gb|rpi5-8gb|laptop-8gb|laptop-16gb|this-machine) ' "$WORK/dev.txt")" -eq 7
expect_fail "unknown device is refused with the known names" SLATE_E_INVALID_ARG "rpi5-8gb" \
  "$SLATE" plan "$WORK/m.slate" --device toaster
expect_fail "plan of a missing file names it" SLATE_E_IO "nope.slate" \
  "$SLATE" plan "$WORK/nope.slate"
# Usage errors exit 2 with a message naming what was wrong: a --context past the package's
# (not the library's SLATE_E_INVALID_ARG, exit 1), arguments beside --devices (not ignored).
for c in "$WORK/m.slate --context 100000|--context must be in 1..512 (the package's context), not 100000" \
         "--devices $WORK/m.slate|--devices takes no other argument, not '$WORK/m.slate'" \
         "--devices --budget 1G|--devices takes no other argument, not '--budget'" \
         "$WORK/m.slate --devices|--devices takes no other argument, not '$WORK/m.slate'"; do
  rc=0; "$SLATE" plan ${c%%|*} >"$WORK/out" 2>"$WORK/err" || rc=$?
  check "plan ${c%%|*}: exit 2 ($rc), '${c#*|}', nothing on stdout" \
    bash -c '[ "$1" -eq 2 ] && grep -qF -- "$2" "$3" && [ ! -s "$4" ]' _ "$rc" "slate plan: ${c#*|}" \
    "$WORK/err" "$WORK/out"
done
check "plan --context 512 (the package's) is accepted" "$SLATE" plan "$WORK/m.slate" --context 512

# ---- cache dtypes ----
"$SLATE" run "$WORK/m.slate" -p "$prompt" -n 196 --temp 0 >"$WORK/out.txt" 2>/dev/null
printf '%s' "$prompt" >"$WORK/full.txt"
cat "$WORK/out.txt" >>"$WORK/full.txt"
check "f16 caches (the new default) still give run.c's greedy text" \
  cmp -s "$WORK/full.txt" "$R/once-upon-a-time.greedy200.txt"
"$SLATE" run "$WORK/m.slate" -p "$prompt" -n 40 --temp 0 --kv-dtype int8 --mem-stats \
  >"$WORK/i8.txt" 2>"$WORK/i8.err"
check "int8 caches run and print text" test -s "$WORK/i8.txt"
check "--mem-stats reports the state's memory" grep -q "KV .* reserved" "$WORK/i8.err"
"$SLATE" run "$WORK/m.slate" -p "$prompt" -n 100 --temp 0 --context 16 >/dev/null 2>"$WORK/c16.err"
check "--context 16 stops at a full context" grep -q "finish context_full" "$WORK/c16.err"

# ---- prompt cache ----
C=$WORK/prompt.state
"$SLATE" run "$WORK/m.slate" -p "$prompt" -n 30 --temp 0 --prompt-cache "$C" >"$WORK/p1.txt" 2>"$WORK/p1.err"
check "first run: nothing reused, cache written" grep -q "reused 0 of 5 prompt tokens" "$WORK/p1.err"
check "cache file exists" test -s "$C"
"$SLATE" run "$WORK/m.slate" -p "$prompt" -n 30 --temp 0 --prompt-cache "$C" >"$WORK/p2.txt" 2>"$WORK/p2.err"
check "second run reuses the whole prompt" grep -q "reused 5 of 5 prompt tokens, prefilled 0" "$WORK/p2.err"
check "second run prints the same text" cmp -s "$WORK/p1.txt" "$WORK/p2.txt"
"$SLATE" run "$WORK/m.slate" -p "$prompt" -n 30 --temp 0 >"$WORK/p0.txt" 2>/dev/null
check "the cached run prints what an uncached run prints" cmp -s "$WORK/p0.txt" "$WORK/p1.txt"
"$SLATE" run "$WORK/m.slate" -p "$prompt, there was" -n 10 --temp 0 --prompt-cache "$C" \
  >/dev/null 2>"$WORK/p3.err"
check "a longer prompt reuses the cached prefix" grep -Eq "reused 5 of [6-9] prompt tokens" "$WORK/p3.err"
"$SLATE" run "$WORK/m32.slate" -p "$prompt" -n 5 --temp 0 --prompt-cache "$C" >/dev/null 2>"$WORK/p4.err"
check "a cache from another model is not used" grep -q "not used (SLATE_E_INVALID_ARG" "$WORK/p4.err"
check "... and the run prefills the whole prompt" grep -q "reused 0 of 5" "$WORK/p4.err"
head -c 100 "$C" >"$WORK/trunc.state"
"$SLATE" run "$WORK/m.slate" -p "$prompt" -n 5 --temp 0 --prompt-cache "$WORK/trunc.state" \
  >/dev/null 2>"$WORK/p5.err"
check "a truncated cache is not used and the run succeeds" grep -q "not used (SLATE_E_FORMAT" "$WORK/p5.err"
finish
