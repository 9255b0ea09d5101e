#!/usr/bin/env bash
# Builds slate, converts the shipped stories260K model and generates a story.
# Usage: scripts/demo.sh [PROMPT]
set -euo pipefail
cd "$(dirname "$0")/.."
models=${SLATE_MODELS_DIR:-../shared/models}
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
mkdir -p out
./build/slate convert "$models/stories260K/stories260K.bin" \
  --tokenizer "$models/stories260K/tok512.bin" -o out/stories260K.slate
./build/slate info out/stories260K.slate
./build/slate run out/stories260K.slate -p "${1:-Once upon a time}" -n 256 --temp 0.8 --seed 42
