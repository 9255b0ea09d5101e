#!/usr/bin/env bash
# Each supported architecture variant, as a small random Hugging Face model made by
# tests/tools/hfmodel.py, converted by slate and checked against the independent NumPy forward
# pass in the same tool: last-position logits for every prefix length 1..N of a fixed sequence
# (N > the Mistral, Phi-3 and Gemma 3 sliding windows), so prefill over several positions, GQA,
# qkv bias, q/k norm, rope scaling (Llama 3.1, LongRoPE, and linear on Gemma 3's global layers
# only), tied/untied heads, the window and Phi-3's fused qkv_proj / gate_up_proj (split by the
# converter, used fused by the reference) are all exercised; Gemma adds the embedding scale, the
# (1 + w) norms (the reference applies the stored w), GeGLU and head_dim != hidden / heads, and
# Gemma 3 the block-output norms, query_pre_attn_scalar and sliding and global layers with their
# own RoPE bases (by sliding_window_pattern and by layer_types), also decoding token by token past
# the window; Gemma 2 its two soft-caps (attention scores and final logits) with alternating
# sliding layers (by default and by layer_types), also decoding past the window. The Gemma 3
# package must pick the gemma chat template from the folder's tokenizer_config.json;
# soft-capping on Gemma 3 and an exact GELU are refused. Phi-4-mini's partial rotary (12 of
# 16 dims) with LongRoPE, whose attention factor scales only the rotated dims, is exercised too.
source "$(dirname "$0")/lib.sh"
ids=(304 72 101 108 108 111 44 32 119 111 114 108 100 33 32 84 104 101 32 99)
n=${#ids[@]}
csv=$(IFS=,; echo "${ids[*]}")
for variant in llama llama-tied llama3-rope qwen2 qwen3 mistral smollm phi3 phi3-longrope \
    phi4-mini gemma gemma2 gemma2-types gemma3 gemma3-types; do
  variant_matches "$variant"
done
# Soft-cap keys on a Llama config are ignored by transformers (only Gemma 2 / 3's modeling code
# reads them), and by slate: the reference must ignore them too, or it checks nothing there.
d="$WORK/llama-stray-caps"
$PY "$TOOLS/hfmodel.py" make --variant llama --out "$d" --seed 11 \
  --set attn_logit_softcapping=0.5 --set final_logit_softcapping=0.5 >/dev/null
"$SLATE" convert "$d" -o "$d.slate" --kv-dtype fp32 >/dev/null 2>&1 || : >"$d.slate"
$PY "$TOOLS/hfmodel.py" forward "$d" --tokens "$csv" --out "$d.ref.f32"
prefix_logits "$d.slate" "$d.slate.f32" "${ids[@]}"
check "llama with Gemma's soft-cap keys: they are ignored, as transformers does (atol 1e-4)" \
  $PY "$TOOLS/compare_logits.py" "$d.slate.f32" "$d.ref.f32" --vocab 320 --atol 1e-4 --quiet
# Gemma 3's per-layer program, read from the package's META: the sliding layers (0 and 2 with
# pattern 2) carry the window and rotate with rope_local.freqs, the global ones neither; one
# scale op (sqrt(64) = 8) after the embedding; GeGLU, no SwiGLU; 6 norms per layer + the final.
check "gemma3: windows and local rope on layers 0 and 2 only, scale 8, geglu, 25 rms_norms" \
  $PY - "$WORK/gemma3.slate" <<'PYEOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<I", b, 12)[0]
for i in range(n):
    kind, _, off, size = struct.unpack_from("<IIQQ", b, 64 + 32 * i)
    if kind == 1:
        meta = json.loads(b[off:off + size])
ops = meta["program"]
att = [o.get("window") for o in ops if o["op"] == "attention"]
ropes = [o["in"][1] for o in ops if o["op"] == "rope"]
local = ["rope_local.freqs"] * 2
want_ropes = local + ["rope.freqs"] * 2 + local + ["rope.freqs"] * 2
scales = [o for o in ops if o["op"] == "scale"]
ok = (att == [6, None, 6, None] and ropes == want_ropes and len(scales) == 1
      and scales[0]["factor"] == 8 and ops[1]["op"] == "scale"
      and sum(o["op"] == "geglu" for o in ops) == 4 and not any(o["op"] == "swiglu" for o in ops)
      and sum(o["op"] == "rms_norm" for o in ops) == 25)
sys.exit(0 if ok else 1)
PYEOF
# Gemma 2's program: every attention is attention_softcap with cap 2 (the variant's), windows on
# layers 0 and 2 only, one RoPE table, a softcap op with cap 3 on the logits after the head;
# gemma2-types: the default attention cap 50, windows on layers 1 and 2, no logit cap.
check "gemma2: attention_softcap 2 on every layer, windows on 0 and 2, logits capped at 3" \
  $PY - "$WORK/gemma2.slate" "$WORK/gemma2-types.slate" <<'PYEOF'
import json, struct, sys
def program(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<I", b, 12)[0]
    for i in range(n):
        kind, _, off, size = struct.unpack_from("<IIQQ", b, 64 + 32 * i)
        if kind == 1:
            return json.loads(b[off:off + size])["program"]
ops = program(sys.argv[1])
att = [(o["op"], o.get("softcap"), o.get("window")) for o in ops if "attention" in o["op"]]
ok = (att == [("attention_softcap", 2, 6), ("attention_softcap", 2, None)] * 2
      and {o["in"][1] for o in ops if o["op"] == "rope"} == {"rope.freqs"}
      and ops[-1] == {"op": "softcap", "in": ["logits"], "out": "logits", "cap": 3}
      and ops[-2]["op"] == "matmul" and sum(o["op"] == "rms_norm" for o in ops) == 17)
ops = program(sys.argv[2])
att = [(o["op"], o.get("softcap"), o.get("window")) for o in ops if "attention" in o["op"]]
ok = ok and att == [("attention_softcap", 50, None), ("attention_softcap", 50, 5),
                    ("attention_softcap", 50, 5), ("attention_softcap", 50, None)]
ok = ok and not any(o["op"] == "softcap" for o in ops)
sys.exit(0 if ok else 1)
PYEOF
check "gemma2: decode steps past the window match the NumPy reference (atol 1e-4)" \
  steps_match "$WORK/gemma2.slate" "$WORK/gemma2"
printf 'Hello\n/stats\n' | "$SLATE" chat "$WORK/gemma3.slate" -n 2 --temp 0 >"$WORK/g3.chat" 2>&1 || true
check "gemma3: chat picks the gemma template from tokenizer_config.json" \
  grep -aq 'template=gemma' "$WORK/g3.chat"
# Decode, one token at a time, across the window (6) of the sliding layers.
check "gemma3: decode steps past the window match the NumPy reference (atol 1e-4)" \
  steps_match "$WORK/gemma3.slate" "$WORK/gemma3"
# Refusals naming the culprit: soft-capping on Gemma 3 (Gemma 2's only), an exact GELU.
for c in 'final_logit_softcapping=30.0|final_logit_softcapping 30 is not supported' \
         'hidden_activation="gelu"|hidden_activation "gelu" is not supported'; do
  kv=${c%%|*} msg=${c#*|} d="$WORK/g3-refused"
  rm -rf "$d" && cp -r "$WORK/gemma3" "$d"
  $PY - "$d/config.json" "${kv%%=*}" "${kv#*=}" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c[sys.argv[2]] = json.loads(sys.argv[3])
json.dump(c, open(sys.argv[1], "w"))
PYEOF
  expect_fail "gemma3 with $kv is refused" SLATE_E_UNSUPPORTED "$msg" \
    "$SLATE" convert "$d" -o "$d.slate"
done
# LongRoPE picks its list from the package's context: --context 64 (= the original context)
# takes short_factor, which the reference at context 64 uses too (and the default one does not);
# the attention factor (from max / original) applies at both.
for variant in phi3-longrope phi4-mini; do
  d="$WORK/$variant"
  "$SLATE" convert "$d" -o "$d.64.slate" --context 64 --kv-dtype fp32 2>/dev/null || true
  prefix_logits "$d.64.slate" "$d.64.f32" "${ids[@]}"
  $PY "$TOOLS/hfmodel.py" forward "$d" --tokens "$csv" --context 64 --out "$d.64.ref" >/dev/null
  check "$variant at --context 64 uses short_factor, as the reference at that context (all $n positions)" \
    $PY "$TOOLS/compare_logits.py" "$d.64.f32" "$d.64.ref" --vocab 320 --atol 1e-4 --quiet
done
# Sharded checkpoints and half-precision sources.
$PY "$TOOLS/hfmodel.py" make --variant qwen2 --out "$WORK/sharded" --seed 11 --shards 2 >/dev/null
"$SLATE" convert "$WORK/sharded" -o "$WORK/sharded.slate" --kv-dtype fp32 2>/dev/null
"$SLATE" run "$WORK/sharded.slate" --ids 304,72,101 -n 1 --temp 0 --dump-logits "$WORK/sh.f32" >/dev/null 2>&1
"$SLATE" run "$WORK/qwen2.slate" --ids 304,72,101 -n 1 --temp 0 --dump-logits "$WORK/one.f32" >/dev/null 2>&1
check "sharded safetensors give the same logits as one file" cmp -s "$WORK/sh.f32" "$WORK/one.f32"
$PY "$TOOLS/hfmodel.py" make --variant llama --out "$WORK/bf16" --seed 11 --dtype BF16 >/dev/null
"$SLATE" convert "$WORK/bf16" -o "$WORK/bf16.slate" --dtype bf16 --kv-dtype fp32 2>/dev/null
$PY "$TOOLS/hfmodel.py" forward "$WORK/bf16" --tokens 304,72,101,108 --out "$WORK/bf16.ref" --last
"$SLATE" run "$WORK/bf16.slate" --ids 304,72,101,108 -n 1 --temp 0 --dump-logits "$WORK/bf16.f32" >/dev/null 2>&1
check "bf16 checkpoint kept in bf16 matches the reference (atol 1e-3)" \
  $PY "$TOOLS/compare_logits.py" "$WORK/bf16.f32" "$WORK/bf16.ref" --vocab 320 --atol 1e-3 --quiet
finish
