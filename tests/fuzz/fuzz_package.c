/* fuzz_package.c - libFuzzer target for the package reader: container, META JSON, program
 * compiler and tokenizer blob. A package that opens is also run for two tokens. */
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
