/*
 * lost_import.c - linked into slate_lost_import, the CLI with slate_state_write_tensor wrapped
 * (-Wl,--wrap) so that it reports success and writes nothing: a cache import that is lost.
 * tests/e2e/test_tools.sh runs `bench --mode kv-io` with it; the correctness gate must fail
 * (it passed while kv-io stepped one state, whose cache already held the rows).
 */
#include "slate.h"

slate_status __real_slate_state_write_tensor(slate_state *st, int32_t index, const void *data,
                                             size_t len, int32_t n_positions, slate_error *err);
slate_status __wrap_slate_state_write_tensor(slate_state *st, int32_t index, const void *data,
                                             size_t len, int32_t n_positions, slate_error *err);

slate_status __wrap_slate_state_write_tensor(slate_state *st, int32_t index, const void *data,
                                             size_t len, int32_t n_positions, slate_error *err) {
    (void)st, (void)index, (void)data, (void)len, (void)n_positions, (void)err;
    return SLATE_OK;
}
