/*
 * error.c - the status table (one X-macro list in slate.h, so codes, names and texts cannot
 * drift) and the helpers that fill a slate_error.
 */
#include "core.h"

#include <stdio.h>
#include <string.h>

const char *slate_status_str(slate_status status) {
    switch (status) {
#define X(name, value, text) \
    case SLATE_##name:       \
        return text;
        SLATE_STATUS_LIST(X)
#undef X
    }
    return "unknown status";
}

const char *slate_status_name(slate_status status) {
    switch (status) {
#define X(name, value, text) \
    case SLATE_##name:       \
        return "SLATE_" #name;
        SLATE_STATUS_LIST(X)
#undef X
    }
    return "SLATE_?";
}

static slate_status vfail(slate_error *err, slate_status code, bool has_offset, uint64_t offset,
                          const char *fmt, va_list ap) {
    if (err) {
        err->code = code;
        err->has_offset = has_offset;
        err->offset = offset;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
    }
    return code;
}

slate_status slate__fail(slate_error *err, slate_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(err, code, false, 0, fmt, ap);
    va_end(ap);
    return code;
}

slate_status slate__fail_at(slate_error *err, slate_status code, uint64_t offset,
                            const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(err, code, true, offset, fmt, ap);
    va_end(ap);
    return code;
}

void slate__error_name_file(slate_error *err, const char *path) {
    if (!err || !path || !*path || err->code == SLATE_OK) return;
    size_t n = strlen(path);
    for (const char *m = strstr(err->message, path); m; m = strstr(m + 1, path))
        if (m > err->message && m[-1] == '\'' && m[n] == '\'') return; /* already quoted */
    char msg[sizeof err->message];
    /* A cut end is accepted (the culprit comes first in our messages); a negative result
     * (an encoding error) leaves the message as it was. */
    if (snprintf(msg, sizeof msg, "'%s': %s", path, err->message) < 0) return;
    memcpy(err->message, msg, sizeof msg);
}

void slate__error_clear(slate_error *err) {
    if (!err) return;
    err->code = SLATE_OK;
    err->has_offset = false;
    err->offset = 0;
    err->message[0] = '\0';
}

const char *slate_dtype_name(slate_dtype dtype) {
    switch (dtype) {
    case SLATE_DTYPE_F32: return "f32";
    case SLATE_DTYPE_F16: return "f16";
    case SLATE_DTYPE_BF16: return "bf16";
    case SLATE_DTYPE_I32: return "i32";
    case SLATE_DTYPE_Q8_0: return "q8_0";
    case SLATE_DTYPE_Q4: return "q4";
    case SLATE_DTYPE_Q8_C: return "q8_c";
    case SLATE_DTYPE_PAL: return "pal";
    case SLATE_DTYPE_Q4_K: return "q4_k";
    case SLATE_DTYPE_Q6_K: return "q6_k";
    case SLATE_DTYPE_Q5_K: return "q5_k";
    case SLATE_DTYPE_Q3_K: return "q3_k";
    case SLATE_DTYPE_Q2_K: return "q2_k";
    case SLATE_DTYPE_IQ4_NL: return "iq4_nl";
    case SLATE_DTYPE_IQ4_XS: return "iq4_xs";
    case SLATE_DTYPE_I8: return "i8";
    }
    return "?";
}
