/*
 * chat.c - `slate chat MODEL`: a conversation in the terminal on top of the session API.
 * One message per line on stdin. The reply streams to stdout and ends with a blank line, in
 * a terminal and on a pipe alike, so a script can feed lines and read replies. Everything
 * else goes to stderr: the prompt marker "> " (terminal only), one "[slate] reply N: ..." line
 * per turn, context-policy notes and errors. Commands start with '/' ("//text" sends
 * "/text"): /reset, /undo, /save FILE, /load FILE, /stats (one "[stats] key=value ..." line
 * on stdout, then a blank line), /help, /quit. Ctrl-C stops the reply being generated (the
 * exchange stays, with the reply so far, possibly empty: templates that need user and
 * assistant turns to alternate still render; /undo takes it back); at the prompt it quits. A turn that fails prints its error and is taken back (its message is
 * removed), the chat goes on, and the exit status is 1 at the end; so does a line that holds a
 * NUL byte (refused, not cut at the NUL) and an unknown command.
 */
#define _POSIX_C_SOURCE 200809L /* getline, sigaction */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The signal handler's view of the running chat. A CLI process runs one chat, so this is the
 * only static; the library itself keeps none. */
static slate_session *volatile g_session;

static void on_sigint(int sig) {
    (void)sig;
    if (g_session) slate_session_cancel(g_session); /* async-signal-safe: one atomic CAS */
}

typedef struct chat_out {
    bool any_text;
    bool ends_with_newline;
} chat_out;

static bool on_event(void *user, const slate_session_event *e) {
    chat_out *o = user;
    switch (e->kind) {
    case SLATE_SESSION_EVENT_TEXT:
        fwrite(e->text, 1, e->len, stdout);
        fflush(stdout);
        if (e->len) {
            o->any_text = true;
            o->ends_with_newline = e->text[e->len - 1] == '\n';
        }
        break;
    case SLATE_SESSION_EVENT_TRUNCATED:
        fprintf(stderr, "[slate] context full: dropped the %d oldest turn%s (%d tokens)\n",
                e->n_turns_dropped, e->n_turns_dropped == 1 ? "" : "s", e->n_tokens_dropped);
        break;
    case SLATE_SESSION_EVENT_SUMMARIZED:
        fprintf(stderr, "[slate] context full: %d earlier turn%s replaced by a summary of %zu "
                "bytes (%d tokens saved)\n", e->n_turns_dropped,
                e->n_turns_dropped == 1 ? "" : "s", e->len, e->n_tokens_dropped);
        break;
    default:
        break;
    }
    return true;
}

static void print_stats(slate_session *s) {
    slate_session_stats st;
    if (slate_session_get_stats(s, &st) != SLATE_OK) return;
    printf("[stats] turns=%d messages=%d ledger_tokens=%d ctx=%d kv_bytes=%zu reuse_hits=%d "
           "tokens_reused=%lld tokens_prefilled=%lld tokens_generated=%lld ttft_ms=%.2f "
           "turns_dropped=%d summaries=%d reuse_released=%d template=%s\n\n",
           st.n_turns, st.n_messages, st.n_ledger_tokens, st.n_ctx, st.kv_bytes_used,
           st.n_reuse_hits, (long long)st.n_tokens_reused, (long long)st.n_tokens_prefilled,
           (long long)st.n_tokens_generated, st.last_ttft_ms, st.n_turns_dropped, st.n_summaries,
           st.n_reuse_released, st.template_name);
    fflush(stdout);
}

static void help(void) {
    fprintf(stderr, "commands: /reset (new conversation), /undo (take back the last exchange), "
                    "/save FILE, /load FILE, /stats, /help, /quit; \"//text\" sends \"/text\"; "
                    "Ctrl-C stops a reply\n");
}

/* Runs one turn for `text`; returns false if it failed (the message is taken back then). */
static bool chat_turn(slate_session *s, const char *text, size_t len,
                      const slate_generate_params *gp, int turn_no) {
    slate_error err;
    slate_status st = slate_session_add_message(s, SLATE_ROLE_USER, text, len, &err);
    if (st) {
        cli_error("chat", st, &err);
        return false;
    }
    chat_out o = {false, false};
    slate_generate_result res;
    slate_session_stats before, after;
    slate_session_get_stats(s, &before);
    st = slate_session_generate(s, gp, on_event, &o, &res, &err);
    /* The reply ends with a newline and a blank line, so replies are separated by one. */
    fputs(o.any_text && o.ends_with_newline ? "\n" : "\n\n", stdout);
    fflush(stdout);
    if (st) {
        cli_error("chat", st, &err);
        slate_session_pop_message(s, NULL);
        return false;
    }
    slate_session_get_stats(s, &after);
    double tps = res.n_generated > 1 && res.decode_ms > 0
                     ? (res.n_generated - 1) / (res.decode_ms / 1000.0) : 0.0;
    fprintf(stderr, "[slate] reply %d: %d tokens (finish %s), prompt %d new + %lld reused, ttft "
            "%.1f ms, %.1f tok/s\n", turn_no, res.n_generated,
            slate_finish_reason_str(res.finish), res.n_prompt,
            (long long)(after.n_tokens_reused - before.n_tokens_reused), res.ttft_ms, tps);
    if (after.n_reuse_released > before.n_reuse_released)
        fprintf(stderr, "[slate] note: the prompt departs from the cached conversation further back "
                "than the sliding window's rollback reach, whose rows were released: the whole "
                "prompt was prefilled again (--kv-rollback N or --kv-keep-all keep more)\n");
    return true;
}

/* /undo: takes back the last exchange (the reply, also one cut short or empty after Ctrl-C, and
 * the user message before it), so the conversation reads as if it had never been sent; the
 * cache keeps what still matches for the next turn. Returns false (with a message) when there
 * is no exchange to take back. */
static bool undo(slate_session *s) {
    int32_t n = slate_session_n_messages(s);
    slate_role last = SLATE_ROLE_SYSTEM, prev = SLATE_ROLE_SYSTEM;
    const char *text;
    size_t len;
    if (n >= 2 && slate_session_message(s, n - 1, &last, &text, &len) == SLATE_OK &&
        slate_session_message(s, n - 2, &prev, &text, &len) == SLATE_OK &&
        last == SLATE_ROLE_ASSISTANT && prev == SLATE_ROLE_USER) {
        slate_error err;
        slate_status st = slate_session_pop_message(s, &err);
        if (!st) st = slate_session_pop_message(s, &err);
        if (st) {
            cli_error("chat", st, &err);
            return false;
        }
        fprintf(stderr, "[slate] took back the last exchange (%d messages left)\n",
                slate_session_n_messages(s));
        return true;
    }
    fprintf(stderr, "slate chat: /undo: no exchange to take back\n");
    return false;
}

static const char *arg_of(const char *line, const char *cmd) {
    size_t n = strlen(cmd);
    if (strncmp(line, cmd, n) != 0 || (line[n] != ' ' && line[n] != '\0')) return NULL;
    line += n;
    while (*line == ' ') line++;
    return line;
}

int slate_cli_chat(int argc, char **argv) {
    const char *model_path = NULL, *system = NULL;
    slate_session_params sp = slate_session_default_params();
    slate_generate_params gp = slate_generate_default_params();
    slate_model_params mp = slate_model_default_params();
    gp.n_predict = 256;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        double d;
#define NEED(cond, msg)                                               \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "slate chat: %s must be %s\n", a, msg);   \
            return 2;                                                 \
        }                                                             \
        i++;                                                          \
    } while (0)
        if (strcmp(a, "--system") == 0) {
            NEED(v, "followed by the system message");
            system = v;
        } else if (strcmp(a, "--template") == 0) {
            NEED(v, "followed by a template name");
            sp.template_name = v;
        } else if (strcmp(a, "-n") == 0) {
            NEED(cli_parse_int(v, -1, 1 << 24, &n) && n != 0, "an integer in 1..16777216, or -1 "
                 "(until the context is full)");
            gp.n_predict = (int32_t)n;
        } else if (strcmp(a, "--temp") == 0) {
            NEED(cli_parse_float(v, 0, 100, &d), "a number in [0, 100]");
            gp.sampler.temperature = (float)d;
        } else if (strcmp(a, "--top-k") == 0) {
            NEED(cli_parse_int(v, 0, 1 << 24, &n), "an integer >= 0 (0: off)");
            gp.sampler.top_k = (int32_t)n;
        } else if (strcmp(a, "--top-p") == 0) {
            NEED(cli_parse_float(v, 0, 1, &d) && d > 0, "a number in (0, 1]");
            gp.sampler.top_p = (float)d;
        } else if (strcmp(a, "--seed") == 0) {
            NEED(cli_parse_int(v, 0, (long long)(~0ull >> 1), &n), "a non-negative integer");
            gp.sampler.seed = (uint64_t)n;
        } else if (strcmp(a, "--ctx-policy") == 0) {
            NEED(v && (!strcmp(v, "refuse") || !strcmp(v, "roll") || !strcmp(v, "summarize")),
                 "refuse, roll or summarize");
            sp.context_policy = !strcmp(v, "refuse") ? SLATE_CONTEXT_REFUSE
                                : !strcmp(v, "roll") ? SLATE_CONTEXT_ROLL
                                                     : SLATE_CONTEXT_SUMMARIZE;
        } else if (strcmp(a, "--context") == 0) {
            NEED(cli_parse_int(v, 1, 1 << 24, &n), "an integer >= 1 (at most the package's)");
            sp.n_ctx = (int32_t)n;
        } else if (strcmp(a, "--kv-rollback") == 0) {
            if (!cli_kv_rollback_parse("chat", v, &sp.kv_rollback_tokens)) return 2;
            i++;
        } else if (strcmp(a, "--kv-keep-all") == 0) {
            sp.kv_keep_all = true;
        } else if (strcmp(a, "--reserve") == 0) {
            NEED(cli_parse_int(v, 0, 1 << 24, &n), "an integer >= 0 (below the context)");
            sp.n_reserve = (int32_t)n;
        } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
            NEED(cli_parse_int(v, 1, 1024, &n), "an integer in 1..1024");
            mp.n_threads = (int32_t)n;
        } else if (a[0] != '-' && !model_path) {
            model_path = a;
        } else {
            return cli_bad_option("chat", a);
        }
#undef NEED
    }
    if (!model_path) return cli_usage("chat");
    slate_error err;
    slate_model *m = NULL;
    slate_session *s = NULL;
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, turns = 0;
    slate_status st = slate_model_open(model_path, &mp, &m, &err);
    if (st) return cli_error("chat", st, &err);
    slate_model_info info;
    slate_model_get_info(m, &info);
    /* A --context beyond the package's is refused by slate_session_create below. */
    if (!cli_kv_options_ok("chat", sp.kv_rollback_tokens, sp.kv_keep_all, sp.n_ctx,
                           info.n_ctx)) {
        rc = 2;
        goto out;
    }
    if ((st = slate_session_create(m, &sp, &s, &err))) {
        rc = cli_error("chat", st, &err);
        goto out;
    }
    if (system && (st = slate_session_add_message(s, SLATE_ROLE_SYSTEM, system, strlen(system),
                                                  &err))) {
        rc = cli_error("chat", st, &err);
        goto out;
    }
    bool tty = isatty(STDIN_FILENO);
    g_session = s;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: Ctrl-C at the prompt ends getline */
    if (tty) {
        slate_session_stats stats;
        slate_session_get_stats(s, &stats);
        fprintf(stderr, "[slate] chat: template %s, context %d, kernels %s. /help for "
                "commands.\n", stats.template_name, stats.n_ctx, slate_kernels_name());
    }
    for (;;) {
        if (tty) {
            fputs("> ", stderr);
            fflush(stderr);
        }
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            if (tty) fputc('\n', stderr);
            break; /* end of input, or Ctrl-C at the prompt */
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        const char *nul = memchr(line, '\0', (size_t)n);
        if (nul) { /* C strings would drop what follows it: refuse, as the server does */
            bool cmd = line[0] == '/' && line[1] != '/';
            fprintf(stderr, "slate chat: the %s contains a NUL byte (at byte %td of the line); "
                    "not sent\n", cmd ? "command" : "message", nul - line);
            rc = 1;
            continue;
        }
        if (line[0] == '/' && line[1] != '/') {
            const char *arg;
            if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
            if (!strcmp(line, "/help")) {
                help();
            } else if (!strcmp(line, "/stats")) {
                print_stats(s);
            } else if (!strcmp(line, "/reset")) {
                st = slate_session_reset(s);
                if (!st && system)
                    st = slate_session_add_message(s, SLATE_ROLE_SYSTEM, system, strlen(system),
                                                   &err);
                if (st) rc = cli_error("chat", st, &err);
                else fprintf(stderr, "[slate] new conversation\n");
            } else if (!strcmp(line, "/undo")) {
                if (!undo(s)) rc = 1;
            } else if ((arg = arg_of(line, "/save")) || (arg = arg_of(line, "/load"))) {
                bool save = line[1] == 's';
                if (!*arg) {
                    fprintf(stderr, "slate chat: %s needs a file name\n", save ? "/save" : "/load");
                    rc = 1;
                    continue;
                }
                st = save ? slate_session_save(s, arg, &err) : slate_session_load(s, arg, &err);
                if (st) {
                    rc = cli_error("chat", st, &err);
                } else {
                    fprintf(stderr, "[slate] %s '%s' (%d messages)\n", save ? "saved to" : "loaded",
                            arg, slate_session_n_messages(s));
                }
            } else {
                fprintf(stderr, "slate chat: unknown command '%s'\n", line);
                help();
                rc = 1;
            }
            continue;
        }
        const char *text = line[0] == '/' ? line + 1 : line;
        if (!chat_turn(s, text, (size_t)n - (size_t)(text - line), &gp, ++turns)) rc = 1;
    }
    g_session = NULL;
out:
    free(line);
    slate_session_free(s);
    slate_model_close(m);
    return rc;
}
