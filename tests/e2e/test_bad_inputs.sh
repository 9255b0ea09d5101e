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
n_out=$("$SLATE" run "$WORK/ok.slate" --ids 1,2,5000 -n 1 2>/dev/null | wc -c || true)
check "... and a failed run prints nothing on stdout, not even a newline ($n_out bytes)" \
  test "$n_out" -eq 0
# --ids is strict: comma-separated integers, no spaces, no empty element; the bad one is named.
for c in "1,2,|element 3 ('') is empty" "1,,2|element 2 ('') is empty" \
         " 1|element 1 (' 1') is not an integer" "1, 2|element 2 (' 2') is not an integer" \
         "1,2x|element 2 ('2x') is not an integer" "+1|element 1 ('+1') is not an integer" \
         "1,4294967297|element 2 ('4294967297') is out of the int32 range"; do
  expect_fail "--ids '${c%%|*}' is refused" "" \
    "--ids must be comma-separated integers without spaces, e.g. 1,2,3: ${c#*|}" \
    "$SLATE" run "$WORK/ok.slate" --ids "${c%%|*}" -n 1
done
expect_fail "prompt past the context" SLATE_E_CONTEXT_FULL "does not fit" \
  "$SLATE" run "$WORK/ok.slate" -p "$(head -c 200 /dev/zero | tr '\0' 'a')" -n 1
# SLATE_KERNELS: a name that is no kernel set, or a set this CPU lacks, is refused with the
# sets there are (before: the fastest table ran instead without a word, so a typo or a CI run
# "on avx512" on a CPU without it tested something else). Empty is unset; ref always runs.
expect_fail "SLATE_KERNELS naming no set" SLATE_E_UNSUPPORTED \
  "SLATE_KERNELS='avx-2' is not a kernel set (ref, avx2, avx2_vnni, avx512, avx512_vnni, neon, neon_dotprod); this CPU runs ref" \
  env SLATE_KERNELS=avx-2 "$SLATE" run "$WORK/ok.slate" --ids 1,2 -n 1
case $(uname -m) in
  x86_64) lacking=neon ;;
  *) lacking=avx2 ;;
esac
expect_fail "SLATE_KERNELS=$lacking on $(uname -m)" SLATE_E_UNSUPPORTED \
  "SLATE_KERNELS=$lacking: this CPU (or this build) has no $lacking kernels; it runs ref" \
  env SLATE_KERNELS=$lacking "$SLATE" run "$WORK/ok.slate" --ids 1,2 -n 1
out=$(SLATE_KERNELS=ref "$SLATE" run "$WORK/ok.slate" --ids 1,2 -n 1 2>&1 >/dev/null || true)
check "SLATE_KERNELS=ref runs the reference" grep -q "kernels ref," <<<"$out"
check "an empty SLATE_KERNELS is unset" env SLATE_KERNELS= "$SLATE" run "$WORK/ok.slate" \
  --ids 1,2 -n 1

size=$(stat -c %s "$WORK/ok.slate")
head -c $((size - 100)) "$WORK/ok.slate" >"$WORK/trunc.slate"
expect_fail "truncated package" SLATE_E_FORMAT "truncated" "$SLATE" info "$WORK/trunc.slate"
cp "$WORK/ok.slate" "$WORK/flip.slate"
printf 'X' | dd of="$WORK/flip.slate" bs=1 seek=300 conv=notrunc 2>/dev/null
expect_fail "corrupt metadata byte" SLATE_E_FORMAT "checksum" "$SLATE" info "$WORK/flip.slate"
expect_fail "not a package" SLATE_E_FORMAT "bad magic" "$SLATE" info "$WORK/hf/config.json"
# A file given where a package goes is named, and so is what it looks like when it is something
# slate reads (before: "bad magic" alone, without the path).
expect_fail "JSON for a package: named, called JSON" SLATE_E_FORMAT \
  "'$WORK/hf/config.json' is not a slate package: bad magic (expected \"SLATEPKG\"); it looks like JSON" \
  "$SLATE" info "$WORK/hf/config.json"
st_file=$(ls "$WORK"/hf/*.safetensors | head -n 1)
expect_fail "a safetensors file for a package: called one" SLATE_E_FORMAT \
  "it is a safetensors file: convert its Hugging Face folder first" "$SLATE" run "$st_file" -p hi
expect_fail "a Hugging Face folder for a package: called a directory" SLATE_E_IO \
  "'$WORK/hf' is a directory, not a slate package (a Hugging Face folder is converted first" \
  "$SLATE" run "$WORK/hf" -p hi
"$SLATE" run "$WORK/ok.slate" -p hi -n 2 --prompt-cache "$WORK/cache.state" >/dev/null 2>&1
expect_fail "a state file for a package: called one" SLATE_E_FORMAT \
  "it is a slate state file (a saved conversation or prompt cache), not a model" \
  "$SLATE" info "$WORK/cache.state"
printf 'GGUF\003\000\000\000' | cat - <(head -c 100 /dev/zero) >"$WORK/x.gguf"
expect_fail "a GGUF file for a package: called one" SLATE_E_FORMAT \
  "it is a GGUF file: convert it first" "$SLATE" info "$WORK/x.gguf"
if [ -f "$SLATE_MODELS_DIR/stories260K/stories260K.bin" ]; then
  expect_fail "a llama2.c checkpoint for a package: called one" SLATE_E_FORMAT \
    "it looks like a llama2.c checkpoint" "$SLATE" info "$SLATE_MODELS_DIR/stories260K/stories260K.bin"
fi
expect_fail "a text file for a package: named, no guess" SLATE_E_FORMAT \
  "'$WORK/t0.txt' is not a slate package: bad magic (expected \"SLATEPKG\")" \
  bash -c "printf '%080d' 0 >'$WORK/t0.txt'; '$SLATE' info '$WORK/t0.txt' 2>&1 >/dev/null | grep -v 'it is\|looks like' >&2; exit 1"

# Messages name what was wrong: eval's --max-tokens states its range, a directory as --text is
# called one; info names the argument it does not take (exit 2 for usage errors).
echo "a small text to score" >"$WORK/t.txt"
EV=("$SLATE" eval "$WORK/ok.slate" --ref "$WORK/ok.slate")
for c in "2|--max-tokens 10000000000000 --text $WORK/t.txt|slate eval: --max-tokens must be an integer in 2..1099511627776, not '10000000000000'" \
         "1|--text $WORK|slate eval: --text '$WORK' is a directory, not a text file" \
         "1|--text $WORK/none.txt|slate eval: cannot open --text '$WORK/none.txt': No such file or directory"; do
  IFS='|' read -r want args msg <<<"$c"
  rc=0; "${EV[@]}" $args >/dev/null 2>"$WORK/err" || rc=$?
  check "eval $args: exit $want ($rc), '$msg'" \
    bash -c '[ "$1" -eq "$2" ] && grep -qF -- "$3" "$4"' _ "$rc" "$want" "$msg" "$WORK/err"
done
for c in "--bogus|unknown or incomplete option '--bogus'" "extra|unexpected argument 'extra'"; do
  rc=0; "$SLATE" info "$WORK/ok.slate" "${c%%|*}" >/dev/null 2>"$WORK/err" || rc=$?
  check "info MODEL ${c%%|*}: exit 2 ($rc), naming it" \
    bash -c '[ "$1" -eq 2 ] && grep -qF -- "$2" "$3"' _ "$rc" "slate info: ${c#*|}" "$WORK/err"
done

# tokenize: a stdin that cannot be read (a directory) is an error, not an empty text; a missing
# SOURCE is reported at once, not after stdin's EOF (a FIFO held open never gives one).
rc=0; out=$("$SLATE" tokenize "$WORK/ok.slate" <"$WORK" 2>"$WORK/err") || rc=$?
check "tokenize < a directory exits 1 with nothing on stdout ($rc, '$out')" test "$rc" -eq 1 -a -z "$out"
check "... saying stdin cannot be read" grep -q "cannot read stdin: Is a directory" "$WORK/err"
mkfifo "$WORK/never_ends"
exec 3<>"$WORK/never_ends"
rc=0; timeout 10 "$SLATE" tokenize "$WORK/missing.json" <"$WORK/never_ends" 2>"$WORK/err" || rc=$?
exec 3>&-
check "tokenize of a missing SOURCE fails without waiting for stdin ($rc)" test "$rc" -eq 1
check "... naming it" grep -q "cannot open '$WORK/missing.json'" "$WORK/err"
# A GGUF the parser refuses: the message names the file (the parser itself sees only bytes).
dup=$SLATE_SOURCE_DIR/tests/fuzz/corpus/gguf/bad_dup_key.gguf
expect_fail "tokenize of a broken GGUF names the file" SLATE_E_FORMAT \
  "'$dup': duplicate key 'llama.embedding_length'" "$SLATE" tokenize "$dup" </dev/null

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
expect_fail "... and the message names the file (the parser itself sees only bytes)" \
  SLATE_E_FORMAT "'$WORK/lie/model.safetensors': tensor" \
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

sed -i 's/GPTNeoXForCausalLM/LlamaForCausalLM/' "$WORK/hf/config.json"
# --tokenizer is read from llama2.c checkpoints only: elsewhere it would be ignored.
expect_fail "--tokenizer with a Hugging Face folder" SLATE_E_INVALID_ARG \
  "applies to llama2.c checkpoints only; '$WORK/hf' is a Hugging Face folder" \
  "$SLATE" convert "$WORK/hf" --tokenizer "$WORK/hf/tokenizer.json" -o "$WORK/n.slate"
if [ -d "$SLATE_MODELS_DIR/stories260K" ]; then
  expect_fail "--tokenizer with a GGUF file" SLATE_E_INVALID_ARG "is a GGUF file" \
    "$SLATE" convert "$SLATE_MODELS_DIR/stories260K/stories260K.gguf" \
    --tokenizer "$SLATE_MODELS_DIR/stories260K/tok512.bin" -o "$WORK/n.slate"
fi
check "no output left after refused --tokenizer" test ! -e "$WORK/n.slate"
pushd "$WORK" >/dev/null # where the temp file of an empty path would go
expect_fail "an empty output path is refused up front" SLATE_E_INVALID_ARG \
  "the output path is empty" "$SLATE" convert "$WORK/hf" -o ""
popd >/dev/null
check "... leaving no temp file in the working folder" \
  test -z "$(find "$WORK" -maxdepth 1 -name '.tmp.*')"
# A file of the wrong kind as the source is called what it is (it was read as a llama2.c
# checkpoint: "implausible llama2.c header").
st_src=$(ls "$WORK"/hf/*.safetensors | head -n 1)
expect_fail "convert of one safetensors file: pass the folder" SLATE_E_INVALID_ARG \
  "is a safetensors file; convert reads the Hugging Face folder it belongs to" \
  "$SLATE" convert "$st_src" -o "$WORK/st.slate"
expect_fail "convert of config.json: pass the folder" SLATE_E_INVALID_ARG \
  "config.json' looks like JSON; convert reads the Hugging Face folder" \
  "$SLATE" convert "$WORK/hf/config.json" -o "$WORK/st.slate"
if [ -d "$SLATE_MODELS_DIR/stories260K" ]; then # -o naming an input would replace it
  cp "$SLATE_MODELS_DIR/stories260K/tok512.bin" "$SLATE_MODELS_DIR/stories260K/stories260K.bin" "$WORK/"
  chmod u+w "$WORK/tok512.bin" "$WORK/stories260K.bin"
  expect_fail "-o naming the llama2.c tokenizer is refused" SLATE_E_INVALID_ARG \
    "output '$WORK/tok512.bin' exists and is not a slate package" "$SLATE" convert \
    "$WORK/stories260K.bin" --tokenizer "$WORK/tok512.bin" -o "$WORK/tok512.bin"
  check "... the tokenizer is untouched" \
    cmp -s "$WORK/tok512.bin" "$SLATE_MODELS_DIR/stories260K/tok512.bin"
fi

# Config values: a key that is present must be valid (named with its value), never replaced by
# a default, truncated or cast out of range.
$PY "$TOOLS/hfmodel.py" make --variant mistral --out "$WORK/mis" --seed 3 >/dev/null
cfg_case() { # cfg_case SRC_DIR KEY JSON_VALUE|DEL STATUS MESSAGE: convert SRC with one key changed
  local src=$1 key=$2 val=$3 st=$4 msg=${5:-}
  rm -rf "$WORK/cfg"
  cp -r "$src" "$WORK/cfg"
  $PY - "$WORK/cfg/config.json" "$key" "$val" <<'PY'
import json, sys
p, k, v = sys.argv[1:]
c = json.load(open(p))
if v == "DEL":
    c.pop(k, None)
else:
    c[k] = json.loads(v)
open(p, "w").write(json.dumps(c))
PY
  if [ "$st" = OK ]; then
    check "config $key=$val converts" "$SLATE" convert "$WORK/cfg" -o "$WORK/cfg.slate" 2>/dev/null
  else
    expect_fail "config $key=$val refused" "$st" "$msg" "$SLATE" convert "$WORK/cfg" -o "$WORK/cfg.slate"
  fi
}
cfg_case "$WORK/hf" rope_theta 1e39 SLATE_E_FORMAT "rope_theta is 1e+39, expected a finite number > 0"
cfg_case "$WORK/hf" rope_theta 0 SLATE_E_FORMAT "rope_theta is 0"
cfg_case "$WORK/hf" rope_scaling '{"type": "linear", "factor": 1e39}' SLATE_E_FORMAT \
  "rope_scaling.factor is 1e+39"
cfg_case "$WORK/hf" rope_scaling '{"type": "linear"}' SLATE_E_FORMAT "rope_scaling.factor is missing"
cfg_case "$WORK/hf" rope_scaling null OK
cfg_case "$WORK/mis" sliding_window 1e30 SLATE_E_FORMAT "sliding_window is 1e+30, expected an integer in 1.."
cfg_case "$WORK/mis" sliding_window -7 SLATE_E_FORMAT "sliding_window is -7"
cfg_case "$WORK/mis" sliding_window 2.5 SLATE_E_FORMAT "sliding_window is 2.5"
cfg_case "$WORK/mis" sliding_window null OK
cfg_case "$WORK/hf" head_dim -16 SLATE_E_FORMAT "head_dim is -16, expected an integer in 2.."
cfg_case "$WORK/hf" max_position_embeddings -5 SLATE_E_FORMAT "max_position_embeddings is -5"
cfg_case "$WORK/hf" max_position_embeddings 1e15 SLATE_E_FORMAT "max_position_embeddings is 1e+15"
cfg_case "$WORK/hf" max_position_embeddings 100000000 SLATE_E_INVALID_ARG "--context"
cfg_case "$WORK/hf" max_position_embeddings DEL OK
cfg_case "$WORK/hf" num_key_value_heads -2 SLATE_E_FORMAT "num_key_value_heads is -2, expected an integer in 1..4"
cfg_case "$WORK/hf" num_key_value_heads 3 SLATE_E_FORMAT "num_key_value_heads 3 does not divide"
cfg_case "$WORK/hf" rms_norm_eps DEL SLATE_E_FORMAT "rms_norm_eps is missing"
cfg_case "$WORK/hf" vocab_size '"320"' SLATE_E_FORMAT 'vocab_size is "320"'

# Tensor names and shapes in a Hugging Face folder.
st_case() { # st_case DESCRIPTION PYTHON_EXPR STATUS MESSAGE: t is the name -> array dict
  local d=$1 expr=$2 st=$3 msg=$4
  rm -rf "$WORK/st"
  cp -r "$WORK/hf" "$WORK/st"
  $PY - "$TOOLS" "$WORK/st/model.safetensors" "$expr" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import hfmodel
t, meta = hfmodel.read_safetensors(sys.argv[2])
exec(sys.argv[3])
hfmodel.write_safetensors(sys.argv[2], t, metadata=meta)
PY
  expect_fail "$d" "$st" "$msg" "$SLATE" convert "$WORK/st" -o "$WORK/st.slate"
}
st_case "1-D shape message" 't["model.layers.0.input_layernorm.weight"] = t["model.layers.0.input_layernorm.weight"][:32]' \
  SLATE_E_FORMAT "has shape [32], the architecture needs [64]"
st_case "2-D shape message" 't["model.layers.0.self_attn.q_proj.weight"] = t["model.layers.0.self_attn.q_proj.weight"][:32]' \
  SLATE_E_FORMAT "has shape [32][64], the architecture needs [64][64]"
L0=model.layers.0.input_layernorm.weight
for idx in 4294967296 00 +0 -0 4 1x; do
  st_case "layer index '$idx' refused" "t['model.layers.$idx.input_layernorm.weight'] = t.pop('$L0')" \
    SLATE_E_FORMAT "tensor 'model.layers.$idx.input_layernorm.weight': the layer index"
done

# Conversion options that would have no effect are refused; a dtype fallback is always reported.
if [ -d "$SLATE_MODELS_DIR/stories260K" ]; then
  M=$SLATE_MODELS_DIR/stories260K
  L2C=("$M/stories260K.bin" --tokenizer "$M/tok512.bin" -o "$WORK/o.slate")
  expect_fail "--asym without int4" "" "--asym applies to int4" "$SLATE" convert "${L2C[@]}" --asym
  expect_fail "--asym with int8" "" "--asym applies to int4" "$SLATE" convert "${L2C[@]}" --asym \
    --quantize int8
  expect_fail "--block-size without int4" "" "--block-size applies to int4" \
    "$SLATE" convert "${L2C[@]}" --block-size 64
  expect_fail "--palettize with --quantize" "" "--palettize and --quantize both set" \
    "$SLATE" convert "${L2C[@]}" --palettize 4 --quantize int4
  expect_fail "--dtype with --palettize" "" "--palettize and --dtype both set" \
    "$SLATE" convert "${L2C[@]}" --dtype int8 --palettize 4
  expect_fail "--group-size without --palettize" "" "--group-size applies to palettized" \
    "$SLATE" convert "${L2C[@]}" --group-size 8
  check "--palettize with --group-size converts" "$SLATE" convert "${L2C[@]}" --palettize 4 --group-size 8
  check "--group-size with a pal keep rule converts" "$SLATE" convert "${L2C[@]}" --group-size 8 \
    --keep 'pal:blk.0.attn_q.weight'
  check "--asym with an int4 keep rule converts" "$SLATE" convert "${L2C[@]}" --asym --quantize int8 \
    --keep 'int4:blk.0.attn_q.weight'
  # The last --dtype wins whole: a later one takes back the block size of an earlier int4-b64
  # (it was kept, and fp16 was then refused as "block size applies to q4").
  L2B=("$M/stories260K.bin" --tokenizer "$M/tok512.bin")
  "$SLATE" convert "${L2B[@]}" -o "$WORK/d16.slate" --dtype fp16 2>/dev/null
  check "--dtype int4-b64 --dtype fp16 converts as --dtype fp16" bash -c \
    "'$SLATE' convert ${L2B[*]} -o '$WORK/d16b.slate' --dtype int4-b64 --dtype fp16 2>/dev/null && cmp -s '$WORK/d16.slate' '$WORK/d16b.slate'"
  "$SLATE" convert "${L2B[@]}" -o "$WORK/d4.slate" --dtype int4 2>/dev/null
  check "--dtype int4-b64 --dtype int4 converts as --dtype int4 (block 32)" bash -c \
    "'$SLATE' convert ${L2B[*]} -o '$WORK/d4b.slate' --dtype int4-b64 --dtype int4 2>/dev/null && cmp -s '$WORK/d4.slate' '$WORK/d4b.slate'"
  err=$("$SLATE" convert "${L2C[@]}" --quantize int4 --block-size 128 2>&1 >/dev/null)
  check "int4 fallback to f16 is reported without --progress" \
    grep -q "note: 35 matrices written as f16 instead of q4: rows not a multiple of the q4 block 128" <<<"$err"

  # llama2.c header: vocab_size INT32_MIN (its negation overflows).
  $PY -c "import struct,sys;b=bytearray(open(sys.argv[1],'rb').read());b[20:24]=struct.pack('<i',-2**31);open(sys.argv[2],'wb').write(b)" \
    "$M/stories260K.bin" "$WORK/vmin.bin"
  expect_fail "llama2.c vocab_size INT32_MIN" SLATE_E_FORMAT "vocab -2147483648" \
    "$SLATE" convert "$WORK/vmin.bin" --tokenizer "$M/tok512.bin" -o "$WORK/o.slate"

  # GGUF: metadata values and the tensor data layout (llama.cpp's loader rules).
  gg_case() { # gg_case STATUS MESSAGE EDIT...: convert stories260K.gguf with the edits
    # (tests/tools/gguf_patch.py: kv:KEY:TYPE:VALUE, tensor:NAME:GGML_TYPE)
    local st=$1 msg=$2; shift 2
    $PY "$TOOLS/gguf_patch.py" "$M/stories260K.gguf" "$WORK/p.gguf" "$@"
    if [ "$st" = OK ]; then
      check "GGUF $* converts" "$SLATE" convert "$WORK/p.gguf" -o "$WORK/p.slate" 2>/dev/null
    else
      expect_fail "GGUF $* refused" "$st" "$msg" "$SLATE" convert "$WORK/p.gguf" -o "$WORK/p.slate"
    fi
  }
  gg_case OK "" kv:llama.rope.freq_base:f32:1e6
  gg_case SLATE_E_FORMAT "key llama.rope.freq_base is inf (f32), expected a finite number > 0" \
    kv:llama.rope.freq_base:f32:inf
  # Float keys must be f32, as llama.cpp's loader requires ("wrong type" otherwise): an integer
  # or an f64 is refused naming the key and its type, not converted.
  gg_case SLATE_E_FORMAT "key llama.rope.freq_base is 10000 (u32), expected an f32" \
    kv:llama.rope.freq_base:u32:10000
  gg_case SLATE_E_FORMAT "key llama.attention.layer_norm_rms_epsilon is 0 (i32), expected an f32" \
    kv:llama.attention.layer_norm_rms_epsilon:i32:0
  gg_case SLATE_E_FORMAT "key llama.rope.freq_base is 1000000 (f64), expected an f32" \
    kv:llama.rope.freq_base:f64:1e6
  gg_case SLATE_E_FORMAT "key llama.rope.scaling.factor is 2 (u32), expected an f32" \
    kv:llama.rope.scaling.type:str:linear kv:llama.rope.scaling.factor:u32:2
  gg_case SLATE_E_FORMAT "key llama.rope.scaling.factor is inf" \
    kv:llama.rope.scaling.type:str:linear kv:llama.rope.scaling.factor:f32:inf
  gg_case SLATE_E_FORMAT "key llama.rope.scaling.type is 1 (u32), expected a string" \
    kv:llama.rope.scaling.type:u32:1
  gg_case SLATE_E_FORMAT "key llama.context_length is 4294967295 (u32), expected an integer in 1.." \
    kv:llama.context_length:u32:0xffffffff
  gg_case SLATE_E_FORMAT "key llama.attention.head_count_kv is -2 (i32)" \
    kv:llama.attention.head_count_kv:i32:-2
  gg_case SLATE_E_FORMAT "key llama.attention.sliding_window is -7 (i32)" \
    kv:llama.attention.sliding_window:i32:-7
  # A parser error names the file first, as the importer's own errors do.
  gg_case SLATE_E_FORMAT "'$WORK/p.gguf': tensor 'output_norm.weight' (F32, 256 bytes) at data offset 131072, expected 34816" \
    tensor:token_embd.weight:8
  for f in "$M"/*.gguf; do
    check "$(basename "$f") still converts" "$SLATE" convert "$f" -o "$WORK/all.slate" 2>/dev/null
  done
fi
finish
