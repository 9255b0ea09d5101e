#!/usr/bin/env bash
# GGUF Q4_1 import: no GGUF with Q4_1 tensors ships in ../shared/models, so tests/tools/
# gguf_requant.py writes one from stories260K-f16.gguf (ggml's Q4_1 layout and rounding). Every
# Q4_1 tensor must land in the package as slate's asymmetric Q4 with blocks of 32 and exactly the
# GGUF's bytes, the package must generate, its next-token distributions must stay close to the
# f16 package's about as closely as slate's own asymmetric int4 quantizer's (a misread nibble or
# offset would be far off).
source "$(dirname "$0")/lib.sh"
need_models
SRC=$SLATE_MODELS_DIR/stories260K/stories260K-f16.gguf
$PY "$TOOLS/gguf_requant.py" "$SRC" "$WORK/q41.gguf"
check "a Q4_1 GGUF converts" "$SLATE" convert "$WORK/q41.gguf" -o "$WORK/q41.slate"
"$SLATE" convert "$SRC" -o "$WORK/f16.slate" 2>/dev/null
"$SLATE" convert "$SRC" -o "$WORK/own.slate" --quantize int4 --asym --block-size 32 \
  --keep int4:token_embd.weight --keep int4:output.weight 2>/dev/null

check "every Q4_1 tensor is asymmetric q4 (block 32) with the GGUF's exact bytes" \
  $PY -c '
import math, sys
import slatefiles as sf
pa = sf.package_tensors(sys.argv[1])
ref = {name: bytes(data[:math.prod(ne) // 32 * 20])  # ggml Q4_1: 20 bytes per 32 values
       for name, (ne, tt, data) in sf.gguf_tensors(sys.argv[2]).items() if tt == 3}
bad = [n for n, blob in ref.items()
       if n not in pa or pa[n][0]["dtype"] != "q4" or pa[n][0].get("block") != 32
       or not pa[n][0].get("asym") or pa[n][1] != blob]
print("%d Q4_1 tensors, %d differ: %s" % (len(ref), len(bad), bad[:3]))
sys.exit(1 if bad or len(ref) < 30 else 0)' "$WORK/q41.slate" "$WORK/q41.gguf"
out=$("$SLATE" run "$WORK/q41.slate" -p "Once upon a time" -n 20 --temp 0 2>/dev/null)
check "the Q4_1 package generates text" test "${#out}" -gt 20
for p in q41 own; do
  "$SLATE" eval "$WORK/$p.slate" --ref "$WORK/f16.slate" \
    --text "$SLATE_SOURCE_DIR/bench/eval_text.txt" --json >"$WORK/eval-$p.json"
done
check "next-token distributions stay close to f16, as close as slate's own asym int4" \
  $PY -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("Q4_1 import: KL %.4f top-1 %.3f; slate int4 --asym: KL %.4f top-1 %.3f"
      % (a["kl_mean"], a["top1_agreement"], b["kl_mean"], b["top1_agreement"]))
sys.exit(0 if a["kl_mean"] < 0.2 and a["top1_agreement"] >= 0.7
         and a["kl_mean"] < 2 * b["kl_mean"] + 0.01 else 1)' "$WORK/eval-q41.json" "$WORK/eval-own.json"

# A keep rule gives its int4 the options' layout (--block-size as well as --asym), on tensors
# that are already Q4_1 in the source too: --block-size is never dropped silently.
"$SLATE" convert "$WORK/q41.gguf" -o "$WORK/keep64.slate" --keep 'int4:blk.*' --asym \
  --block-size 64 2>/dev/null
check "--keep int4 with --block-size 64 re-blocks the GGUF's Q4_1 matrices" $PY -c '
import sys
import slatefiles as sf
q4 = [t for t in sf.package_meta(sys.argv[1])["tensors"]
      if t["dtype"] == "q4" and t["name"].startswith("blk.")]
bad = [t["name"] for t in q4 if t.get("block") != 64 or not t.get("asym")]
print("%d q4 matrices, %d not asymmetric with block 64: %s" % (len(q4), len(bad), bad[:3]))
sys.exit(1 if bad or len(q4) < 20 else 0)' "$WORK/keep64.slate"
finish
