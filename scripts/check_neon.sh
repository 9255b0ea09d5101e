#!/usr/bin/env bash
# Cross-checks the NEON kernels (src/kernels/arm/neon*.c) on any Linux host: builds
# tests/kernels/neon_check.c and the checks it shares with test_kernels.c (kcheck.c) with the
# kernel sources for AArch64 (static, so no ARM sysroot is needed at run time) and runs it
# under qemu user-mode emulation against the scalar reference, once for the "neon" table
# (plain Advanced SIMD) and once for "neon_dotprod" (SDOT; qemu's default CPU has it).
# Only the kernels and two small core files are compiled (half-precision conversion in
# core/num.c, slate_dtype_name in core/error.c): the kernels need nothing else of the library.
# Usage: scripts/check_neon.sh      Exit: 0 all passed, 1 a build error or a failed case,
# 2 the cross toolchain or qemu is missing.
# Environment: SLATE_NEON_BUILD_DIR (default build-neon), SLATE_AARCH64_CC
# (default aarch64-linux-gnu-gcc), SLATE_TEST_SEED (repeats a run).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${SLATE_NEON_BUILD_DIR:-build-neon}
cc=${SLATE_AARCH64_CC:-aarch64-linux-gnu-gcc}
install_hint="apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static"

qemu=""
for q in qemu-aarch64-static qemu-aarch64; do
  if command -v "$q" >/dev/null; then qemu=$q; break; fi
done
if ! command -v "$cc" >/dev/null || [ -z "$qemu" ]; then
  echo "check_neon: missing the AArch64 cross compiler ($cc) or qemu-aarch64(-static);" \
       "install them with: $install_hint" >&2
  exit 2
fi

# The project's warning flags (CMakeLists.txt SLATE_WARN) with -Werror, as CI builds.
flags=(-std=c11 -O2 -static -pthread -Wall -Wextra -Wshadow -Wstrict-prototypes
       -Wno-unused-parameter -Werror -DSLATE_HAVE_neon -Iinclude -Isrc)
srcs=(tests/kernels/neon_check.c tests/kernels/kcheck.c src/kernels/dispatch.c src/kernels/quant.c
      src/kernels/ref/*.c src/kernels/arm/neon.c src/kernels/arm/neon_q.c src/kernels/arm/neon_k.c
      src/core/num.c src/core/error.c)
mkdir -p "$dir"
start=$(date +%s)
# neon_dotprod.c and neon_dotprod_k.c alone are built for ARMv8.2 + dot product, as
# CMakeLists.txt does.
if ! "$cc" "${flags[@]}" -DSLATE_HAVE_neon_dotprod -march=armv8.2-a+dotprod -c \
       src/kernels/arm/neon_dotprod.c -o "$dir/neon_dotprod.o" ||
   ! "$cc" "${flags[@]}" -DSLATE_HAVE_neon_dotprod -march=armv8.2-a+dotprod -c \
       src/kernels/arm/neon_dotprod_k.c -o "$dir/neon_dotprod_k.o" ||
   ! "$cc" "${flags[@]}" -DSLATE_HAVE_neon_dotprod "${srcs[@]}" "$dir/neon_dotprod.o" \
       "$dir/neon_dotprod_k.o" -o "$dir/neon_check" -lm; then
  echo "check_neon: the AArch64 build failed" >&2
  exit 1
fi
rc=0
for table in neon neon_dotprod; do
  "$qemu" "$dir/neon_check" "$table" || rc=1
done
echo "check_neon: $(($(date +%s) - start)) s (build + run under $qemu)"
[ "$rc" -eq 0 ] || exit 1
