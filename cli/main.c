/*
 * main.c - the slate command line: dispatches to one file per subcommand. Every error is
 * printed with its status name and message, and the exit status is non-zero.
 */
#define _POSIX_C_SOURCE 200809L /* sigaction */
#include "cli.h"
#include "server.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_error(const char *cmd, slate_status s, const slate_error *err) {
    fprintf(stderr, "slate %s: %s: %s\n", cmd, slate_status_name(s),
            err && err->code == s && err->message[0] ? err->message : slate_status_str(s));
    return 1;
}

bool cli_parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_kv_rollback_parse(const char *cmd, const char *v, int32_t *out) {
    long long n;
    if (!cli_parse_int(v, 1, 1 << 24, &n)) {
        fprintf(stderr, "slate %s: --kv-rollback must be an integer in 1..the context (positions "
                        "a sliding-window cache keeps behind its window), not '%s'\n", cmd,
                v ? v : "");
        return false;
    }
    *out = (int32_t)n;
    return true;
}

bool cli_kv_options_ok(const char *cmd, int32_t n, bool keep_all, int32_t ctx_given,
                       int32_t package_ctx) {
    return cli_kv_options_ok_ctx(cmd, "--context", n, keep_all, ctx_given, package_ctx);
}

bool cli_kv_options_ok_ctx(const char *cmd, const char *ctx_option, int32_t n, bool keep_all,
                           int32_t ctx_given, int32_t package_ctx) {
    /* A context option beyond the package's is refused elsewhere (plan, state creation, the
     * server's backend). */
    bool given = ctx_given > 0 && ctx_given <= package_ctx;
    int32_t n_ctx = given ? ctx_given : package_ctx;
    char ctx_what[64] = "the package's context";
    if (given) snprintf(ctx_what, sizeof ctx_what, "the %s", ctx_option);
    if (n && keep_all) {
        fprintf(stderr, "slate %s: --kv-rollback and --kv-keep-all exclude each other "
                        "(--kv-keep-all keeps every row, so there is no reach to set)\n", cmd);
        return false;
    }
    if (n > n_ctx) {
        fprintf(stderr, "slate %s: --kv-rollback must be in 1..%d (%s), not %d\n", cmd, n_ctx,
                ctx_what, n);
        return false;
    }
    cli_kv_env_note(cmd, n);
    return true;
}

void cli_kv_env_note(const char *cmd, int32_t n) {
    const char *env = getenv("SLATE_KV_KEEP_ALL");
    if (n && env && *env && strcmp(env, "0") != 0)
        fprintf(stderr, "slate %s: note: SLATE_KV_KEEP_ALL is set, so every row is kept and "
                        "--kv-rollback %d has no effect\n", cmd, n);
}

bool cli_parse_float(const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: slate <command> [options]     (slate <command> --help: its options)\n"
            "\n"
            "commands:\n"
            "  convert SRC -o OUT.slate [--dtype T | --quantize int8|int8-b32|int4 | --palettize N]\n"
            "                                 checkpoint (HF folder, .gguf, llama2.c .bin) -> package\n"
            "  run MODEL.slate -p PROMPT [-n N] [--temp T] ...   generate text\n"
            "  chat MODEL.slate [--system TEXT] ...   conversation on stdin/stdout (/help inside)\n"
            "  serve MODEL.slate [--port 8080] ...    OpenAI-compatible HTTP server\n"
            "  info MODEL.slate               program summary, states, memory plan\n"
            "  plan MODEL.slate [--device NAME | --budget BYTES] ...   memory plan vs a budget\n"
            "  tokenize SOURCE < text         token ids of stdin\n"
            "  synth --shape NAME -o DIR      random-weight HF folder of a real model's shape\n"
            "  bench MODEL.slate [--json] [--profile] [--mode ...]   speed, load, memory\n"
            "  eval MODEL.slate --ref REF.slate --text FILE   KL, top-1 agreement, perplexity\n"
            "  help [COMMAND]                 this list, or a command's options\n");
}

/* Ctrl-C, kill or a closed terminal while a package or a state file is being written: remove
 * its temp file, then die of the signal as before (commands that handle a signal themselves,
 * chat and serve, install their own handler over this one). */
static void on_fatal_signal(int sig) {
    slate_remove_partial_outputs();
    raise(sig); /* SA_RESETHAND: the default action now */
}

static void install_cleanup_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}

/* A command's output is only as good as its last write: stdout full or closed (a full disk,
 * > /dev/full, a closed pipe) turns success into exit status 1. */
static int finish_stdout(int rc) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "slate: cannot write the output: %s\n", strerror(errno));
        return rc ? rc : 1;
    }
    return rc;
}

typedef int (*command_fn)(int argc, char **argv);

static const struct {
    const char *name;
    command_fn fn;
} COMMANDS[] = {
    {"convert", slate_cli_convert}, {"run", slate_cli_run},     {"chat", slate_cli_chat},
    {"serve", srv_main},            {"info", slate_cli_info},   {"plan", slate_cli_plan},
    {"tokenize", slate_cli_tokenize}, {"synth", slate_cli_synth}, {"bench", slate_cli_bench},
    {"eval", slate_cli_eval},
};

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
        if (strcmp(cmd, COMMANDS[i].name) != 0) continue;
        /* --help or -h anywhere after the command: its help, whatever else is there. */
        if (cli_wants_help(argc - 1, argv + 1)) return finish_stdout(cli_help(cmd, stdout));
        install_cleanup_handlers();
        return finish_stdout(COMMANDS[i].fn(argc - 1, argv + 1));
    }
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        if (strcmp(cmd, "help") == 0 && argc > 2) {
            if (cli_help(argv[2], stdout) == 0) return 0;
            fprintf(stderr, "slate help: unknown command '%s'\n", argv[2]);
            usage(stderr);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "slate: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
