/*
 * exec.c - the interpreter: runs a compiled program for one call on one state. The program
 * was validated at open, so nothing here re-checks shapes. Work is split across the state's
 * thread pool by output columns (matmul) or by (rows, kv head) pairs (attention); the small
 * elementwise ops run on the calling thread. Nothing is allocated: activations live in the
 * state's scratch, the cache in its KV arena.
 */
#include "plan/model.h"
#include "pkg/pkg.h"

#include <math.h>
#include <string.h>

static float *act(const slate_state *st, int32_t i) {
    return (float *)(st->scratch + st->model->prog.tensors[i].offset);
}

static int32_t rows_of(const slate_state *st, int32_t i) {
    return st->model->prog.tensors[i].out_rows ? st->n_out : st->n_q;
}

/* Consecutive matmuls of one x with weights of one format (q, k and v; gate and up) run as one
 * pool job: their column chunks are taken from one counter, so the threads go from one weight
 * to the next without waiting for each other in between, and x is quantized once. */
enum { GROUP_MAX = 4 };
typedef struct mm_group {
    int n;
    const slate__op *op[GROUP_MAX];
    slate__wmat wm[GROUP_MAX];
    int64_t chunk[GROUP_MAX];      /* columns per chunk of each matmul, a multiple of 32 */
    int64_t first[GROUP_MAX + 1];  /* index of each matmul's first chunk; first[n]: all chunks */
} mm_group;

typedef struct job {
    const slate_state *st;
    const slate__op *op;
    const slate__wmat *wm; /* matmul: the weight as the kernels see it (the group's first) */
    const mm_group *grp;   /* matmul: all the matmuls of this job */
    const void *xq;        /* matmul: quantized x, or NULL */
    int64_t row_align;     /* quantize: row ranges start at multiples of this */
    atomic_llong *next;    /* matmul, attention: the next chunk / item to take */
} job;

static void split(int64_t n, int ith, int nth, int64_t *a, int64_t *b) {
    *a = n * ith / nth;
    *b = n * (ith + 1) / nth;
}

/* Columns [o0, o1) of matmul i of the group. */
static void matmul_cols(const job *j, int i, int64_t o0, int64_t o1) {
    const slate_state *st = j->st;
    const slate__program *p = &st->model->prog;
    const slate__op *op = j->grp->op[i];
    const slate__wmat *w = &j->grp->wm[i];
    const float *bias = op->n_in == 3 ? (const float *)p->tensors[op->in[2]].data : NULL;
    st->model->k->matmul[w->dtype](act(st, op->out), act(st, op->in[0]), j->xq, w, bias,
                                   rows_of(st, op->in[0]), o0, o1);
}

static void run_matmul(void *ctx, int ith, int nth) {
    const job *j = ctx;
    const mm_group *g = j->grp;
    if (nth == 1) {
        for (int i = 0; i < g->n; i++) matmul_cols(j, i, 0, g->wm[i].n_out);
        return;
    }
    /* Column chunks (multiples of 32, so SIMD kernels see whole blocks and tiles) are taken
     * from a shared counter rather than split in equal halves up front: while a worker is still
     * waking up (it may have gone to sleep while the caller ran other ops), the caller goes on
     * taking chunks instead of waiting with its half done. Measured on TinyLlama int4 decode,
     * 2 threads, same run: 45.5 -> 58.1 tok/s. */
    (void)ith;
    int i = 0;
    for (;;) {
        int64_t c = atomic_fetch_add(j->next, 1);
        if (c >= g->first[g->n]) return;
        while (c >= g->first[i + 1]) i++; /* chunks are taken in increasing order */
        int64_t o0 = (c - g->first[i]) * g->chunk[i], n_out = g->wm[i].n_out;
        matmul_cols(j, i, o0, o0 + g->chunk[i] < n_out ? o0 + g->chunk[i] : n_out);
    }
}

/* Quantizes the matmul's x into the state's xq scratch, split by rows. */
static void run_quantize(void *ctx, int ith, int nth) {
    const job *j = ctx;
    const slate_state *st = j->st;
    int64_t n_rows = rows_of(st, j->op->in[0]), a = j->row_align;
    int64_t units = (n_rows + a - 1) / a, u0, u1;
    split(units, ith, nth, &u0, &u1);
    int64_t r1 = u1 * a < n_rows ? u1 * a : n_rows;
    if (u0 * a >= r1) return;
    st->model->k->quantize_x[j->wm->dtype]((void *)j->xq, act(st, j->op->in[0]), j->wm, n_rows,
                                           u0 * a, r1);
}

/* Whether matmul b can join a group that starts with matmul a: the same x, a weight of the
 * same format and input width (so one quantized x serves both), and x not written by a. */
static bool groupable(const slate__program *p, const slate__op *a, const slate__op *b) {
    if (b->kind != SLATE__OP_MATMUL || b->in[0] != a->in[0] || a->out == a->in[0] ||
        b->out == b->in[0])
        return false;
    const slate__tensor *ta = &p->tensors[a->in[1]], *tb = &p->tensors[b->in[1]];
    return ta->dtype == tb->dtype && ta->block == tb->block && ta->asym == tb->asym &&
           ta->dims[1] == tb->dims[1]; /* dims: [n_out, n_in] */
}

/* The matmul at ops[oi] and the ones after it that can share its job; returns how many. */
static int matmul_group(const slate_state *st, int32_t oi, mm_group *g) {
    const slate__program *p = &st->model->prog;
    const slate__op *a = &p->ops[oi];
    int nth = slate__pool_size(st->pool);
    g->n = 0;
    g->first[0] = 0;
    for (int32_t k = oi; k < p->n_ops && g->n < GROUP_MAX; k++) {
        const slate__op *op = &p->ops[k];
        if (k > oi && !groupable(p, a, op)) break;
        bool clash = false; /* two matmuls of one job never write one tensor */
        for (int i = 0; i < g->n; i++) clash |= g->op[i]->out == op->out;
        if (clash) break;
        const slate__tensor *t = &p->tensors[op->in[1]];
        int i = g->n++;
        g->op[i] = op;
        slate__wmat_init(&g->wm[i], t->data, t->dtype, t->block, t->asym, t->dims[0], t->dims[1]);
        /* Chunks per thread: a decode step (one row) is bound by the weight stream, and every
         * chunk restarts it; prefill is bound by arithmetic and wants balance. Measured on
         * TinyLlama, 2 threads, alternating runs: one row, 3 per thread vs 8: int4 decode
         * 89-94 vs 86-89 tok/s (faster in 8 of 8), int8 61-62 vs 57-59 (4 of 4), fp16 within
         * noise; 2 and 4 per thread were slower than 3 (int4 87-89, 88-90), 32 much slower
         * (72-76 vs 84-88); 512 rows: 8 per thread vs 3, int4 prefill 549-554 vs 521-540. */
        int per = rows_of(st, op->in[0]) == 1 ? 3 : 8;
        int64_t chunk = (g->wm[i].n_out + per * nth - 1) / (per * nth);
        g->chunk[i] = chunk < 32 ? 32 : (chunk + 31) / 32 * 32;
        g->first[i + 1] = g->first[i] + (g->wm[i].n_out + g->chunk[i] - 1) / g->chunk[i];
    }
    return g->n;
}

/* A group of matmuls: x is quantized first when the kernel wants it (xq_plan), unless xq
 * already holds x in that layout: *xq_src (the activation quantized last, -1 for none) and
 * *xq_layout say what the scratch holds; any op that writes that activation resets *xq_src. */
static void matmul_op(slate_state *st, const mm_group *g, int32_t *xq_src, uint32_t *xq_layout) {
    const slate__program *p = &st->model->prog;
    const slate__kernels *k = st->model->k;
    const slate__op *op = g->op[0];
    const slate__wmat *wm = &g->wm[0];
    atomic_llong next;
    atomic_init(&next, 0);
    job jb = {st, op, wm, g, NULL, 1, &next};
    if (k->xq_plan[wm->dtype]) {
        int64_t n_rows = rows_of(st, op->in[0]);
        slate__xq_plan pl = k->xq_plan[wm->dtype](wm, n_rows);
        if (pl.bytes) {
            jb.xq = st->scratch + p->xq_offset;
            jb.row_align = pl.row_align;
            if (*xq_src != op->in[0] || *xq_layout != pl.layout) {
                /* One row (decode) is quicker on this thread than a round trip through the
                 * pool. */
                if (n_rows < 16) run_quantize(&jb, 0, 1);
                else slate__pool_run(st->pool, run_quantize, &jb);
                *xq_src = op->in[0];
                *xq_layout = pl.layout;
            }
        }
    }
    slate__pool_run(st->pool, run_matmul, &jb);
}

/* Rows per work item of an attention op run on nth threads: where a kv head has fewer query
 * heads than a kernel pass serves (Phi-3's 1, Gemma's 2, Llama-3's 4), consecutive rows of a
 * prefill share one pass (kernels.h: n_rows), so each K/V row is read once for all of them:
 * Phi-3-mini's prefill attention took 50 GFLOP/s one row at a time against ~125 with
 * TinyLlama's 8 heads per kv head. Sliding windows too (the kernels start each row at its
 * own position - window). Not with a caller's mask (one per row), and only with enough items
 * to feed every thread. */
static int64_t attn_rows_per_item(const slate_state *st, const slate__op *op, int nth) {
    int64_t group = op->n_heads / op->n_kv_heads;
    if (st->mask || group >= SLATE__ATTN_PASS_HEADS || st->n_q < 2) return 1;
    int64_t rpi = SLATE__ATTN_PASS_HEADS / group;
    if (rpi > st->n_q) rpi = st->n_q;
    return (st->n_q + rpi - 1) / rpi * op->n_kv_heads < 2 * nth ? 1 : rpi;
}

/* Where an attention op's kv head g reads its cache, and how (run_attention). */
typedef struct attn_src {
    const uint8_t *k, *v; /* kv head g's first row */
    int64_t stride;       /* between rows: elements (f32/f16) or bytes (int8) */
    slate_dtype dtype;
    bool k16;
} attn_src;

/* The table's kernel for src: n_heads query heads of kv head g (n_rows rows of them). */
static void attend(const slate_state *st, const slate__op *op, const attn_src *src, float *out,
                   const float *q, int64_t j0, int64_t j1, int64_t n_heads, int64_t n_rows,
                   int64_t window, const float *mask) {
    const slate__kernels *k = st->model->k;
    if (src->k16) /* K dim-major in blocks of 16 (src/state/kvmem.c) */
        k->attention_k16(out, q, (const uint16_t *)src->k, (const uint16_t *)src->v, src->stride,
                         j0, j1, op->head_dim, n_heads, n_rows, window, op->scale, op->softcap,
                         mask);
    else if (src->dtype == SLATE_DTYPE_I8)
        k->attention_i8(out, q, src->k, src->v, src->stride, j0, j1, op->head_dim, n_heads, n_rows,
                        window, op->scale, op->softcap, mask);
    else
        k->attention(out, q, src->k, src->v, src->dtype, src->stride, j0, j1, op->head_dim,
                     n_heads, n_rows, window, op->scale, op->softcap, mask);
}

static void run_attention(void *ctx, int ith, int nth) {
    const job *j = ctx;
    const slate_state *st = j->st;
    const slate__op *op = j->op;
    int32_t slot = st->model->state_slot[op->in[1]], vslot = st->model->state_slot[op->in[2]];
    slate_dtype kvt = st->kv_dtype[slot];
    /* Head g's rows: with the usual head-major cache (one region per kv head, src/state/
     * kvmem.c) they are side by side, head_bytes apart; a cache split otherwise (read by two
     * attentions of different head sizes: one region) has head g's piece at g x head_bytes in
     * each row. K and V are split alike (the planner's find_groups). f32/f16 pieces are
     * [head_dim]; int8 ones a {scale, head_dim values} block. */
    size_t head_bytes = st->kv_row_bytes[slot] / (size_t)op->n_kv_heads;
    bool by_head = st->kv_heads[slot] == op->n_kv_heads && st->kv_heads[vslot] == op->n_kv_heads;
    size_t row_step = by_head ? head_bytes : st->kv_row_bytes[slot];
    int64_t stride = kvt == SLATE_DTYPE_I8 ? (int64_t)row_step
                                           : (int64_t)(row_step / slate__dtype_size(kvt));
    int32_t hd = op->head_dim, group = op->n_heads / op->n_kv_heads;
    int64_t qw = (int64_t)op->n_heads * hd, len0 = st->length, n_tot = len0 + st->n_q;
    int64_t rpi = attn_rows_per_item(st, op, nth);
    /* Work items are (rows, kv head, part of its query heads): the kernels take all the query
     * heads of a kv head at once and read each K/V row once for them. The heads of a
     * group are split into parts only when rows x kv heads are too few to feed every thread. */
    int64_t items = (st->n_q + rpi - 1) / rpi * op->n_kv_heads;
    int64_t parts = items >= 2 * nth ? 1 : (2 * nth + items - 1) / items;
    if (parts > group) parts = group;
    int64_t total = items * parts;
    const float *q = act(st, op->in[0]);
    float *out = act(st, op->out);
    /* a batch's query rows side by side, and its outputs (n_rows x group heads) */
    float qb[SLATE__ATTN_PASS_HEADS * SLATE__MAX_HEAD_DIM];
    float ob[SLATE__ATTN_PASS_HEADS * SLATE__MAX_HEAD_DIM];
    /* Items are taken from a shared counter: with a causal mask later rows attend to more
     * positions (an equal split of rows gave the second thread 3/4 of a prefill's work), and a
     * worker that wakes late takes fewer items. */
    (void)ith;
    for (int64_t t = nth == 1 ? 0 : atomic_fetch_add(j->next, 1); t < total;
         t = nth == 1 ? t + 1 : atomic_fetch_add(j->next, 1)) {
        int64_t b = t / (op->n_kv_heads * parts), g = t / parts % op->n_kv_heads, pt = t % parts;
        int64_t h_lo = g * group + pt * group / parts, h_hi = g * group + (pt + 1) * group / parts;
        int64_t r0 = b * rpi, nr = st->n_q - r0 < rpi ? st->n_q - r0 : rpi;
        attn_src src = {
            .k = by_head ? slate__kv_at(st, slot, (int32_t)g, 0)
                         : slate__kv_at(st, slot, 0, 0) + (size_t)g * head_bytes,
            .v = by_head ? slate__kv_at(st, vslot, (int32_t)g, 0)
                         : slate__kv_at(st, vslot, 0, 0) + (size_t)g * head_bytes,
            .stride = stride,
            .dtype = kvt,
            .k16 = st->kv_k16[slot],
        };
        if (nr > 1) { /* the rows' causal ends and sliding windows: the kernel's */
            int64_t gw = (h_hi - h_lo) * hd; /* one row's heads of kv head g */
            for (int64_t i = 0; i < nr; i++)
                memcpy(qb + i * gw, q + (r0 + i) * qw + h_lo * hd, (size_t)gw * sizeof(float));
            attend(st, op, &src, ob, qb, 0, len0 + r0 + nr, nr * (h_hi - h_lo), nr, op->window,
                   NULL);
            for (int64_t i = 0; i < nr; i++)
                memcpy(out + (r0 + i) * qw + h_lo * hd, ob + i * gw, (size_t)gw * sizeof(float));
            continue;
        }
        for (int64_t r = r0; r < r0 + nr; r++) {
            int64_t pos = len0 + r, j0 = 0, j1 = pos + 1;
            const float *mask = NULL;
            /* A caller's mask replaces the causal one (any key up to the last position), but
             * the model's sliding window is part of the architecture and still applies: no key
             * more than window - 1 positions before the query's own. */
            if (st->mask) {
                j1 = n_tot;
                mask = st->mask + r * n_tot;
            }
            if (op->window > 0 && pos + 1 > op->window) j0 = pos + 1 - op->window;
            attend(st, op, &src, out + r * qw + h_lo * hd, q + r * qw + h_lo * hd, j0, j1,
                   h_hi - h_lo, 1, 0, mask);
        }
    }
}

static void rope(const slate_state *st, const slate__op *op) {
    const slate__program *p = &st->model->prog;
    const float *freqs = p->tensors[op->in[1]].data;
    float *x = act(st, op->in[0]), *y = act(st, op->out);
    int32_t half = op->rope_dim / 2, hd = op->head_dim;
    int64_t w = (int64_t)op->n_heads * hd;
    float c[SLATE__MAX_HEAD_DIM / 2], s[SLATE__MAX_HEAD_DIM / 2];
    for (int32_t r = 0; r < rows_of(st, op->in[0]); r++) {
        float pos = (float)(st->length + r);
        /* mscale multiplies cos and sin here, once per row, so every kernel variant scales
         * exactly the rotated pairs (their (u c - v s, u s + v c) is linear in c and s) and
         * copies the other dims unscaled. */
        for (int32_t i = 0; i < half; i++) {
            float a = pos * freqs[i];
            c[i] = cosf(a) * op->mscale;
            s[i] = sinf(a) * op->mscale;
        }
        st->model->k->rope(y + r * w, x + r * w, c, s, op->n_heads, hd, op->rope_dim,
                           op->rope_mode == SLATE__ROPE_HALF);
    }
}

static void kv_write(const slate_state *st, const slate__op *op) {
    const slate__tensor *t = &st->model->prog.tensors[op->in[1]];
    const float *x = act(st, op->in[0]);
    int32_t slot = st->model->state_slot[op->in[1]], len0 = st->length;
    int32_t heads = st->kv_heads[slot];
    int64_t w = t->width / heads; /* elements of one head's piece of a row */
    for (int32_t r = 0; r < st->n_q; r++)
        for (int32_t g = 0; g < heads; g++) { /* head-major: each piece to its head's region */
            const float *xr = x + (int64_t)r * t->width + g * w;
            if (st->kv_k16[slot]) { /* f16, head_dim 64 or 128: converted, then spread */
                uint16_t h[128];
                st->model->k->to_f16(h, xr, w);
                slate__kv_piece_put(st, slot, g, len0 + r, (const uint8_t *)h);
                continue;
            }
            uint8_t *d = slate__kv_at(st, slot, g, len0 + r);
            switch (st->kv_dtype[slot]) {
            case SLATE_DTYPE_F16:
                st->model->k->to_f16((uint16_t *)d, xr, w);
                break;
            case SLATE_DTYPE_I8:
                slate__kv_quantize_i8(d, xr, w, st->model->state_group[slot]);
                break;
            default:
                memcpy(d, xr, (size_t)w * 4);
                break;
            }
        }
}

/* ---- profiling (slate_state_set_profiling) ------------------------------------------------
 * When on, the time since the previous op's end is charged to each op, with the weight/KV bytes
 * it moves and its flops (estimates from the shapes of this call, formulas below). When off the
 * interpreter pays one branch per op. */

static void op_cost(const slate_state *st, int32_t oi, uint64_t *bytes_out, uint64_t *flops_out) {
    const slate__program *p = &st->model->prog;
    const slate__op *op = &p->ops[oi];
    uint64_t rows = op->out >= 0 ? (uint64_t)rows_of(st, op->out) : (uint64_t)st->n_q;
    uint64_t n = op->out >= 0 ? rows * (uint64_t)p->tensors[op->out].width : 0;
    uint64_t bytes = 0, flops = 0;
    switch (op->kind) {
    case SLATE__OP_MATMUL: { /* the whole weight streams once per call; 2 flops per MAC */
        const slate__tensor *w = &p->tensors[op->in[1]];
        bytes = w->nbytes;
        flops = 2 * (uint64_t)rows_of(st, op->in[0]) * (uint64_t)w->dims[0] * (uint64_t)w->dims[1];
        break;
    }
    case SLATE__OP_EMBEDDING: { /* one table row per token */
        const slate__tensor *t = &p->tensors[op->in[0]];
        bytes = (uint64_t)st->n_q * (t->nbytes / (uint64_t)t->dims[0]);
        break;
    }
    case SLATE__OP_RMS_NORM: /* square, sum, scale, weight */
        bytes = p->tensors[op->in[1]].nbytes;
        flops = 4 * n;
        break;
    case SLATE__OP_ROPE: /* 4 mul + 2 add per rotated pair */
        bytes = p->tensors[op->in[1]].nbytes;
        flops = rows * (uint64_t)op->n_heads * (uint64_t)(op->rope_dim / 2) * 6;
        break;
    case SLATE__OP_KV_WRITE:
        bytes = (uint64_t)st->n_q * st->kv_row_bytes[st->model->state_slot[op->in[1]]];
        break;
    case SLATE__OP_ATTENTION: { /* per query row: K and V rows of the positions it attends to
                                   (read once per kernel call: the heads of a group and the rows
                                   of one call share them); per head and position q.k and p.v,
                                   2 flops per element each */
        uint64_t row_bytes = st->kv_row_bytes[st->model->state_slot[op->in[1]]], positions = 0;
        uint64_t read = 0; /* positions read, once per call */
        int64_t rpi = attn_rows_per_item(st, op, slate__pool_size(st->pool));
        for (int64_t r0 = 0; r0 < st->n_q; r0 += rpi) {
            int64_t nr = st->n_q - r0 < rpi ? st->n_q - r0 : rpi, first = 0;
            for (int64_t r = r0; r < r0 + nr; r++) {
                int64_t j1 = st->mask ? st->length + st->n_q : st->length + r + 1, j0 = 0;
                if (!st->mask && op->window > 0 && j1 > op->window) j0 = j1 - op->window;
                positions += (uint64_t)(j1 - j0);
                if (r == r0) first = j0;
                /* rows of one call: from the first row's start to the last row's end */
                if (nr == 1) read += (uint64_t)(j1 - j0);
                else if (r == r0 + nr - 1) read += (uint64_t)(j1 - first);
            }
        }
        bytes = 2 * read * row_bytes;
        flops = 4 * positions * (uint64_t)op->n_heads * (uint64_t)op->head_dim;
        break;
    }
    case SLATE__OP_ADD:
    case SLATE__OP_MUL: flops = n; break;
    case SLATE__OP_SILU: flops = 4 * n; break;   /* exp, add, div (counted as 4) */
    case SLATE__OP_SWIGLU: flops = 5 * n; break;
    case SLATE__OP_GEGLU: flops = 9 * n; break; /* cube, fma, exp, add, div, mul */
    case SLATE__OP_SCALE: flops = n; break;
    case SLATE__OP_SOFTCAP: flops = 10 * n; break; /* div, tanh (counted as 8), mul */
    default: break;
    }
    *bytes_out = bytes;
    *flops_out = flops;
}

/* Charges ops [oi, oi + n) (one op, or a group of matmuls run as one job, whose time is shared
 * out by the bytes each streams). */
static void profile_ops(slate_state *st, int32_t oi, int n, double *t_prev) {
    double now = slate__now_ms(), ns = now > *t_prev ? (now - *t_prev) * 1e6 : 0;
    uint64_t bytes[GROUP_MAX], flops[GROUP_MAX], sum = 0;
    for (int i = 0; i < n; i++) {
        op_cost(st, oi + i, &bytes[i], &flops[i]);
        sum += bytes[i];
    }
    for (int i = 0; i < n; i++) {
        slate__op_stat *ps = &st->prof[oi + i];
        double share = n == 1 ? 1.0 : sum ? (double)bytes[i] / (double)sum : 1.0 / n;
        ps->n_calls++;
        ps->total_ns += (uint64_t)(ns * share + 0.5);
        ps->bytes += bytes[i];
        ps->flops += flops[i];
    }
    *t_prev = now;
}

void slate__exec_op_kernel(const slate_state *st, int32_t oi, const char **kernel,
                           bool *scalar_fallback) {
    const slate__program *p = &st->model->prog;
    const slate__op *op = &p->ops[oi];
    const slate__kernels *k = st->model->k;
    *kernel = "c";
    *scalar_fallback = false;
    /* a cache write converts with a kernel only into an f16 cache (int8: slate__kv_quantize_i8,
     * f32: a copy) */
    bool f16_write = op->kind == SLATE__OP_KV_WRITE &&
                     st->kv_dtype[st->model->state_slot[op->in[1]]] == SLATE_DTYPE_F16;
    if (op->kind != SLATE__OP_MATMUL && op->kind != SLATE__OP_EMBEDDING &&
        op->kind != SLATE__OP_RMS_NORM && op->kind != SLATE__OP_ATTENTION &&
        op->kind != SLATE__OP_ROPE && op->kind != SLATE__OP_SWIGLU &&
        op->kind != SLATE__OP_GEGLU && !f16_write)
        return;
    slate_dtype d = op->kind == SLATE__OP_MATMUL      ? p->tensors[op->in[1]].dtype
                    : op->kind == SLATE__OP_EMBEDDING ? p->tensors[op->in[0]].dtype
                                                      : SLATE_DTYPE_F32;
    bool i8_cache = op->kind == SLATE__OP_ATTENTION &&
                    st->kv_dtype[st->model->state_slot[op->in[1]]] == SLATE_DTYPE_I8;
    /* ISA tables start as copies of the one below them (ref <- avx2 <- avx512 <- avx512_vnni;
     * ref <- neon <- neon_dotprod), so the first table holding the same function pointer is
     * where the function comes from. */
    static const char *const sets[] = {"ref", "avx2", "avx512", "avx512_vnni", "neon"};
    *kernel = k->name;
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        const slate__kernels *t = slate__kernels_by_name(sets[i]);
        if (!t) continue;
        bool same;
        switch (op->kind) {
        case SLATE__OP_MATMUL: same = t->matmul[d] == k->matmul[d]; break;
        case SLATE__OP_EMBEDDING:
            same = d <= SLATE_DTYPE_BF16 ? t->to_f32[d] == k->to_f32[d]
                                         : t->row_to_f32[d] == k->row_to_f32[d];
            break;
        case SLATE__OP_RMS_NORM: same = t->rms_norm == k->rms_norm; break;
        case SLATE__OP_ROPE: same = t->rope == k->rope; break;
        case SLATE__OP_SWIGLU: same = t->swiglu == k->swiglu; break;
        case SLATE__OP_GEGLU: same = t->geglu == k->geglu; break;
        case SLATE__OP_KV_WRITE: same = t->to_f16 == k->to_f16; break;
        default:
            same = st->kv_k16[st->model->state_slot[op->in[1]]]
                       ? t->attention_k16 == k->attention_k16
                   : i8_cache ? t->attention_i8 == k->attention_i8
                              : t->attention == k->attention;
            break;
        }
        if (same) {
            *kernel = t->name;
            break;
        }
    }
    *scalar_fallback = strcmp(*kernel, "ref") == 0 && strcmp(k->name, "ref") != 0;
}

void slate__exec_run(slate_state *st) {
    const slate_model *m = st->model;
    const slate__program *p = &m->prog;
    const slate__kernels *k = m->k;
    double t_prev = st->profiling ? slate__now_ms() : 0;
    int32_t xq_src = -1;   /* the activation whose quantized copy xq holds (matmul_op) */
    uint32_t xq_layout = 0;
    for (int32_t oi = 0; oi < p->n_ops; oi++) {
        const slate__op *op = &p->ops[oi];
        job jb = {st, op, NULL, NULL, NULL, 1, NULL};
        int n_ops = 1; /* ops this step ran: more than one for a group of matmuls */
        const slate__tensor *o = op->out >= 0 ? &p->tensors[op->out] : NULL;
        int64_t width = o ? o->width : 0;
        int64_t n = o ? (int64_t)rows_of(st, op->out) * width : 0;
        switch (op->kind) {
        case SLATE__OP_EMBEDDING: {
            const slate__tensor *tab = &p->tensors[op->in[0]];
            slate__wmat wm;
            slate__wmat_init(&wm, tab->data, tab->dtype, tab->block, tab->asym, tab->dims[0],
                             tab->dims[1]);
            for (int32_t r = 0; r < st->n_q; r++) {
                float *dst = act(st, op->out) + r * width;
                if (tab->dtype <= SLATE_DTYPE_BF16) /* plain rows: the fast conversion */
                    k->to_f32[tab->dtype](dst, (const uint8_t *)tab->data +
                                                   (size_t)st->tokens[r] * wm.row_bytes, width);
                else /* a compressed row, dequantized */
                    k->row_to_f32[tab->dtype](dst, &wm, st->tokens[r]);
            }
            break;
        }
        case SLATE__OP_RMS_NORM: {
            const float *x = act(st, op->in[0]), *w = p->tensors[op->in[1]].data;
            float *y = act(st, op->out);
            int64_t g = op->group ? op->group : width;
            for (int64_t i = 0; i < n; i += g) k->rms_norm(y + i, x + i, w, g, op->eps);
            break;
        }
        case SLATE__OP_MATMUL: {
            mm_group g;
            n_ops = matmul_group(st, oi, &g);
            matmul_op(st, &g, &xq_src, &xq_layout);
            break;
        }
        case SLATE__OP_ROPE:
            rope(st, op);
            break;
        case SLATE__OP_KV_WRITE:
            kv_write(st, op);
            break;
        case SLATE__OP_ATTENTION: {
            atomic_llong next;
            atomic_init(&next, 0);
            jb.next = &next;
            slate__pool_run(st->pool, run_attention, &jb);
            break;
        }
        case SLATE__OP_ADD: {
            const float *a = act(st, op->in[0]), *b = act(st, op->in[1]);
            float *y = act(st, op->out);
            for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
            break;
        }
        case SLATE__OP_MUL: {
            const float *a = act(st, op->in[0]), *b = act(st, op->in[1]);
            float *y = act(st, op->out);
            for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
            break;
        }
        case SLATE__OP_SILU: {
            const float *a = act(st, op->in[0]);
            float *y = act(st, op->out);
            for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + expf(-a[i]));
            break;
        }
        case SLATE__OP_SWIGLU: {
            const float *a = act(st, op->in[0]), *b = act(st, op->in[1]);
            float *y = act(st, op->out);
            k->swiglu(y, a, b, n);
            break;
        }
        case SLATE__OP_GEGLU: {
            const float *a = act(st, op->in[0]), *b = act(st, op->in[1]);
            float *y = act(st, op->out);
            k->geglu(y, a, b, n);
            break;
        }
        case SLATE__OP_SCALE: {
            const float *a = act(st, op->in[0]);
            float *y = act(st, op->out);
            for (int64_t i = 0; i < n; i++) y[i] = a[i] * op->scale;
            break;
        }
        case SLATE__OP_SOFTCAP: { /* the logits: a vocabulary-sized row per output row */
            const float *a = act(st, op->in[0]);
            float *y = act(st, op->out);
            k->softcap(y, a, n, op->softcap);
            break;
        }
        case SLATE__OP_LAST_ROWS: {
            const float *x = act(st, op->in[0]);
            int64_t first = st->n_out == st->n_q ? 0 : st->n_q - 1;
            memmove(act(st, op->out), x + first * width, (size_t)n * 4);
            break;
        }
        case SLATE__OP_COUNT:
            break;
        }
        for (int i = 0; i < n_ops; i++) /* xq no longer holds x once x is written */
            if (p->ops[oi + i].out >= 0 && p->ops[oi + i].out == xq_src) xq_src = -1;
        if (st->profiling) profile_ops(st, oi, n_ops, &t_prev);
        oi += n_ops - 1;
    }
}
