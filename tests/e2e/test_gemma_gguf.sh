#!/usr/bin/env bash
# Gemma, Gemma 2 and Gemma 3 from GGUF. tests/tools/hf_to_gguf.py writes an hfmodel.py gemma /
# gemma2 / gemma3-6l folder in llama.cpp's layout (norm weights stored with Gemma's + 1 added,
# gemma2's and gemma3's keys; the 6-layer Gemma 3 has the values GGUF cannot carry and llama.cpp
# assumes: layer pattern 6, query_pre_attn_scalar = head_dim, local RoPE base 10000; the gemma2
# folder gets query_pre_attn_scalar = head_dim for the same reason). The GGUF package must give
# the HF package's logits exactly and match the NumPy reference at every position; its program
# must have the window on the sliding layers only and Gemma 2's caps; soft-capping on gemma3, bad
# caps and a missing window are refused naming the culprit.
source "$(dirname "$0")/lib.sh"
ids=(304 72 101 108 108 111 44 32 119 111 114 108 100 33)
n=${#ids[@]}
for v in gemma gemma2 gemma3-6l; do
  d="$WORK/$v"
  $PY "$TOOLS/hfmodel.py" make --variant "$v" --out "$d" --seed 11 >/dev/null
  if [ "$v" = gemma2 ]; then # GGUF has no query_pre_attn_scalar: llama.cpp takes head_dim (32)
    $PY - "$d/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["query_pre_attn_scalar"] = c["head_dim"]
json.dump(c, open(sys.argv[1], "w"))
PYEOF
  fi
  $PY "$TOOLS/hf_to_gguf.py" "$d" "$d.gguf"
  if ! "$SLATE" convert "$d.gguf" -o "$d.g.slate" --kv-dtype fp32 2>"$d.err" ||
     ! "$SLATE" convert "$d" -o "$d.h.slate" --kv-dtype fp32 2>>"$d.err"; then
    bad "$v: convert failed: $(cat "$d.err")"
    continue
  fi
  $PY "$TOOLS/hfmodel.py" forward "$d" --tokens "$(IFS=,; echo "${ids[*]}")" --out "$d.ref" >/dev/null
  prefix_logits "$d.g.slate" "$d.g.f32" "${ids[@]}"
  cp "$WORK/row" "$d.row" # the logits of all n ids
  check "$v GGUF: logits at all $n positions match the NumPy reference (atol 1e-4)" \
    $PY "$TOOLS/compare_logits.py" "$d.g.f32" "$d.ref" --vocab 320 --atol 1e-4 --quiet
  "$SLATE" run "$d.h.slate" --ids "$(IFS=,; echo "${ids[*]}")" -n 1 --temp 0 \
    --dump-logits "$d.h.last" >/dev/null 2>&1
  check "$v GGUF: the same logits as the HF folder's package (bit for bit)" \
    cmp -s "$d.row" "$d.h.last"
done
check "gemma3 GGUF: windows on layers 0-4, layer 5 global, scale 1/sqrt(32), scale op 8" \
  $PY - "$WORK/gemma3-6l.g.slate" <<'PYEOF'
import math, sys
import slatefiles as sf
ops = sf.package_program(sys.argv[1])
att = [o for o in ops if o["op"] == "attention"]
ok = ([o.get("window") for o in att] == [6] * 5 + [None]
      and all(abs(o["scale"] - 1 / math.sqrt(32)) < 1e-7 for o in att)
      and [o["factor"] for o in ops if o["op"] == "scale"] == [8])
sys.exit(0 if ok else 1)
PYEOF
check "gemma2 GGUF: attention_softcap 2 everywhere, windows on layers 0 and 2, logit cap 3" \
  $PY - "$WORK/gemma2.g.slate" <<'PYEOF'
import math, sys
import slatefiles as sf
ops = sf.package_program(sys.argv[1])
att = [o for o in ops if "attention" in o["op"]]
ok = ([(o["op"], o["softcap"], o.get("window")) for o in att]
      == [("attention_softcap", 2, 6), ("attention_softcap", 2, None)] * 2
      and all(abs(o["scale"] - 1 / math.sqrt(32)) < 1e-7 for o in att)
      and ops[-1]["op"] == "softcap" and ops[-1]["cap"] == 3)
sys.exit(0 if ok else 1)
PYEOF
# gemma2 without the cap and window keys: llama.cpp's defaults 50, 30 and 4096
d="$WORK/gemma2"
$PY - "$d.gguf" "$WORK/g2-nokeys.gguf" <<'PYEOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
for key in (b"gemma2.attn_logit_softcapping", b"gemma2.final_logit_softcapping",
            b"gemma2.attention.sliding_window"):  # renamed: same length, no longer read
    assert b.count(key) == 1
    b = b.replace(key, key[:-1] + b"X")
open(sys.argv[2], "wb").write(b)
PYEOF
"$SLATE" convert "$WORK/g2-nokeys.gguf" -o "$WORK/g2-nokeys.slate" --kv-dtype fp32 2>/dev/null || true
check "gemma2 GGUF without cap and window keys takes llama.cpp's 50, 30 and 4096" \
  $PY - "$WORK/g2-nokeys.slate" <<'PYEOF'
import sys
import slatefiles as sf
ops = sf.package_program(sys.argv[1])
att = [(o["softcap"], o.get("window")) for o in ops if o["op"] == "attention_softcap"]
sys.exit(0 if att == [(50, 4096), (50, None)] * 2 and ops[-1].get("cap") == 30 else 1)
PYEOF
for c in 'gemma2.attn_logit_softcapping:f32:0|key gemma2.attn_logit_softcapping is 0 (f32), expected a number > 0 and < 1e+06' \
         'gemma2.final_logit_softcapping:f32:-3|key gemma2.final_logit_softcapping is -3 (f32), expected a number > 0' \
         'gemma2.attn_logit_softcapping:f32:1e6|key gemma2.attn_logit_softcapping is 1000000 (f32), expected a number > 0 and < 1e+06'; do
  gguf_refused "gemma2 GGUF with ${c%%|*} is refused" SLATE_E_FORMAT "${c#*|}" "$d" --key "${c%%|*}"
done
# Soft-caps are floats: stored as an integer they are refused naming the key and the type, as
# llama.cpp's loader refuses them (only f32 is read), not converted.
gguf_refused "gemma2 GGUF with attn_logit_softcapping stored as u32 is refused" SLATE_E_FORMAT \
  "key gemma2.attn_logit_softcapping is 50 (u32), expected an f32" \
  "$d" --key gemma2.attn_logit_softcapping:u32:50
d="$WORK/gemma3-6l"
gguf_refused "gemma3.final_logit_softcapping is refused" SLATE_E_UNSUPPORTED \
  "key gemma3.final_logit_softcapping is 30 (f32): logit soft-capping is not supported on gemma3" \
  "$d" --key gemma3.final_logit_softcapping:f32:30
gguf_refused "gemma3.final_logit_softcapping 0 stored as u32 is refused for its type" \
  SLATE_E_FORMAT "key gemma3.final_logit_softcapping is 0 (u32), expected an f32" \
  "$d" --key gemma3.final_logit_softcapping:u32:0
gguf_refused "gemma3.attention.sliding_window 0 is refused" SLATE_E_FORMAT \
  "key gemma3.attention.sliding_window is 0 (u32), expected an integer in 1.." \
  "$d" --key gemma3.attention.sliding_window:u32:0
finish
