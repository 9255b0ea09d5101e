/* test_sampler.c - the sampler (src/sample/sampler.c, rng.c): greedy and its ties, seeds,
 * top-k / top-p / min-p on constructed distributions, frequencies against the softmax, -inf and
 * NaN logits, the three penalties and their window, parameter refusal naming the parameter,
 * API misuse, no allocation while sampling, allocation faults at create, RNG save/restore.
 *
 * Sampler draws use fixed seeds, so those tests are deterministic; the frequency tolerances
 * are still set (and explained) as for a truly random source, so a different correct RNG or
 * seed would pass too. The nucleus-selection test takes random inputs from tu_seed() (set
 * SLATE_TEST_SEED to replay) and checks exact sets, so any seed must pass. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "sample/sample.h"

static slate_sampler_params params_plain(float temperature, uint64_t seed) {
    slate_sampler_params p = slate_sampler_default_params();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

static slate_sampler *make(const slate_sampler_params *p, int32_t n_vocab) {
    slate_sampler *s = NULL;
    slate_error e;
    slate_status rc = slate_sampler_create(p, n_vocab, &s, &e);
    if (rc != SLATE_OK) fail_msg("create: %s", e.message);
    return s;
}

static int32_t sample1(slate_sampler *s, const float *logits, int32_t n) {
    int32_t t = -1;
    slate_error e;
    slate_status rc = slate_sampler_sample(s, logits, n, &t, &e);
    if (rc != SLATE_OK) fail_msg("sample: %s", e.message);
    assert_true(t >= 0 && t < n);
    return t;
}

/* Draws `n_draws` tokens and counts them into counts[0..n). */
static void histogram(slate_sampler *s, const float *logits, int32_t n, int n_draws,
                      int *counts) {
    memset(counts, 0, sizeof(int) * (size_t)n);
    for (int i = 0; i < n_draws; i++) counts[sample1(s, logits, n)]++;
}

/* log of probabilities, so the softmax at temperature 1 gives them back. */
static void logits_from_probs(const double *p, int32_t n, float *logits) {
    for (int32_t i = 0; i < n; i++) logits[i] = p[i] > 0 ? (float)log(p[i]) : -INFINITY;
}

static void defaults_match_the_documented_values(void **st) {
    (void)st;
    slate_sampler_params p = slate_sampler_default_params();
    assert_true(p.temperature == 0.8f);
    assert_int_equal(p.top_k, 40);
    assert_true(p.top_p == 0.95f);
    assert_true(p.min_p == 0.05f);
    assert_true(p.repeat_penalty == 1.0f);
    assert_int_equal(p.repeat_last_n, 64);
    assert_true(p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f);
    assert_int_equal(p.seed, 0);
}

static void greedy_picks_argmax_and_lowest_id_on_ties(void **st) {
    (void)st;
    slate_sampler_params p = slate_sampler_default_params();
    p.temperature = 0.0f;
    slate_sampler *s = make(&p, 6);
    const float a[6] = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 2.0f - 1e-6f};
    for (int i = 0; i < 5; i++) assert_int_equal(sample1(s, a, 6), 1);
    const float ties[6] = {-1.0f, 3.0f, 0.0f, 3.0f, 3.0f, 1.0f};
    assert_int_equal(sample1(s, ties, 6), 1);
    const float nan_first[6] = {NAN, -INFINITY, 0.5f, 0.5f, NAN, -2.0f};
    assert_int_equal(sample1(s, nan_first, 6), 2);
    const float all_equal[6] = {0, 0, 0, 0, 0, 0};
    assert_int_equal(sample1(s, all_equal, 6), 0);
    slate_sampler_free(s);
}

static void same_seed_gives_same_sequence(void **st) {
    (void)st;
    enum { V = 50, N = 500 };
    float logits[V];
    uint64_t r = 12345;
    for (int i = 0; i < V; i++) logits[i] = 3.0f * tu_randf(&r);
    slate_sampler_params p = slate_sampler_default_params(); /* default seed 0 */
    slate_sampler *a = make(&p, V);
    slate_sampler *b = make(&p, V);
    for (int i = 0; i < N; i++) assert_int_equal(sample1(a, logits, V), sample1(b, logits, V));
    slate_sampler_free(a);
    slate_sampler_free(b);

    p.seed = 0xdeadbeefull;
    a = make(&p, V);
    b = make(&p, V);
    for (int i = 0; i < N; i++) assert_int_equal(sample1(a, logits, V), sample1(b, logits, V));
    slate_sampler_free(a);
    slate_sampler_free(b);
}

static void different_seeds_give_different_sequences(void **st) {
    (void)st;
    enum { V = 16, N = 400 };
    float logits[V] = {0}; /* uniform: every draw is a coin the seed decides */
    slate_sampler_params p = params_plain(1.0f, 1);
    slate_sampler *a = make(&p, V);
    p.seed = 2;
    slate_sampler *b = make(&p, V);
    int same = 0;
    for (int i = 0; i < N; i++) same += sample1(a, logits, V) == sample1(b, logits, V);
    /* Independent streams agree on 1/16 of draws: ~25 of 400; 200 is far out of reach. */
    assert_true(same < N / 2);
    slate_sampler_free(a);
    slate_sampler_free(b);
}

static void top_k_1_equals_greedy(void **st) {
    (void)st;
    enum { V = 1000 };
    static float logits[V];
    slate_sampler_params g = slate_sampler_default_params();
    g.temperature = 0.0f;
    slate_sampler_params k1 = params_plain(1.5f, 7);
    k1.top_k = 1;
    slate_sampler *sg = make(&g, V);
    slate_sampler *sk = make(&k1, V);
    uint64_t r = 99;
    for (int row = 0; row < 50; row++) {
        for (int i = 0; i < V; i++) logits[i] = 5.0f * tu_randf(&r);
        if (row % 5 == 0) logits[V - 1] = logits[3] = 10.0f; /* a tie: lowest id wins both */
        assert_int_equal(sample1(sk, logits, V), sample1(sg, logits, V));
    }
    slate_sampler_free(sg);
    slate_sampler_free(sk);
}

static void full_distribution_matches_softmax_when_k_0_p_1(void **st) {
    (void)st;
    enum { V = 4, N = 20000 };
    const float logits[V] = {1.0f, 0.5f, 0.0f, -1.0f};
    const float temps[] = {1.0f, 0.5f};
    for (size_t ti = 0; ti < sizeof temps / sizeof temps[0]; ti++) {
        slate_sampler_params p = params_plain(temps[ti], 2024);
        slate_sampler *s = make(&p, V);
        int counts[V];
        histogram(s, logits, V, N, counts);
        double z = 0, prob[V];
        for (int i = 0; i < V; i++) z += prob[i] = exp(logits[i] / temps[ti]);
        double chi2 = 0;
        for (int i = 0; i < V; i++) {
            double e = N * prob[i] / z;
            chi2 += (counts[i] - e) * (counts[i] - e) / e;
        }
        /* 3 degrees of freedom: P(chi2 > 30) is about 1e-6 for a correct sampler, so a fair RNG
         * practically never fails, while a wrong distribution (no softmax, wrong temperature,
         * an off-by-one in the walk) gives chi2 in the hundreds at N = 20000. */
        if (chi2 > 30.0)
            fail_msg("T=%g: chi2 = %.1f; counts %d %d %d %d", (double)temps[ti], chi2, counts[0],
                     counts[1], counts[2], counts[3]);
        slate_sampler_free(s);
    }
}

/* Draws often and checks that exactly the tokens in `keep` (a 0/1 mask) occur. Callers make
 * every kept token's probability among the kept >= 0.01 (4000 draws then miss one with chance
 * < 64 * 0.99^4000 = 3e-16) and the dropped ones impossible, so the check is exact. */
static void assert_support(slate_sampler *s, const float *logits, int32_t n, const int *keep) {
    int counts[512];
    assert_true(n <= 512);
    histogram(s, logits, n, 4000, counts);
    for (int i = 0; i < n; i++) {
        if (keep[i] && counts[i] == 0) fail_msg("token %d is kept but never drawn", i);
        if (!keep[i] && counts[i] != 0) fail_msg("token %d is dropped but drawn %d times", i,
                                                 counts[i]);
    }
}

static void top_p_keeps_smallest_set_reaching_p(void **st) {
    (void)st;
    /* Probabilities 0.5, 0.3, 0.15, 0.05 placed at scattered ids; the other four get 1e-12 so
     * that they are candidates (top_k = 6 then really cuts) yet never reach any top_p below. */
    enum { V = 8 };
    const double prob[V] = {1e-12, 0.15, 1e-12, 0.5, 0.05, 1e-12, 0.3, 1e-12};
    float logits[V];
    logits_from_probs(prob, V, logits);
    const struct {
        float top_p;
        int keep[V];
    } cases[] = {
        {0.40f, {0, 0, 0, 1, 0, 0, 0, 0}}, /* 0.5 alone reaches it */
        {0.75f, {0, 0, 0, 1, 0, 0, 1, 0}}, /* 0.5 + 0.3 */
        {0.90f, {0, 1, 0, 1, 0, 0, 1, 0}}, /* 0.5 + 0.3 + 0.15 */
        {0.99f, {0, 1, 0, 1, 1, 0, 1, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int top_k = 0; top_k <= 6; top_k += 6) { /* heap path, then the top-k sorted path */
            slate_sampler_params p = params_plain(1.0f, 11 + c);
            p.top_p = cases[c].top_p;
            p.top_k = top_k;
            slate_sampler *s = make(&p, V);
            assert_support(s, logits, V, cases[c].keep);
            slate_sampler_free(s);
        }
    }
}

/* Whether token a ranks before token b: higher logit, then lower id. */
static bool ranks_before(const float *l, int32_t a, int32_t b) {
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void top_p_nucleus_matches_brute_force_on_flat_distributions(void **st) {
    (void)st;
    /* Nuclei of dozens of tokens, so the quickselect (top_k = 0) partitions several times and
     * the sorted path (top_k = V - 1) walks far. The brute force sorts everything and sums the
     * same float weights expf(l - l_max) as the sampler. Temperature 100 then flattens the
     * kept tokens so each is drawn with probability > 0.01 (see assert_support). */
    enum { V = 300 };
    static float logits[V];
    static int32_t order[V];
    static int keep[V];
    uint64_t r = 808;
    const float top_ps[] = {0.15f, 0.3f, 0.45f};
    for (int row = 0; row < 6; row++) {
        for (int i = 0; i < V; i++) logits[i] = tu_randf(&r);
        logits[7] = logits[8] = logits[250]; /* ties are ranked by id */
        float top_p = top_ps[row % 3];
        float lmax = -INFINITY;
        for (int i = 0; i < V; i++) {
            order[i] = i;
            if (logits[i] > lmax) lmax = logits[i];
        }
        for (int i = 1; i < V; i++) /* insertion sort: obviously right, V is small */
            for (int j = i; j > 0 && ranks_before(logits, order[j], order[j - 1]); j--) {
                int32_t t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        double z = 0, cum = 0;
        for (int i = 0; i < V; i++) z += expf(logits[i] - lmax);
        memset(keep, 0, sizeof keep);
        int n_keep = 0;
        for (int i = 0; i < V && cum < (double)top_p * z; i++) {
            cum += expf(logits[order[i]] - lmax);
            keep[order[i]] = 1;
            n_keep++;
        }
        if (n_keep <= 16 || n_keep > 100) fail_msg("nucleus of %d: retune the test", n_keep);
        for (int top_k = 0; top_k < V; top_k += V - 1) {
            slate_sampler_params p = params_plain(100.0f, 900 + row);
            p.top_p = top_p;
            p.top_k = top_k;
            slate_sampler *s = make(&p, V);
            assert_support(s, logits, V, keep);
            slate_sampler_free(s);
        }
    }
}

static void nucleus_selection_matches_brute_force_on_every_path(void **st) {
    (void)st;
    /* Integer weights make every sum exact, so the expected set is exact whatever order the
     * selection adds them in. max_rounds 0 runs the heap alone, 1 and 3 hand over to it midway,
     * 64 is the sampler's quickselect. Logits from a small set give many ties (ranked by id). */
    enum { V = 2000 };
    static float logits[V], w[V];
    static int32_t order[V], ids[V];
    static int in_set[V];
    uint64_t seed = tu_seed(), r = seed;
    const int rounds[] = {0, 1, 3, 64};
    for (int iter = 0; iter < 40; iter++) {
        int32_t n = 1 + (int32_t)(tu_rand(&r) % V);
        double total = 0;
        for (int32_t i = 0; i < n; i++) {
            logits[i] = (float)(tu_rand(&r) % 50);
            w[i] = (float)(tu_rand(&r) % 100); /* zeros included */
            total += w[i];
            order[i] = i;
        }
        for (int32_t i = 1; i < n; i++)
            for (int32_t j = i; j > 0 && ranks_before(logits, order[j], order[j - 1]); j--) {
                int32_t t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        double need = 0.5 + (double)(tu_rand(&r) % (uint64_t)(total + 100)); /* may exceed */
        int32_t want = 0;
        double cum = 0;
        while (want < n && cum < need) cum += w[order[want++]];
        for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
            for (int32_t i = 0; i < n; i++) ids[i] = i;
            for (int32_t i = n - 1; i > 0; i--) { /* shuffled input */
                int32_t j = (int32_t)(tu_rand(&r) % (uint64_t)(i + 1)), t = ids[i];
                ids[i] = ids[j];
                ids[j] = t;
            }
            int32_t m = slate__sample_nucleus(ids, n, logits, w, need, rounds[k]);
            if (m != want)
                fail_msg("seed %llu iter %d rounds %d: kept %d, want %d (n %d)",
                         (unsigned long long)seed, iter, rounds[k], (int)m, (int)want, (int)n);
            memset(in_set, 0, sizeof in_set);
            for (int32_t i = 0; i < m; i++) in_set[ids[i]] = 1;
            for (int32_t i = 0; i < want; i++)
                if (!in_set[order[i]])
                    fail_msg("seed %llu iter %d rounds %d: rank %d (token %d) not kept",
                             (unsigned long long)seed, iter, rounds[k], (int)i, (int)order[i]);
        }
    }
}

static void top_p_on_large_vocab_keeps_the_nucleus(void **st) {
    (void)st;
    enum { V = 150000 };
    float *logits = malloc(sizeof(float) * V);
    float *sorted = malloc(sizeof(float) * V);
    assert_non_null(logits);
    assert_non_null(sorted);
    uint64_t r = 4242;
    for (int i = 0; i < V; i++) logits[i] = 4.0f * tu_randf(&r);
    /* 30 planted logits hold about 85% of the mass, so the 50% nucleus lies among them. */
    for (int i = 0; i < 30; i++) logits[tu_rand(&r) % V] = 12.0f + tu_randf(&r);
    /* The nucleus by brute force: sort the probabilities, find the logit of the last kept. */
    double z = 0;
    for (int i = 0; i < V; i++) z += exp(logits[i] - 13.0);
    memcpy(sorted, logits, sizeof(float) * V);
    for (int i = 1; i < V; i++) { /* insertion sort of the planted values is enough */
        if (sorted[i] > 10.0f) {
            float v = sorted[i];
            int j = i;
            while (j > 0 && sorted[j - 1] < v) {
                sorted[j] = sorted[j - 1];
                j--;
            }
            sorted[j] = v;
        }
    }
    const float top_p = 0.5f;
    double cum = 0;
    float cut = 0;
    for (int i = 0; i < V; i++) {
        cum += exp(sorted[i] - 13.0) / z;
        if (cum >= top_p) {
            cut = sorted[i];
            break;
        }
    }
    assert_true(cut > 10.0f); /* the construction put the nucleus among the planted logits */
    for (int top_k = 0; top_k <= 100; top_k += 100) {
        slate_sampler_params p = params_plain(1.0f, 5);
        p.top_p = top_p;
        p.top_k = top_k;
        slate_sampler *s = make(&p, V);
        for (int i = 0; i < 200; i++) {
            int32_t t = sample1(s, logits, V);
            if (logits[t] < cut) fail_msg("drew %d (logit %g) below the nucleus cut %g", t,
                                          (double)logits[t], (double)cut);
        }
        slate_sampler_free(s);
    }
    free(logits);
    free(sorted);
}

static void top_k_on_large_vocab_draws_only_the_k_best(void **st) {
    (void)st;
    enum { V = 150000, K = 40 };
    float *logits = malloc(sizeof(float) * V);
    assert_non_null(logits);
    uint64_t r = 777;
    for (int i = 0; i < V; i++) logits[i] = (float)(tu_rand(&r) % 1000) / 100.0f; /* many ties */
    /* The K-th best logit and how many of the K sit on it (ties go to the lowest ids). */
    int hist[1000] = {0};
    for (int i = 0; i < V; i++) hist[(int)lrintf(logits[i] * 100.0f)]++;
    int above = 0, kth = 999;
    while (above + hist[kth] < K) above += hist[kth--];
    int on_cut = K - above;
    slate_sampler_params p = params_plain(50.0f, 3); /* hot: spreads draws over all K */
    p.top_k = K;
    slate_sampler *s = make(&p, V);
    for (int i = 0; i < 2000; i++) {
        int32_t t = sample1(s, logits, V);
        int v = (int)lrintf(logits[t] * 100.0f);
        assert_true(v >= kth);
        if (v == kth) { /* must be among the on_cut lowest ids holding the cut value */
            int rank = 0;
            for (int j = 0; j < t; j++) rank += (int)lrintf(logits[j] * 100.0f) == kth;
            assert_true(rank < on_cut);
        }
    }
    slate_sampler_free(s);
    free(logits);
}

static void min_p_drops_tokens_below_threshold(void **st) {
    (void)st;
    enum { V = 5 };
    const double prob[V] = {0.05, 0.5, 0.15, 0.3, 0};
    float logits[V];
    logits_from_probs(prob, V, logits);
    const struct {
        float min_p;
        int keep[V];
    } cases[] = {
        {0.05f, {1, 1, 1, 1, 0}}, /* threshold 0.025 keeps all four */
        {0.20f, {0, 1, 1, 1, 0}}, /* threshold 0.1 drops 0.05 */
        {0.50f, {0, 1, 0, 1, 0}}, /* threshold 0.25 */
        {1.00f, {0, 1, 0, 0, 0}}, /* only the best */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        slate_sampler_params p = params_plain(1.0f, 21 + c);
        p.min_p = cases[c].min_p;
        slate_sampler *s = make(&p, V);
        assert_support(s, logits, V, cases[c].keep);
        slate_sampler_free(s);
    }
}

static void equal_logits_draw_uniformly(void **st) {
    (void)st;
    enum { V = 8, N = 16000 };
    const float logits[V] = {0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
    slate_sampler_params p = params_plain(0.7f, 8);
    slate_sampler *s = make(&p, V);
    int counts[V];
    histogram(s, logits, V, N, counts);
    /* Expected 2000 each, standard deviation sqrt(16000 * 1/8 * 7/8) = 41.8; 6 sigma = 251. */
    for (int i = 0; i < V; i++)
        if (abs(counts[i] - N / V) > 251) fail_msg("token %d drawn %d times", i, counts[i]);
    slate_sampler_free(s);
}

static void neg_inf_and_nan_tokens_are_never_drawn(void **st) {
    (void)st;
    enum { V = 10 };
    const float logits[V] = {-INFINITY, 0.0f, NAN, -INFINITY, -30.0f, NAN, -INFINITY, 1.0f,
                             -INFINITY, -INFINITY};
    const int keep[V] = {0, 1, 0, 0, 1, 0, 0, 1, 0, 0};
    slate_sampler_params p = params_plain(100.0f, 31); /* flat: -30 is drawn about 1/3 */
    slate_sampler *s = make(&p, V);
    assert_support(s, logits, V, keep);
    slate_sampler_free(s);
    p.top_p = 0.999f; /* heap path */
    p.top_k = 3;
    s = make(&p, V);
    int counts[V];
    histogram(s, logits, V, 2000, counts);
    for (int i = 0; i < V; i++)
        if (!keep[i]) assert_int_equal(counts[i], 0);
    slate_sampler_free(s);
}

static void pos_inf_tokens_take_all_the_mass(void **st) {
    (void)st;
    enum { V = 5 };
    const float logits[V] = {3.0f, INFINITY, 1e30f, INFINITY, -INFINITY};
    const int keep[V] = {0, 1, 0, 1, 0};
    slate_sampler_params p = params_plain(1.0f, 41);
    slate_sampler *s = make(&p, V);
    assert_support(s, logits, V, keep);
    slate_sampler_free(s);
}

static void all_neg_inf_or_nan_is_refused(void **st) {
    (void)st;
    const float logits[4] = {-INFINITY, NAN, -INFINITY, -NAN};
    for (int greedy = 0; greedy < 2; greedy++) {
        slate_sampler_params p = slate_sampler_default_params();
        if (greedy) p.temperature = 0.0f;
        slate_sampler *s = make(&p, 4);
        int32_t t = 7;
        slate_error e;
        assert_int_equal(slate_sampler_sample(s, logits, 4, &t, &e), SLATE_E_INVALID_ARG);
        assert_non_null(strstr(e.message, "all logits are -inf or NaN"));
        assert_int_equal(t, -1);
        slate_sampler_free(s);
    }
}

static void repetition_penalty_changes_argmax(void **st) {
    (void)st;
    slate_sampler_params p = slate_sampler_default_params();
    p.temperature = 0.0f;
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = 3;
    slate_sampler *s = make(&p, 8);
    const float pos[8] = {2.0f, 1.9f, 0, 0, 0, 0, 0, 0};       /* 2.0 / 1.1 = 1.82 < 1.9 */
    const float neg[8] = {-1.0f, -1.05f, -9, -9, -9, -9, -9, -9}; /* -1.0 * 1.1 = -1.1 */
    assert_int_equal(sample1(s, pos, 8), 0); /* ...and 0 is now recorded */
    assert_int_equal(sample1(s, pos, 8), 1); /* 1 recorded too: 1.82 vs 1.73, 0 wins */
    assert_int_equal(sample1(s, pos, 8), 0);
    slate_sampler_reset(s);
    assert_int_equal(sample1(s, neg, 8), 0);
    assert_int_equal(sample1(s, neg, 8), 1);
    /* Window of 3: after 0, 1 (sampled), 5, 6, 7 only 5, 6, 7 are recorded; 0 is free again. */
    slate_sampler_reset(s);
    assert_int_equal(slate_sampler_accept(s, 0), SLATE_OK);
    assert_int_equal(sample1(s, pos, 8), 1);
    for (int t = 5; t <= 7; t++) assert_int_equal(slate_sampler_accept(s, t), SLATE_OK);
    assert_int_equal(sample1(s, pos, 8), 0);
    slate_sampler_free(s);

    p.repeat_penalty = 1.0f; /* off: the same history changes nothing */
    s = make(&p, 8);
    for (int i = 0; i < 4; i++) assert_int_equal(sample1(s, pos, 8), 0);
    slate_sampler_free(s);
}

static void presence_and_frequency_penalties_change_argmax(void **st) {
    (void)st;
    const float logits[3] = {1.0f, 0.5f, 0.0f};
    slate_sampler_params p = slate_sampler_default_params();
    p.temperature = 0.0f;
    const struct {
        float presence, frequency;
        int32_t want;
    } cases[] = {
        {0.0f, 0.0f, 0},
        {0.6f, 0.0f, 1},   /* 1.0 - 0.6 = 0.4 < 0.5 */
        {0.4f, 0.0f, 0},   /* 0.6 > 0.5 */
        {0.0f, 0.2f, 1},   /* 1.0 - 3 * 0.2 = 0.4: counted three times */
        {0.0f, 0.1f, 0},   /* 1.0 - 0.3 = 0.7 */
        {0.3f, 0.1f, 1},   /* 1.0 - 0.3 - 0.3 = 0.4 */
        {-1.0f, 0.0f, 0},  /* a negative presence penalty promotes */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        p.presence_penalty = cases[c].presence;
        p.frequency_penalty = cases[c].frequency;
        slate_sampler *s = make(&p, 3);
        for (int i = 0; i < 3; i++) assert_int_equal(slate_sampler_accept(s, 0), SLATE_OK);
        assert_int_equal(sample1(s, logits, 3), cases[c].want);
        slate_sampler_free(s);
    }
    /* Promotion: token 2, seen twice, overtakes with a negative frequency penalty. */
    p.presence_penalty = 0.0f;
    p.frequency_penalty = -0.6f;
    slate_sampler *s = make(&p, 3);
    slate_sampler_accept(s, 2);
    slate_sampler_accept(s, 2);
    assert_int_equal(sample1(s, logits, 3), 2);
    slate_sampler_free(s);
}

static void reset_forgets_history_but_keeps_rng_position(void **st) {
    (void)st;
    slate_sampler_params p = params_plain(1.0f, 55);
    p.presence_penalty = 2.0f;
    slate_sampler *s = make(&p, 4);
    const float logits[4] = {0, 0, 0, 0};
    uint64_t before[4], after[4];
    for (int i = 0; i < 4; i++) sample1(s, logits, 4);
    slate__sampler_rng_get(s, before);
    slate_sampler_reset(s);
    slate__sampler_rng_get(s, after);
    assert_memory_equal(before, after, sizeof before);
    /* History gone: greedy with the penalty would avoid token 0 if it were still recorded. */
    p.temperature = 0.0f;
    slate_sampler *g = make(&p, 4);
    slate_sampler_accept(g, 0);
    assert_int_equal(sample1(g, logits, 4), 1);
    slate_sampler_reset(g);
    assert_int_equal(sample1(g, logits, 4), 0);
    slate_sampler_free(g);
    slate_sampler_free(s);
}

static void rng_state_restore_replays_the_same_draws(void **st) {
    (void)st;
    enum { V = 32 };
    float logits[V];
    uint64_t r = 5;
    for (int i = 0; i < V; i++) logits[i] = tu_randf(&r);
    slate_sampler_params p = params_plain(1.0f, 77);
    slate_sampler *s = make(&p, V);
    for (int i = 0; i < 10; i++) sample1(s, logits, V);
    uint64_t saved[4];
    slate__sampler_rng_get(s, saved);
    int32_t first[20];
    for (int i = 0; i < 20; i++) first[i] = sample1(s, logits, V);
    assert_int_equal(slate__sampler_rng_set(s, saved), SLATE_OK);
    for (int i = 0; i < 20; i++) assert_int_equal(sample1(s, logits, V), first[i]);
    const uint64_t zero[4] = {0, 0, 0, 0};
    assert_int_equal(slate__sampler_rng_set(s, zero), SLATE_E_INVALID_ARG);
    assert_int_equal(slate__sampler_rng_set(NULL, saved), SLATE_E_INVALID_ARG);
    slate_sampler_free(s);
}

static void rng_matches_the_published_algorithms(void **st) {
    (void)st;
    /* Expected words from an independent Python transcription of splitmix64 and
     * xoshiro256** 1.0 (prng.di.unimi.it); splitmix64(0) = 0xe220a8397b1dcdaf is the widely
     * quoted first output. Pinning them keeps "same seed, same tokens" true across versions. */
    const struct {
        uint64_t seed, state[4], next[4];
    } cases[] = {
        {0,
         {0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull, 0x06c45d188009454full,
          0xf88bb8a8724c81ecull},
         {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull, 0x1a5f849d4933e6e0ull,
          0x6aa594f1262d2d2cull}},
        {0x0123456789abcdefull,
         {0x157a3807a48faa9dull, 0xd573529b34a1d093ull, 0x2f90b72e996dccbeull,
          0xa2d419334c4667ecull},
         {0xa2c2a42038d4ec3dull, 0x05fc25d0738e7b0full, 0x625e7bff938e701eull,
          0x1ba4ddc6fe2b5726ull}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t state[4];
        slate__rng_seed(state, cases[c].seed);
        for (int i = 0; i < 4; i++) assert_int_equal(state[i], cases[c].state[i]);
        for (int i = 0; i < 4; i++) assert_int_equal(slate__rng_next(state), cases[c].next[i]);
    }
    /* A sampler starts from slate__rng_seed(params.seed). */
    slate_sampler_params p = slate_sampler_default_params();
    slate_sampler *s = make(&p, 2);
    uint64_t got[4];
    slate__sampler_rng_get(s, got);
    for (int i = 0; i < 4; i++) assert_int_equal(got[i], cases[0].state[i]);
    slate_sampler_free(s);
}

/* One invalid parameter value and the name the message must carry. */
typedef struct bad_param {
    const char *name;
    void (*set)(slate_sampler_params *p, double v);
    double value;
} bad_param;

static void set_temperature(slate_sampler_params *p, double v) { p->temperature = (float)v; }
static void set_top_k(slate_sampler_params *p, double v) { p->top_k = (int32_t)v; }
static void set_top_p(slate_sampler_params *p, double v) { p->top_p = (float)v; }
static void set_min_p(slate_sampler_params *p, double v) { p->min_p = (float)v; }
static void set_repeat_penalty(slate_sampler_params *p, double v) { p->repeat_penalty = (float)v; }
static void set_repeat_last_n(slate_sampler_params *p, double v) { p->repeat_last_n = (int32_t)v; }
static void set_presence(slate_sampler_params *p, double v) { p->presence_penalty = (float)v; }
static void set_frequency(slate_sampler_params *p, double v) { p->frequency_penalty = (float)v; }

static void every_invalid_parameter_is_refused_by_name(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    const bad_param bad[] = {
        {"temperature", set_temperature, -0.1},     {"temperature", set_temperature, 100.5},
        {"temperature", set_temperature, NAN},      {"temperature", set_temperature, INFINITY},
        {"top_k", set_top_k, -1},                   {"top_p", set_top_p, 0.0},
        {"top_p", set_top_p, -0.5},                 {"top_p", set_top_p, 1.01},
        {"top_p", set_top_p, NAN},                  {"min_p", set_min_p, -0.01},
        {"min_p", set_min_p, 1.5},                  {"min_p", set_min_p, NAN},
        {"repeat_penalty", set_repeat_penalty, 0},  {"repeat_penalty", set_repeat_penalty, -1},
        {"repeat_penalty", set_repeat_penalty, INFINITY},
        {"repeat_penalty", set_repeat_penalty, NAN},
        {"repeat_last_n", set_repeat_last_n, -1},
        {"repeat_last_n", set_repeat_last_n, (1 << 20) + 1},
        {"presence_penalty", set_presence, -2.5},   {"presence_penalty", set_presence, 2.01},
        {"presence_penalty", set_presence, NAN},    {"frequency_penalty", set_frequency, -3},
        {"frequency_penalty", set_frequency, 2.5},  {"frequency_penalty", set_frequency, NAN},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        slate_sampler_params p = slate_sampler_default_params();
        bad[i].set(&p, bad[i].value);
        slate_sampler *s = (slate_sampler *)&p; /* must come back NULL */
        slate_error e;
        memset(&e, 0, sizeof e);
        assert_int_equal(slate_sampler_create(&p, 100, &s, &e), SLATE_E_INVALID_ARG);
        assert_null(s);
        assert_int_equal(e.code, SLATE_E_INVALID_ARG);
        if (!strstr(e.message, bad[i].name) || !strstr(e.message, "range"))
            fail_msg("case %zu (%s = %g): message '%s'", i, bad[i].name, bad[i].value,
                     e.message);
    }
    slate_sampler_params p = slate_sampler_default_params();
    slate_sampler *s = NULL;
    slate_error e;
    assert_int_equal(slate_sampler_create(&p, 0, &s, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "n_vocab = 0"));
    assert_int_equal(slate_sampler_create(&p, 10, NULL, &e), SLATE_E_INVALID_ARG);
    /* The edges of each range are accepted. */
    p.temperature = 100.0f;
    p.top_p = 1.0f;
    p.min_p = 1.0f;
    p.repeat_last_n = 1 << 20;
    p.presence_penalty = -2.0f;
    p.frequency_penalty = 2.0f;
    p.repeat_penalty = 1e-6f;
    assert_int_equal(slate_sampler_create(&p, 1, &s, &e), SLATE_OK);
    slate_sampler_free(s);
    assert_int_equal(slate_sampler_create(NULL, 3, &s, &e), SLATE_OK); /* NULL: defaults */
    slate_sampler_free(s);
    assert_int_equal(slate__alloc_live_bytes(), live);
}

static void misuse_is_refused_with_a_status(void **st) {
    (void)st;
    slate_sampler_params p = slate_sampler_default_params();
    slate_sampler *s = make(&p, 10);
    float logits[10] = {0};
    int32_t t = 0;
    slate_error e;
    assert_int_equal(slate_sampler_sample(NULL, logits, 10, &t, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_sampler_sample(s, NULL, 10, &t, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "logits"));
    assert_int_equal(slate_sampler_sample(s, logits, 10, NULL, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_sampler_sample(s, logits, 9, &t, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "n_vocab = 9"));
    assert_non_null(strstr(e.message, "n_vocab = 10"));
    assert_int_equal(slate_sampler_sample(s, logits, 9, &t, NULL), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_sampler_accept(s, -1), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_sampler_accept(s, 10), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_sampler_accept(NULL, 0), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_sampler_accept(s, 9), SLATE_OK);
    slate_sampler_reset(NULL);
    slate_sampler_free(NULL);
    slate_sampler_free(s);
}

static void sample_allocates_nothing(void **st) {
    (void)st;
    enum { V = 5000 };
    static float logits[V];
    uint64_t r = 3;
    for (int i = 0; i < V; i++) logits[i] = 2.0f * tu_randf(&r);
    logits[17] = NAN;
    logits[18] = -INFINITY;
    slate_sampler_params variants[5];
    variants[0] = slate_sampler_default_params();             /* top-k, top-p, min-p */
    variants[1] = params_plain(0.0f, 0);                      /* greedy */
    variants[2] = params_plain(1.0f, 0);                      /* full distribution */
    variants[3] = params_plain(1.0f, 0);
    variants[3].top_p = 0.9f;                                 /* top-p heap path */
    variants[4] = slate_sampler_default_params();
    variants[4].repeat_penalty = 1.3f;                        /* penalties */
    variants[4].presence_penalty = 0.5f;
    variants[4].frequency_penalty = 0.1f;
    for (int v = 0; v < 5; v++) {
        slate_sampler *s = make(&variants[v], V);
        long calls = slate__alloc_calls();
        long long live = slate__alloc_live_bytes();
        for (int i = 0; i < 200; i++) {
            sample1(s, logits, V);
            slate_sampler_accept(s, i % V);
        }
        slate_sampler_reset(s);
        assert_int_equal(slate__alloc_calls(), calls);
        assert_int_equal(slate__alloc_live_bytes(), live);
        slate_sampler_free(s);
    }
}

static void create_fails_cleanly_under_allocation_faults(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    slate_sampler_params p = slate_sampler_default_params();
    for (long k = 1;; k++) {
        slate_sampler *s = NULL;
        slate_error e;
        slate__alloc_fail_after(k);
        slate_status rc = slate_sampler_create(&p, 1000, &s, &e);
        slate__alloc_fail_after(0);
        if (rc == SLATE_OK) {
            assert_true(k > 1);
            slate_sampler_free(s);
            break;
        }
        assert_int_equal(rc, SLATE_E_NOMEM);
        assert_null(s);
        assert_int_equal(slate__alloc_live_bytes(), live);
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_match_the_documented_values),
        cmocka_unit_test(greedy_picks_argmax_and_lowest_id_on_ties),
        cmocka_unit_test(same_seed_gives_same_sequence),
        cmocka_unit_test(different_seeds_give_different_sequences),
        cmocka_unit_test(top_k_1_equals_greedy),
        cmocka_unit_test(full_distribution_matches_softmax_when_k_0_p_1),
        cmocka_unit_test(top_p_keeps_smallest_set_reaching_p),
        cmocka_unit_test(top_p_nucleus_matches_brute_force_on_flat_distributions),
        cmocka_unit_test(nucleus_selection_matches_brute_force_on_every_path),
        cmocka_unit_test(top_p_on_large_vocab_keeps_the_nucleus),
        cmocka_unit_test(top_k_on_large_vocab_draws_only_the_k_best),
        cmocka_unit_test(min_p_drops_tokens_below_threshold),
        cmocka_unit_test(equal_logits_draw_uniformly),
        cmocka_unit_test(neg_inf_and_nan_tokens_are_never_drawn),
        cmocka_unit_test(pos_inf_tokens_take_all_the_mass),
        cmocka_unit_test(all_neg_inf_or_nan_is_refused),
        cmocka_unit_test(repetition_penalty_changes_argmax),
        cmocka_unit_test(presence_and_frequency_penalties_change_argmax),
        cmocka_unit_test(reset_forgets_history_but_keeps_rng_position),
        cmocka_unit_test(rng_matches_the_published_algorithms),
        cmocka_unit_test(rng_state_restore_replays_the_same_draws),
        cmocka_unit_test(every_invalid_parameter_is_refused_by_name),
        cmocka_unit_test(misuse_is_refused_with_a_status),
        cmocka_unit_test(sample_allocates_nothing),
        cmocka_unit_test(create_fails_cleanly_under_allocation_faults),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
