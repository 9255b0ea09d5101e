#!/usr/bin/env bash
# bench/run_tinyllama.sh - speed and memory of slate on the TinyLlama-1.1B shape, per weight
# format, and the recompute / kv-io / state comparison; writes the "tinyllama" section of
# bench/RESULTS.md (commands, machine, date, commit, numbers).
#
#   bench/run_tinyllama.sh            # SLATE=build/slate, scratch in $SLATE_BENCH_DIR
#
# Environment:
#   SLATE            the CLI (default: build/slate of this checkout)
#   SLATE_BENCH_DIR  scratch folder outside the repository (default /tmp/slate-bench); the
#                    synthetic model (2.2 GB) and packages are made once and reused
#   THREADS          -t for bench (default 2: both cores of the target VM)
#   FORMATS          space-separated NAME=CONVERT-ARGS (commas for spaces in the args); the
#                    default asks for fp16, int8, int4 with blocks of 32 and 4-bit palettes.
#                    A format the converter refuses is skipped and listed as such.
#   MODE_FORMATS     formats for the mode table (default "int4-b32 fp16"; missing ones skipped)
#   MODE_PROMPT, MODE_N  prompt tokens and decoded tokens of the mode table (default 128, 16)
#   CTX              the context every package declares (default 4096, room for depth 2048)
#   REBUILD=1        convert the packages again even if they exist
# Takes several minutes (synthesis ~1 min, each conversion ~1 min, each bench ~1-2 min).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SLATE=${SLATE:-$ROOT/build/slate}
DIR=${SLATE_BENCH_DIR:-/tmp/slate-bench}
THREADS=${THREADS:-2}
# Every package declares a context of 4096 (the shape's own 2048 leaves no room for decode at
# depth 2048); the synthetic weights make the positions past 2048 no less meaningful.
CTX=${CTX:-4096}
FORMATS=${FORMATS:-"fp16=--dtype,fp16 int8=--dtype,int8 int4-b32=--dtype,int4-b32 pal4=--palettize,4"}
MODE_FORMATS=${MODE_FORMATS:-"int4-b32 fp16"}
MODE_PROMPT=${MODE_PROMPT:-128}
MODE_N=${MODE_N:-16}
RESULTS=$ROOT/bench/RESULTS.md

if [ ! -x "$SLATE" ]; then
  echo "run_tinyllama.sh: no slate CLI at $SLATE (build first: cmake -S . -B build && cmake --build build)" >&2
  exit 1
fi
case "$DIR" in "$ROOT"/*) echo "run_tinyllama.sh: SLATE_BENCH_DIR must be outside the repository" >&2; exit 1 ;; esac
mkdir -p "$DIR"
OUT=$DIR/results-tinyllama
rm -rf "$OUT"
mkdir -p "$OUT"
: >"$OUT/commands.txt"
: >"$OUT/skipped.txt"
log() { echo "$*" >>"$OUT/commands.txt"; echo "+ $*" >&2; }

MODEL=$DIR/tinyllama-1.1b
if [ ! -d "$MODEL" ]; then
  log "slate synth --shape tinyllama-1.1b -o $MODEL --seed 1 --dtype bf16"
  "$SLATE" synth --shape tinyllama-1.1b -o "$MODEL" --seed 1 --dtype bf16
else
  log "slate synth --shape tinyllama-1.1b -o $MODEL --seed 1 --dtype bf16   # (made earlier, reused)"
fi

have=()
for spec in $FORMATS; do
  name=${spec%%=*}
  args=${spec#*=}
  args="${args//,/ } --context $CTX"
  pkg=$DIR/tinyllama-$name-ctx$CTX.slate
  if [ -s "$pkg" ] && [ "${REBUILD:-0}" != 1 ]; then
    log "slate convert $MODEL -o $pkg $args   # (made earlier, reused)"
  else
    log "slate convert $MODEL -o $pkg $args"
    # shellcheck disable=SC2086
    if ! "$SLATE" convert "$MODEL" -o "$pkg" $args 2>"$OUT/convert-$name.err"; then
      why=$(head -c 300 "$OUT/convert-$name.err" | tr '\n' ' ' | sed 's/ *$//')
      echo "$name: slate convert $args failed: $why" >>"$OUT/skipped.txt"
      echo "skipping $name: the converter does not support it yet ($why)" >&2
      sed -i '$ d' "$OUT/commands.txt"
      continue
    fi
  fi
  have+=("$name")
  log "slate bench $pkg -t $THREADS --json --profile > bench-$name.json"
  if ! "$SLATE" bench "$pkg" -t "$THREADS" --json --profile >"$OUT/bench-$name.json"; then
    rm -f "$OUT/bench-$name.json"
    echo "$name: slate bench failed (see the output above)" >>"$OUT/skipped.txt"
  fi
done

for name in $MODE_FORMATS; do
  if [[ " ${have[*]} " != *" $name "* ]]; then
    echo "mode table for $name: no $name package (see above)" >>"$OUT/skipped.txt"
    continue
  fi
  pkg=$DIR/tinyllama-$name-ctx$CTX.slate
  log "slate bench $pkg --mode all -t $THREADS --prompt $MODE_PROMPT -n $MODE_N --json > modes-$name.json"
  if ! "$SLATE" bench "$pkg" --mode all -t "$THREADS" --prompt "$MODE_PROMPT" -n "$MODE_N" --json \
      >"$OUT/modes-$name.json"; then
    # The gate failed (the table says where) or the run did: keep going, keep the record.
    [ -s "$OUT/modes-$name.json" ] || rm -f "$OUT/modes-$name.json"
    echo "mode table for $name: slate bench --mode all exited non-zero (see the table)" >>"$OUT/skipped.txt"
  fi
done

/usr/bin/python3 "$ROOT/bench/results.py" tinyllama --dir "$OUT" --out "$RESULTS" \
  --commands "$OUT/commands.txt" --skipped "$OUT/skipped.txt"
echo "wrote $RESULTS (raw JSON in $OUT)" >&2
