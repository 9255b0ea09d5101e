/*
 * exec.c - the interpreter: runs a compiled program for one call on one state. The program
 * was validated at open, so nothing here re-checks shapes. Work is split across the state's
 * thread pool by output columns (matmul) or by (row, head) pairs (attention); the small
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

uint8_t *slate__state_tensor(const slate_state *st, int32_t i) {
    return st->kv + st->model->prog.tensors[i].offset * (uint64_t)st->n_ctx;
}

static int32_t rows_of(const slate_state *st, int32_t i) {
    return st->model->prog.tensors[i].out_rows ? st->n_out : st->n_q;
}

typedef struct job {
    const slate_state *st;
    const slate__op *op;
} job;

static void split(int64_t n, int ith, int nth, int64_t *a, int64_t *b) {
    *a = n * ith / nth;
    *b = n * (ith + 1) / nth;
}

static void run_matmul(void *ctx, int ith, int nth) {
    const job *j = ctx;
    const slate_state *st = j->st;
    const slate__program *p = &st->model->prog;
    const slate__op *op = j->op;
    const slate__tensor *w = &p->tensors[op->in[1]];
    int64_t n_out = w->dims[0], n_in = w->dims[1];
    /* Keep column chunks a multiple of 16 so SIMD kernels see whole blocks. */
    int64_t blocks = (n_out + 15) / 16, b0, b1;
    split(blocks, ith, nth, &b0, &b1);
    int64_t o0 = b0 * 16, o1 = b1 * 16 < n_out ? b1 * 16 : n_out;
    if (o0 >= o1) return;
    const float *bias = op->n_in == 3 ? (const float *)p->tensors[op->in[2]].data : NULL;
    st->model->k->matmul[w->dtype](act(st, op->out), act(st, op->in[0]), w->data, bias,
                                   rows_of(st, op->in[0]), n_in, n_out, o0, o1);
}

static void run_attention(void *ctx, int ith, int nth) {
    const job *j = ctx;
    const slate_state *st = j->st;
    const slate__program *p = &st->model->prog;
    const slate__op *op = j->op;
    const slate__tensor *kt = &p->tensors[op->in[1]];
    const uint8_t *kbase = slate__state_tensor(st, op->in[1]);
    const uint8_t *vbase = slate__state_tensor(st, op->in[2]);
    size_t esz = slate__dtype_size(kt->dtype);
    int32_t hd = op->head_dim, group = op->n_heads / op->n_kv_heads;
    int64_t total = (int64_t)st->n_q * op->n_heads, t0, t1;
    split(total, ith, nth, &t0, &t1);
    const float *q = act(st, op->in[0]);
    float *out = act(st, op->out);
    int64_t qw = (int64_t)op->n_heads * hd, len0 = st->length, n_tot = len0 + st->n_q;
    for (int64_t t = t0; t < t1; t++) {
        int64_t r = t / op->n_heads, h = t % op->n_heads, g = h / group;
        int64_t pos = len0 + r, j0 = 0, j1 = pos + 1;
        const float *mask = NULL;
        if (st->mask) {
            j1 = n_tot;
            mask = st->mask + r * n_tot;
        } else if (op->window > 0 && pos + 1 > op->window) {
            j0 = pos + 1 - op->window;
        }
        st->model->k->attention(out + r * qw + h * hd, q + r * qw + h * hd,
                                kbase + (size_t)g * hd * esz, vbase + (size_t)g * hd * esz,
                                kt->dtype, kt->width, j0, j1, hd, op->scale, mask);
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
        for (int32_t i = 0; i < half; i++) {
            float a = pos * freqs[i];
            c[i] = cosf(a);
            s[i] = sinf(a);
        }
        for (int32_t h = 0; h < op->n_heads; h++) {
            const float *xi = x + r * w + (int64_t)h * hd;
            float *yo = y + r * w + (int64_t)h * hd;
            for (int32_t i = 0; i < half; i++) {
                int32_t a = op->rope_mode == SLATE__ROPE_HALF ? i : 2 * i;
                int32_t b = op->rope_mode == SLATE__ROPE_HALF ? i + half : 2 * i + 1;
                float x0 = xi[a], x1 = xi[b];
                yo[a] = x0 * c[i] - x1 * s[i];
                yo[b] = x0 * s[i] + x1 * c[i];
            }
            if (yo != xi)
                for (int32_t d = op->rope_dim; d < hd; d++) yo[d] = xi[d];
        }
    }
}

static void kv_write(const slate_state *st, const slate__op *op) {
    const slate__tensor *t = &st->model->prog.tensors[op->in[1]];
    const float *x = act(st, op->in[0]);
    uint8_t *base = slate__state_tensor(st, op->in[1]);
    for (int32_t r = 0; r < st->n_q; r++) {
        const float *xr = x + (int64_t)r * t->width;
        size_t row = (size_t)(st->length + r) * (size_t)t->width;
        if (t->dtype == SLATE_DTYPE_F16) {
            uint16_t *d = (uint16_t *)base + row;
            for (int64_t i = 0; i < t->width; i++) d[i] = slate__f32_to_f16(xr[i]);
        } else {
            memcpy((float *)base + row, xr, (size_t)t->width * 4);
        }
    }
}

void slate__exec_run(slate_state *st) {
    const slate_model *m = st->model;
    const slate__program *p = &m->prog;
    const slate__kernels *k = m->k;
    for (int32_t oi = 0; oi < p->n_ops; oi++) {
        const slate__op *op = &p->ops[oi];
        job jb = {st, op};
        const slate__tensor *o = op->out >= 0 ? &p->tensors[op->out] : NULL;
        int64_t width = o ? o->width : 0;
        int64_t n = o ? (int64_t)rows_of(st, op->out) * width : 0;
        switch (op->kind) {
        case SLATE__OP_EMBEDDING: {
            const slate__tensor *tab = &p->tensors[op->in[0]];
            size_t row_bytes = (size_t)width * slate__dtype_size(tab->dtype);
            for (int32_t r = 0; r < st->n_q; r++)
                k->to_f32[tab->dtype](act(st, op->out) + r * width,
                                      (const uint8_t *)tab->data + (size_t)st->tokens[r] * row_bytes,
                                      width);
            break;
        }
        case SLATE__OP_RMS_NORM: {
            const float *x = act(st, op->in[0]), *w = p->tensors[op->in[1]].data;
            float *y = act(st, op->out);
            int64_t g = op->group ? op->group : width;
            for (int64_t i = 0; i < n; i += g) k->rms_norm(y + i, x + i, w, g, op->eps);
            break;
        }
        case SLATE__OP_MATMUL:
            slate__pool_run(st->pool, run_matmul, &jb);
            break;
        case SLATE__OP_ROPE:
            rope(st, op);
            break;
        case SLATE__OP_KV_WRITE:
            kv_write(st, op);
            break;
        case SLATE__OP_ATTENTION:
            slate__pool_run(st->pool, run_attention, &jb);
            break;
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
            for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
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
    }
}
