/*
 * model.h - the model and state objects (internal layout). A model is immutable after open:
 * its compiled program, bound weights (read into anonymous memory, or mapped), tokenizer and
 * kernel table. A state owns everything that changes: the KV arena, scratch, logits, its pool.
 */
#ifndef SLATE_MODEL_H
#define SLATE_MODEL_H

#include "core/core.h"
#include "exec/program.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

typedef struct slate__hparams {
    int32_t n_layers, n_kv_heads, head_dim; /* from META hparams; 0 when not declared */
} slate__hparams;

struct slate_model {
    slate__program prog;
    slate_tokenizer *tok;
    char *arch;
    int32_t n_layers;
    char *chat_template;         /* may be NULL */
    int32_t stop_ids[8];         /* ids that end generation besides the tokenizer's EOG set */
    int32_t n_stop_ids;
    uint8_t *weights_heap;       /* allocation holding DATA read into anonymous memory
                                  * (use_mmap = false); data points inside it */
    const uint8_t *weights_map;  /* mapping base when use_mmap */
    size_t weights_map_len;
    const uint8_t *data;         /* start of DATA, wherever it lives */
    const slate__kernels *k;
    int32_t n_threads;
    size_t mem_budget_bytes;
    atomic_int n_states;         /* live states: close refuses while > 0 */
    /* Memory planning and pressure (issue 4). */
    bool weights_mapped;         /* use_mmap: weights are file-backed pages */
    uint64_t fingerprint;        /* slate__model_fingerprint: binds state files to the model */
    int32_t *state_slot;         /* [n_tensors]: index into prog.states of a STATE tensor, or -1 */
    int32_t *state_group;        /* [n_states]: elements per int8 scale (the head_dim of the
                                    attention reading the cache), 0 when no attention reads it */
    int32_t *state_window;       /* [n_states]: the largest window of the attention ops reading
                                    it when every one has a window > 0, else 0 (rows behind the
                                    window may be released: src/state/kvmem.c) */
    bool kv_keep_all;            /* slate_model_params.kv_keep_all or SLATE_KV_KEEP_ALL=1 */
    int32_t kv_rollback_tokens;  /* slate_model_params.kv_rollback_tokens (0: max_query) */
    slate__hparams hp;           /* for the plan's KV formula */
    char *spill_dir;             /* NULL: no spilling */
    slate_pressure_fn on_pressure;
    void *pressure_user;
    /* The model's only mutable part: its live states (for pressure) and their planned bytes
     * (for the budget), both guarded by states_mu. */
    pthread_mutex_t states_mu;
    slate_state *states_head;
    size_t states_bytes;
    uint64_t spill_seq;
    struct slate__watcher *watcher; /* pressure_watch_ms > 0, else NULL */
};

/* Per-op profiling counters of a state (slate_state_profile), summed over calls. */
typedef struct slate__op_stat {
    uint64_t n_calls, total_ns, bytes, flops;
} slate__op_stat;

struct slate_state {
    slate_model *model;
    int32_t n_ctx;               /* capacity in positions */
    _Atomic int32_t length;      /* positions holding valid cache rows (atomic: the getters
                                    run without busy while pressure may reset the state) */
    uint8_t *kv;                 /* state tensors, each [n_ctx][width] of its dtype, stored
                                    head-major (slate__kv_at, src/state/kvmem.c) */
    size_t kv_bytes;
    uint8_t *scratch;            /* activations, each [max_query][width] f32 */
    int32_t *tokens;             /* [max_query]: the current call's ids */
    const float *mask;           /* current call's mask or NULL */
    int32_t n_q;                 /* current call's query length */
    int32_t n_out;               /* output rows of the current call (1 or n_q) */
    _Atomic int32_t n_logit_rows; /* rows of valid logits, 0 before the first predict */
    slate__pool *pool;
    atomic_int busy;             /* SLATE__IDLE, SLATE__IN_CALL or SLATE__IN_PRESSURE */
    /* Cache layout for this state's dtypes (src/state/kvmem.c), [prog.n_states] each. */
    slate_dtype *kv_dtype;
    size_t *kv_row_bytes;        /* bytes of one position of each state tensor */
    size_t *kv_off;              /* page-aligned byte offset of each tensor's block in kv */
    int32_t *kv_heads;           /* regions (kv heads) a tensor's block is split into */
    size_t *kv_head_span;        /* bytes from one head's region to the next: n_ctx x head bytes */
    bool *kv_k16;                /* K stored dim-major in blocks of 16 positions (the kernel
                                    table's attention_k16, src/state/kvmem.c); else rows */
    _Atomic int32_t *kv_first;   /* first position whose rows every head still holds: rows
                                    before it were released behind a sliding window (0 for a
                                    tensor without a window, or when nothing was released).
                                    Written by whoever holds busy; atomic because
                                    slate_state_tensor_info reads it without taking the state */
    uint8_t *kv_huge;            /* per whole 2 MiB chunk of kv: 1 once backed by a huge page
                                    (slate__kv_huge_update); NULL when none can be */
    size_t *kv_huge_fill;        /* [kv_huge_n]: scratch of slate__kv_huge_update */
    size_t kv_huge_n;            /* whole 2 MiB chunks inside kv */
    size_t kv_huge_done;         /* chunks with kv_huge[c] = 1 */
    bool kv_huge_hold;           /* a trim past the length: no advice until the cache is emptied */
    bool kv_release;             /* windowed caches release rows behind the window */
    int32_t kv_rollback;         /* positions a truncate must be able to go back (R) */
    size_t scratch_bytes;        /* mapped scratch (page-rounded) */
    size_t plan_bytes;           /* counted against the model's budget while alive */
    /* Memory pressure (src/state/pressure.c). Fields below are touched only by whoever holds
     * busy, except reset_req (atomic) and prev/next (model->states_mu). */
    slate_state *prev, *next;
    atomic_bool reset_req;       /* critical pressure hit while a call was running */
    int32_t lost_tokens;         /* > 0: reset by pressure, not yet reported to the caller */
    bool spilled;                /* the cache lives in spill_path until the next call */
    char *spill_path;
    bool profiling;              /* time each op into prof (slate_state_set_profiling) */
    slate__op_stat *prof;        /* [n_ops] profiling counters */
};

/* Who holds a state. A call that finds another call running gets SLATE_E_BUSY; a call that
 * finds memory pressure working on the state (a trim or a spill: short) waits for it, so
 * pressure never makes an owner's call fail. */
enum { SLATE__IDLE = 0, SLATE__IN_CALL = 1, SLATE__IN_PRESSURE = 2 };

/* Takes the state for a call; false when another call holds it. */
static inline bool slate__state_acquire(slate_state *st) {
    for (;;) {
        int expect = SLATE__IDLE;
        if (atomic_compare_exchange_weak(&st->busy, &expect, SLATE__IN_CALL)) return true;
        if (expect == SLATE__IN_CALL) return false;
        if (expect == SLATE__IN_PRESSURE) sched_yield();
    }
}
static inline void slate__state_release(slate_state *st) {
    atomic_store(&st->busy, SLATE__IDLE);
}

/* slate_state_predict for a caller that already holds the state (slate__state_acquire):
 * slate_generate holds it for its whole loop, so no other call can slip in between steps. */
slate_status slate__state_predict_held(slate_state *st, const int32_t *tokens, int32_t n_tokens,
                                      const slate_predict_params *params, slate_error *err);

/* Runs the program for the state's current call (tokens, n_q, n_out, mask set). */
void slate__exec_run(slate_state *st);

/* The cache of state tensor `i` (state slot, not program index) is head-major: kv_heads[i]
 * regions [slate__kv_ctx_rows(n_ctx)][head bytes] one after the other, head bytes = row bytes /
 * kv_heads (a row of an int8 cache is one {scale, values} block per head, so a head's piece is
 * its block). */
static inline size_t slate__kv_head_bytes(const slate_state *st, int32_t i) {
    return st->kv_row_bytes[i] / (size_t)st->kv_heads[i];
}
/* Position pos of head g of state tensor i: its piece of the row, for a tensor stored as rows
 * (not kv_k16; any tensor at pos 0: the head's region). */
static inline uint8_t *slate__kv_at(const slate_state *st, int32_t i, int32_t g, int64_t pos) {
    return st->kv + st->kv_off[i] + (size_t)g * st->kv_head_span[i] +
           (size_t)pos * slate__kv_head_bytes(st, i);
}
/* The piece of head g at position pos of state tensor i (head bytes), whatever the layout:
 * copied out of the cache, or into it. */
void slate__kv_piece_get(const slate_state *st, int32_t i, int32_t g, int64_t pos, uint8_t *dst);
void slate__kv_piece_put(const slate_state *st, int32_t i, int32_t g, int64_t pos,
                         const uint8_t *src);
/* Rows [r0, r0 + n) of state tensor i as the program sees them ([n][row bytes], every head's
 * piece of a row side by side), gathered into dst / scattered from src. */
void slate__kv_get_rows(const slate_state *st, int32_t i, int32_t r0, int32_t n, uint8_t *dst);
void slate__kv_put_rows(slate_state *st, int32_t i, int32_t r0, int32_t n, const uint8_t *src);

/* ---- memory planning, cache layout, persistence, pressure (issue 4) ---------------------- */

/* Bytes of one position of a cache of `width` elements stored as dtype; group = elements per
 * int8 scale (I8 only). 0 for a dtype a cache cannot use. */
size_t slate__kv_row_bytes(slate_dtype dtype, int64_t width, int32_t group);
/* Positions each cache region of a state of context n_ctx reserves: n_ctx rounded up to a whole
 * K16 block (16 positions, src/state/kvmem.c), so that the K16 layout applies whatever context
 * a caller picks (slate bench's 2082, say: without the rounding its decode attention took the
 * slower row layout). Rows past n_ctx are never written, so the lazy mapping never commits
 * them; the planner counts them (its kv_bytes equals the reservation). */
static inline size_t slate__kv_ctx_rows(int32_t n_ctx) { return ((size_t)n_ctx + 15) / 16 * 16; }
/* The system page size (mapping and plan granularity). */
size_t slate__page_size(void);
/* SLATE_KV_KEEP_ALL is set to something other than "" or "0": sliding-window caches are kept
 * whole (read at model open and by slate_plan_file). */
bool slate__kv_keep_all_env(void);

/* The plan (src/plan/planner.c): one function for slate_model_plan, slate_plan_file, open's
 * and state creation's budget checks. group: model->state_group (NULL: I8 unsupported).
 * extra_bytes: memory already committed besides the weights (live states), added to the total
 * before comparing with the budget. */
slate_status slate__plan(const slate__program *prog, const slate__hparams *hp,
                         const int32_t *group, const int32_t *window, bool weights_mapped,
                         const slate_plan_params *params, size_t extra_bytes, slate_plan *plan,
                         slate_error *err);
/* Reads n_layers, n_kv_heads, head_dim from META's hparams (0 when missing). */
void slate__plan_read_hparams(const cJSON *meta, slate__hparams *hp);
/* E_BUDGET with the plan's numbers: `what` is "model" (open) or "state" (create); n_live and
 * extra_bytes describe the live states already counted. */
slate_status slate__plan_budget_fail(const slate_plan *plan, const char *what, size_t extra_bytes,
                                     int32_t n_live, slate_error *err);
/* "this machine" from the text of /proc/meminfo and of the cgroup limit file (NULL or "max":
 * none). Tests feed it strings. */
slate_status slate__device_from_text(const char *meminfo, const char *cgroup_limit,
                                     slate_device *out, slate_error *err);
/* Per-state cache group sizes and windows and the tensor->state slot map (model open). */
slate_status slate__plan_bind_states(slate_model *m, slate_error *err);

/* Cache arena (src/state/kvmem.c): reserves and maps the state's cache and scratch. */
slate_status slate__kv_create(slate_state *st, const slate_state_params *params,
                              slate_error *err);
void slate__kv_free(slate_state *st);
/* Releases the cache pages past each tensor's first n_keep positions, and the scratch pages
 * outside the live logits. Returns the bytes released (resident before, per mincore). */
size_t slate__kv_trim(slate_state *st, int32_t n_keep);
/* Huge pages for a deep cache (src/state/kvmem.c): backs each whole 2 MiB chunk of the cache
 * mapping with one huge page once at least half of its bytes hold rows below the state's
 * length (rows of caches without a sliding window). Each chunk is copied, so a call advises
 * two chunks plus one per 16 of the n_new rows it added (a decode step two, a long prefill
 * all). slate__kv_trim undoes the advice; after a trim past the length none is given until
 * the cache is emptied. Call after the length grew. Nothing changes any value;
 * SLATE_NO_HUGEPAGES turns it off, as for the weights. */
void slate__kv_huge_update(slate_state *st, int64_t n_new);
/* Resident bytes of the cache and scratch (mincore). */
void slate__kv_resident(const slate_state *st, size_t *kv, size_t *scratch);

/* Sliding-window release (src/state/kvmem.c). The positions below which windowed cache i may
 * be released at the state's length: length - window - rollback + 1, clamped at 0 (0 when the
 * tensor has no window or the state keeps everything). */
int32_t slate__kv_window_cut(const slate_state *st, int32_t i);
/* Rows of one release step: those filling SLATE__KV_RELEASE_PAGES pages of one head region
 * (head_bytes bytes per row), at least 1. */
#define SLATE__KV_RELEASE_PAGES 4
int32_t slate__kv_release_step(size_t head_bytes, size_t page);
/* The byte range [*a, *b) of whole pages to hand back in one head region that starts at byte
 * `region` (any alignment) when its rows [0, first) were released already and [first, cut)
 * go now: pages wholly inside the region and before row `cut`, from the first page not yet
 * released. *a >= *b when there is nothing to release. */
void slate__kv_release_range(size_t region, size_t head_bytes, size_t page, int32_t first,
                             int32_t cut, size_t *a, size_t *b);
/* After the length grew (predict) or the content was replaced (load): releases the rows of
 * each windowed cache below slate__kv_window_cut, once at least a release step of rows became
 * releasable (force: any whole page, as at load and under memory pressure), and raises
 * kv_first accordingly. Returns the bytes handed back (resident before, when force). */
size_t slate__kv_release_window(slate_state *st, bool force);
/* Tensor i holds only rows from `first` on (a state file's): the pages below go back and
 * kv_first[i] = first. */
void slate__kv_drop_below(slate_state *st, int32_t i, int32_t first);
/* Every tensor's first held position back to 0: the state is empty (reset, truncate to 0,
 * pressure reset) or the caller declared every row (set_length). */
void slate__kv_first_clear(slate_state *st);
/* The resident bound of windowed cache rows (per kv head, in rows) that the planner counts:
 * window + rollback + step + max_query - 2. */
int64_t slate__kv_window_rows(int32_t window, int32_t rollback, int32_t step, int32_t max_query);

/* Model fingerprint (src/state/persist.c): FNV-1a 64 over META, the tokenizer blob and the
 * first and last 256 bytes of every weight tensor. */
uint64_t slate__model_fingerprint(const slate_model *m, const void *meta, size_t meta_len,
                                  const void *tok, size_t tok_len);
/* Serializes / deserializes a state (caller holds busy; no pressure hooks). */
slate_status slate__state_save_locked(slate_state *st, const char *path,
                                      const slate_state_extra *extra, slate_error *err);
slate_status slate__state_load_locked(slate_state *st, const uint8_t *data, size_t len,
                                      const char *what, slate_state_extra_out *extra_out,
                                      slate_error *err);

/* Pressure (src/state/pressure.c). register/unregister: the model's state list and budget. */
slate_status slate__state_register(slate_state *st, const slate_plan_params *params,
                                   slate_error *err);
void slate__state_unregister(slate_state *st);
/* Called by every state call right after taking busy: applies a reset requested while the
 * state was busy, reports a pressure reset once (E_CANCELLED) when report_lost (else it is
 * acknowledged silently), and reads a spilled state back. */
slate_status slate__state_enter(slate_state *st, bool report_lost, slate_error *err);
/* Applies a reset that critical pressure requested while the state was busy (caller holds
 * busy): empties it and counts the positions in lost_tokens, to be reported or acknowledged
 * by the caller. Part of slate__state_enter; a load calls it alone before replacing the
 * content, so that a request older than the load cannot empty what it loads. */
void slate__state_apply_reset(slate_state *st);
/* For slate_state_reset (caller holds busy): acknowledges a pressure reset and drops a spill
 * file without reading it. */
void slate__state_forget(slate_state *st);
/* Called by predict before releasing busy: applies a reset requested during the call. */
slate_status slate__state_leave(slate_state *st, slate_status s, slate_error *err);
/* Starts / stops the watcher thread (model open / close). */
slate_status slate__watcher_start(slate_model *m, int32_t period_ms, slate_error *err);
void slate__watcher_stop(slate_model *m);
/* Parses /proc/pressure/memory text into a level (watcher; tests). */
slate_pressure_level slate__psi_level(const char *text);

/* Which kernel set op `op_index` runs on this state ("avx512", "avx2", "ref", or "c" for plain
 * C loops in the interpreter), and whether that is the scalar reference although the active
 * set is not "ref". For the profiler. */
void slate__exec_op_kernel(const slate_state *st, int32_t op_index, const char **kernel,
                           bool *scalar_fallback);

#endif /* SLATE_MODEL_H */
