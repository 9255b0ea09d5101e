/* fuzz_http_request.c - libFuzzer target for the server's request-body parser: the bytes are
 * parsed as a chat completion request and as a completion request. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    srv_config cfg = {0};
    cfg.model_id = "m";
    cfg.max_tokens_limit = 4096;
    atomic_ulong seeds = 1;
    for (int chat = 0; chat < 2; chat++) {
        srv_parsed p;
        srv_parse_request(&cfg, &seeds, &p, (const char *)data, size, chat);
        srv_parsed_free(&p);
    }
    return 0;
}
