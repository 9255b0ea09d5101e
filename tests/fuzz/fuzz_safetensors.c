/* fuzz_safetensors.c - libFuzzer target for the safetensors reader: opens the bytes with
 * slate__st_open_mem and, when they are accepted, checks and reads every tensor (lookup by name,
 * the data range, every data byte), so a wrong range recorded at open shows up under ASan. A
 * leak of counted allocations aborts. The corpus is in corpus/safetensors/; replay_main.c
 * replays it in the normal test run. */
#include <stdint.h>
#include <stdlib.h>

#include "convert/safetensors.h"
#include "core/core.h"

static volatile uint64_t sink; /* keeps the reads from being optimised away */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    long long live = slate__alloc_live_bytes();
    slate__st *st = NULL;
    slate_error err;
    if (slate__st_open_mem(data, size, &st, &err) == SLATE_OK) {
        for (int64_t i = 0; i < slate__st_n_tensors(st); i++) {
            const slate__st_tensor *t = slate__st_tensor_at(st, i);
            if (slate__st_find(st, t->name) != t) abort(); /* names are unique */
            if (t->n_dims > 8 || t->file_offset + t->nbytes > size ||
                t->data != data + t->file_offset ||
                t->nbytes != t->n_elements * slate__st_dtype_size(t->dtype))
                abort();
            uint64_t h = t->n_dims + t->shape[0] + t->n_elements;
            for (uint64_t k = 0; k < t->nbytes; k++) h = h * 31 + t->data[k];
            sink += h + (uintptr_t)slate__st_dtype_name(t->dtype);
        }
        if (slate__st_tensor_at(st, slate__st_n_tensors(st))) abort();
        slate__st_close(st);
    } else if (st != NULL || err.message[0] == '\0') {
        abort(); /* a refusal leaves *out NULL and says why */
    }
    if (slate__alloc_live_bytes() != live) abort(); /* leak of counted memory */
    return 0;
}
