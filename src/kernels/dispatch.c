/*
 * dispatch.c - picks the kernel table once per process from the CPU's features (cpuid via the
 * compiler's builtins on x86-64; on AArch64 NEON is part of the base architecture, so "neon" is
 * always there, and "neon_dotprod" where the kernel reports the dot product instructions in
 * AT_HWCAP). SLATE_KERNELS=ref|avx2|avx2_vnni|avx512|avx512_vnni|neon|neon_dotprod forces a
 * path. A name that is no set, or a set this CPU (or this build) lacks, is refused: opening a
 * model fails with SLATE_E_UNSUPPORTED naming the sets there are (slate__kernels_check), rather
 * than running another table than the one asked for without a word. An empty value is unset.
 * The tables (and that verdict) are filled once under pthread_once and never change afterwards.
 */
#include "kernels.h"
#include "core/core.h"

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
static char g_force_error[512]; /* why SLATE_KERNELS is refused; empty when it is not */
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
#ifdef SLATE_HAVE_avx2_k
        slate__avx2_k_fill(&g_avx2); /* after avx2_q: Q2_K..Q6_K read x as Q4's quantizer writes it */
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
#ifdef SLATE_HAVE_avx2_vnni_k
        slate__avx2_vnni_k_fill(&g_avx2_vnni);
#endif
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
#ifdef SLATE_HAVE_avx512_vnni_k
        slate__avx512_vnni_k_fill(&g_avx512_vnni); /* q2_k..q6_k; iq4_xs on iq4_nl's x */
#endif
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
    slate__neon_k_fill(&g_neon); /* after neon_q: it reuses its x quantizer */
    g_best = &g_neon;
#ifdef SLATE_HAVE_neon_dotprod
    /* neon with SDOT in the compressed formats' matmuls */
    g_has_neon_dotprod = has_asimddp();
    if (g_has_neon_dotprod) {
        g_neon_dotprod = g_neon;
        slate__neon_dotprod_fill(&g_neon_dotprod);
        slate__neon_dotprod_k_fill(&g_neon_dotprod);
        g_neon_dotprod.name = "neon_dotprod";
        g_best = &g_neon_dotprod;
    }
#endif
#endif
    const char *force = getenv("SLATE_KERNELS");
    if (force && force[0]) {
        const struct { const char *name; bool has; const slate__kernels *k; } sets[] = {
            {"ref", true, &g_ref},
            {"avx2", g_has_avx2, &g_avx2},
            {"avx2_vnni", g_has_avx2_vnni, &g_avx2_vnni},
            {"avx512", g_has_avx512, &g_avx512},
            {"avx512_vnni", g_has_avx512_vnni, &g_avx512_vnni},
            {"neon", g_has_neon, &g_neon},
            {"neon_dotprod", g_has_neon_dotprod, &g_neon_dotprod},
        };
        enum { N_SETS = sizeof sets / sizeof sets[0] };
        char have[160] = "", all[160] = "";
        size_t nh = 0, na = 0;
        int found = -1;
        for (int i = 0; i < N_SETS; i++) {
            if (strcmp(force, sets[i].name) == 0) found = i;
            na += (size_t)snprintf(all + na, sizeof all - na, "%s%s", i ? ", " : "",
                                   sets[i].name);
            if (sets[i].has)
                nh += (size_t)snprintf(have + nh, sizeof have - nh, "%s%s", nh ? ", " : "",
                                       sets[i].name);
        }
        if (found >= 0 && sets[found].has)
            g_best = sets[found].k;
        else if (found < 0)
            snprintf(g_force_error, sizeof g_force_error, "SLATE_KERNELS='%.40s' is not a kernel "
                     "set (%s); this CPU runs %s (unset it for the fastest, %s)", force, all,
                     have, g_best->name);
        else
            snprintf(g_force_error, sizeof g_force_error, "SLATE_KERNELS=%s: this CPU (or this "
                     "build) has no %s kernels; it runs %s (unset it for the fastest, %s)",
                     force, force, have, g_best->name);
    }
}

slate_status slate__kernels_check(slate_error *err) {
    pthread_once(&g_once, init);
    if (g_force_error[0]) return slate__fail(err, SLATE_E_UNSUPPORTED, "%s", g_force_error);
    return SLATE_OK;
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
