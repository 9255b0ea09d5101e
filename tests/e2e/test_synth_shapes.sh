#!/usr/bin/env bash
# slate synth for the Phi-3, Gemma 2, Gemma 3, Mistral and SmolLM3 shapes:
# - a tiny version of each (synth --like SHAPE --dims ...: 6 layers, head size 32 != hidden /
#   heads, window 4 where the shape has one; SmolLM3's layer 3 is NoPE) has exactly the tensors (names, shapes, dtype) that tests/tools/hfmodel.py
#   lists for its config.json (the checkpoints' layout: Phi-3's fused qkv_proj / gate_up_proj,
#   Gemma's four norms per layer, Gemma 3's q/k norms), Gemma's norm weights are stored around 0
#   (its norms scale by 1 + w); it converts, and greedy decode steps past the window give the
#   logits of the NumPy reference forward pass over the same tokens;
# - the default dtype (bf16) is what the header says, and converts to the reference's logits;
# - synth --dry-run on the full-size shapes reports the published parameter counts (within
#   1 %) and the checkpoints' tensor counts, and on the tiny shapes what synth then writes;
# - --like and the new --dims keys refuse what they cannot do, naming it.
source "$(dirname "$0")/lib.sh"
dims=hidden=64,layers=6,heads=4,kv_heads=2,ffn=96,vocab=320,head_dim=32,window=4,ctx=64
ids=304,72,101,108

# layout DIR DTYPE: the safetensors tensors are exactly hfmodel.tensor_shapes(config), in DTYPE;
# norm weights average ~0 for Gemma (1 + w) and ~1 elsewhere.
layout() {
  $PY - "$TOOLS" "$1" "$2" <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import hfmodel
d, dtype = sys.argv[2], sys.argv[3]
cfg = json.load(open(d + "/config.json"))
hdr = {}
import glob, struct
for f in glob.glob(d + "/*.safetensors"):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        hdr.update({k: v for k, v in json.loads(fh.read(n)).items() if k != "__metadata__"})
want = hfmodel.tensor_shapes(cfg)
got = {k: tuple(v["shape"]) for k, v in hdr.items()}
if got != want:
    print("extra:", sorted(set(got) - set(want))[:5], "missing:", sorted(set(want) - set(got))[:5],
          "shape:", [(k, got[k], want[k]) for k in got if k in want and got[k] != want[k]][:5])
    sys.exit(1)
bad = [k for k, v in hdr.items() if v["dtype"] != dtype]
if bad:
    print("dtype not", dtype, ":", bad[:5])
    sys.exit(1)
w = hfmodel.load_weights(d)
base = 0.0 if cfg["model_type"] in hfmodel.GEMMA_TYPES else 1.0
means = [float(np.mean(v)) for k, v in w.items() if k.endswith("norm.weight")]
sys.exit(0 if means and all(abs(m - base) < 0.05 for m in means) else 1)
PYEOF
}

# steps PKG DIR N ATOL: N greedy decode steps from $ids (positions up to 3 + N, past the window)
# match the reference over the same tokens.
steps() {
  "$SLATE" run "$1" --ids "$ids" -n "$3" --temp 0 --dump-logits "$WORK/steps" >/dev/null 2>&1 ||
    : >"$WORK/steps"
  $PY - "$TOOLS" "$2" "$WORK/steps" "$3" "$4" "$ids" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import hfmodel
n, atol = int(sys.argv[4]), float(sys.argv[5])
rows = np.fromfile(sys.argv[3], dtype="<f4").reshape(-1, 320)
prompt = [int(t) for t in sys.argv[6].split(",")]
toks = prompt + [int(np.argmax(r)) for r in rows[:-1]]
ref = hfmodel.forward(sys.argv[2], toks)[len(prompt) - 1:]
err = float(np.max(np.abs(ref - rows))) if len(rows) == n else float("inf")
if not err < atol:
    print("rows %d of %d, max |slate - reference| %g" % (len(rows), n, err))
    sys.exit(1)
PYEOF
}

for c in "phi-3-mini-4k|Phi3ForCausalLM" "gemma-2-2b|Gemma2ForCausalLM" \
         "gemma-3-1b|Gemma3ForCausalLM" "mistral-7b|MistralForCausalLM" \
         "smollm3-3b|SmolLM3ForCausalLM" "granite-3.1-2b|GraniteForCausalLM"; do
  shape=${c%%|*} arch=${c#*|} d="$WORK/${c%%|*}"
  sd=$dims
  # no window (smollm3: layer 3 of 6 is NoPE; granite: its four multipliers)
  [ "$shape" = smollm3-3b ] || [ "$shape" = granite-3.1-2b ] && sd=${dims/,window=4/}
  if ! "$SLATE" synth --like "$shape" --dims "$sd" --dtype f32 --seed 11 -o "$d" 2>"$WORK/err"; then
    bad "$shape: synth --like failed: $(cat "$WORK/err")"
    continue
  fi
  check "$shape: config.json is a $arch labelled custom, like $shape" \
    grep -q "\"like\": \"$shape\"" "$d/config.json"
  check "$shape: config.json names $arch" grep -q "\"architectures\": \[\"$arch\"\]" "$d/config.json"
  check "$shape: the tensors are the checkpoint layout's (hfmodel.tensor_shapes), F32" layout "$d" F32
  if ! "$SLATE" convert "$d" -o "$d.slate" --kv-dtype fp32 2>"$WORK/err" >/dev/null; then
    bad "$shape: convert failed: $(cat "$WORK/err")"
    continue
  fi
  check "$shape: 10 decode steps past the window match the NumPy reference (atol 1e-4)" \
    steps "$d.slate" "$d" 10 1e-4
  # What --dry-run reports is what synth wrote.
  "$SLATE" synth --like "$shape" --dims "$sd" --dtype f32 --dry-run >"$WORK/dry" 2>&1 || true
  check "$shape: --dry-run of the tiny shape counts what synth wrote" $PY - "$TOOLS" "$d" "$WORK/dry" <<'PYEOF'
import re, sys
sys.path.insert(0, sys.argv[1])
import hfmodel
w = hfmodel.load_weights(sys.argv[2])
dry = open(sys.argv[3]).read()
n = int(re.search(r"^parameters +(\d+)", dry, re.M).group(1))
t = int(re.search(r"^tensors +(\d+)", dry, re.M).group(1))
b = int(re.search(r"^bytes +(\d+)", dry, re.M).group(1))
total = sum(v.size for v in w.values())
sys.exit(0 if n == total and t == len(w) and b == 4 * total else 1)
PYEOF
done

# The default dtype: bf16 in the header; slate converts it to f32 exactly, the reference reads
# the same rounded values.
d="$WORK/g2bf"
"$SLATE" synth --like gemma-2-2b --dims "$dims" --seed 12 -o "$d" 2>/dev/null || true
check "gemma-2-2b bf16: the tensors are the checkpoint layout's, BF16" layout "$d" BF16
"$SLATE" convert "$d" -o "$d.slate" --kv-dtype fp32 >/dev/null 2>&1 || true
check "gemma-2-2b bf16: decode steps match the NumPy reference (atol 1e-4)" steps "$d.slate" "$d" 6 1e-4

# The full-size shapes, counted without writing: the published parameter counts (the model
# cards' 3.82B, 2.61B, 1.00B, 7.24B) within 1 %, and the checkpoints' tensor counts (their
# model.safetensors.index.json weight maps: 195, 288, 340, 291). SmolLM3-3B: 3.08B and 326
# tensors as its config.json gives them (embedding, 36 x 9, final norm; tied), its weight map
# not checked here; granite-3.1-2b likewise: 2.53B, 362 (embedding, 40 x 9, final norm; tied).
for c in "phi-3-mini-4k 3.82e9 195" "gemma-2-2b 2.61e9 288" "gemma-3-1b 1.00e9 340" \
         "mistral-7b 7.24e9 291" "smollm3-3b 3.08e9 326" "granite-3.1-2b 2.53e9 362"; do
  set -- $c
  rc=0; "$SLATE" synth --shape "$1" --dry-run >"$WORK/dry" 2>&1 || rc=$?
  check "$1: --dry-run exits 0 ($rc) and writes nothing" bash -c '[ "$1" -eq 0 ] && [ ! -e "$2" ]' _ "$rc" "$1"
  n=$(sed -n 's/^parameters *\([0-9]*\).*/\1/p' "$WORK/dry")
  t=$(sed -n 's/^tensors *\([0-9]*\).*/\1/p' "$WORK/dry")
  check "$1: ${n:-no} parameters, within 1 % of $2" \
    $PY -c 'import sys; n, p = float(sys.argv[1] or 0), float(sys.argv[2]); sys.exit(0 if abs(n - p) <= 0.01 * p else 1)' "$n" "$2"
  check "$1: ${t:-no} tensors, as the checkpoint ($3)" test "${t:-0}" -eq "$3"
done
check "gemma-2-2b: --dry-run notes the published f32 weights" \
  grep -q "the published weights are f32" <<<"$("$SLATE" synth --shape gemma-2-2b --dry-run)"

# Refusals, naming the culprit.
for c in "--like gemma-2-2b -o $WORK/x|--like gemma-2-2b needs --dims" \
         "--dims ${dims/head_dim=32/head_dim=31} --like gemma-2-2b -o $WORK/x|--dims head_dim 31 must be even" \
         "--dims hidden=64,layers=1,heads=4,ffn=64,vocab=300,cols=3 -o $WORK/x|unknown --dims key 'cols' (known: hidden, layers, heads, kv_heads, ffn, vocab, ctx, head_dim, window)"; do
  rc=0; "$SLATE" synth ${c%%|*} >/dev/null 2>"$WORK/err" || rc=$?
  check "synth ${c%%|*}: exit 2 ($rc), '${c#*|}'" \
    bash -c '[ "$1" -eq 2 ] && grep -qF -- "$2" "$3"' _ "$rc" "slate synth: ${c#*|}" "$WORK/err"
done
expect_fail "a window on a shape without one is refused" SLATE_E_INVALID_ARG \
  "sliding_window 4: like 'qwen2.5-0.5b' has no sliding window" \
  "$SLATE" synth --like qwen2.5-0.5b --dims "$dims" -o "$WORK/x"
expect_fail "an unknown --like names the known shapes" SLATE_E_INVALID_ARG \
  "unknown like 'gemma-9' (known: tinyllama-1.1b" \
  "$SLATE" synth --like gemma-9 --dims "$dims" -o "$WORK/x"
check "... and nothing was written" test ! -e "$WORK/x"
finish
