#!/usr/bin/env bash
# Bad input through the CLI: each gets a non-zero exit, a status name and a message naming the
# culprit, and never leaves a half-written output file.
source "$(dirname "$0")/lib.sh"
$PY "$TOOLS/hfmodel.py" make --variant llama --out "$WORK/hf" --seed 3 >/dev/null
"$SLATE" convert "$WORK/hf" -o "$WORK/ok.slate" --context 32 --max-query 8 2>/dev/null
check "reference package converts" test -s "$WORK/ok.slate"

# (A query longer than max_query is E_SHAPE at the API, see test_state; the generation loop
# splits a long prompt into max_query chunks, so the CLI accepts it.)
check "prompt longer than max_query is prefilled in chunks" \
  "$SLATE" run "$WORK/ok.slate" --ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18 -n 1
expect_fail "token id outside the vocabulary" SLATE_E_INVALID_ARG "outside the vocabulary" \
  "$SLATE" run "$WORK/ok.slate" --ids 1,2,5000 -n 1
expect_fail "prompt past the context" SLATE_E_CONTEXT_FULL "does not fit" \
  "$SLATE" run "$WORK/ok.slate" -p "$(head -c 200 /dev/zero | tr '\0' 'a')" -n 1
size=$(stat -c %s "$WORK/ok.slate")
head -c $((size - 100)) "$WORK/ok.slate" >"$WORK/trunc.slate"
expect_fail "truncated package" SLATE_E_FORMAT "truncated" "$SLATE" info "$WORK/trunc.slate"
cp "$WORK/ok.slate" "$WORK/flip.slate"
printf 'X' | dd of="$WORK/flip.slate" bs=1 seek=300 conv=notrunc 2>/dev/null
expect_fail "corrupt metadata byte" SLATE_E_FORMAT "checksum" "$SLATE" info "$WORK/flip.slate"
expect_fail "not a package" SLATE_E_FORMAT "bad magic" "$SLATE" info "$WORK/hf/config.json"

# Lying sources refused by convert, with no output file left behind.
cp -r "$WORK/hf" "$WORK/lie"
$PY - "$WORK/lie/model.safetensors" <<'PYEOF'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
k = "model.layers.0.self_attn.q_proj.weight"
h[k]["data_offsets"][1] += 4000000
s = json.dumps(h).encode()
s += b" " * ((8 - len(s) % 8) % 8)
open(p, "wb").write(struct.pack("<Q", len(s)) + s + bytes(b[8 + n:]))
PYEOF
expect_fail "safetensors header lying about a tensor's size" SLATE_E_FORMAT "q_proj" \
  "$SLATE" convert "$WORK/lie" -o "$WORK/lie.slate"
check "no output left after a failed convert" test ! -e "$WORK/lie.slate" -a ! -e "$WORK/lie.slate.tmp"
sed -i 's/LlamaForCausalLM/GPTNeoXForCausalLM/' "$WORK/hf/config.json"
expect_fail "unknown architecture named" SLATE_E_UNSUPPORTED "GPTNeoXForCausalLM" \
  "$SLATE" convert "$WORK/hf" -o "$WORK/x.slate"
if [ -d "$SLATE_MODELS_DIR/stories260K" ]; then
  M=$SLATE_MODELS_DIR/stories260K
  head -c 600000 "$M/stories260K.gguf" >"$WORK/trunc.gguf"
  expect_fail "truncated GGUF" SLATE_E_FORMAT "" "$SLATE" convert "$WORK/trunc.gguf" -o "$WORK/t.slate"
  head -c 500000 "$M/stories260K.bin" >"$WORK/trunc.bin"
  expect_fail "truncated llama2.c checkpoint" SLATE_E_FORMAT "truncated" \
    "$SLATE" convert "$WORK/trunc.bin" --tokenizer "$M/tok512.bin" -o "$WORK/t.slate"
  check "no output left after failed converts" test ! -e "$WORK/t.slate"
fi
expect_fail "missing source" SLATE_E_IO "no such file" "$SLATE" convert "$WORK/nope" -o "$WORK/n.slate"
finish
