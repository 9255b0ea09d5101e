#!/usr/bin/env bash
# bench/run_eval.sh - quality of the weight formats on stories260K: `slate eval` of each package
# against the fp32 package of the same checkpoint over bench/eval_text.txt (original short
# stories in simple English written for this benchmark, ~900 words); writes the "eval" section
# of bench/RESULTS.md. Takes seconds.
#
# Environment:
#   SLATE            the CLI (default: build/slate of this checkout)
#   SLATE_MODELS_DIR shared models (default: ../shared/models beside the repository)
#   SLATE_BENCH_DIR  scratch folder outside the repository (default /tmp/slate-bench)
#   FORMATS          space-separated NAME=CONVERT-ARGS (commas for spaces); a format the
#                    converter refuses is skipped and listed as such
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SLATE=${SLATE:-$ROOT/build/slate}
MODELS=$(cd "${SLATE_MODELS_DIR:-$ROOT/../shared/models}" 2>/dev/null && pwd || echo "${SLATE_MODELS_DIR:-$ROOT/../shared/models}")
DIR=${SLATE_BENCH_DIR:-/tmp/slate-bench}
FORMATS=${FORMATS:-"bf16=--dtype,bf16 fp16=--dtype,fp16 int8=--dtype,int8 int4-b32=--dtype,int4-b32 pal4=--palettize,4"}
TEXT=bench/eval_text.txt
RESULTS=$ROOT/bench/RESULTS.md
M=$MODELS/stories260K

if [ ! -x "$SLATE" ]; then
  echo "run_eval.sh: no slate CLI at $SLATE (build first)" >&2
  exit 1
fi
if [ ! -f "$M/stories260K.bin" ]; then
  echo "run_eval.sh: $M/stories260K.bin not found (set SLATE_MODELS_DIR)" >&2
  exit 1
fi
OUT=$DIR/results-eval
rm -rf "$OUT"
mkdir -p "$OUT"
: >"$OUT/commands.txt"
: >"$OUT/skipped.txt"
log() { echo "$*" >>"$OUT/commands.txt"; echo "+ $*" >&2; }

REF=$OUT/stories260K-fp32.slate
log "slate convert $M/stories260K.bin --tokenizer $M/tok512.bin -o $REF"
"$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" -o "$REF" 2>/dev/null
for spec in $FORMATS; do
  name=${spec%%=*}
  args=${spec#*=}
  args=${args//,/ }
  pkg=$OUT/stories260K-$name.slate
  # shellcheck disable=SC2086
  if ! "$SLATE" convert "$M/stories260K.bin" --tokenizer "$M/tok512.bin" -o "$pkg" $args \
      2>"$OUT/convert-$name.err"; then
    why=$(head -c 300 "$OUT/convert-$name.err" | tr '\n' ' ' | sed 's/ *$//')
    echo "$name: slate convert $args failed: $why" >>"$OUT/skipped.txt"
    echo "skipping $name: the converter does not support it yet ($why)" >&2
    continue
  fi
  log "slate convert $M/stories260K.bin --tokenizer $M/tok512.bin -o $pkg $args"
  log "slate eval $pkg --ref $REF --text $TEXT --json > eval-$name.json"
  (cd "$ROOT" && "$SLATE" eval "$pkg" --ref "$REF" --text "$TEXT" --json) >"$OUT/eval-$name.json"
done
/usr/bin/python3 "$ROOT/bench/results.py" eval --dir "$OUT" --out "$RESULTS" \
  --commands "$OUT/commands.txt" --skipped "$OUT/skipped.txt" --text "$TEXT"
echo "wrote $RESULTS (raw JSON in $OUT)" >&2
