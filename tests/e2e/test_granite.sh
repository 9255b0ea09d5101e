#!/usr/bin/env bash
# IBM Granite 3.x dense (GraniteForCausalLM): a Llama decoder with four multipliers (transformers'
# modeling_granite): the embedding times embedding_multiplier, the attention scale
# attention_multiplier (instead of 1 / sqrt(head_dim)), the attention and feed-forward outputs
# times residual_multiplier before each residual add, the logits divided by logits_scaling.
# tests/tools/hfmodel.py writes small random folders (granite: granite-3.1-2b-shaped, tied, with
# multipliers 12, 0.22, 1/64 and 8, far from 1 so that dropping any one moves every logit;
# granite-defaults: no multiplier keys, GraniteConfig's 1.0 each, so an attention scale of 1) and
# its NumPy reference; slate's packages must match it at every position and decoding token by
# token. The granite folder written as llama.cpp's GGUF "granite" (tests/tools/hf_to_gguf.py:
# llama keys, permuted Q/K, granite.embedding_scale / residual_scale / attention.scale /
# logit_scale) must match the same reference, and a Q8_0 GGUF keeps its blocks byte for byte
# (nothing is folded into weights: the tied head shares the embedding). What slate cannot run
# is refused naming it; Granite's chat template (date-dependent default system prompt) matches
# no family, so chat asks for --template.
source "$(dirname "$0")/lib.sh"
ids=(304 72 101 108 108 111 44 32 119 111 114 108 100 33 32 84)
n=${#ids[@]}
csv=$(IFS=,; echo "${ids[*]}")
for v in granite granite-defaults; do variant_matches "$v"; done
check "granite: 12 decode steps match the NumPy reference (atol 1e-4)" \
  steps_match "$WORK/granite.slate" "$WORK/granite"
# multipliers PKG EMB RESID ATT LOGIT ROPE_MODE: the program expresses the multipliers with
# existing ops: a scale op EMB right after the embedding, a scale op RESID on "ao" before each
# of the 8 residual adds, attention scale ATT on every layer, the tied head's matmul then a scale
# op 1/LOGIT on the logits as the last op (None: no such op), rope in ROPE_MODE.
multipliers() {
  $PY - "$@" <<'PYEOF'
import sys
import numpy as np
import slatefiles as sf
path, emb, resid, att, logit, mode = sys.argv[1:]
ops = sf.package_program(path)
f32 = lambda x: float(np.float32(x))
scales = [(i, o) for i, o in enumerate(ops) if o["op"] == "scale"]
adds = [i for i, o in enumerate(ops) if o["op"] == "add"]
ok = len(adds) == 8 and all(o["op"] == "rope" and o["mode"] == mode or o["op"] != "rope"
                            for o in ops)
want_emb = [] if emb == "None" else [(1, f32(emb))]
got_emb = [(i, f32(o["factor"])) for i, o in scales if o["in"] == ["x"]]
ok = ok and got_emb == want_emb
got_res = [(i, f32(o["factor"])) for i, o in scales if o["in"] == ["ao"]]
ok = ok and got_res == ([] if resid == "None" else [(i - 1, f32(resid)) for i in adds])
ok = ok and [f32(o["scale"]) for o in ops if o["op"] == "attention"] == [f32(att)] * 4
got_logit = [(i, f32(o["factor"])) for i, o in scales if o["in"] == ["logits"]]
if logit == "None":
    ok = ok and got_logit == [] and ops[-1]["op"] == "matmul"
else:
    ok = ok and got_logit == [(len(ops) - 1, f32(1 / float(logit)))]
    ok = ok and ops[-2]["op"] == "matmul" and ops[-2]["in"] == ["xl", "token_embd.weight"]
sys.exit(0 if ok else 1)
PYEOF
}
check "granite: scale ops 12 (embedding), 0.22 (before each residual add), 1/8 (logits); attention scale 1/64" \
  multipliers "$WORK/granite.slate" 12 0.22 0.015625 8 half
check "granite-defaults: no scale ops, attention scale 1 (GraniteConfig's default multiplier)" \
  multipliers "$WORK/granite-defaults.slate" None None 1 None half
# GGUF: llama.cpp's granite layout of the granite folder.
d="$WORK/granite"
$PY "$TOOLS/hf_to_gguf.py" "$d" "$d.gguf"
if "$SLATE" convert "$d.gguf" -o "$d.g.slate" --kv-dtype fp32 2>"$d.gerr"; then
  prefix_logits "$d.g.slate" "$d.g.f32" "${ids[@]}"
  check "granite GGUF: logits at all $n positions match the NumPy reference (atol 1e-4)" \
    $PY "$TOOLS/compare_logits.py" "$d.g.f32" "$d.ref.f32" --vocab 320 --atol 1e-4 --quiet
  check "granite GGUF: the same multipliers, adjacent-pair rope (llama.cpp's permuted Q/K)" \
    multipliers "$d.g.slate" 12 0.22 0.015625 8 adjacent
else
  bad "granite GGUF: convert failed: $(cat "$d.gerr")"
fi
# Q8_0 GGUF (every matrix, the tied embedding too): the blocks are kept as stored, and the
# package runs close to its decoded F32 twin (int8 activations in the Q8_0 matmuls).
$PY "$TOOLS/hf_to_gguf.py" "$d" "$d.q8.gguf" --quant Q8_0:weight --dequant-gguf "$d.q8ref.gguf"
"$SLATE" convert "$d.q8.gguf" -o "$d.q8.slate" --kv-dtype fp32 2>/dev/null || true
"$SLATE" convert "$d.q8ref.gguf" -o "$d.q8ref.slate" --kv-dtype fp32 2>/dev/null || true
check "granite Q8_0 GGUF: every matrix (the tied embedding too) kept byte for byte" \
  $PY - "$d.q8.gguf" "$d.q8.slate" <<'PYEOF'
import sys
import slatefiles as sf
g = sf.gguf_tensors(sys.argv[1])
p = sf.package_tensors(sys.argv[2])
mats = [k for k, (ne, tt, _) in g.items() if len(ne) == 2]
ok = len(mats) == 29 and all(tt == 8 for k, (ne, tt, _) in g.items() if k in mats)
for k in mats:
    t, data = p[k]
    ok = ok and t["dtype"] == "q8_0" and bytes(g[k][2][:len(data)]) == data
sys.exit(0 if ok else 1)
PYEOF
"$SLATE" run "$d.q8.slate" --ids "$csv" -n 1 --temp 0 --dump-logits "$d.q8.f32" >/dev/null 2>&1 || true
"$SLATE" run "$d.q8ref.slate" --ids "$csv" -n 1 --temp 0 --dump-logits "$d.q8ref.f32" >/dev/null 2>&1 || true
check "granite Q8_0 GGUF: logits close to its decoded F32 twin (atol 3e-2)" \
  $PY "$TOOLS/compare_logits.py" "$d.q8.f32" "$d.q8ref.f32" --vocab 320 --atol 3e-2 --quiet
# GGUF keys: logit_scale is required (as llama.cpp), the others may be absent (none; attention:
# 1 / sqrt(head_dim)); each must be an f32, 0 (none) or positive.
gguf_refused "granite GGUF without logit_scale is refused" SLATE_E_FORMAT \
  "key granite.logit_scale is missing" "$d" --no-key granite.logit_scale
gguf_refused "granite GGUF with a u32 residual_scale is refused" SLATE_E_FORMAT \
  "key granite.residual_scale is 1 (u32), expected an f32" "$d" --key granite.residual_scale:u32:1
gguf_refused "granite GGUF with a negative embedding_scale is refused" SLATE_E_FORMAT \
  "key granite.embedding_scale is -2" "$d" --key granite.embedding_scale:f32:-2
$PY "$TOOLS/hf_to_gguf.py" "$d" "$WORK/nokeys.gguf" --no-key granite.residual_scale \
  --no-key granite.embedding_scale --no-key granite.attention.scale
"$SLATE" convert "$WORK/nokeys.gguf" -o "$WORK/nokeys.slate" 2>/dev/null || true
check "granite GGUF without the optional keys: no scale ops but the logits', attention 1/sqrt(16)" \
  multipliers "$WORK/nokeys.slate" None None 0.25 8 adjacent
# config.json keys slate cannot honour, each refused naming itself.
for c in 'U|attention_bias=true|attention_bias on GraniteForCausalLM is not supported' \
         'U|mlp_bias=true|mlp_bias on GraniteForCausalLM is not supported' \
         'U|rope_scaling={"rope_type":"yarn","factor":2.0}|rope_scaling type '"'"'yarn'"'"' is not supported' \
         'F|embedding_multiplier=0|embedding_multiplier is 0, expected a number > 0' \
         'F|logits_scaling=-8|logits_scaling is -8, expected a number > 0' \
         'F|residual_multiplier="0.22"|residual_multiplier is "0.22", expected a number > 0' \
         'U|architectures=["GraniteMoeForCausalLM"]|Granite'"'"'s mixture-of-experts models are not'; do
  st=SLATE_E_UNSUPPORTED
  [ "${c%%|*}" = F ] && st=SLATE_E_FORMAT
  c=${c#*|}
  kv=${c%%|*} msg=${c#*|} r="$WORK/refused"
  rm -rf "$r" && cp -r "$d" "$r"
  $PY - "$r/config.json" "${kv%%=*}" "${kv#*=}" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c[sys.argv[2]] = json.loads(sys.argv[3])
json.dump(c, open(sys.argv[1], "w"))
PYEOF
  expect_fail "granite with $kv is refused" "$st" "$msg" "$SLATE" convert "$r" -o "$r.slate"
done
# Granite's chat template (granite-3.1-2b-instruct's, abridged: its default system message
# carries today's date) matches no family: chat is refused naming the way out, a raw completion
# of the same package runs.
r="$WORK/chat"
rm -rf "$r" && cp -r "$d" "$r"
$PY - "$r/tokenizer_config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = (
    "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n"
    "    {%- set loop_messages = messages[1:] %}\n{%- else %}\n"
    "    {%- set system_message = \"Knowledge Cutoff Date: April 2024.\\nToday's Date: \" + "
    "strftime_now('%B %d, %Y') + \".\\nYou are Granite, developed by IBM. You are a helpful AI "
    "assistant.\" %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n"
    "{{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_text|>\\n' }}\n"
    "{%- for message in loop_messages %}\n    {{- '<|start_of_role|>' + message['role'] + "
    "'<|end_of_role|>' + message['content'] + '<|end_of_text|>\\n' }}\n"
    "    {%- if loop.last and add_generation_prompt %}\n"
    "        {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n    {%- endif %}\n{%- endfor %}")
json.dump(c, open(sys.argv[1], "w"))
PYEOF
"$SLATE" convert "$r" -o "$r.slate" 2>/dev/null || true
expect_fail "granite: chat with Granite's template is refused (name one with --template)" \
  SLATE_E_UNSUPPORTED "matches none of the known families" \
  bash -c "printf 'Hello\n' | '$SLATE' chat '$r.slate' -n 2 --temp 0"
completes() { "$SLATE" run "$1" -p "Hello" -n 4 --temp 0 >/dev/null 2>&1; }
check "granite: raw completion of the same package runs" completes "$r.slate"
finish
