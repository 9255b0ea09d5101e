# lib.sh - shared helpers for the end-to-end tests (sourced). Each test gets $SLATE (the CLI),
# $SLATE_MODELS_DIR, $SLATE_SOURCE_DIR from ctest; PY is Debian's python3 (it has numpy).
set -euo pipefail
: "${SLATE:?SLATE (the CLI binary) must be set}"
: "${SLATE_MODELS_DIR:?}"
: "${SLATE_SOURCE_DIR:?}"
PY=/usr/bin/python3
TOOLS="$SLATE_SOURCE_DIR/tests/tools"
# The tests' Python (inline checks too) imports the shared readers from tests/tools:
# slatefiles (package META, program, tensor bytes; GGUF keys and tensors).
export PYTHONPATH="$TOOLS${PYTHONPATH:+:$PYTHONPATH}"
# Scratch under POSIX's temporary directory, TMPDIR (/tmp when unset or empty).
slate_tmp=${TMPDIR:-/tmp}
WORK=$(mktemp -d "${slate_tmp%/}/slate-e2e.XXXXXX")
unset slate_tmp
trap 'rm -rf "$WORK"' EXIT
N_PASS=0
N_FAIL=0

ok() { N_PASS=$((N_PASS + 1)); echo "ok   - $*"; }
bad() { N_FAIL=$((N_FAIL + 1)); echo "FAIL - $*"; }
check() { # check "description" command...
  local d=$1; shift
  if "$@"; then ok "$d"; else bad "$d"; fi
}
# expect_fail "description" STATUS_NAME MESSAGE_SUBSTRING command...: the command must exit
# non-zero and print the status name and the substring on stderr.
expect_fail() {
  local d=$1 st=$2 msg=$3; shift 3
  local out
  if out=$("$@" 2>&1 >/dev/null); then bad "$d (exited 0)"; return; fi
  if [[ $out == *"$st"* && $out == *"$msg"* ]]; then ok "$d"; else bad "$d: got: $out"; fi
}
# gguf_refused "description" STATUS MESSAGE FOLDER EDIT...: writes the hfmodel.py FOLDER as a
# GGUF (tests/tools/hf_to_gguf.py) with EDIT (--key K:TYPE:V, --rows, --drop: one broken thing)
# and expects `slate convert` of it to fail as expect_fail says.
gguf_refused() {
  local d=$1 st=$2 msg=$3 src=$4; shift 4
  $PY "$TOOLS/hf_to_gguf.py" "$src" "$WORK/refused.gguf" "$@"
  expect_fail "$d" "$st" "$msg" "$SLATE" convert "$WORK/refused.gguf" -o "$WORK/refused.slate"
}
# patch_f16 GGUF OUT TENSOR BLOCK BYTE_OFFSET F16_HEX: a copy of GGUF with the f16 at BYTE_OFFSET
# of block BLOCK of TENSOR replaced (a block's d, a super-block's d or dmin).
patch_f16() {
  $PY - "$@" <<'PY'
import struct, sys
import ggml_quants as gq
import slatefiles as sf
src, out, name, blk, at, val = sys.argv[1:7]
buf = bytearray(open(src, "rb").read())
g = sf.Gguf(buf)
for n, ne, tt, off in g.tensors:
    if n == name:
        size = gq.TYPES[gq.TYPE_IDS[tt]][2]
        struct.pack_into("<H", buf, g.data0 + off + int(blk) * size + int(at), int(val, 16))
        break
else:
    sys.exit("no tensor " + name)
open(out, "wb").write(buf)
PY
}
# prefix_logits PKG OUT ID...: the last-position logits (slate run --dump-logits, temperature 0)
# of every prefix 1..N of the ids, one row each, into OUT; a failed run writes an empty row, so
# a comparison of OUT then fails. $WORK/row is left holding the last row (all N ids).
prefix_logits() {
  local pkg=$1 out=$2 k
  shift 2
  local ids=("$@")
  : >"$out"
  for ((k = 1; k <= ${#ids[@]}; k++)); do
    "$SLATE" run "$pkg" --ids "$(IFS=,; echo "${ids[*]:0:k}")" -n 1 --temp 0 \
      --dump-logits "$WORK/row" >/dev/null 2>&1 || : >"$WORK/row"
    cat "$WORK/row" >>"$out"
  done
}
# variant_matches V: makes hfmodel.py's variant V (seed 11) in $WORK/V, converts it with f32
# caches, and checks slate's logits at every position of the prompt $ids (the caller's array;
# $csv the same ids comma-separated, $n their count) against the NumPy reference (atol 1e-4).
variant_matches() {
  local v=$1 d="$WORK/$1"
  $PY "$TOOLS/hfmodel.py" make --variant "$v" --out "$d" --seed 11 >/dev/null
  if ! "$SLATE" convert "$d" -o "$d.slate" --kv-dtype fp32 2>"$d.err"; then # f32 caches: 1e-4
    bad "$v: convert failed: $(cat "$d.err")"
    return
  fi
  $PY "$TOOLS/hfmodel.py" forward "$d" --tokens "$csv" --out "$d.ref.f32" >/dev/null
  prefix_logits "$d.slate" "$d.slate.f32" "${ids[@]}"
  check "$v: logits at all $n positions match the NumPy reference (atol 1e-4)" \
    $PY "$TOOLS/compare_logits.py" "$d.slate.f32" "$d.ref.f32" --vocab 320 --atol 1e-4 --quiet
}
# steps_match PKG DIR: a greedy run of PKG (an hfmodel.py folder DIR's package, vocab 320) from
# 4 prompt ids, 12 steps, one token at a time (each step reads the cache the previous ones
# wrote): each step's logits match the NumPy reference over the same tokens within 1e-4.
steps_match() {
  "$SLATE" run "$1" --ids 304,72,101,108 -n 12 --temp 0 --dump-logits "$1.steps" \
    >/dev/null 2>&1 || return 1
  $PY - "$TOOLS" "$2" "$1.steps" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import hfmodel
rows = np.fromfile(sys.argv[3], dtype="<f4").reshape(-1, 320)
toks = [304, 72, 101, 108] + [int(np.argmax(r)) for r in rows[:-1]]
ref = hfmodel.forward(sys.argv[2], toks)[3:]
sys.exit(0 if len(rows) == 12 and np.max(np.abs(ref - rows)) < 1e-4 else 1)
PYEOF
}
need_models() {
  if [ ! -d "$SLATE_MODELS_DIR/stories260K" ]; then
    echo "skipping: $SLATE_MODELS_DIR/stories260K not found"
    exit 0
  fi
}
finish() {
  echo "$N_PASS passed, $N_FAIL failed"
  [ "$N_FAIL" -eq 0 ]
}
