/* fuzz_package.c - libFuzzer target for the package reader: container, META JSON, program
 * compiler and tokenizer blob. A package that opens is also run for two tokens. Seeds in
 * corpus/package/; kquant_ffn_down.slate holds every weight format a GGUF import copies (q4 from
 * Q4_0, q4_k and q6_k super-blocks in the two ffn_down), written by
 *   tests/tools/hfmodel.py make --variant phi3 --out m --seed 3 --set intermediate_size=256
 *       --set num_hidden_layers=2
 *   tests/tools/hf_to_gguf.py m k.gguf --quant Q4_0:weight --quant Q4_K:blk.0.ffn_down
 *       --quant Q6_K:blk.1.ffn_down
 *   slate convert k.gguf -o kquant_ffn_down.slate --kv-dtype fp32 --context 64
 * and kquant23_ffn_down.slate the same with --quant Q3_K:blk.0.ffn_down --quant
 * Q2_K:blk.1.ffn_down (q3_k and q2_k super-blocks), iq4_ffn_down.slate with --quant
 * IQ4_NL:blk.0.ffn_down --quant IQ4_XS:blk.1.ffn_down (iq4_nl blocks, iq4_xs super-blocks). */
#include <stddef.h>
#include <stdint.h>

#include "slate.h"

slate_status slate__model_open_mem(const uint8_t *data, size_t size,
                                   const slate_model_params *params, slate_model **out,
                                   slate_error *err);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    slate_model *m = NULL;
    slate_model_params p = slate_model_default_params();
    p.n_threads = 1;
    if (slate__model_open_mem(data, size, &p, &m, NULL) != SLATE_OK) return 0;
    slate_state *s = NULL;
    if (slate_state_create(m, NULL, &s, NULL) == SLATE_OK) {
        int32_t ids[2] = {1, 0};
        slate_state_predict(s, ids, 2, NULL, NULL);
        slate_state_free(s);
    }
    slate_model_close(m);
    return 0;
}
