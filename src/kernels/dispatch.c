/*
 * dispatch.c - picks the kernel table once per process from the CPU's features (cpuid via the
 * compiler's builtins on x86-64; on AArch64 NEON is part of the base architecture, so "neon" is
 * always there, and "neon_dotprod" where the kernel reports the dot product instructions in
 * AT_HWCAP). SLATE_KERNELS=ref|avx2|avx2_vnni|avx512|avx512_vnni|neon|neon_dotprod forces a
 * path; asking for one the CPU lacks keeps the best available one, and slate_kernels_name()
 * says which.
 * The tables are filled once under pthread_once and never change afterwards.
 */
#include "kernels.h"

#include <pthread.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#include <stdlib.h>
#include <string.h>

static slate__kernels g_ref, g_avx2, g_avx2_vnni, g_avx512, g_avx512_vnni, g_neon, g_neon_dotprod;
static bool g_has_avx2, g_has_avx2_vnni, g_has_avx512, g_has_avx512_vnni, g_has_neon,
    g_has_neon_dotprod;
static const slate__kernels *g_best;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) && defined(__GNUC__)
/* F16C (CPUID.1:ECX bit 29): not every compiler's __builtin_cpu_supports knows it. */
__attribute__((unused)) static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
/* AVX-VNNI (CPUID.(EAX=7,ECX=1):EAX bit 4); the OS's AVX state is already implied by avx2. */
__attribute__((unused)) static bool has_avx_vnni(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}
#endif

#if defined(__aarch64__)
/* FEAT_DotProd (SDOT/UDOT), as the Linux kernel reports it; other systems go without. */
__attribute__((unused)) static bool has_asimddp(void) {
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
    return false;
#endif
}
#endif

static void init(void) {
    slate__ref_fill(&g_ref);
    g_best = &g_ref;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
#ifdef SLATE_HAVE_avx2
    g_has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    if (g_has_avx2) {
        g_avx2 = g_ref;
        slate__avx2_fill(&g_avx2);
#ifdef SLATE_HAVE_avx2_q
        slate__avx2_q_fill(&g_avx2);
#endif
        g_best = &g_avx2;
    }
#endif
#ifdef SLATE_HAVE_avx2_vnni
    /* avx2 with AVX-VNNI dot products in the compressed formats' matmuls (the best table of
     * CPUs with AVX-VNNI but no AVX-512; those with AVX-512 VNNI go on below). */
    g_has_avx2_vnni = g_has_avx2 && has_avx_vnni();
    if (g_has_avx2_vnni) {
        g_avx2_vnni = g_avx2;
        slate__avx2_vnni_fill(&g_avx2_vnni);
        g_avx2_vnni.name = "avx2_vnni";
        g_best = &g_avx2_vnni;
    }
#endif
#ifdef SLATE_HAVE_avx512
    g_has_avx512 = g_has_avx2 && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512dq");
    if (g_has_avx512) {
        g_avx512 = g_avx2;
        slate__avx512_fill(&g_avx512);
#ifdef SLATE_HAVE_avx512_pal
        slate__avx512_pal_fill(&g_avx512);
#endif
        g_best = &g_avx512;
    }
#endif
#ifdef SLATE_HAVE_avx512_vnni
    /* avx512 plus the integer (vpdpbusd) kernels of the compressed weight formats. */
    g_has_avx512_vnni = g_has_avx512 && __builtin_cpu_supports("avx512vnni");
    if (g_has_avx512_vnni) {
        g_avx512_vnni = g_avx512;
        slate__avx512_vnni_fill(&g_avx512_vnni);
#ifdef SLATE_HAVE_avx512_vbmi
        /* PAL with byte lookups (vpermb) and vpdpbusd; without VBMI avx512_pal.c's stays. */
        if (__builtin_cpu_supports("avx512vbmi")) slate__avx512_vbmi_fill(&g_avx512_vnni);
#endif
        g_best = &g_avx512_vnni;
    }
#endif
#endif
#if defined(__aarch64__) && defined(SLATE_HAVE_neon)
    g_has_neon = true; /* Advanced SIMD is mandatory in AArch64 */
    g_neon = g_ref;
    slate__neon_fill(&g_neon);
    slate__neon_q_fill(&g_neon);
    g_best = &g_neon;
#ifdef SLATE_HAVE_neon_dotprod
    /* neon with SDOT in the compressed formats' matmuls */
    g_has_neon_dotprod = has_asimddp();
    if (g_has_neon_dotprod) {
        g_neon_dotprod = g_neon;
        slate__neon_dotprod_fill(&g_neon_dotprod);
        g_neon_dotprod.name = "neon_dotprod";
        g_best = &g_neon_dotprod;
    }
#endif
#endif
    const char *force = getenv("SLATE_KERNELS");
    if (force) {
        if (strcmp(force, "ref") == 0) g_best = &g_ref;
        else if (strcmp(force, "avx2") == 0 && g_has_avx2) g_best = &g_avx2;
        else if (strcmp(force, "avx2_vnni") == 0 && g_has_avx2_vnni) g_best = &g_avx2_vnni;
        else if (strcmp(force, "avx512") == 0 && g_has_avx512) g_best = &g_avx512;
        else if (strcmp(force, "avx512_vnni") == 0 && g_has_avx512_vnni) g_best = &g_avx512_vnni;
        else if (strcmp(force, "neon") == 0 && g_has_neon) g_best = &g_neon;
        else if (strcmp(force, "neon_dotprod") == 0 && g_has_neon_dotprod)
            g_best = &g_neon_dotprod;
    }
}

const slate__kernels *slate__kernels_get(void) {
    pthread_once(&g_once, init);
    return g_best;
}

const slate__kernels *slate__kernels_by_name(const char *name) {
    pthread_once(&g_once, init);
    if (strcmp(name, "ref") == 0) return &g_ref;
    if (strcmp(name, "avx2") == 0) return g_has_avx2 ? &g_avx2 : NULL;
    if (strcmp(name, "avx2_vnni") == 0) return g_has_avx2_vnni ? &g_avx2_vnni : NULL;
    if (strcmp(name, "avx512") == 0) return g_has_avx512 ? &g_avx512 : NULL;
    if (strcmp(name, "avx512_vnni") == 0) return g_has_avx512_vnni ? &g_avx512_vnni : NULL;
    if (strcmp(name, "neon") == 0) return g_has_neon ? &g_neon : NULL;
    if (strcmp(name, "neon_dotprod") == 0) return g_has_neon_dotprod ? &g_neon_dotprod : NULL;
    return NULL;
}

const char *slate_kernels_name(void) { return slate__kernels_get()->name; }
