/*
 * model.h - the model and state objects (internal layout). A model is immutable after open:
 * its compiled program, bound weights (read into anonymous memory, or mapped), tokenizer and
 * kernel table. A state owns everything that changes: the KV arena, scratch, logits, its pool.
 */
#ifndef SLATE_MODEL_H
#define SLATE_MODEL_H

#include "core/core.h"
#include "exec/program.h"

#include <stdatomic.h>

typedef struct slate__gen_defaults {
    float temperature, top_p, min_p, repeat_penalty;
    int32_t top_k;
} slate__gen_defaults;

struct slate_model {
    slate__program prog;
    slate_tokenizer *tok;
    char *arch;
    int32_t n_layers;
    char *chat_template;         /* may be NULL */
    int32_t stop_ids[8];         /* ids that end generation besides the tokenizer's EOG set */
    int32_t n_stop_ids;
    slate__gen_defaults gen;
    uint8_t *weights_heap;       /* DATA read into anonymous memory (use_mmap = false) */
    const uint8_t *weights_map;  /* mapping base when use_mmap */
    size_t weights_map_len;
    const uint8_t *data;         /* start of DATA, wherever it lives */
    const slate__kernels *k;
    int32_t n_threads;
    size_t mem_budget_bytes;
    atomic_int n_states;         /* live states: close refuses while > 0 */
};

struct slate_state {
    slate_model *model;
    int32_t n_ctx;               /* capacity in positions */
    int32_t length;              /* positions holding valid cache rows */
    uint8_t *kv;                 /* state tensors, each [n_ctx][width] of its dtype */
    size_t kv_bytes;
    uint8_t *scratch;            /* activations, each [max_query][width] f32 */
    int32_t *tokens;             /* [max_query]: the current call's ids */
    const float *mask;           /* current call's mask or NULL */
    int32_t n_q;                 /* current call's query length */
    int32_t n_out;               /* output rows of the current call (1 or n_q) */
    int32_t n_logit_rows;        /* rows of valid logits, 0 before the first predict */
    slate__pool *pool;
    atomic_flag busy;
};

/* Runs the program for the state's current call (tokens, n_q, n_out, mask set). */
void slate__exec_run(slate_state *st);

/* Base pointer of state tensor (program index) in this state's arena. */
uint8_t *slate__state_tensor(const slate_state *st, int32_t tensor_index);

#endif /* SLATE_MODEL_H */
