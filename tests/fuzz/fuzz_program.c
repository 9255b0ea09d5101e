/* fuzz_program.c - libFuzzer target for the program compiler: the input is a package's META
 * JSON, reached directly (through a package the CRC would stop nearly every mutation). */
#include <stddef.h>
#include <stdint.h>

#include "exec/program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *j = cJSON_ParseWithLength((const char *)data, size);
    if (j) {
        slate__program p;
        if (slate__program_compile(j, (uint64_t)1 << 30, &p, NULL) == SLATE_OK)
            slate__program_free(&p);
        cJSON_Delete(j);
    }
    return 0;
}
