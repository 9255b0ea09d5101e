/* fuzz_hf_config.c - libFuzzer target for the Hugging Face config.json importer (architecture
 * detection, hyper-parameters, rope scaling, sliding window). */
#include <stddef.h>
#include <stdint.h>

#include "convert/convert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    slate__arch a;
    slate__hf_parse_config((const char *)data, size, &a, NULL);
    return 0;
}
