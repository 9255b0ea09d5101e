#!/usr/bin/env bash
# End to end on the real stories260K model (../shared/models/stories260K, see SOURCES.md):
# - greedy generation from "Once upon a time" equals run.c's recorded continuation;
# - the logits after the prompt match run.c's recorded logits within 1e-4 (fp32);
# - the same weights imported from the llama2.c file, the GGUF file and a Hugging Face folder
#   (exported by tests/tools/llama2c_to_hf.py with the HF q/k layout) give the same logits;
# - the fp16/q8_0/q4_0 GGUF variants convert and run.
source "$(dirname "$0")/lib.sh"
need_models
M=$SLATE_MODELS_DIR/stories260K
R=$M/reference
prompt=$(cat "$R/once-upon-a-time.prompt.txt")

# Reference comparisons use f32 caches (new packages default to f16: tests/e2e/test_plan.sh).
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --kv-dtype fp32 -o "$WORK/bin.slate" 2>/dev/null
check "convert llama2.c checkpoint" test -s "$WORK/bin.slate"
check "no temp file left behind" test ! -e "$WORK/bin.slate.tmp"

# run.c -n 200 runs 200 forward passes (positions 0..199); the first 4 only force prompt
# tokens, so positions 4..199 sample 196 tokens.
"$SLATE" run "$WORK/bin.slate" -p "$prompt" -n 196 --temp 0 --dump-logits "$WORK/bin.f32" \
  >"$WORK/out.txt" 2>"$WORK/err.txt"
printf '%s' "$prompt" >"$WORK/full.txt"
# stdout is the generated text plus a final newline, as run.c prints it.
cat "$WORK/out.txt" >>"$WORK/full.txt"
check "greedy text equals run.c reference" cmp -s "$WORK/full.txt" "$R/once-upon-a-time.greedy200.txt"
check "stderr reports tokens/s and ttft" grep -q "ttft" "$WORK/err.txt"
check "first-step logits match run.c within 1e-4" \
  $PY "$TOOLS/compare_logits.py" "$WORK/bin.f32" "$R/once-upon-a-time.pos4.logits.txt" \
  --vocab 512 --rows-a 0 --atol 1e-4 --quiet

# Logits after BOS only (empty prompt) match run.c's position-0 logits.
"$SLATE" run "$WORK/bin.slate" -p "" -n 1 --temp 0 --dump-logits "$WORK/bos.f32" >/dev/null 2>&1
check "empty prompt (BOS only) logits match run.c pos 0" \
  $PY "$TOOLS/compare_logits.py" "$WORK/bos.f32" "$R/once-upon-a-time.pos0.logits.txt" \
  --vocab 512 --rows-a 0 --atol 1e-4 --quiet

# The same weights from GGUF and from a Hugging Face folder.
"$SLATE" convert "$M/stories260K.gguf" -o "$WORK/gguf.slate" --context 512 --kv-dtype fp32 2>/dev/null
"$SLATE" run "$WORK/gguf.slate" -p "$prompt" -n 40 --temp 0 --dump-logits "$WORK/gguf.f32" >/dev/null 2>&1
check "GGUF import: logits equal the llama2.c import" \
  $PY "$TOOLS/compare_logits.py" "$WORK/gguf.f32" "$WORK/bin.f32" --vocab 512 --rows-a all \
  --rows-b 0:40 --atol 1e-5 --quiet
$PY "$TOOLS/llama2c_to_hf.py" --out "$WORK/hf" >/dev/null
"$SLATE" convert "$WORK/hf" -o "$WORK/hf.slate" --kv-dtype fp32 2>/dev/null
"$SLATE" run "$WORK/hf.slate" -p "$prompt" -n 40 --temp 0 --dump-logits "$WORK/hf.f32" >/dev/null 2>&1
check "HF import (rotate_half q/k layout): logits equal the llama2.c import" \
  $PY "$TOOLS/compare_logits.py" "$WORK/hf.f32" "$WORK/bin.f32" --vocab 512 --rows-a all \
  --rows-b 0:40 --atol 1e-4 --quiet
"$SLATE" tokenize "$WORK/hf/tokenizer.json" <"$R/once-upon-a-time.prompt.txt" >"$WORK/hf.ids"
check "HF tokenizer.json encodes the prompt like run.c" \
  test "$(cat "$WORK/hf.ids")" = "1 403 407 261 378"
# stdout continues the prompt: a first token that starts a word keeps its space, so prompt +
# stdout is the text the model wrote ("Once upon a time," + " there"); with no text in the
# prompt (BOS only) the output is the whole text and starts without one. Both SentencePiece
# decoders (llama2.c's tokenizer, the HF tokenizer.json's Strip) and the prompt cache agree.
for pkg in "$WORK/bin.slate" "$WORK/hf.slate"; do
  n=$(basename "$pkg")
  "$SLATE" run "$pkg" -p "Once upon a time," -n 2 --temp 0 >"$WORK/cont.txt" 2>/dev/null
  check "$n: the output after a prompt keeps its first space" test "$(head -c 6 "$WORK/cont.txt")" = " there"
  "$SLATE" run "$pkg" -p "" -n 2 --temp 0 >"$WORK/cont.txt" 2>/dev/null
  check "$n: the output after BOS alone starts without a space" test "$(head -c 4 "$WORK/cont.txt")" = "Once"
  for i in 1 2; do
    "$SLATE" run "$pkg" -p "Once upon a time," -n 2 --temp 0 --prompt-cache "$WORK/cont.state" \
      >"$WORK/cont.txt" 2>/dev/null
    check "$n: the same with the prompt cache (run $i)" test "$(head -c 6 "$WORK/cont.txt")" = " there"
  done
  rm -f "$WORK/cont.state"
  for i in 1 2; do
    "$SLATE" run "$pkg" -p "" -n 2 --temp 0 --prompt-cache "$WORK/cont.state" >"$WORK/cont.txt" 2>/dev/null
    check "$n: BOS alone with the prompt cache (run $i)" test "$(head -c 4 "$WORK/cont.txt")" = "Once"
  done
  rm -f "$WORK/cont.state"
done
for src in "$WORK/bin.slate" "$M/tok512.bin" "$M/stories260K.gguf"; do
  check "tokenize with $(basename "$src")" \
    test "$("$SLATE" tokenize "$src" <"$R/once-upon-a-time.prompt.txt")" = "1 403 407 261 378"
done
check "tokenize --no-bos adds no special token" \
  test "$("$SLATE" tokenize "$WORK/bin.slate" --no-bos <"$R/once-upon-a-time.prompt.txt")" = "403 407 261 378"

# fp16 / bf16 packages and the quantized GGUF files.
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --dtype fp16 -o "$WORK/f16.slate" 2>/dev/null
"$SLATE" run "$WORK/f16.slate" -p "$prompt" -n 1 --temp 0 --dump-logits "$WORK/f16.f32" >/dev/null 2>&1
check "fp16 package: first logits within 2e-2 of fp32" \
  $PY "$TOOLS/compare_logits.py" "$WORK/f16.f32" "$WORK/bin.f32" --vocab 512 --rows-a 0 --rows-b 0 --atol 2e-2 --argmax --quiet
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --dtype bf16 -o "$WORK/bf16.slate" 2>/dev/null
"$SLATE" run "$WORK/bf16.slate" -p "$prompt" -n 1 --temp 0 --dump-logits "$WORK/bf16.f32" >/dev/null 2>&1
check "bf16 package: first-token argmax equals fp32" \
  $PY "$TOOLS/compare_logits.py" "$WORK/bf16.f32" "$WORK/bin.f32" --vocab 512 --rows-a 0 --rows-b 0 --atol 0.5 --argmax --quiet
for q in f16 q8_0 q4_0; do
  "$SLATE" convert "$M/stories260K-$q.gguf" -o "$WORK/$q.slate" --context 512 2>/dev/null
  "$SLATE" run "$WORK/$q.slate" -p "$prompt" -n 1 --temp 0 --dump-logits "$WORK/$q.f32" >/dev/null 2>&1
done
check "GGUF f16: logits within 2e-2 of fp32" \
  $PY "$TOOLS/compare_logits.py" "$WORK/f16.f32" "$WORK/bin.f32" --vocab 512 --rows-a 0 --rows-b 0 --atol 2e-2 --quiet
check "GGUF q8_0 (dequantized): first argmax equals fp32" \
  $PY "$TOOLS/compare_logits.py" "$WORK/q8_0.f32" "$WORK/bin.f32" --vocab 512 --rows-a 0 --rows-b 0 --atol 1.0 --argmax --quiet
check "GGUF q4_0 (dequantized): runs and gives finite logits" \
  $PY "$TOOLS/compare_logits.py" "$WORK/q4_0.f32" "$WORK/bin.f32" --vocab 512 --rows-a 0 --rows-b 0 --atol 100 --quiet

# Threads: -t 2 gives the same greedy text.
"$SLATE" run "$WORK/bin.slate" -p "$prompt" -n 60 --temp 0 -t 2 >"$WORK/t2.txt" 2>/dev/null
"$SLATE" run "$WORK/bin.slate" -p "$prompt" -n 60 --temp 0 -t 1 >"$WORK/t1.txt" 2>/dev/null
check "-t 2 and -t 1 give the same greedy text" cmp -s "$WORK/t1.txt" "$WORK/t2.txt"
# Stop strings and seeds.
"$SLATE" run "$WORK/bin.slate" -p "$prompt" -n 60 --temp 0 --stop "Lily" >"$WORK/stop.txt" 2>/dev/null
check "stop string ends generation and is not printed" \
  test "$(cat "$WORK/stop.txt")" = ", there was a little girl named "
"$SLATE" run "$WORK/bin.slate" -p "$prompt" -n 30 --temp 1 --seed 7 >"$WORK/s1.txt" 2>/dev/null
"$SLATE" run "$WORK/bin.slate" -p "$prompt" -n 30 --temp 1 --seed 7 >"$WORK/s2.txt" 2>/dev/null
check "same seed gives the same sampled text" cmp -s "$WORK/s1.txt" "$WORK/s2.txt"
# stories260K ends a story by producing BOS (id 1); generation stops there, like run.c.
"$SLATE" run "$WORK/bin.slate" -p "$prompt" -n 1000 --temp 0 >/dev/null 2>"$WORK/bos.err"
check "generation ends when the model produces BOS (finish eos)" grep -q "finish eos" "$WORK/bos.err"
# Context limit: a clean stop, not a crash.
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --context 16 -o "$WORK/c16.slate" 2>/dev/null
"$SLATE" run "$WORK/c16.slate" -p "$prompt" -n 100 --temp 0 >/dev/null 2>"$WORK/c16.err"
check "full context stops cleanly with finish context_full" grep -q "finish context_full" "$WORK/c16.err"
finish
