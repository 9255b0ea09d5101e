/* fuzz_llama2c.c - libFuzzer target for the llama2.c checkpoint importer (header validation
 * against the size, tensor slicing). */
#include <stddef.h>
#include <stdint.h>

#include "convert/convert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    slate__import imp;
    if (slate__import_llama2c_mem(data, size, &imp, NULL) == SLATE_OK) {
        /* Touch every tensor's first and last byte: they must lie inside the input. */
        volatile uint8_t sink = 0;
        for (int32_t i = 0; i < imp.n_tensors; i++)
            if (imp.tensors[i].nbytes)
                sink ^= imp.tensors[i].data[0] ^ imp.tensors[i].data[imp.tensors[i].nbytes - 1];
        (void)sink;
        slate__import_free(&imp);
    }
    return 0;
}
