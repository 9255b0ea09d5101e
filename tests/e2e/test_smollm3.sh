#!/usr/bin/env bash
# SmolLM3 (SmolLM3ForCausalLM): a Llama decoder whose "NoPE" layers apply no RoPE to q and k.
# tests/tools/hfmodel.py writes small random folders (smollm3: layer 3 NoPE by no_rope_layers, as
# SmolLM3-3B's interval 4; smollm3-list: layers 0 and 2 NoPE, a list longer than the layers;
# smollm3-longrope: layers 1 and 3 NoPE by no_rope_layer_interval 2, with LongRoPE, whose
# attention factor must scale only the rotated layers) and its NumPy reference, which skips the
# rotation on the NoPE layers as transformers' modeling_smollm3 does. slate's packages must match
# it at every position (a NoPE layer given RoPE changes every position after the first), also
# decoding token by token, and their programs must have rope ops on the RoPE layers only. The
# smollm3 folder written as llama.cpp's GGUF "smollm3" (tests/tools/hf_to_gguf.py: llama keys,
# permuted Q/K; llama.cpp fixes the NoPE layers at (l + 1) % 4 == 0) must match the same
# reference. What slate cannot run is
# refused naming the key: biases, sliding-window layers, bad no_rope_layers, unknown RoPE
# scaling, a GGUF window. SmolLM3's chat template matches no family: chat is refused, raw
# completion runs.
source "$(dirname "$0")/lib.sh"
ids=(304 72 101 108 108 111 44 32 119 111 114 108 100 33 32 84)
n=${#ids[@]}
csv=$(IFS=,; echo "${ids[*]}")
for v in smollm3 smollm3-list smollm3-longrope; do variant_matches "$v"; done
check "smollm3-list: 12 decode steps match the NumPy reference (atol 1e-4)" \
  steps_match "$WORK/smollm3-list.slate" "$WORK/smollm3-list"
# rope_layers PKG WANT: the layers whose program rotates q and k (two rope ops each, the
# layer found by the following kv_write's cache name) are exactly WANT (a Python list).
rope_layers() {
  $PY - "$1" "$2" <<'PYEOF'
import sys
import slatefiles as sf
ops = sf.package_program(sys.argv[1])
layers, pending = [], 0
for o in ops:
    if o["op"] == "rope":
        pending += 1
    elif o["op"] == "kv_write" and o["in"][1].endswith(".k"):
        layers += [int(o["in"][1].split(".")[1])] * pending
        pending = 0
want = eval(sys.argv[2])
sys.exit(0 if layers == [l for l in want for _ in range(2)] else 1)
PYEOF
}
check "smollm3: rope ops on layers 0-2 only (layer 3 is NoPE)" rope_layers "$WORK/smollm3.slate" "[0, 1, 2]"
check "smollm3-list: rope ops on layers 1 and 3 only" rope_layers "$WORK/smollm3-list.slate" "[1, 3]"
check "smollm3-longrope: rope ops on layers 0 and 2 only (interval 2)" \
  rope_layers "$WORK/smollm3-longrope.slate" "[0, 2]"
# LongRoPE's m^2 (m = sqrt(1 + ln 4 / ln 64)) is folded into the rotated layers' scale only.
check "smollm3-longrope: attention scale m^2/4 on layers 0 and 2, 1/4 on the NoPE layers" \
  $PY - "$WORK/smollm3-longrope.slate" <<'PYEOF'
import math, sys
import slatefiles as sf
m2 = 1 + math.log(4) / math.log(64)
sc = [o["scale"] for o in sf.package_program(sys.argv[1]) if o["op"] == "attention"]
want = [m2 / 4, 0.25, m2 / 4, 0.25]
sys.exit(0 if all(abs(a - b) < 1e-6 for a, b in zip(sc, want)) and len(sc) == 4 else 1)
PYEOF
check "smollm3: tied head (SmolLM3Config's default) reads token_embd.weight" \
  $PY - "$WORK/smollm3.slate" <<'PYEOF'
import sys
import slatefiles as sf
ops = sf.package_program(sys.argv[1])
sys.exit(0 if ops[-1]["in"] == ["xl", "token_embd.weight"] else 1)
PYEOF
# The interval rule without a list: null no_rope_layers and interval 3 make layer 2 NoPE.
d="$WORK/interval"
$PY "$TOOLS/hfmodel.py" make --variant smollm3 --out "$d" --seed 5 --set no_rope_layers=null \
  --set no_rope_layer_interval=3 >/dev/null
"$SLATE" convert "$d" -o "$d.slate" --kv-dtype fp32 2>/dev/null || true
$PY "$TOOLS/hfmodel.py" forward "$d" --tokens "$csv" --out "$d.ref" --last >/dev/null
"$SLATE" run "$d.slate" --ids "$csv" -n 1 --temp 0 --dump-logits "$d.f32" >/dev/null 2>&1 || true
check "smollm3 with no_rope_layer_interval 3: layer 2 NoPE, logits match the reference" \
  $PY "$TOOLS/compare_logits.py" "$d.f32" "$d.ref" --vocab 320 --atol 1e-4 --quiet
check "smollm3 with no_rope_layer_interval 3: rope ops on layers 0, 1 and 3" \
  rope_layers "$d.slate" "[0, 1, 3]"
# GGUF: llama.cpp's smollm3 layout of the smollm3 folder.
d="$WORK/smollm3"
$PY "$TOOLS/hf_to_gguf.py" "$d" "$d.gguf"
if "$SLATE" convert "$d.gguf" -o "$d.g.slate" --kv-dtype fp32 2>"$d.gerr"; then
  prefix_logits "$d.g.slate" "$d.g.f32" "${ids[@]}"
  check "smollm3 GGUF: logits at all $n positions match the NumPy reference (atol 1e-4)" \
    $PY "$TOOLS/compare_logits.py" "$d.g.f32" "$d.ref.f32" --vocab 320 --atol 1e-4 --quiet
  check "smollm3 GGUF: rope ops on layers 0-2 only, adjacent pairs" \
    rope_layers "$d.g.slate" "[0, 1, 2]"
  check "smollm3 GGUF: adjacent-pair rope (llama.cpp's permuted Q/K rows)" \
    $PY - "$d.g.slate" <<'PYEOF'
import sys
import slatefiles as sf
modes = {o["mode"] for o in sf.package_program(sys.argv[1]) if o["op"] == "rope"}
sys.exit(0 if modes == {"adjacent"} else 1)
PYEOF
else
  bad "smollm3 GGUF: convert failed: $(cat "$d.gerr")"
fi
gguf_refused "smollm3 GGUF with a sliding window is refused" SLATE_E_UNSUPPORTED \
  "key smollm3.attention.sliding_window is 8: a sliding window is not supported on smollm3" \
  "$d" --key smollm3.attention.sliding_window:u32:8
# config.json keys slate cannot honour, each refused naming itself.
for c in 'U|mlp_bias=true|mlp_bias on SmolLM3ForCausalLM is not supported' \
         'U|attention_bias=true|attention_bias on SmolLM3ForCausalLM is not supported' \
         'U|layer_types=["full_attention","sliding_attention","full_attention","full_attention"]|layer_types[1] is "sliding_attention": SmolLM3'"'"'s sliding-window layers are not supported' \
         'U|use_sliding_window=true|use_sliding_window with sliding_window 4096 makes SmolLM3'"'"'s NoPE layers (layer 3 first)' \
         'F|no_rope_layers=[1,1,1]|no_rope_layers is too short, expected an array of at least 4 entries' \
         'F|no_rope_layers=[1,1,2,0]|no_rope_layers[2] is 2, expected 0 (no RoPE) or 1 (RoPE)' \
         'F|no_rope_layer_interval=0|no_rope_layer_interval is 0, expected an integer in 1..' \
         'U|rope_scaling={"rope_type":"yarn","factor":2.0}|rope_scaling type '"'"'yarn'"'"' is not supported' \
         'U|partial_rotary_factor=0.5|partial_rotary_factor 0.5 is not supported for SmolLM3ForCausalLM'; do
  st=SLATE_E_UNSUPPORTED
  [ "${c%%|*}" = F ] && st=SLATE_E_FORMAT
  c=${c#*|}
  kv=${c%%|*} msg=${c#*|} d="$WORK/refused"
  rm -rf "$d" && cp -r "$WORK/smollm3" "$d"
  # use_sliding_window comes with a window and without layer_types; the interval applies
  # without a list
  $PY - "$d/config.json" "${kv%%=*}" "${kv#*=}" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c[sys.argv[2]] = json.loads(sys.argv[3])
if sys.argv[2] == "use_sliding_window":  # layer_types, when given, decides alone
    c["sliding_window"] = 4096
    c["layer_types"] = None
if sys.argv[2] == "no_rope_layer_interval":
    c["no_rope_layers"] = None
json.dump(c, open(sys.argv[1], "w"))
PYEOF
  expect_fail "smollm3 with $kv is refused" "$st" "$msg" "$SLATE" convert "$d" -o "$d.slate"
done
# SmolLM3's chat template (its reasoning-mode, system and generation-prompt parts, as
# HuggingFaceTB/SmolLM3-3B ships them) matches no family: chat is refused naming the way out,
# a raw completion of the same package runs.
d="$WORK/chat"
rm -rf "$d" && cp -r "$WORK/smollm3" "$d"
$PY - "$d/tokenizer_config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = (
    '{%- if enable_thinking -%}\n  {%- set reasoning_mode = "/think" -%}\n{%- else -%}\n'
    '  {%- set reasoning_mode = "/no_think" -%}\n{%- endif -%}\n'
    '{{- "<|im_start|>system\\n" -}}\n{{- "Reasoning Mode: " + reasoning_mode + "\\n\\n" -}}\n'
    '{%- for message in messages -%}\n{{ "<|im_start|>" + message.role + "\\n" + message.content'
    ' + "<|im_end|>\\n" }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n'
    '  {%- if reasoning_mode == "/think" -%}\n    {{ "<|im_start|>assistant\\n" }}\n'
    '  {%- else -%}\n    {{ "<|im_start|>assistant\\n" + "<think>\\n\\n</think>\\n"  }}\n'
    '  {%- endif -%}\n{%- endif -%}')
json.dump(c, open(sys.argv[1], "w"))
PYEOF
"$SLATE" convert "$d" -o "$d.slate" 2>/dev/null || true
expect_fail "smollm3: chat with SmolLM3's template is refused (name one with --template)" \
  SLATE_E_UNSUPPORTED "matches none of the known families" \
  bash -c "printf 'Hello\n' | '$SLATE' chat '$d.slate' -n 2 --temp 0"
completes() { "$SLATE" run "$1" -p "Hello" -n 4 --temp 0 >/dev/null 2>&1; }
check "smollm3: raw completion of the same package runs" completes "$d.slate"
finish
