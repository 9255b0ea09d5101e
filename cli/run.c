/*
 * run.c - `slate run MODEL -p PROMPT [...]`: streams the generated text (not the prompt) to
 * stdout; statistics go to stderr. --dump-logits writes one row of n_vocab little-endian
 * float32 per sampled token (row 0 = the logits after the prompt).
 *
 * --prompt-cache FILE: if FILE holds a state of this model, the longest common prefix of its
 * token ledger and the prompt is reused (the state is truncated to it, capped at the prompt
 * length - 1 unless the whole prompt matches and the file has its logits) and only the rest is
 * prefilled; the state after the prompt is then saved to FILE, so the next run with the same
 * prompt prefix skips that prefill. FILE is replaced only when it is missing or a slate state
 * file (by its magic; one that cannot be used is noted and replaced); anything else (a package,
 * a text file, a directory) is noted and left untouched; a failed save is a note too (the
 * cache only saves time). On a model with sliding-window attention the saved state holds only
 * the rows its rollback reach keeps (--kv-rollback N, default the package's max query;
 * --kv-keep-all: every row): a prompt that departs from the cached one further back than that
 * cannot reuse any prefix (see prompt_cache), and the note says which --kv-rollback, given to
 * the runs that save and load the cache, would have allowed it. With the cache the prompt is fed before slate_generate, so the
 * repetition penalties see only generated tokens (they are off by default).
 * --mem-stats prints the process RSS and the state's reserved/resident memory on stderr.
 * The dump file is opened before any work (an unwritable path fails at once) and, when it is a
 * regular file or new, written through slate_output (a temp beside it, renamed when complete,
 * removed on failure or on a signal), so a failed run leaves no partial dump; a FIFO or device
 * (e.g. /dev/stdout) is written directly. A dump path that is the model package or the prompt
 * cache is refused.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool print_piece(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --dump-logits FILE: a regular file (or a new one) is written through slate_output, whole or
 * not at all (its temp is removed on a signal with the library's other outputs); a device or
 * FIFO named on purpose (/dev/null, a pipe to a reader) is written directly. Opened before any
 * work, so a bad path fails at once. */
typedef struct dump_file {
    const char *path;
    slate_output *out; /* regular files */
    FILE *f;           /* devices, FIFOs */
} dump_file;

/* Whether a and b name one existing file (a link included). */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Opens the dump; refuses a path that is the model package or the prompt cache (a slip of the
 * keyboard would replace them with logits). */
static bool dump_open(dump_file *d, const char *path, const char *model_path,
                      const char *cache_path) {
    struct stat st;
    memset(d, 0, sizeof *d);
    d->path = path;
    if (same_file(path, model_path) || same_file(path, cache_path)) {
        fprintf(stderr, "slate run: --dump-logits '%s' is the %s; it is not replaced (choose "
                "another file)\n", path, same_file(path, model_path) ? "model package"
                                                                     : "prompt cache");
        return false;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        if ((d->f = fopen(path, "wb"))) return true;
        fprintf(stderr, "slate run: cannot write --dump-logits '%s': %s\n", path, strerror(errno));
        return false;
    }
    slate_error err;
    if (slate_output_open(path, &d->out, &err) == SLATE_OK) return true;
    fprintf(stderr, "slate run: cannot write --dump-logits '%s': %s\n", d->path, err.message);
    return false;
}

/* Writes the rows and moves the file into place; false (nothing left at the path) on any
 * error. */
static bool dump_finish(dump_file *d, const float *rows, size_t n_floats) {
    slate_error err;
    if (d->f) {
        bool ok = fwrite(rows, sizeof *rows, n_floats, d->f) == n_floats;
        int e = errno;
        ok = fclose(d->f) == 0 && ok;
        d->f = NULL;
        if (!ok) fprintf(stderr, "slate run: cannot write --dump-logits '%s': %s\n", d->path,
                         strerror(e));
        return ok;
    }
    slate_output *o = d->out;
    d->out = NULL;
    if (slate_output_write(o, rows, n_floats * sizeof *rows, &err) != SLATE_OK) {
        slate_output_discard(o);
        fprintf(stderr, "slate run: cannot write --dump-logits '%s': %s\n", d->path, err.message);
        return false;
    }
    if (slate_output_commit(o, &err) != SLATE_OK) {
        fprintf(stderr, "slate run: cannot write --dump-logits '%s': %s\n", d->path, err.message);
        return false;
    }
    return true;
}

static void dump_abort(dump_file *d) {
    if (d->f) fclose(d->f);
    d->f = NULL;
    slate_output_discard(d->out);
    d->out = NULL;
}

/* Resident set size of this process (/proc/self/statm), or 0. */
static size_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (!f) return 0;
    int n = fscanf(f, "%llu %llu", &size, &res);
    fclose(f);
    return n == 2 ? (size_t)res * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

static void mem_stats(const char *when, slate_state *st) {
    slate_state_memory mm;
    memset(&mm, 0, sizeof mm);
    if (st) slate_state_get_memory(st, &mm);
    fprintf(stderr, "[slate] memory %-14s RSS %8.1f MiB", when, rss_bytes() / 1048576.0);
    if (st)
        fprintf(stderr, " | state: KV %.1f MiB reserved, %.1f MiB resident; scratch %.1f MiB "
                        "reserved, %.1f MiB resident", mm.kv_reserved_bytes / 1048576.0,
                mm.kv_resident_bytes / 1048576.0, mm.scratch_reserved_bytes / 1048576.0,
                mm.scratch_resident_bytes / 1048576.0);
    fprintf(stderr, "\n");
}

/* The first bytes of every slate state file (docs/format.md, "State files"). */
static const char STATE_MAGIC[8] = {'S', 'L', 'A', 'T', 'E', 'S', 'T', 'A'};

typedef enum cache_kind {
    CACHE_ABSENT,  /* nothing at the path (or it cannot be reached: saving will say why) */
    CACHE_STATE,   /* a slate state file, usable or not: read it, then replace it */
    CACHE_FOREIGN, /* anything else: neither read nor written */
} cache_kind;

/* What is at the --prompt-cache path. A regular file counts as a state file when it is empty or
 * starts with the state file magic (or, shorter than 8 bytes, with the magic's first bytes): a
 * state of another model, a damaged or a truncated one. A package, a text file, a directory, a
 * FIFO or device (never opened: that could block) and a file that cannot be read are someone
 * else's: CACHE_FOREIGN, with the reason in why. */
static cache_kind cache_probe(const char *file, char *why, size_t why_cap) {
    struct stat sb;
    if (stat(file, &sb) != 0) return CACHE_ABSENT;
    if (!S_ISREG(sb.st_mode)) {
        snprintf(why, why_cap, "'%s' is not a slate state file (it is %s)", file,
                 S_ISDIR(sb.st_mode)    ? "a directory"
                 : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                        : "not a regular file");
        return CACHE_FOREIGN;
    }
    char head[sizeof STATE_MAGIC];
    size_t n = 0;
    ssize_t r = 1;
    int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    while (fd >= 0 && n < sizeof head && r != 0) {
        r = read(fd, head + n, sizeof head - n);
        if (r > 0) n += (size_t)r;
        if (r < 0 && errno != EINTR) break;
    }
    if (fd < 0 || r < 0) {
        snprintf(why, why_cap, "cannot read '%s' to check that it is a slate state file: %s",
                 file, strerror(errno));
        if (fd >= 0) close(fd);
        return CACHE_FOREIGN;
    }
    close(fd);
    if (memcmp(head, STATE_MAGIC, n) != 0) {
        snprintf(why, why_cap, "'%s' is not a slate state file (it does not start with '%.8s')",
                 file, STATE_MAGIC);
        return CACHE_FOREIGN;
    }
    return CACHE_STATE;
}

/* Reuses FILE's prefix for ids, prefills the rest, saves the state to FILE. *reused_out: prompt
 * tokens not recomputed; *saved_out: whether FILE was written. A FILE that is missing, from
 * another model or damaged only costs a full prefill (a note on stderr) and is replaced; a FILE
 * that is not a slate state file is neither read nor written (a note on stderr), and a save
 * that fails is a note on stderr. Returns a status only when the prefill fails. */
static slate_status prompt_cache(slate_state *st, const char *file, const int32_t *ids,
                                 int32_t n_ids, int32_t max_query, int32_t *reused_out,
                                 bool *saved_out, slate_error *err) {
    int32_t reuse = 0;
    char why[4200]; /* a path (up to PATH_MAX) and a sentence */
    cache_kind kind = cache_probe(file, why, sizeof why);
    if (kind == CACHE_FOREIGN) {
        fprintf(stderr, "slate run: --prompt-cache: %s; it is left untouched and the whole "
                        "prompt is prefilled\n", why);
    } else if (kind == CACHE_STATE) {
        int32_t cap = slate_state_n_ctx(st) + 1;
        int32_t *ledger = malloc((size_t)cap * sizeof *ledger);
        slate_state_extra_out xo;
        memset(&xo, 0, sizeof xo);
        xo.tokens = ledger;
        xo.tokens_cap = ledger ? cap : 0;
        slate_error le;
        memset(&le, 0, sizeof le);
        slate_status s = ledger ? slate_state_load(st, file, &xo, &le) : SLATE_E_NOMEM;
        if (s == SLATE_OK && xo.n_tokens == slate_state_length(st)) {
            int32_t lcp = 0;
            while (lcp < n_ids && lcp < xo.n_tokens && ledger[lcp] == ids[lcp]) lcp++;
            /* The whole prompt matched and the file has its logits: nothing to recompute.
             * Otherwise keep at least one token to feed, so there are logits to sample from. */
            bool whole = lcp == n_ids && xo.n_tokens == n_ids && slate_state_logits(st, NULL);
            reuse = whole ? n_ids : lcp < n_ids ? lcp : n_ids - 1;
            if (!whole) s = slate_state_truncate(st, reuse, &le);
        } else if (s == SLATE_OK) {
            s = SLATE_E_FORMAT;
            snprintf(le.message, sizeof le.message, "its ledger (%d ids) does not match its %d "
                     "positions", xo.n_tokens, slate_state_length(st));
        }
        free(ledger);
        if (s == SLATE_E_RELEASED) {
            /* The cached state's sliding-window caches no longer hold the rows a query at
             * `reuse` reads. Nothing shorter can be kept either: a kept prefix must end at or
             * before `reuse` (later positions hold the old prompt's tokens), and every length
             * below the earliest one the cache can resume from (first held + window - 1, which
             * is above `reuse`) reads released rows too. So the whole prompt is prefilled. What
             * helps is a larger reach in the run that saves the state and in the one that loads
             * it (slate_state_load drops the rows beyond the loading state's reach). */
            int32_t resume = 0;
            for (int32_t i = 0; i < slate_state_n_tensors(st); i++) {
                slate_tensor_info ti;
                if (slate_state_tensor_info(st, i, &ti) == SLATE_OK && ti.first_position > 0 &&
                    ti.first_position + ti.window - 1 > resume)
                    resume = ti.first_position + ti.window - 1;
            }
            int32_t back = slate_state_length(st) - reuse;
            fprintf(stderr, "slate run: prompt cache '%s' not used: reusing its first %d tokens "
                            "(of %d cached) means going back %d positions, but it was saved "
                            "without the sliding-window rows that needs (it can resume from "
                            "position %d at the earliest, and no shorter prefix can be reused "
                            "either), so the whole prompt is prefilled (%s: %s). To reuse a "
                            "prompt that departs up to %d tokens before the end of the cached "
                            "one, give --kv-rollback %d (or more) or --kv-keep-all to every run "
                            "that uses this cache: a state keeps, saves and loads only the rows "
                            "its own reach covers\n",
                    file, reuse, slate_state_length(st), back, resume, slate_status_name(s),
                    le.message, back, back);
            slate_state_reset(st);
            reuse = 0;
        } else if (s != SLATE_OK) {
            fprintf(stderr, "slate run: prompt cache '%s' not used (%s: %s); prefilling the "
                            "whole prompt\n", file, slate_status_name(s), le.message);
            slate_state_reset(st);
            reuse = 0;
        }
    }
    for (int32_t i = reuse; i < n_ids; i += max_query) {
        int32_t n = n_ids - i < max_query ? n_ids - i : max_query;
        slate_status s = slate_state_predict(st, ids + i, n, NULL, err);
        if (s) return s;
    }
    slate_state_extra x;
    memset(&x, 0, sizeof x);
    x.tokens = ids;
    x.n_tokens = n_ids;
    *reused_out = reuse;
    *saved_out = false;
    if (kind == CACHE_FOREIGN) return SLATE_OK;
    /* The cache only saves time: a save that fails (a read-only folder, a full disk) costs the
     * next run a prefill, not this run its output. */
    slate_error se;
    memset(&se, 0, sizeof se);
    slate_status s = slate_state_save(st, file, &x, &se);
    if (s)
        fprintf(stderr, "slate run: prompt cache '%s' not saved (%s: %s); the run goes on\n",
                file, slate_status_name(s), se.message);
    *saved_out = s == SLATE_OK;
    return SLATE_OK;
}

/* "1,2,3" -> malloc'd ids (*n_out of them; "" gives none). Each element is decimal digits with
 * an optional '-' (a negative id is refused later with the vocabulary's range) that fits in
 * int32; no spaces, no empty element ("1,,2", "1,2,"). NULL, with a message on stderr naming
 * the bad element, on anything else. */
static int32_t *parse_ids(const char *s, size_t *n_out) {
    size_t cap = 1;
    for (const char *c = s; *c; c++) cap += *c == ',';
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "slate run: out of memory for --ids (%zu ids)\n", cap);
        return NULL;
    }
    size_t n = 0;
    const char *c = s;
    bool more = *s != '\0'; /* "" lists nothing; otherwise each element, the last included */
    while (more) {
        size_t len = strcspn(c, ",");
        const char *digits = c + (*c == '-');
        size_t n_digits = len - (size_t)(digits - c);
        const char *why = NULL;
        long long v = 0;
        if (len == 0) {
            why = "is empty";
        } else if (n_digits == 0 || strspn(digits, "0123456789") < n_digits) {
            why = "is not an integer";
        } else {
            errno = 0;
            v = strtoll(c, NULL, 10); /* stops at the ',' */
            if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
                why = "is out of the int32 range";
        }
        if (why) {
            fprintf(stderr, "slate run: --ids must be comma-separated integers without spaces, "
                            "e.g. 1,2,3: element %zu ('%.*s') %s\n", n + 1, (int)len, c, why);
            free(ids);
            return NULL;
        }
        ids[n++] = (int32_t)v;
        more = c[len] == ',';
        if (more) c += len + 1;
    }
    *n_out = n;
    return ids;
}

int slate_cli_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *dump = NULL, *ids_arg = NULL;
    const char *cache_file = NULL;
    slate_state_params sp = slate_state_default_params();
    bool want_mem = false;
    slate_generate_params gp = slate_generate_default_params();
    slate_model_params mp = slate_model_default_params();
    const char *stops[64];
    int32_t n_stops = 0;
    gp.n_predict = 256;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        double d;
#define NEED(cond, msg)                                              \
    do {                                                             \
        if (!(cond)) {                                               \
            fprintf(stderr, "slate run: %s must be %s\n", a, msg);   \
            return 2;                                                \
        }                                                            \
        i++;                                                         \
    } while (0)
        if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) {
            NEED(v, "followed by the prompt text");
            prompt = v;
        } else if (strcmp(a, "-n") == 0) {
            NEED(cli_parse_int(v, -1, 1 << 24, &n), "an integer in -1..16777216 (-1: until the "
                 "context is full)");
            gp.n_predict = (int32_t)n;
        } else if (strcmp(a, "--temp") == 0) {
            NEED(cli_parse_float(v, 0, 100, &d), "a number in [0, 100]");
            gp.sampler.temperature = (float)d;
        } else if (strcmp(a, "--top-p") == 0) {
            NEED(cli_parse_float(v, 0, 1, &d) && d > 0, "a number in (0, 1]");
            gp.sampler.top_p = (float)d;
        } else if (strcmp(a, "--top-k") == 0) {
            NEED(cli_parse_int(v, 0, 1 << 24, &n), "an integer >= 0 (0: off)");
            gp.sampler.top_k = (int32_t)n;
        } else if (strcmp(a, "--min-p") == 0) {
            NEED(cli_parse_float(v, 0, 1, &d), "a number in [0, 1]");
            gp.sampler.min_p = (float)d;
        } else if (strcmp(a, "--repeat-penalty") == 0) {
            NEED(cli_parse_float(v, 1e-6, 100, &d), "a number in (0, 100]");
            gp.sampler.repeat_penalty = (float)d;
        } else if (strcmp(a, "--seed") == 0) {
            NEED(cli_parse_int(v, 0, (long long)(~0ull >> 1), &n), "a non-negative integer");
            gp.sampler.seed = (uint64_t)n;
        } else if (strcmp(a, "--stop") == 0) {
            NEED(v && v[0] && n_stops < 64, "a non-empty string (at most 64 of them)");
            stops[n_stops++] = v;
        } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
            NEED(cli_parse_int(v, 1, 1024, &n), "an integer in 1..1024");
            mp.n_threads = (int32_t)n;
        } else if (strcmp(a, "--dump-logits") == 0) {
            NEED(v, "followed by a file name");
            dump = v;
        } else if (strcmp(a, "--ids") == 0) {
            NEED(v, "followed by comma-separated token ids");
            ids_arg = v;
        } else if (strcmp(a, "--mmap") == 0) {
            mp.use_mmap = true;
        } else if (strcmp(a, "--prompt-cache") == 0) {
            NEED(v, "followed by a file name");
            cache_file = v;
        } else if (strcmp(a, "--context") == 0) {
            NEED(cli_parse_int(v, 1, 1 << 24, &n), "an integer in 1..16777216 (at most the "
                 "package's context)");
            sp.n_ctx = (int32_t)n;
        } else if (strcmp(a, "--kv-dtype") == 0) {
            NEED(v && (!strcmp(v, "fp32") || !strcmp(v, "f32") || !strcmp(v, "fp16") ||
                       !strcmp(v, "f16") || !strcmp(v, "int8") || !strcmp(v, "i8")),
                 "fp16, fp32 or int8");
            sp.kv_dtype_set = true;
            sp.kv_dtype = v[1] == '8' || v[0] == 'i' ? SLATE_DTYPE_I8
                          : strstr(v, "16")          ? SLATE_DTYPE_F16
                                                     : SLATE_DTYPE_F32;
        } else if (strcmp(a, "--kv-rollback") == 0) {
            if (!cli_kv_rollback_parse("run", v, &sp.kv_rollback_tokens)) return 2;
            i++;
        } else if (strcmp(a, "--kv-keep-all") == 0) {
            sp.kv_keep_all = true;
        } else if (strcmp(a, "--mem-stats") == 0) {
            want_mem = true;
        } else if (a[0] != '-' && !model_path) {
            model_path = a;
        } else {
            return cli_bad_option("run", a);
        }
#undef NEED
    }
    if (prompt && ids_arg) {
        fprintf(stderr, "slate run: give the prompt as text (-p) or as ids (--ids), not both\n");
        return 2;
    }
    if (!model_path || (!prompt) == (!ids_arg)) return cli_usage("run");
    gp.stop_strings = stops;
    gp.n_stop = n_stops;
    slate_error err;
    slate_model *m = NULL;
    slate_state *st = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    int rc = 1;
    double t0 = 0;
    dump_file df = {0};
    int32_t dump_rows = 0;
    if (dump && !dump_open(&df, dump, model_path, cache_file)) return 1;
    slate_status s = slate_model_open(model_path, &mp, &m, &err);
    if (s) {
        dump_abort(&df);
        return cli_error("run", s, &err);
    }
    slate_model_info info;
    slate_model_get_info(m, &info);
    /* A --context beyond the package's is refused by slate_state_create below. */
    if (!cli_kv_options_ok("run", sp.kv_rollback_tokens, sp.kv_keep_all, sp.n_ctx,
                           info.n_ctx)) {
        rc = 2;
        goto out;
    }
    const slate_tokenizer *tok = slate_model_tokenizer(m);
    size_t n_ids = 0, plen = prompt ? strlen(prompt) : 0;
    if (ids_arg) {
        ids = parse_ids(ids_arg, &n_ids);
        if (!ids) goto out; /* parse_ids said why */
    } else {
        s = slate_tokenizer_encode(tok, prompt, plen, SLATE_ENCODE_ADD_BOS, NULL, 0, &n_ids, &err);
    }
    if (!ids_arg && (s == SLATE_E_BUFFER_TOO_SMALL || s == SLATE_OK)) {
        ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
        s = ids ? slate_tokenizer_encode(tok, prompt, plen, SLATE_ENCODE_ADD_BOS, ids, n_ids,
                                         &n_ids, &err)
                : SLATE_E_NOMEM;
    }
    if (s) goto fail;
    if (n_ids == 0) {
        fprintf(stderr, ids_arg ? "slate run: --ids lists no token ids\n"
                                : "slate run: the prompt is empty and the vocabulary has no BOS "
                                  "to start from\n");
        goto out;
    }
    if (want_mem) mem_stats("model open", NULL);
    if ((s = slate_state_create(m, &sp, &st, &err))) goto fail;
    if (want_mem) mem_stats("state created", st);
    double t_cache = 0;
    int32_t n_fed = (int32_t)n_ids, reused = 0;
    if (cache_file) {
        double tc0 = now_ms();
        bool saved = false;
        if ((s = prompt_cache(st, cache_file, ids, (int32_t)n_ids, info.max_query, &reused,
                              &saved, &err)))
            goto fail;
        t_cache = now_ms() - tc0;
        fprintf(stderr, "[slate] prompt cache %s: reused %d of %zu prompt tokens, prefilled %zu, "
                        "%s (%.1f ms)\n", cache_file, reused, n_ids, n_ids - (size_t)reused,
                saved ? "saved" : "not saved", t_cache);
        n_fed = 0; /* the prompt is in the state; generation continues from its logits */
    }
    if (dump) {
        /* One row per sampled token: at most n_predict, and never more than the context left
         * after the prompt, plus one (a token is sampled at a full context). */
        int32_t room = slate_state_n_ctx(st) - slate_state_length(st) - n_fed + 1;
        int32_t rows = gp.n_predict >= 0 && gp.n_predict < room ? gp.n_predict : room;
        if (rows < 1) rows = 1;
        logits = calloc((size_t)rows * (size_t)info.n_vocab, sizeof *logits);
        if (!logits) {
            fprintf(stderr, "slate run: out of memory for --dump-logits\n");
            goto out;
        }
        gp.dump_logits = logits;
        gp.dump_logits_cap = dump_rows = rows;
    }
    gp.on_piece = print_piece;
    /* stdout continues the prompt, so a first token that starts a word keeps its space (" there"
     * after "Once upon a time,"), unless the prompt has no text (BOS only): then the output is
     * the whole text. Decided from the ids, as the prompt cache may hold them all already. */
    gp.text_before = SLATE_TEXT_BEFORE_NONE;
    for (size_t i = 0; i < n_ids && gp.text_before == SLATE_TEXT_BEFORE_NONE; i++) {
        char one[1];
        size_t len = 0;
        slate_status ps = slate_tokenizer_piece(tok, ids[i], false, one, 0, &len, NULL);
        if ((ps == SLATE_OK || ps == SLATE_E_BUFFER_TOO_SMALL) && len > 0)
            gp.text_before = SLATE_TEXT_BEFORE_SOME;
    }
    slate_generate_result res;
    (void)t0;
    s = slate_generate(st, ids, n_fed, &gp, &res, &err);
    if (s) goto fail; /* stdout gets no newline: nothing was generated, or the text is cut */
    printf("\n");
    fflush(stdout);
    if (want_mem) mem_stats("after generate", st);
    if (cache_file) { /* count the prompt work done before slate_generate */
        res.n_prompt = (int32_t)n_ids;
        res.prefill_ms += t_cache;
        res.ttft_ms += t_cache;
    }
    if (dump && !dump_finish(&df, logits, (size_t)info.n_vocab *
                                              (size_t)(res.n_generated < dump_rows
                                                           ? res.n_generated : dump_rows)))
        goto out;
    double decode_tps = res.n_generated > 1 && res.decode_ms > 0
                            ? (res.n_generated - 1) / (res.decode_ms / 1000.0)
                            : 0.0;
    fprintf(stderr, "[slate] prompt %d tokens, generated %d, finish %s | ttft %.2f ms, prefill "
                    "%.1f tok/s, decode %.1f tok/s | kernels %s, threads %d\n",
            res.n_prompt, res.n_generated, slate_finish_reason_str(res.finish), res.ttft_ms,
            res.prefill_ms > 0 ? res.n_prompt / (res.prefill_ms / 1000.0) : 0.0, decode_tps,
            slate_kernels_name(), info.n_threads);
    rc = 0;
    goto out;
fail:
    cli_error("run", s, &err);
out:
    dump_abort(&df);
    free(logits);
    free(ids);
    slate_state_free(st);
    slate_model_close(m);
    return rc;
}
