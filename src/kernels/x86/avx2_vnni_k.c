/*
 * avx2_vnni_k.c - the super-block matmuls (Q2_K to Q6_K, IQ4_XS) of x86/avx2_k.c built for CPUs
 * with AVX2 and AVX-VNNI (the avx2_vnni table): Q4_K's, Q5_K's and IQ4_XS's product of a unit of
 * 32 weights with a unit of x is one VEX vpdpbusd instead of vpmaddubsw + vpmaddwd; the code of
 * Q6_K, Q3_K and Q2_K, which have a scale per 16, is avx2_k.c's (see there why). x is the avx2_vnni
 * table's Q4 quantizer's (the same bytes as avx2's), so the results are bit-identical to the
 * avx2 table's.
 */
#define SLATE_AVX2_K_VNNI 1
#include "avx2_k.c"
