/*
 * prefetch.h - the cache level that decode's software prefetches of a weight stream fill, for
 * the x86 matmuls that measured better with L2 (T1) than with L1 (T0): avx512.c's f16/bf16/f32
 * loop, avx512_vnni.c's Q8_0 and Q8_C rows and every avx512_vnni_k.c row (K-quants, IQ4_XS).
 * avx2.c, avx512_vbmi.c (PAL) and the Q4 / IQ4_NL rows of avx512_vnni.c keep T0 (no gain
 * measured for them); attention's prefetches of cache rows keep T0 for another reason
 * (avx512.c, SLATE_PF_ATTN: the Zen 5 VM measured T1 slower there).
 *
 * Why: a prefetch into L1 that goes to DRAM holds one of L1's few miss buffers for its whole
 * trip, and the demand loads of the stream queue behind it; into L2 it holds one of L2's. On an
 * AMD EPYC Zen 4 VM (family 25), 2 threads, TinyLlama's four matrix shapes from DRAM, each
 * kernel compiled twice into one process and the two alternating call by call (median GB/s of
 * the later over the earlier, per shape; what bench_kq_ab now does):
 *   f16 (avx512.c)           [5632][2048]: T0 19.6-20.9, T1 26.4-30.3, no prefetch 28.5-29.3
 *   q8_c (int8 per channel)  1.25-1.88x in 12 of 12 shape x run cells
 *   q8_0                     1.02-1.35x in 11 of 12
 *   q6_k / q4_k / iq4_xs     0.97-1.57x / 0.98-1.30x / 0.95-1.50x (geometric means above 1)
 *   q4 block 32              0.63-1.15x, about 1: left at T0
 *   pal2-pal8 (avx512_vbmi)  0.88-1.02x (bench/pal_matvec.c's best-of-5 GB/s, one run): T0
 * End to end there (`slate bench --mode state --prompt 16 -n 64 -t 2`, the TinyLlama shape,
 * pairs of the two builds alternating): int8 16.7-20.5 -> 21.5-27.2 tok/s in 4 of 4 pairs,
 * fp16 8.7-9.8 -> 11.4-12.8 in 4 of 4; int4-b32 (Q4 rows, Q8_0 head) unchanged within noise.
 * On the Zen 5 target VM (AMD family 26, 2026-12-03) bench_kq_ab measured avx512.c's f16
 * stream with T0 ahead of T1 in 7 of 8 shape x run cells (0.91-1.12x), while end to end
 * (`slate bench --mode state`, fp16, five pairs) the two were alike within noise; avx512.c
 * therefore picks T0 at load on that family and SLATE_PF_STREAM elsewhere (g_stream_t0). The
 * other files' loops were not re-measured there.
 * -DSLATE_PF_STREAM=_MM_HINT_T0 builds the old hint; to compare the two in one process:
 *   cmake -S . -B build-ab -DCMAKE_BUILD_TYPE=Release -DSLATE_AB_KERNEL=avx512_vnni \
 *         -DSLATE_AB_FLAGS=-DSLATE_PF_STREAM=_MM_HINT_T0 && cmake --build build-ab -t bench_kq_ab
 *   build-ab/bench_kq_ab 5 512      (bench/kq_matvec.c, "A/B mode"; avx512_vnni_k likewise)
 */
#ifndef SLATE_KERNELS_X86_PREFETCH_H
#define SLATE_KERNELS_X86_PREFETCH_H

#include <immintrin.h>

#ifndef SLATE_PF_STREAM
#define SLATE_PF_STREAM _MM_HINT_T1
#endif

#endif
