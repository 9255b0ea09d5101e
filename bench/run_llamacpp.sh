#!/usr/bin/env bash
# bench/run_llamacpp.sh - slate against llama.cpp on the TinyLlama-1.1B shape, side by side,
# and a verdict on each of issue 3's targets against llama.cpp; writes the "llama.cpp-pairs"
# section of bench/RESULTS.md.
#
# The machine's read bandwidth moves by ±20 % from minute to minute, and decode follows it, so
# a ratio is only meaningful between two runs made in the same minute. This script therefore
# measures in short pairs: one llama-bench run immediately followed by the same measurement with
# `slate run` (or the other way round: the order alternates between rounds), and each pair
# gives one ratio. A target is met when the median ratio of its pairs reaches it; the table also
# says in how many pairs it was reached.
#
#   LLAMA_BENCH=/path/to/llama-bench GGUF_Q4_0=q4_0.gguf GGUF_Q8_0=q8_0.gguf GGUF_F16=f16.gguf \
#     bench/run_llamacpp.sh
#
# Environment:
#   LLAMA_BENCH       llama.cpp's llama-bench (required; not part of slate, build it yourself)
#   LLAMA_BENCH_ARGS  extra llama-bench arguments (default "-lm none": weights read into process
#                     memory, as in the issue's reference figures; builds older than the -lm
#                     option take "-mmp 0" instead)
#   GGUF_F16, GGUF_Q8_0, GGUF_Q4_0
#                     TinyLlama-1.1B-shaped GGUF files for llama.cpp (a format without its file
#                     is skipped). Any GGUF of that shape will do, the real TinyLlama's too:
#                     speed does not depend on the values. For the same bytes per token as
#                     slate's int4 packages, quantize Q4_0 with a Q8_0 output head and token
#                     embedding (llama-quantize --output-tensor-type q8_0
#                     --token-embedding-type q8_0 F16.gguf Q4_0.gguf Q4_0). RESULTS.md's
#                     "llama.cpp" section says how the files measured there were made.
#   SLATE             the CLI (default: build/slate of this checkout)
#   SLATE_BENCH_DIR   where bench/run_tinyllama.sh left its packages (default /tmp/slate-bench):
#                     tinyllama-{fp16,int8,int4-b32}-ctx$CTX.slate
#   CTX               the packages' declared context (default 4096)
#   THREADS           threads on both sides (default 2)
#   SLATE_RESULTS_MD  the file whose section is rewritten (default bench/RESULTS.md)
#   PAIRS             rounds (default 6); each round measures every test of every format once
#   TESTS             any of "decode prefill depth" (default all three):
#                       decode:  32 one-token steps at depth 0 (llama-bench -n 32 -r 3) against
#                                `slate run` decoding 96 tokens after a 3-token prompt
#                       prefill: a 512-token prompt in one call (llama-bench -p 512 -r 3) against
#                                three `slate run` of a 512-token prompt (mean)
#                       depth:   32 one-token steps after 2048 tokens (llama-bench -d 2048 -n 32)
#                                against `slate run` decoding 32 tokens after a 2048-token prompt
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SLATE=${SLATE:-$ROOT/build/slate}
DIR=${SLATE_BENCH_DIR:-/tmp/slate-bench}
CTX=${CTX:-4096}
THREADS=${THREADS:-2}
PAIRS=${PAIRS:-6}
TESTS=${TESTS:-"decode prefill depth"}
LLAMA_BENCH_ARGS=${LLAMA_BENCH_ARGS:--lm none}
RESULTS=${SLATE_RESULTS_MD:-$ROOT/bench/RESULTS.md}

die() { echo "run_llamacpp.sh: $*" >&2; exit 1; }
[ -n "${LLAMA_BENCH:-}" ] || die "set LLAMA_BENCH to llama.cpp's llama-bench (see the header)"
[ -x "$LLAMA_BENCH" ] || die "LLAMA_BENCH=$LLAMA_BENCH is not an executable"
[ -x "$SLATE" ] || die "no slate CLI at $SLATE (build first: cmake -S . -B build && cmake --build build)"
case "$PAIRS" in '' | *[!0-9]* | 0) die "PAIRS must be a positive integer, not '$PAIRS'" ;; esac
for t in $TESTS; do
  case "$t" in decode | prefill | depth) ;; *) die "unknown test '$t' in TESTS (decode prefill depth)" ;; esac
done

# slate format : llama.cpp type : GGUF variable
formats=()
for spec in "fp16:F16:GGUF_F16" "int8:Q8_0:GGUF_Q8_0" "int4-b32:Q4_0:GGUF_Q4_0"; do
  IFS=: read -r fmt typ var <<<"$spec"
  gguf=${!var:-}
  pkg=$DIR/tinyllama-$fmt-ctx$CTX.slate
  if [ -z "$gguf" ]; then echo "skipping $fmt: $var is not set" >&2; continue; fi
  [ -s "$gguf" ] || die "$var=$gguf: no such file"
  [ -s "$pkg" ] || die "no slate package $pkg (run bench/run_tinyllama.sh first)"
  formats+=("$fmt:$typ:$gguf")
done
[ ${#formats[@]} -gt 0 ] || die "no format to compare: set at least one of GGUF_F16, GGUF_Q8_0, GGUF_Q4_0"

OUT=$DIR/results-llamacpp
rm -rf "$OUT"
mkdir -p "$OUT"
: >"$OUT/commands.txt"

# Synthetic token ids, spread over the vocabulary (llama-bench draws random ones), past the
# first three ids (special tokens in the Llama vocabularies).
first_fmt=${formats[0]%%:*}
vocab=$("$SLATE" info "$DIR/tinyllama-$first_fmt-ctx$CTX.slate" | sed -n 's/.* vocab \([0-9]*\),.*/\1/p' | head -1)
case "$vocab" in '' | *[!0-9]*) die "cannot read the vocabulary size from slate info" ;; esac
[ "$vocab" -gt 3 ] || die "vocabulary of $vocab tokens is too small"
ids() {
  seq 0 $(($1 - 1)) |
    awk -v v="$vocab" '{printf "%s%d", (NR > 1 ? "," : ""), ($1 * 7919 + 13) % (v - 3) + 3}'
}
IDS3=$(ids 3)
IDS512=$(ids 512)
IDS2048=$(ids 2048)

# llama TEST GGUF FILE: one llama-bench run, its JSONL rows into FILE.
llama() {
  local test=$1 gguf=$2 file=$3 args
  case "$test" in
    decode) args="-p 0 -n 32 -d 0 -r 3" ;;
    prefill) args="-p 512 -n 0 -d 0 -r 3" ;;
    depth) args="-p 0 -n 32 -d 2048 -r 1" ;;
  esac
  [ "$r" != 1 ] || echo "$LLAMA_BENCH -m $gguf -t $THREADS $args $LLAMA_BENCH_ARGS -o jsonl" >>"$OUT/commands.txt"
  # shellcheck disable=SC2086
  "$LLAMA_BENCH" -m "$gguf" -t "$THREADS" $args $LLAMA_BENCH_ARGS -o jsonl >"$file" 2>"$file.err" ||
    die "llama-bench failed on $gguf (see $file.err)"
  grep -q '"avg_ts"' "$file" || die "llama-bench wrote no JSONL rows with avg_ts (see $file, $file.err)"
}

# slate_run TEST PKG FILE: the matching `slate run` (its summary lines into FILE).
slate_run() {
  local test=$1 pkg=$2 file=$3 reps=1 ids=$IDS3 n=96
  case "$test" in
    prefill) reps=3; ids=$IDS512; n=1 ;;
    depth) ids=$IDS2048; n=32 ;;
  esac
  : >"$file"
  [ "$r" != 1 ] || echo "$SLATE run $pkg --ids <$(($(tr -cd , <<<"$ids" | wc -c) + 1)) synthetic ids> -n $n --temp 0 -t $THREADS   # x $reps" >>"$OUT/commands.txt"
  for _ in $(seq $reps); do
    "$SLATE" run "$pkg" --ids "$ids" -n "$n" --temp 0 -t "$THREADS" 2>&1 >/dev/null |
      grep '^\[slate\] prompt' >>"$file" || die "slate run failed on $pkg"
  done
}

for r in $(seq "$PAIRS"); do
  for fmt_spec in "${formats[@]}"; do
    IFS=: read -r fmt typ gguf <<<"$fmt_spec"
    pkg=$DIR/tinyllama-$fmt-ctx$CTX.slate
    for t in $TESTS; do
      base=$OUT/r$r-$fmt-$t
      date -u +%H:%M:%S >"$base.time"
      if [ $((r % 2)) = 1 ]; then
        llama "$t" "$gguf" "$base.llama.jsonl"
        slate_run "$t" "$pkg" "$base.slate.txt"
        echo llama >"$base.first"
      else
        slate_run "$t" "$pkg" "$base.slate.txt"
        llama "$t" "$gguf" "$base.llama.jsonl"
        echo slate >"$base.first"
      fi
      echo "round $r/$PAIRS: $fmt vs $typ, $t" >&2
    done
  done
done

/usr/bin/python3 "$ROOT/bench/results.py" llamacpp --dir "$OUT" --out "$RESULTS" \
  --commands "$OUT/commands.txt" --llama-args "$LLAMA_BENCH_ARGS" --threads "$THREADS"
echo "wrote $RESULTS (raw output in $OUT)" >&2
