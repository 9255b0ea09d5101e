/*
 * sampler.c - picks the next token from one row of logits. Order (llama.cpp's default chain in
 * common/sampling.cpp, simplified): penalties over the recent tokens (repetition, presence,
 * frequency), then either greedy argmax (temperature 0; ties go to the lowest id) or
 * top-k -> top-p -> min-p -> temperature -> softmax -> draw. As in llama.cpp, top-p and min-p
 * look at the probabilities before temperature (temperature only shapes the final draw).
 *
 * Key idea: every buffer is n_vocab-sized and allocated at create, so sample allocates nothing.
 * The caller's logits are never written: they are copied (NaN -> -inf) into a working row that
 * the penalties edit. The candidates are token ids in `ids`; each filter keeps its survivors at
 * the front. Candidates are ranked by (logit descending, id ascending), a total order, so ties
 * are broken the same way on every run. top-k selects with a k-element heap (O(n log k), no sort
 * of the whole vocabulary) and sorts only the k survivors; top-p without top-k finds the nucleus
 * by quickselect on probability mass (expected O(n)) and sorts only the last few candidates.
 *
 * Invariants: ring[0..n_ring) holds the last min(accepted, repeat_last_n) tokens and counts[t]
 * is how often t occurs there (counts are >= 0 outside apply_penalties); the RNG advances only
 * when a token is drawn at temperature > 0, once per draw; a failed call changes nothing.
 *
 * The default seed is 0, a fixed value (not "random"): two samplers made from the default
 * params draw the same tokens from the same logits. Callers who want variety set a seed.
 */
#include "sample/sample.h"

#include <math.h>
#include <string.h>

/* Longest penalty window: 4 MiB of ring; far beyond any context we plan for. */
#define REPEAT_LAST_N_MAX (1 << 20)

struct slate_sampler {
    slate_sampler_params params;
    int32_t n_vocab;
    float *work;     /* [n_vocab] logits after NaN -> -inf and the penalties */
    int32_t *ids;    /* [n_vocab] candidate token ids, survivors at the front */
    float *weights;  /* [n_vocab] by token id: exp of the shifted logit, unnormalized */
    int32_t *counts; /* [n_vocab] occurrences of each token in ring */
    int32_t *ring;   /* [repeat_last_n] recent tokens; once full, ring[head] is the oldest */
    int32_t n_ring;
    int32_t head;
    uint64_t rng[4]; /* xoshiro256** state */
};

slate_sampler_params slate_sampler_default_params(void) {
    slate_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.seed = 0;
    return p;
}

/* Every comparison is written so that NaN fails it: a NaN parameter is refused, not passed. */
static slate_status check_params(const slate_sampler_params *p, int32_t n_vocab,
                                 slate_error *err) {
    if (n_vocab < 1)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler n_vocab = %d is out of range: must be >= 1", (int)n_vocab);
    if (!(p->temperature >= 0.0f && p->temperature <= 100.0f))
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler temperature = %g is out of range [0, 100] (0: greedy)",
                           (double)p->temperature);
    if (p->top_k < 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler top_k = %d is out of range: must be >= 0 (0: off)",
                           (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler top_p = %g is out of range (0, 1] (1: off)",
                           (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler min_p = %g is out of range [0, 1] (0: off)", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty)))
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler repeat_penalty = %g is out of range: must be > 0 and finite "
                           "(1: off)",
                           (double)p->repeat_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > REPEAT_LAST_N_MAX)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler repeat_last_n = %d is out of range [0, %d]",
                           (int)p->repeat_last_n, REPEAT_LAST_N_MAX);
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler presence_penalty = %g is out of range [-2, 2] (0: off)",
                           (double)p->presence_penalty);
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "sampler frequency_penalty = %g is out of range [-2, 2] (0: off)",
                           (double)p->frequency_penalty);
    return SLATE_OK;
}

slate_status slate_sampler_create(const slate_sampler_params *params, int32_t n_vocab,
                                  slate_sampler **out, slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "slate_sampler_create: out is NULL");
    *out = NULL;
    slate_sampler_params p = params ? *params : slate_sampler_default_params();
    slate_status st = check_params(&p, n_vocab, err);
    if (st != SLATE_OK) return st;

    slate_sampler *s = slate__calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->params = p;
    s->n_vocab = n_vocab;
    /* n_vocab <= INT32_MAX, so these products cannot overflow a 64-bit size_t; calloc checks
     * anyway. */
    s->work = slate__calloc((size_t)n_vocab, sizeof *s->work);
    s->ids = slate__calloc((size_t)n_vocab, sizeof *s->ids);
    s->weights = slate__calloc((size_t)n_vocab, sizeof *s->weights);
    s->counts = slate__calloc((size_t)n_vocab, sizeof *s->counts);
    s->ring = slate__calloc((size_t)p.repeat_last_n, sizeof *s->ring);
    if (!s->work || !s->ids || !s->weights || !s->counts || !s->ring) goto nomem;
    slate__rng_seed(s->rng, p.seed);
    *out = s;
    return SLATE_OK;

nomem:
    slate_sampler_free(s);
    return slate__fail(err, SLATE_E_NOMEM,
                       "sampler: out of memory for %d-token buffers (about %zu bytes)",
                       (int)n_vocab, (size_t)n_vocab * 16 + (size_t)p.repeat_last_n * 4);
}

void slate_sampler_free(slate_sampler *s) {
    if (!s) return;
    slate__free(s->work);
    slate__free(s->ids);
    slate__free(s->weights);
    slate__free(s->counts);
    slate__free(s->ring);
    slate__free(s);
}

/* ---- history ----------------------------------------------------------------------------- */

static void record(slate_sampler *s, int32_t token) {
    int32_t cap = s->params.repeat_last_n;
    if (cap == 0) return;
    if (s->n_ring < cap) {
        s->ring[s->n_ring++] = token;
    } else {
        s->counts[s->ring[s->head]]--;
        s->ring[s->head] = token;
        s->head = (s->head + 1) % cap;
    }
    s->counts[token]++;
}

slate_status slate_sampler_accept(slate_sampler *s, int32_t token) {
    if (!s || token < 0 || token >= s->n_vocab) return SLATE_E_INVALID_ARG;
    record(s, token);
    return SLATE_OK;
}

void slate_sampler_reset(slate_sampler *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->n_ring; i++) s->counts[s->ring[i]] = 0;
    s->n_ring = 0;
    s->head = 0;
}

static bool penalties_on(const slate_sampler_params *p) {
    return p->repeat_last_n > 0 &&
           (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f ||
            p->frequency_penalty != 0.0f);
}

/* Penalizes each distinct token of the ring once. A token seen in this pass has its count
 * negated (so its repeats are skipped), and the second loop restores the counts. */
static void apply_penalties(slate_sampler *s) {
    const slate_sampler_params *p = &s->params;
    for (int32_t i = 0; i < s->n_ring; i++) {
        int32_t t = s->ring[i];
        int32_t c = s->counts[t];
        if (c <= 0) continue;
        float l = s->work[t];
        /* Dividing a negative logit would raise it; multiplying lowers it (llama.cpp, CTRL). */
        l = l > 0.0f ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)c * p->frequency_penalty + p->presence_penalty;
        s->work[t] = l;
        s->counts[t] = -c;
    }
    for (int32_t i = 0; i < s->n_ring; i++) {
        int32_t t = s->ring[i];
        if (s->counts[t] < 0) s->counts[t] = -s->counts[t];
    }
}

/* ---- candidate filters ------------------------------------------------------------------- */

/* Rank order: higher logit first, lower id first among equal logits. */
static inline bool better(const float *l, int32_t a, int32_t b) {
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}
static inline bool worse(const float *l, int32_t a, int32_t b) { return better(l, b, a); }

typedef bool (*order_fn)(const float *l, int32_t a, int32_t b);

/* Restores the heap property below ids[i] for a heap of n whose root is the element that
 * comes first under `above`. */
static void sift_down(int32_t *ids, int32_t n, int32_t i, const float *l, order_fn above) {
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && above(l, ids[c + 1], ids[c])) c++;
        if (!above(l, ids[c], ids[i])) return;
        int32_t t = ids[i];
        ids[i] = ids[c];
        ids[c] = t;
        i = c;
    }
}

static void heapify(int32_t *ids, int32_t n, const float *l, order_fn above) {
    for (int32_t i = n / 2 - 1; i >= 0; i--) sift_down(ids, n, i, l, above);
}

/* Keeps the k best of ids[0..n) (0 < k < n), sorted best first. A heap of the k best so far
 * with the worst of them on top rejects most candidates with one comparison. */
static int32_t keep_top_k(int32_t *ids, int32_t n, int32_t k, const float *l) {
    heapify(ids, k, l, worse);
    for (int32_t j = k; j < n; j++) {
        if (better(l, ids[j], ids[0])) {
            ids[0] = ids[j];
            sift_down(ids, k, 0, l, worse);
        }
    }
    /* Heap sort: moving the worst to the end each time leaves the array best first. */
    for (int32_t m = k - 1; m > 0; m--) {
        int32_t t = ids[0];
        ids[0] = ids[m];
        ids[m] = t;
        sift_down(ids, m, 0, l, worse);
    }
    return k;
}

static float max_logit(const int32_t *ids, int32_t n, const float *l) {
    float m = l[ids[0]];
    for (int32_t i = 1; i < n; i++)
        if (l[ids[i]] > m) m = l[ids[i]];
    return m;
}

static inline void swap_ids(int32_t *ids, int32_t i, int32_t j) {
    int32_t t = ids[i];
    ids[i] = ids[j];
    ids[j] = t;
}

/* Nucleus by heap: the fewest best candidates of ids[0..n) whose weights w (by token id) sum to
 * at least `need`, moved to the front (worst first); returns their count. O(n + m log n) for m
 * kept: the fallback when the quickselect below meets bad pivots. */
static int32_t heap_nucleus(int32_t *ids, int32_t n, const float *l, const float *w,
                            double need) {
    heapify(ids, n, l, better);
    int32_t end = n; /* ids[0..end) is the heap; ids[end..n) the popped, worst first */
    double cum = 0.0;
    while (end > 0) {
        swap_ids(ids, 0, end - 1);
        end--;
        sift_down(ids, end, 0, l, better);
        cum += w[ids[end]];
        if (cum >= need) break;
    }
    int32_t kept = n - end;
    memmove(ids, ids + end, (size_t)kept * sizeof *ids);
    return kept;
}

/* Partitions ids[lo..hi) (hi - lo >= 3) around a median-of-three pivot: better ones first,
 * then the pivot at the returned index. *mass_better is the weight of the better side. */
static int32_t partition(int32_t *ids, int32_t lo, int32_t hi, const float *l, const float *w,
                         double *mass_better) {
    int32_t mid = lo + (hi - lo) / 2, last = hi - 1;
    if (better(l, ids[mid], ids[lo])) swap_ids(ids, lo, mid);
    if (better(l, ids[last], ids[lo])) swap_ids(ids, lo, last);
    if (better(l, ids[last], ids[mid])) swap_ids(ids, mid, last);
    swap_ids(ids, mid, last); /* the median is the pivot, parked at the end */
    const int32_t pivot = ids[last];
    int32_t a = lo;
    double mass = 0.0;
    for (int32_t i = lo; i < last; i++) {
        if (better(l, ids[i], pivot)) {
            mass += w[ids[i]];
            swap_ids(ids, i, a++);
        }
    }
    swap_ids(ids, a, last);
    *mass_better = mass;
    return a;
}

/* See sample.h. Quickselect by mass: partition around a pivot; if the better side alone
 * reaches the mass still needed, the nucleus ends inside it, else all of it is kept and the
 * search goes on in the worse side. Expected O(n) however many tokens are kept (a near-flat
 * 150k distribution can keep most of them, where popping a heap per kept token costs
 * O(m log n)). Only the last few candidates are sorted. */
int32_t slate__sample_nucleus(int32_t *ids, int32_t n, const float *l, const float *w,
                              double need, int max_rounds) {
    int32_t lo = 0, hi = n; /* ids[0..lo) kept; the nucleus ends inside ids[lo..hi) */
    for (int round = 0; hi - lo > 16; round++) {
        if (round >= max_rounds) return lo + heap_nucleus(ids + lo, hi - lo, l, w, need);
        double upper;
        int32_t a = partition(ids, lo, hi, l, w, &upper);
        if (upper >= need) {
            hi = a;
            continue;
        }
        need -= upper + w[ids[a]];
        if (need <= 0.0) return a + 1;
        lo = a + 1;
    }
    for (int32_t i = lo + 1; i < hi; i++) /* insertion sort of the few left */
        for (int32_t j = i; j > lo && better(l, ids[j], ids[j - 1]); j--) swap_ids(ids, j, j - 1);
    double cum = 0.0;
    for (int32_t m = lo; m < hi; m++) {
        cum += w[ids[m]];
        if (cum >= need) return m + 1;
    }
    return hi; /* rounding: the range's summed mass fell a hair short of `need` */
}

/* Keeps the smallest best-first prefix whose probability (softmax at temperature 1) reaches
 * top_p. Sorted input (after top-k) is walked and stays sorted; otherwise the kept tokens end
 * up in ids[0..m) in no particular order. */
static int32_t keep_top_p(slate_sampler *s, int32_t n, bool sorted) {
    int32_t *ids = s->ids;
    const float *l = s->work;
    float *w = s->weights;
    float lmax = sorted ? l[ids[0]] : max_logit(ids, n, l);
    double z = 0.0;
    for (int32_t i = 0; i < n; i++) {
        w[ids[i]] = expf(l[ids[i]] - lmax);
        z += w[ids[i]];
    }
    const double need = (double)s->params.top_p * z;
    /* Median-of-three shrinks the range to about half per round on any but crafted input; 64
     * rounds cover far more than 2^31 candidates, so reaching the limit means bad pivots. */
    if (!sorted) return slate__sample_nucleus(ids, n, l, w, need, 64);
    double cum = 0.0;
    for (int32_t m = 0; m < n; m++) {
        cum += w[ids[m]];
        if (cum >= need) return m + 1;
    }
    return n;
}

/* Keeps tokens whose probability is at least min_p times the largest one (p_i / p_max =
 * exp(l_i - l_max), temperature 1). The best token always stays. Order is preserved. */
static int32_t keep_min_p(slate_sampler *s, int32_t n, bool sorted) {
    int32_t *ids = s->ids;
    const float *l = s->work;
    float lmax = sorted ? l[ids[0]] : max_logit(ids, n, l);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (expf(l[ids[i]] - lmax) >= s->params.min_p) ids[m++] = ids[i];
    return m;
}

/* Softmax at the sampler's temperature over ids[0..n), then one draw. Subtracting the largest
 * logit before dividing keeps every exponent <= 0, so nothing overflows even for a tiny
 * temperature; the best token has weight 1, so the sum is >= 1. */
static int32_t draw(slate_sampler *s, int32_t n) {
    const int32_t *ids = s->ids;
    const float *l = s->work;
    float *w = s->weights;
    const float t = s->params.temperature;
    float lmax = max_logit(ids, n, l);
    double z = 0.0;
    for (int32_t i = 0; i < n; i++) {
        w[ids[i]] = expf((l[ids[i]] - lmax) / t);
        z += w[ids[i]];
    }
    const double u = slate__rng_uniform(s->rng) * z;
    double cum = 0.0;
    int32_t last = ids[0];
    for (int32_t i = 0; i < n; i++) {
        if (w[ids[i]] <= 0.0f) continue;
        last = ids[i];
        cum += w[ids[i]];
        if (u < cum) return ids[i];
    }
    return last; /* u landed in the rounding gap between cum and z */
}

/* ---- sampling ----------------------------------------------------------------------------- */

slate_status slate_sampler_sample(slate_sampler *s, const float *logits, int32_t n_vocab,
                                  int32_t *token_out, slate_error *err) {
    if (token_out) *token_out = -1;
    if (!s) return slate__fail(err, SLATE_E_INVALID_ARG, "slate_sampler_sample: sampler is NULL");
    if (!logits)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_sampler_sample: logits is NULL");
    if (!token_out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_sampler_sample: token_out is NULL");
    if (n_vocab != s->n_vocab)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_sampler_sample: n_vocab = %d does not match the sampler's "
                           "n_vocab = %d (set at create)",
                           (int)n_vocab, (int)s->n_vocab);

    float *l = s->work;
    int32_t n_live = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        float v = logits[i];
        if (isnan(v)) v = -INFINITY;
        l[i] = v;
        n_live += v > -INFINITY;
    }
    if (n_live == 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_sampler_sample: all logits are -inf or NaN (n_vocab = %d)",
                           (int)n_vocab);
    if (penalties_on(&s->params)) apply_penalties(s);

    int32_t token;
    if (s->params.temperature == 0.0f) {
        token = -1;
        float best = -INFINITY;
        for (int32_t i = 0; i < n_vocab; i++) {
            if (l[i] > best) { /* strict: the lowest id wins a tie */
                best = l[i];
                token = i;
            }
        }
    } else {
        int32_t *ids = s->ids;
        int32_t n = 0;
        bool any_pos_inf = false;
        for (int32_t i = 0; i < n_vocab; i++) {
            if (l[i] > -INFINITY) {
                ids[n++] = i;
                any_pos_inf |= l[i] == INFINITY;
            }
        }
        if (any_pos_inf) {
            /* A +inf logit outweighs every finite one: the softmax's limit is uniform over the
             * +inf tokens. Give them equal finite logits so the arithmetic below stays finite. */
            int32_t m = 0;
            for (int32_t i = 0; i < n; i++) {
                if (l[ids[i]] == INFINITY) {
                    l[ids[i]] = 0.0f;
                    ids[m++] = ids[i];
                }
            }
            n = m;
        }
        if (n > 0) {
            bool sorted = false;
            if (s->params.top_k > 0 && s->params.top_k < n) {
                n = keep_top_k(ids, n, s->params.top_k, l);
                sorted = true;
            }
            if (s->params.top_p < 1.0f) n = keep_top_p(s, n, sorted);
            if (s->params.min_p > 0.0f) n = keep_min_p(s, n, sorted);
            token = draw(s, n);
        } else {
            token = -1;
        }
    }
    if (token < 0) /* finite logits can only all reach -inf by overflowing in the penalties */
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_sampler_sample: all logits are -inf after the penalties "
                           "(repeat_penalty = %g overflowed them)",
                           (double)s->params.repeat_penalty);
    record(s, token);
    *token_out = token;
    return SLATE_OK;
}

/* ---- RNG state (for state save/restore) ------------------------------------------------- */

void slate__sampler_rng_get(const slate_sampler *s, uint64_t out[4]) {
    memcpy(out, s->rng, sizeof s->rng);
}

slate_status slate__sampler_rng_set(slate_sampler *s, const uint64_t in[4]) {
    if (!s || !in) return SLATE_E_INVALID_ARG;
    if ((in[0] | in[1] | in[2] | in[3]) == 0) return SLATE_E_INVALID_ARG;
    memcpy(s->rng, in, sizeof s->rng);
    return SLATE_OK;
}
