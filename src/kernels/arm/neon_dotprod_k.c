/*
 * neon_dotprod_k.c - the Q4_K / Q5_K / Q6_K / Q3_K / Q2_K / IQ4_XS matmuls of arm/neon_k.c built
 * for AArch64 CPUs with the dot product instructions (FEAT_DotProd), as arm/neon_dotprod.c does
 * for neon_q.c: the integer products of 16 weights with 16 x are one SDOT instead of vmull/vmlal
 * + pairwise adds; x's quantization is neon_q.c's. CMake compiles this file alone with
 * -march=armv8.2-a+dotprod; dispatch.c adds these matmuls to the "neon_dotprod" table.
 */
#define SLATE_NEON_Q_DOTPROD 1
#include "neon_k.c"
