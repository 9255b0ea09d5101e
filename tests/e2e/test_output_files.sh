#!/usr/bin/env bash
# test_output_files.sh - files slate writes (packages, prompt caches, chat /save) go through an
# exclusive temp file beside the target: a FIFO or device at the target is refused, never
# replaced and never waited on (a prompt cache that is not a slate state file, whatever it is,
# is left alone and the run goes on; a state save never replaces a file that is not a state
# file: chat /save onto a package is refused; convert's output replaces only a package,
# never its source); a symbolic link is followed (the link stays); a planted
# OUT.tmp link is not written through; a conversion killed by a signal leaves nothing; a failed
# write to stdout is exit status 1.
source "$(dirname "$0")/lib.sh"
need_models
M=$SLATE_MODELS_DIR/stories260K
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" -o "$WORK/m.slate" 2>/dev/null
check "stories260K converts" test -s "$WORK/m.slate"
quiet() { "$@" >/dev/null 2>&1; }
run() { timeout 60 "$SLATE" run "$WORK/m.slate" -p "Once upon" -n 4 --temp 0 -t 1 "$@"; }

# A FIFO as the prompt cache: not a state file, so never opened (that used to block) nor
# replaced; the run goes on without the cache.
mkfifo "$WORK/fifo"
rc=0; run --prompt-cache "$WORK/fifo" >/dev/null 2>"$WORK/err" || rc=$?
check "prompt cache on a FIFO: the run succeeds (exit 0, not a hang: $rc)" test "$rc" -eq 0
check "the FIFO is named as not a state file" \
  grep -q "fifo' is not a slate state file (it is a FIFO); it is left untouched" "$WORK/err"
check "the FIFO is still a FIFO" test -p "$WORK/fifo"
if [ "$(id -u)" = 0 ] && mknod "$WORK/null" c 1 3 2>/dev/null; then
  rc=0; run --prompt-cache "$WORK/null" >/dev/null 2>&1 || rc=$?
  check "prompt cache on a character device: the run succeeds ($rc)" test "$rc" -eq 0
  check "the device is still a device" test -c "$WORK/null"
fi

# Something else at the prompt cache path (the package itself, a text file, a directory): not a
# slate state file, so it is neither read nor replaced; a note says so and the run prefills the
# whole prompt, printing what it prints without a cache.
run >"$WORK/nocache.txt" 2>/dev/null
cp "$WORK/m.slate" "$WORK/victim.slate"
echo "my notes" >"$WORK/notes.txt"
mkdir "$WORK/dir.state"
for f in victim.slate notes.txt dir.state; do
  rc=0; run --prompt-cache "$WORK/$f" >"$WORK/out" 2>"$WORK/err" || rc=$?
  check "prompt cache on $f: the run succeeds ($rc)" test "$rc" -eq 0
  check "... printing the uncached text" cmp -s "$WORK/out" "$WORK/nocache.txt"
  check "... $f is named as not a slate state file, left untouched" \
    grep -q "$f' is not a slate state file (.*); it is left untouched" "$WORK/err"
  check "... and reported as not saved" grep -q "prefilled [1-9][0-9]*, not saved" "$WORK/err"
done
check "the package given as a prompt cache is unchanged" cmp -s "$WORK/m.slate" "$WORK/victim.slate"
check "the text file is unchanged" test "$(cat "$WORK/notes.txt")" = "my notes"
check "the directory is still an empty directory" \
  test -d "$WORK/dir.state" -a -z "$(ls -A "$WORK/dir.state")"
# A slate state file that cannot be used is replaced: a truncated one, one of another cache dtype.
quiet run --prompt-cache "$WORK/good.state"
head -c 100 "$WORK/good.state" >"$WORK/trunc.state"
for c in "trunc.state:SLATE_E_FORMAT:a truncated" "f32.state:SLATE_E_INVALID_ARG:another dtype's"; do
  IFS=: read -r f st what <<<"$c"
  [ "$f" = f32.state ] && quiet run --prompt-cache "$WORK/f32.state" --kv-dtype fp32
  run --prompt-cache "$WORK/$f" >/dev/null 2>"$WORK/err"
  check "$what state file is not used" grep -q "$f' not used ($st" "$WORK/err"
  run --prompt-cache "$WORK/$f" >/dev/null 2>"$WORK/err"
  check "... and is replaced by the new state" grep -q "reused [1-9]" "$WORK/err"
done

# A prompt cache that cannot be saved only costs the next run its prefill: a note names the file
# and the reason, and the run prints its text and exits 0. A path under a regular file fails
# with ENOTDIR even for root; a read-only folder is tried only where permissions apply.
: >"$WORK/plainfile"
unwritable=("$WORK/plainfile/cache.state")
if [ "$(id -u)" != 0 ]; then
  mkdir "$WORK/ro"
  chmod 555 "$WORK/ro"
  unwritable+=("$WORK/ro/cache.state")
fi
for f in "${unwritable[@]}"; do
  rc=0; run --prompt-cache "$f" >"$WORK/out" 2>"$WORK/err" || rc=$?
  check "unsavable prompt cache ${f#"$WORK"/}: the run succeeds ($rc)" test "$rc" -eq 0
  check "... printing the uncached text" cmp -s "$WORK/out" "$WORK/nocache.txt"
  check "... and a note naming the file and why" \
    grep -q "prompt cache '$f' not saved (SLATE_E_IO: .*\(Not a directory\|Permission denied\)" \
    "$WORK/err"
done

# A symbolic link as the prompt cache: the file it points to gets the state, the link stays.
: >"$WORK/real.state"
ln -s real.state "$WORK/link.state"
check "prompt cache through a link runs" quiet run --prompt-cache "$WORK/link.state"
check "the link is still a link" test -L "$WORK/link.state"
check "its target holds the saved state" test "$(stat -c %s "$WORK/real.state")" -gt 64
out=$(run --prompt-cache "$WORK/link.state" 2>&1 >/dev/null)
check "the next run reuses the prompt through the link" grep -q "reused [1-9]" <<<"$out"

# chat /save onto a FIFO: refused, the chat goes on.
out=$(printf 'Hi\n/save %s\n' "$WORK/fifo" | timeout 60 "$SLATE" chat "$WORK/m.slate" --template llama2 -n 4 -t 1 2>&1 >/dev/null || true)
check "chat /save onto a FIFO is refused" grep -q "not a regular file" <<<"$out"
check "the FIFO is still a FIFO after /save" test -p "$WORK/fifo"
# chat /save onto the model's own package (a slip of the keyboard): refused, the package is
# unchanged and still opens; before, the state file replaced it.
cp "$WORK/m.slate" "$WORK/m.copy"
out=$(printf 'Hi\n/save %s\n' "$WORK/m.slate" | timeout 60 "$SLATE" chat "$WORK/m.slate" --template llama2 -n 4 -t 1 2>&1 >/dev/null || true)
check "chat /save onto a package is refused" \
  grep -q "m.slate' exists and is not a slate state file (it does not start with 'SLATESTA'); it is not replaced" <<<"$out"
check "the package is unchanged after /save" cmp -s "$WORK/m.slate" "$WORK/m.copy"

# convert's output replaces only a package (or an empty file): the source itself, directly or
# through a link, and any other file are refused and left as they were (before, `-o` naming
# the source replaced the checkpoint with the package); a package as the source is named one.
cp "$M/stories260K.gguf" "$WORK/src.gguf"
cp "$WORK/src.gguf" "$WORK/src.copy"
ln -s src.gguf "$WORK/src-link.slate"
echo '{"keep": true}' >"$WORK/notes.json"
for o in src.gguf src-link.slate notes.json; do
  out=$("$SLATE" convert "$WORK/src.gguf" -o "$WORK/$o" 2>&1) && rc=0 || rc=$?
  check "convert -o $o: refused (exit $rc)" test "$rc" -eq 1
  case $o in
    notes.json) check "... named: exists and is not a slate package" \
                  grep -q "output '$WORK/notes.json' exists and is not a slate package; it is not replaced" <<<"$out" ;;
    *) check "... named: the output is the source" grep -q "is the source; convert writes a new package" <<<"$out" ;;
  esac
done
check "the source is unchanged" cmp -s "$WORK/src.gguf" "$WORK/src.copy"
check "the other file is unchanged" grep -q keep "$WORK/notes.json"
: >"$WORK/empty.slate"
check "convert -o an empty file: written" quiet "$SLATE" convert "$WORK/src.gguf" -o "$WORK/empty.slate"
check "convert -o an existing package: replaced" quiet "$SLATE" convert "$WORK/src.gguf" -o "$WORK/empty.slate"
out=$("$SLATE" convert "$WORK/empty.slate" -o "$WORK/again.slate" 2>&1 || true)
check "convert of a package: named as a package already" grep -q "is a slate package already" <<<"$out"

# The old fixed temp name, planted as a link to a victim: convert does not write through it.
echo victim >"$WORK/victim"
ln -s victim "$WORK/out.slate.tmp"
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" -o "$WORK/out.slate" 2>/dev/null
check "convert beside a planted out.slate.tmp link succeeds" quiet "$SLATE" info "$WORK/out.slate"
check "the victim is untouched" test "$(cat "$WORK/victim")" = victim
check "no temp file is left" test -z "$(ls "$WORK" | grep 'out.slate.tmp.')"

# killed_mid_write NAME SIG CMD...: starts CMD, which writes $WORK/NAME, waits until its temp
# file NAME.tmp.* exists, sends SIG after DELAY seconds (default 0), and checks that the signal
# killed CMD and that nothing named NAME* is left.
killed_mid_write() {
  local name=$1 sig=$2; shift 2
  "$@" >/dev/null 2>&1 &
  local pid=$! saw rc=0
  for _ in $(seq 600); do
    ls "$WORK" | grep -q "^$name.tmp." && break
    sleep 0.05
  done
  saw=$(ls "$WORK" | grep -c "^$name.tmp." || true)
  sleep "${DELAY:-0}"
  kill -"$sig" $pid
  wait $pid 2>/dev/null || rc=$?
  check "SIG$sig arrived while $name's temp file existed ($saw) and killed slate $2 ($rc)" \
    test "$saw" -eq 1 -a "$rc" -gt 128
  check "SIG$sig: no $name* left" test -z "$(ls "$WORK" | grep "^$name" || true)"
}

# Killed mid-conversion: the temp file is removed. A model whose k-means takes seconds; the kill
# comes once the temp file exists.
"$SLATE" synth --dims hidden=1024,layers=4,heads=16,kv_heads=4,ffn=4096,vocab=32000 -o "$WORK/syn" 2>/dev/null
for sig in INT TERM; do
  killed_mid_write k.slate $sig "$SLATE" convert "$WORK/syn" -o "$WORK/k.slate" --palettize 4 --threads 1
done

# synth killed while writing the weights: every file of DIR.tmp is still one of the writer's
# tracked temps, so the signal leaves at most an empty DIR.tmp (no half-written safetensors
# hogging the disk), and the next run removes it. After SIGKILL (no handler runs) the temps
# stay, and the next run removes them too.
sdims=hidden=1024,layers=16,heads=16,kv_heads=4,ffn=4096,vocab=32000
for sig in INT TERM HUP KILL; do
  rm -rf "$WORK/sk" "$WORK/sk.tmp"
  "$SLATE" synth --dims "$sdims" -o "$WORK/sk" --dtype f32 >/dev/null 2>&1 &
  pid=$! rc=0
  for _ in $(seq 600); do
    ls "$WORK/sk.tmp" 2>/dev/null | grep -q '^model.safetensors' && break
    sleep 0.02
  done
  kill -$sig $pid
  wait $pid 2>/dev/null || rc=$?
  check "synth SIG$sig: killed while writing the weights ($rc)" test "$rc" -gt 128
  check "synth SIG$sig: no folder" test ! -e "$WORK/sk"
  if [ $sig != KILL ]; then
    check "synth SIG$sig: DIR.tmp is gone or empty ($(ls "$WORK/sk.tmp" 2>/dev/null | tr '\n' ' '))" \
      test -z "$(ls -A "$WORK/sk.tmp" 2>/dev/null)"
  fi
  check "synth SIG$sig: the next run cleans up and succeeds" \
    "$SLATE" synth --dims hidden=64,layers=1,heads=4,ffn=64,vocab=300 -o "$WORK/sk"
  check "synth SIG$sig: ... leaving no DIR.tmp" test ! -e "$WORK/sk.tmp"
done
rm -rf "$WORK/sk"
# -o a dangling symbolic link: refused before any weight is written, the link left alone.
ln -s nowhere "$WORK/dangling"
expect_fail "synth -o a dangling link is refused up front" SLATE_E_INVALID_ARG \
  "'$WORK/dangling' already exists (a symbolic link to a missing target)" \
  "$SLATE" synth --dims "$sdims" -o "$WORK/dangling"
check "... no dangling.tmp written, the link stays" test ! -e "$WORK/dangling.tmp" -a -L "$WORK/dangling"

# Killed mid-run: --dump-logits's temp file goes too (it is one of the library's outputs).
"$SLATE" convert "$WORK/syn" -o "$WORK/syn.slate" --dtype fp16 2>/dev/null
for sig in INT TERM; do
  DELAY=0.3 killed_mid_write dl.bin $sig "$SLATE" run "$WORK/syn.slate" --ids 1 -n -1 --temp 0 -t 1 \
    --dump-logits "$WORK/dl.bin"
done

# --dump-logits: written whole or not at all; an unwritable path fails before any work.
rc=0; run --dump-logits "$WORK/no/such/dir/d.bin" >/dev/null 2>"$WORK/err" || rc=$?
check "--dump-logits into a missing folder exits 1" test "$rc" -eq 1
check "... naming the path" grep -q "cannot write --dump-logits '$WORK/no/such/dir/d.bin'" "$WORK/err"
check "... before generating anything" bash -c '! grep -q "generated" "$1"' _ "$WORK/err"
rc=0; (trap '' XFSZ; ulimit -f 2; run -n 8 --dump-logits "$WORK/part.bin" >/dev/null 2>&1) || rc=$?
check "a dump cut by the file size limit fails ($rc)" test "$rc" -eq 1
check "... and leaves no file" test -z "$(ls "$WORK" | grep '^part.bin' || true)"
# The dump never replaces the model package or the prompt cache (also through another path).
cp "$WORK/m.slate" "$WORK/m.copy2"
rc=0; run --dump-logits "$WORK/./m.slate" >/dev/null 2>"$WORK/err" || rc=$?
check "--dump-logits naming the model package: refused ($rc), named" \
  grep -q "is the model package; it is not replaced" "$WORK/err"
check "... the package is unchanged" cmp -s "$WORK/m.slate" "$WORK/m.copy2"
quiet run --prompt-cache "$WORK/pc.state"
cp "$WORK/pc.state" "$WORK/pc.copy"
expect_fail "convert of a state file: called one" SLATE_E_INVALID_ARG \
  "is a slate state file (a saved conversation), not a checkpoint" \
  "$SLATE" convert "$WORK/pc.state" -o "$WORK/pc.slate"
rc=0; run --prompt-cache "$WORK/pc.state" --dump-logits "$WORK/pc.state" >/dev/null 2>"$WORK/err" || rc=$?
check "--dump-logits naming the prompt cache: refused ($rc)" \
  bash -c "test $rc -eq 1 && grep -q 'is the prompt cache; it is not replaced' '$WORK/err'"
check "... the cache is unchanged" cmp -s "$WORK/pc.state" "$WORK/pc.copy"
quiet run -n 3 --dump-logits "$WORK/d.bin"
check "a complete dump has 3 rows of 512 floats" test "$(stat -c %s "$WORK/d.bin")" -eq $((3 * 512 * 4))
# A huge -n allocates rows for the context left, not for -n (it used to ask for -n rows).
rc=0; run -n 16777216 --dump-logits "$WORK/big.bin" >/dev/null 2>"$WORK/err" || rc=$?
check "-n 16777216 --dump-logits runs, its rows sized by the context left ($rc: $(tail -c 200 "$WORK/err"))" test "$rc" -eq 0
sz=$(stat -c %s "$WORK/big.bin" 2>/dev/null || echo 0)
check "... and dumps one row per token, at most the context ($sz bytes)" \
  test "$sz" -gt 0 -a $((sz % 2048)) -eq 0 -a "$sz" -le $((513 * 2048))
out=$(run -n 0 2>&1 >/dev/null)
check "-n 0 prefills and generates nothing" grep -q "generated 0, finish length" <<<"$out"

# eval --json never prints nan (not JSON): non-finite logits are an error that says where.
# (convert refuses NaN weights, so the package's DATA section, which carries no CRC, is patched.)
$PY - "$WORK/m.slate" "$WORK/nan.slate" <<'PYEOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack_from("<I", b, 12)[0]
for i in range(n):
    kind, _, off, size = struct.unpack_from("<IIQQ", b, 64 + 32 * i)
    if kind == 3:  # DATA: every f32 weight NaN
        b[off:off + size] = struct.pack("<f", float("nan")) * (size // 4)
open(sys.argv[2], "wb").write(b)
PYEOF
echo "Once upon a time there was a cat." >"$WORK/t.txt"
rc=0; "$SLATE" eval "$WORK/nan.slate" --ref "$WORK/m.slate" --text "$WORK/t.txt" --json \
  >"$WORK/out" 2>"$WORK/err" || rc=$?
check "eval of a NaN model exits 1" test "$rc" -eq 1
check "... naming the package and the token" grep -q "nan.slate gives non-finite logits at token 0" "$WORK/err"
check "... and prints no nan" bash -c '! grep -qi nan "$1"' _ "$WORK/out"

# stdout that cannot be written: exit status 1 and a message.
if [ -w /dev/full ]; then
  rc=0; run >/dev/full 2>"$WORK/err" || rc=$?
  check "run > /dev/full exits 1" test "$rc" -eq 1
  check "run > /dev/full says why" grep -q "cannot write the output" "$WORK/err"
  rc=0; "$SLATE" info "$WORK/m.slate" >/dev/full 2>/dev/null || rc=$?
  check "info > /dev/full exits 1" test "$rc" -eq 1
fi
finish
