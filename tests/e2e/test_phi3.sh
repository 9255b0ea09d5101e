#!/usr/bin/env bash
# Phi-3 beyond the HF variants test (test_hf_variants.sh checks phi3 / phi3-longrope folders
# against the NumPy reference):
# - GGUF phi3: tests/tools/hf_to_gguf.py writes the folder's weights in llama.cpp's layout
#   (fused attn_qkv, gate+up fused in ffn_up, rope_factors_long/short + attn_factor); the GGUF
#   package gives the HF package's logits at every position, also with LongRoPE at both lists
#   and for Phi-4-mini's shape (rope.dimension_count 12 < head size 16, LongRoPE, no
#   output.weight: tied);
# - a GGUF whose fused tensors are Q8_0 / Q4_0: the split q/k/v and gate/up land in the package
#   as the exact bytes of the source rows, and (reference kernels) its logits equal the NumPy
#   reference over the values decoded from those bytes;
# - HF: sharded bf16 checkpoints; --quantize and --palettize compress the split matrices, as
#   they would the same weights given unfused (a Mistral twin: same tensors, same logits);
# - refusals name the culprit: a qkv_proj / gate_up_proj / attn_qkv with the wrong row count,
#   a non-finite value or block scale in one (as the file's tensor and its row there, with the
#   split part it went to),
#   a partial_rotary_factor giving an odd rotated width or LongRoPE lists of the whole head's
#   length, an odd GGUF rope.dimension_count, an unknown rope_scaling type;
# - a Phi-3.5 chat template is picked as the phi3 family, Phi-4-mini's as phi4-mini, by the HF
#   and the GGUF package; a GGUF
#   with llama.cpp's Phi-3 vocabulary tokenizes as that file and picks phi3-v1.
source "$(dirname "$0")/lib.sh"
ids=(304 72 101 108 108 111 44 32 119 111 114 108 100 33)
n=${#ids[@]}
csv=$(IFS=,; echo "${ids[*]}")
# chat_template DIR NAME: puts a published chat template into DIR/tokenizer_config.json; NAME
# phi3.5 (Phi-3.5-mini-instruct's) or phi4-mini (Phi-4-mini-instruct's), as in their
# tokenizer_config.json.
chat_template() {
  $PY - "$1" "$2" <<'PY'
import json, sys
p = sys.argv[1] + "/tokenizer_config.json"
c = json.load(open(p))
c["chat_template"] = {
    "phi3.5": (
        "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
        "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}"
        "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
        "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"),
    "phi4-mini": (
        "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
        "message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + "
        "'<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + "
        "message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if "
        "add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"),
}[sys.argv[2]]
json.dump(c, open(p, "w"), indent=2)
PY
}

for variant in phi3 phi3-longrope phi4-mini; do
  d="$WORK/$variant"
  $PY "$TOOLS/hfmodel.py" make --variant "$variant" --out "$d" --seed 5 >/dev/null
  if [ "$variant" = phi4-mini ]; then chat_template "$d" phi4-mini; else chat_template "$d" phi3.5; fi
  $PY "$TOOLS/hf_to_gguf.py" "$d" "$d.gguf"
  "$SLATE" convert "$d" -o "$d.hf.slate" --kv-dtype fp32 2>/dev/null || true
  if ! "$SLATE" convert "$d.gguf" -o "$d.gguf.slate" --kv-dtype fp32 2>"$d.err"; then
    bad "$variant: GGUF convert failed: $(cat "$d.err")"
    continue
  fi
  prefix_logits "$d.hf.slate" "$d.hf.f32" "${ids[@]}"
  prefix_logits "$d.gguf.slate" "$d.gguf.f32" "${ids[@]}"
  check "$variant: the GGUF package gives the HF package's logits at all $n positions" \
    $PY "$TOOLS/compare_logits.py" "$d.gguf.f32" "$d.hf.f32" --vocab 320 --atol 1e-6 --quiet
done
for variant in phi3-longrope phi4-mini; do
  d="$WORK/$variant"
  "$SLATE" convert "$d.gguf" -o "$d.g64.slate" --context 64 --kv-dtype fp32 2>/dev/null || true
  "$SLATE" run "$d.g64.slate" --ids "$csv" -n 1 --temp 0 --dump-logits "$WORK/g64.f32" >/dev/null 2>&1 || : >"$WORK/g64.f32"
  $PY "$TOOLS/hfmodel.py" forward "$d" --tokens "$csv" --context 64 --last --out "$WORK/r64.f32" >/dev/null
  check "$variant GGUF at --context 64 (short factors) matches the reference at context 64" \
    $PY "$TOOLS/compare_logits.py" "$WORK/g64.f32" "$WORK/r64.f32" --vocab 320 --atol 1e-4 --quiet
done

# Quantized fused tensors: Q8_0 qkv, Q4_0 gate+up.
d="$WORK/phi3"
$PY "$TOOLS/hf_to_gguf.py" "$d" "$WORK/q.gguf" --quant Q8_0:attn_qkv --quant Q4_0:ffn_up \
  --dequant-out "$WORK/deq"
check "a GGUF with Q8_0 attn_qkv and Q4_0 ffn_up converts" \
  "$SLATE" convert "$WORK/q.gguf" -o "$WORK/q.slate" --kv-dtype fp32
cat >"$WORK/split.py" <<'PY'
# The package's q/k/v and gate/up tensors are the GGUF's fused rows, byte for byte.
import sys
import slatefiles as sf
pkg, src = sf.package_tensors(sys.argv[1]), sf.gguf_tensors(sys.argv[2])
BLOCK = {8: ("q8_0", 34), 2: ("q4", 18)}
n_ok, bad = 0, []
for l in range(4):
    for fused, parts in (("attn_qkv", [("attn_q", 64), ("attn_k", 32), ("attn_v", 32)]),
                         ("ffn_up", [("ffn_gate", 128), ("ffn_up", 128)])):
        ne, tt, data = src["blk.%d.%s.weight" % (l, fused)]
        dtype, bsize = BLOCK[tt]
        row = ne[0] // 32 * bsize
        r0 = 0
        for name, rows in parts:
            t, blob = pkg["blk.%d.%s.weight" % (l, name)]
            want = bytes(data[r0 * row:(r0 + rows) * row])
            if t["dtype"] != dtype or t["shape"] != [rows, ne[0]] or blob != want:
                bad.append("blk.%d.%s (%s %s)" % (l, name, t["dtype"], t["shape"]))
            else:
                n_ok += 1
            r0 += rows
print("%d split tensors byte-exact, %d differ: %s" % (n_ok, len(bad), bad[:3]))
sys.exit(1 if bad or n_ok != 20 else 0)
PY
check "the split Q8_0 q/k/v and Q4_0 gate/up are the source rows' blocks, byte for byte" \
  $PY "$WORK/split.py" "$WORK/q.slate" "$WORK/q.gguf"
SLATE_KERNELS=ref "$SLATE" run "$WORK/q.slate" --ids "$csv" -n 1 --temp 0 \
  --dump-logits "$WORK/q.f32" >/dev/null 2>&1 || true
$PY "$TOOLS/hfmodel.py" forward "$WORK/deq" --tokens "$csv" --last --out "$WORK/deq.f32" >/dev/null
check "the quantized GGUF package (reference kernels) matches the reference of its decoded weights" \
  $PY "$TOOLS/compare_logits.py" "$WORK/q.f32" "$WORK/deq.f32" --vocab 320 --atol 1e-4 --quiet
# A bad element of a fused tensor is named as the file's tensor and its row there, with the
# split part it went to (the file has no blk.1.attn_k.weight). Q8_0 rows of 64 are 2 blocks of
# 34 bytes: block 141 starts at row 70, column 32, in attn_k's rows 64..95.
patch_f16 "$WORK/q.gguf" "$WORK/inf_qkv.gguf" blk.1.attn_qkv.weight 141 0 7c00
expect_fail "an infinite Q8_0 scale in attn_qkv is named by the file's tensor and row" \
  SLATE_E_FORMAT "tensor 'blk.1.attn_qkv.weight' (rows 64..95 of it are blk.1.attn_k.weight): the Q8_0 block of 32 at element [70][32] has a scale that is not finite (inf)" \
  "$SLATE" convert "$WORK/inf_qkv.gguf" -o "$WORK/x.slate"

# HF: three bf16 shards; --quantize int8 and --palettize compress the split matrices.
$PY "$TOOLS/hfmodel.py" make --variant phi3 --out "$WORK/bf" --seed 5 --dtype BF16 --shards 3 >/dev/null
"$SLATE" convert "$WORK/bf" -o "$WORK/bf.slate" --dtype bf16 --kv-dtype fp32 2>/dev/null || true
"$SLATE" run "$WORK/bf.slate" --ids "$csv" -n 1 --temp 0 --dump-logits "$WORK/bf.f32" >/dev/null 2>&1 || true
$PY "$TOOLS/hfmodel.py" forward "$WORK/bf" --tokens "$csv" --last --out "$WORK/bf.ref" >/dev/null
check "phi3 in three bf16 shards matches the reference (atol 1e-3)" \
  $PY "$TOOLS/compare_logits.py" "$WORK/bf.f32" "$WORK/bf.ref" --vocab 320 --atol 1e-3 --quiet
# The same weights as a Mistral folder (separate q/k/v, gate/up; same window): compressing the
# phi3 folder must give that folder's tensors byte for byte and its logits exactly.
TOOLS=$TOOLS $PY - "$d" "$WORK/mistral" <<'PY'
import json, os, shutil, sys
sys.path.insert(0, os.environ["TOOLS"])
import hfmodel
src, out = sys.argv[1:3]
os.makedirs(out)
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(src, f), out)
c = json.load(open(os.path.join(src, "config.json")))
c.update(architectures=["MistralForCausalLM"], model_type="mistral", head_dim=16)
json.dump(c, open(os.path.join(out, "config.json"), "w"))
w, _ = hfmodel.read_safetensors(os.path.join(src, "model.safetensors"))
nw = {}
for k, v in w.items():
    if k.endswith("qkv_proj.weight"):
        p = k[:-len("qkv_proj.weight")]
        nw[p + "q_proj.weight"], nw[p + "k_proj.weight"], nw[p + "v_proj.weight"] = v[:64], v[64:96], v[96:]
    elif k.endswith("gate_up_proj.weight"):
        p = k[:-len("gate_up_proj.weight")]
        nw[p + "gate_proj.weight"], nw[p + "up_proj.weight"] = v[:128], v[128:]
    else:
        nw[k] = v
hfmodel.write_weights(out, nw)
PY
cat >"$WORK/same.py" <<'PY'
# Every tensor of package 1 has package 2's dtype, shape and bytes (and the names agree).
import sys
import slatefiles as sf
def package(path):
    return {n: (t["dtype"], t["shape"], blob) for n, (t, blob) in sf.package_tensors(path).items()}
a, b = package(sys.argv[1]), package(sys.argv[2])
bad = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
print("%d tensors, %d differ: %s; dtypes %s" % (len(a), len(bad), bad[:3],
      sorted({v[0] for v in a.values()})))
sys.exit(1 if bad or len(a) < 30 else 0)
PY
for opt in "--quantize int8" "--quantize int4" "--palettize 4"; do
  # shellcheck disable=SC2086
  "$SLATE" convert "$d" -o "$WORK/c.slate" $opt --kv-dtype fp32 2>/dev/null || true
  # shellcheck disable=SC2086
  "$SLATE" convert "$WORK/mistral" -o "$WORK/m.slate" $opt --kv-dtype fp32 2>/dev/null || true
  check "phi3 with $opt: the tensors of the unfused twin, byte for byte" \
    $PY "$WORK/same.py" "$WORK/c.slate" "$WORK/m.slate"
  "$SLATE" run "$WORK/c.slate" --ids "$csv" -n 1 --temp 0 --dump-logits "$WORK/c.f32" >/dev/null 2>&1 || true
  "$SLATE" run "$WORK/m.slate" --ids "$csv" -n 1 --temp 0 --dump-logits "$WORK/m.f32" >/dev/null 2>&1 || true
  check "phi3 with $opt: the unfused twin's logits exactly" cmp -s "$WORK/c.f32" "$WORK/m.f32"
done

# Refusals name the culprit.
mkdir -p "$WORK/badqkv" "$WORK/badgu"
TOOLS=$TOOLS $PY - "$d" "$WORK/badqkv" "$WORK/badgu" <<'PY'
import os, shutil, sys
sys.path.insert(0, os.environ["TOOLS"])
import hfmodel
src, qkv, gu = sys.argv[1:4]
w, _ = hfmodel.read_safetensors(src + "/model.safetensors")
for out, name, rows in ((qkv, "model.layers.0.self_attn.qkv_proj.weight", 96),
                        (gu, "model.layers.2.mlp.gate_up_proj.weight", 128)):
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), out)
    bad = dict(w)
    bad[name] = w[name][:rows]
    hfmodel.write_weights(out, bad)
PY
expect_fail "a qkv_proj with 96 rows is refused, naming it and the expected rows" SLATE_E_FORMAT \
  "tensor 'model.layers.0.self_attn.qkv_proj.weight' has shape [96][64] (rows by inputs), expected [128][64]: q 64 + k 32 + v 32 rows" \
  "$SLATE" convert "$WORK/badqkv" -o "$WORK/x.slate"
expect_fail "a gate_up_proj with 128 rows is refused, naming it" SLATE_E_FORMAT \
  "tensor 'model.layers.2.mlp.gate_up_proj.weight' has shape [128][64] (rows by inputs), expected [256][64]: gate 128 + up 128 rows" \
  "$SLATE" convert "$WORK/badgu" -o "$WORK/x.slate"
# The same for an HF fused matrix, on each route its values take (f32 copy, int8, palettes,
# f16): qkv_proj element [70][5] (attn_k's row 6) is NaN; gate_up_proj [130][7] (up's row 2)
# is +inf in another folder; an unfused o_proj [3][9] is NaN in a third (named by the file's
# name, with slate's after it).
mkdir -p "$WORK/nanqkv" "$WORK/infgu" "$WORK/nano"
TOOLS=$TOOLS $PY - "$d" "$WORK/nanqkv" "$WORK/infgu" "$WORK/nano" <<'PY'
import os, shutil, sys
sys.path.insert(0, os.environ["TOOLS"])
import hfmodel
src, qkv, gu, o = sys.argv[1:5]
w, _ = hfmodel.read_safetensors(src + "/model.safetensors")
for out, name, at, v in ((qkv, "model.layers.1.self_attn.qkv_proj.weight", (70, 5), "nan"),
                         (gu, "model.layers.3.mlp.gate_up_proj.weight", (130, 7), "inf"),
                         (o, "model.layers.2.self_attn.o_proj.weight", (3, 9), "nan")):
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), out)
    bad = dict(w)
    bad[name] = w[name].copy()
    bad[name][at] = float(v)
    hfmodel.write_weights(out, bad)
PY
qkv="tensor 'model.layers.1.self_attn.qkv_proj.weight' (rows 64..95 of it are blk.1.attn_k.weight)"
expect_fail "a NaN in an HF qkv_proj (f32) is named by the file's tensor and element" \
  SLATE_E_FORMAT "$qkv: element $((70 * 64 + 5)) is not finite (nan)" \
  "$SLATE" convert "$WORK/nanqkv" -o "$WORK/x.slate"
expect_fail "... (--quantize int8) by the file's tensor and row" \
  SLATE_E_FORMAT "$qkv: element [70][5] is not finite (nan)" \
  "$SLATE" convert "$WORK/nanqkv" -o "$WORK/x.slate" --quantize int8
expect_fail "... (--palettize 4) by the file's tensor and row" \
  SLATE_E_FORMAT "$qkv: element [70][5] is not finite (nan)" \
  "$SLATE" convert "$WORK/nanqkv" -o "$WORK/x.slate" --palettize 4
expect_fail "an inf in an HF gate_up_proj (--dtype fp16) is named by the file's tensor" \
  SLATE_E_FORMAT "tensor 'model.layers.3.mlp.gate_up_proj.weight' (rows 128..255 of it are blk.3.ffn_up.weight): element $((130 * 64 + 7)) is not finite (inf)" \
  "$SLATE" convert "$WORK/infgu" -o "$WORK/x.slate" --dtype fp16
expect_fail "a NaN in an HF o_proj is named by the file's tensor, then slate's name" \
  SLATE_E_FORMAT "tensor 'model.layers.2.self_attn.o_proj.weight' (blk.2.attn_output.weight): element [3][9] is not finite (nan)" \
  "$SLATE" convert "$WORK/nano" -o "$WORK/x.slate" --quantize int8
$PY "$TOOLS/hf_to_gguf.py" "$WORK/badqkv" "$WORK/badqkv.gguf"
expect_fail "a GGUF attn_qkv with 96 rows is refused, naming it" SLATE_E_FORMAT \
  "tensor 'blk.0.attn_qkv.weight' has shape [96][64] (rows by inputs), expected [128][64]" \
  "$SLATE" convert "$WORK/badqkv.gguf" -o "$WORK/x.slate"
# phi3 GGUF keys and tensors, one broken thing each (LongRoPE ones from the longrope folder).
lr="$WORK/phi3-longrope"
gguf_refused "GGUF ffn_up with ffn rows (not gate+up) is refused" SLATE_E_FORMAT \
  "tensor 'blk.1.ffn_up.weight' has shape [128][64] (rows by inputs), expected [256][64]: gate 128 + up 128 rows" \
  "$d" --rows blk.1.ffn_up.weight:128
gguf_refused "GGUF rope.dimension_count 11 (odd: dims rotate in pairs) is refused" SLATE_E_FORMAT \
  "key phi3.rope.dimension_count 11 is odd" "$d" --key phi3.rope.dimension_count:u32:11
gguf_refused "GGUF partial rotary with whole-head LongRoPE factors (8 for 6 pairs) is refused" \
  SLATE_E_FORMAT "tensor 'rope_factors_short.weight' must be f32 [6]" "$lr" \
  --key phi3.rope.dimension_count:u32:12
gguf_refused "GGUF with rope_factors_long but no rope_factors_short is refused" SLATE_E_FORMAT \
  "tensor 'rope_factors_short.weight' is missing (LongRoPE needs both" "$lr" --drop rope_factors_short.weight
gguf_refused "GGUF rope_factors_long of 7 factors is refused" SLATE_E_FORMAT \
  "tensor 'rope_factors_long.weight' must be f32 [8]" "$lr" --rows rope_factors_long.weight:7
gguf_refused "GGUF rope.scaling.attn_factor -1 is refused" SLATE_E_FORMAT \
  "key phi3.rope.scaling.attn_factor is -1" "$lr" --key phi3.rope.scaling.attn_factor:f32:-1
$PY "$TOOLS/hf_to_gguf.py" "$d" "$WORK/w0.gguf" --key phi3.attention.sliding_window:u32:0
"$SLATE" convert "$WORK/w0.gguf" -o "$WORK/w0.slate" --kv-dtype fp32 2>/dev/null || true
check "GGUF sliding_window 0 (llama.cpp's none, Phi-4) writes no window" $PY -c '
import sys
import slatefiles as sf
att = [o for o in sf.package_program(sys.argv[1]) if o["op"] == "attention"]
sys.exit(0 if len(att) == 4 and all("window" not in o for o in att) else 1)' "$WORK/w0.slate"
# config.json: edit (KEY JSON) pairs into a copy of the phi3 folder.
with_config() {
  local out=$1; shift
  cp -r "$d" "$out"
  $PY - "$out/config.json" "$@" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
for k, v in zip(sys.argv[2::2], sys.argv[3::2]):
    c[k] = json.loads(v)
json.dump(c, open(p, "w"))
PY
}
with_config "$WORK/prf" partial_rotary_factor 0.7
expect_fail "partial_rotary_factor 0.7 (11 of 16 dims: odd) is refused, naming both numbers" \
  SLATE_E_FORMAT "partial_rotary_factor 0.7 of head_dim 16 rotates 11 dims per head" \
  "$SLATE" convert "$WORK/prf" -o "$WORK/x.slate"
d="$WORK/phi3-longrope"
with_config "$WORK/prf2" partial_rotary_factor 0.75
expect_fail "partial_rotary_factor 0.75 with LongRoPE lists of 8 (not 12 / 2) is refused" \
  SLATE_E_FORMAT "rope_scaling.short_factor must be an array of 6 numbers" \
  "$SLATE" convert "$WORK/prf2" -o "$WORK/x.slate"
d="$WORK/phi3"
with_config "$WORK/yarn" rope_scaling '{"type": "yarn", "factor": 4}'
expect_fail "rope_scaling type yarn is refused, naming rope_scaling" SLATE_E_UNSUPPORTED \
  "rope_scaling type 'yarn' is not supported" "$SLATE" convert "$WORK/yarn" -o "$WORK/x.slate"

# Chat template: the Phi-3.5 template picks the phi3 family, Phi-4-mini's (no newlines) the
# phi4-mini family, from either source.
for p in phi3.hf phi3.gguf phi4-mini.hf phi4-mini.gguf; do
  printf 'Hello\n/stats\n' | "$SLATE" chat "$WORK/$p.slate" -n 2 --temp 0 >"$WORK/chat.out" \
    2>/dev/null || true
  check "$p: the chat template is detected as ${p%%.*}" \
    grep -aq "^\[stats\].* template=${p%%.*}\( \|$\)" "$WORK/chat.out"
done
# With llama.cpp's Phi-3 vocabulary (SentencePiece, 32064 tokens, the first Phi-3 template):
# the package tokenizes as that file does and picks the phi3-v1 family.
V=$SLATE_MODELS_DIR/tokenizers/gguf-vocab/ggml-vocab-phi-3.gguf
if [ -f "$V" ]; then
  $PY "$TOOLS/hf_to_gguf.py" "$d" "$WORK/v.gguf" --vocab-from "$V"
  check "a phi3 GGUF with the Phi-3 vocabulary converts" \
    "$SLATE" convert "$WORK/v.gguf" -o "$WORK/v.slate" --kv-dtype fp32
  text=$'<|user|>\nHello world<|end|>\n<|assistant|>\n'
  want=$(printf '%s' "$text" | "$SLATE" tokenize "$V" --parse-special)
  got=$(printf '%s' "$text" | "$SLATE" tokenize "$WORK/v.slate" --parse-special || true)
  check "... and tokenizes as the vocabulary file ($want)" test "$got" = "$want"
  printf 'Hello\n/stats\n' | "$SLATE" chat "$WORK/v.slate" -n 2 --temp 0 >"$WORK/chat.out" \
    2>/dev/null || true
  check "... and its template is detected as phi3-v1" \
    grep -aq '^\[stats\].* template=phi3-v1\( \|$\)' "$WORK/chat.out"
else
  echo "skipping the Phi-3 vocabulary checks: $V not found"
fi
finish
