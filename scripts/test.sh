#!/usr/bin/env bash
# Builds slate and runs the whole test suite (unit, kernel, fuzz-corpus replay, end-to-end on
# the real models in ../shared/models). Usage: scripts/test.sh
# Environment: SLATE_BUILD_DIR (default build), SLATE_CMAKE_ARGS (extra cmake arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${SLATE_BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$dir" -DSLATE_WERROR=ON ${SLATE_CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j"$(nproc)"
cd "$dir"
ctest --output-on-failure -j"$(nproc)"
