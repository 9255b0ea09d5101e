/*
 * neon_dotprod.c - the integer Q8_0/Q4/Q8_C/IQ4_NL matmuls of arm/neon_q.c built for AArch64
 * CPUs with the dot product instructions (FEAT_DotProd: optional from ARMv8.2, e.g.
 * Cortex-A55/A75 and later, Neoverse N1, Apple M1; mandatory from ARMv8.4): the integer
 * products of a unit of 32 weights with a unit of x are two SDOT instead of vmull/vmlal +
 * pairwise adds. Everything else, x's quantization included, is neon_q.c's. The results differ
 * from the "neon" table's only in rounding (SDOT sums products in other lanes). CMake compiles
 * this file alone with -march=armv8.2-a+dotprod; dispatch.c builds the table "neon_dotprod"
 * (the neon table with these matmuls) when the kernel reports HWCAP_ASIMDDP (Linux, Android).
 */
#define SLATE_NEON_Q_DOTPROD 1
#include "neon_q.c"
