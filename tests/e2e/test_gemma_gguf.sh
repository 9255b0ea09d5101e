#!/usr/bin/env bash
# Gemma and Gemma 3 from GGUF. tests/tools/hf_to_gguf.py writes an hfmodel.py gemma / gemma3-6l
# folder in llama.cpp's layout (norm weights stored with Gemma's + 1 added, gemma3's keys; the
# 6-layer Gemma 3 has the values GGUF cannot carry and llama.cpp assumes: layer pattern 6,
# query_pre_attn_scalar = head_dim, local RoPE base 10000). The GGUF package must give the HF
# package's logits exactly and match the NumPy reference at every position; its program must
# have the window on the sliding layers only; Gemma 2, soft-capping and a missing window are
# refused naming the culprit.
source "$(dirname "$0")/lib.sh"
ids=(304 72 101 108 108 111 44 32 119 111 114 108 100 33)
n=${#ids[@]}
for v in gemma gemma3-6l; do
  d="$WORK/$v"
  $PY "$TOOLS/hfmodel.py" make --variant "$v" --out "$d" --seed 11 >/dev/null
  $PY "$TOOLS/hf_to_gguf.py" "$d" "$d.gguf"
  if ! "$SLATE" convert "$d.gguf" -o "$d.g.slate" --kv-dtype fp32 2>"$d.err" ||
     ! "$SLATE" convert "$d" -o "$d.h.slate" --kv-dtype fp32 2>>"$d.err"; then
    bad "$v: convert failed: $(cat "$d.err")"
    continue
  fi
  $PY "$TOOLS/hfmodel.py" forward "$d" --tokens "$(IFS=,; echo "${ids[*]}")" --out "$d.ref" >/dev/null
  : >"$d.g.f32"
  for ((k = 1; k <= n; k++)); do
    "$SLATE" run "$d.g.slate" --ids "$(IFS=,; echo "${ids[*]:0:k}")" -n 1 --temp 0 \
      --dump-logits "$d.row" >/dev/null 2>&1
    cat "$d.row" >>"$d.g.f32"
  done
  check "$v GGUF: logits at all $n positions match the NumPy reference (atol 1e-4)" \
    $PY "$TOOLS/compare_logits.py" "$d.g.f32" "$d.ref" --vocab 320 --atol 1e-4 --quiet
  "$SLATE" run "$d.h.slate" --ids "$(IFS=,; echo "${ids[*]}")" -n 1 --temp 0 \
    --dump-logits "$d.h.last" >/dev/null 2>&1
  check "$v GGUF: the same logits as the HF folder's package (bit for bit)" \
    cmp -s "$d.row" "$d.h.last"
done
check "gemma3 GGUF: windows on layers 0-4, layer 5 global, scale 1/sqrt(32), scale op 8" \
  $PY - "$WORK/gemma3-6l.g.slate" <<'PYEOF'
import json, math, struct, sys
b = open(sys.argv[1], "rb").read()
for i in range(struct.unpack_from("<I", b, 12)[0]):
    kind, _, off, size = struct.unpack_from("<IIQQ", b, 64 + 32 * i)
    if kind == 1:
        ops = json.loads(b[off:off + size])["program"]
att = [o for o in ops if o["op"] == "attention"]
ok = ([o.get("window") for o in att] == [6] * 5 + [None]
      and all(abs(o["scale"] - 1 / math.sqrt(32)) < 1e-7 for o in att)
      and [o["factor"] for o in ops if o["op"] == "scale"] == [8])
sys.exit(0 if ok else 1)
PYEOF
d="$WORK/gemma3-6l"
$PY - "$d.gguf" "$WORK/gemma2.gguf" <<'PYEOF'
import sys
b = open(sys.argv[1], "rb").read()
val = b"\x06" + b"\0" * 7 + b"gemma3"  # general.architecture's value (u64 length 6)
assert b.count(val) == 1
open(sys.argv[2], "wb").write(b.replace(val, val[:-1] + b"2"))
PYEOF
expect_fail "a gemma2 GGUF is refused naming soft-capping" SLATE_E_UNSUPPORTED \
  "architecture 'gemma2' is not supported (Gemma 2 soft-caps" \
  "$SLATE" convert "$WORK/gemma2.gguf" -o "$WORK/x.slate"
$PY "$TOOLS/hf_to_gguf.py" "$d" "$WORK/cap.gguf" --key gemma3.final_logit_softcapping:f32:30
expect_fail "gemma3.final_logit_softcapping is refused" SLATE_E_UNSUPPORTED \
  "key gemma3.final_logit_softcapping is 30 (f32): logit soft-capping (Gemma 2) is not supported" \
  "$SLATE" convert "$WORK/cap.gguf" -o "$WORK/x.slate"
$PY "$TOOLS/hf_to_gguf.py" "$d" "$WORK/sw0.gguf" --key gemma3.attention.sliding_window:u32:0
expect_fail "gemma3.attention.sliding_window 0 is refused" SLATE_E_FORMAT \
  "key gemma3.attention.sliding_window is 0 (u32), expected an integer in 1.." \
  "$SLATE" convert "$WORK/sw0.gguf" -o "$WORK/x.slate"
finish
