/*
 * avx2_vnni.c - the integer Q8_0/Q4/Q8_C/IQ4_NL matmuls of x86/avx2_q.c built for CPUs with
 * AVX2 and AVX-VNNI but not AVX-512 (Intel Alder Lake and later client cores; Zen 5 has both but
 * takes the avx512_vnni table): each product of a unit of 32 weights with a unit of x is one VEX
 * vpdpbusd instead of vpmaddubsw + vpmaddwd. Everything else, x's quantization included, is
 * avx2_q.c's, so the results are bit-identical to the avx2 table's. The table "avx2_vnni" is
 * the avx2 table with these matmuls (src/kernels/dispatch.c).
 */
#define SLATE_AVX2_Q_VNNI 1
#include "avx2_q.c"
