/* cli.h - subcommands of the slate CLI. The CLI uses only the public header. */
#ifndef SLATE_CLI_H
#define SLATE_CLI_H

#include "slate.h"

#include <stdio.h>

int slate_cli_convert(int argc, char **argv);
int slate_cli_run(int argc, char **argv);
int slate_cli_chat(int argc, char **argv);
int slate_cli_info(int argc, char **argv);
int slate_cli_plan(int argc, char **argv);
int slate_cli_tokenize(int argc, char **argv);
int slate_cli_synth(int argc, char **argv);
int slate_cli_bench(int argc, char **argv);
int slate_cli_eval(int argc, char **argv);

/* Help (cli/help.c). cli_wants_help: some argument is --help or -h. cli_help: cmd's full help
 * (every option, its default) on f; 0, or 2 for an unknown cmd. cli_usage: the usage lines on
 * stderr and a pointer to --help; returns 2. cli_bad_option: "unknown or incomplete option";
 * returns 2. */
bool cli_wants_help(int argc, char **argv);
int cli_help(const char *cmd, FILE *f);
int cli_usage(const char *cmd);
int cli_bad_option(const char *cmd, const char *arg);

/* Prints "slate <cmd>: <status name>: <message>" on stderr and returns 1. */
int cli_error(const char *cmd, slate_status s, const slate_error *err);
/* Strict number parsing: the whole string must be a number in [lo, hi]. */
bool cli_parse_int(const char *s, long long lo, long long hi, long long *out);
bool cli_parse_float(const char *s, double lo, double hi, double *out);

/* Sliding-window cache options shared by run, chat, serve, plan, bench and info:
 * --kv-rollback N (slate_state_params.kv_rollback_tokens) and --kv-keep-all (kv_keep_all).
 * cli_kv_rollback_parse: v is an integer in 1..16777216 (the context is checked later, once it
 * is known), else a message on stderr and false. cli_kv_options_ok: n (0: not given) is in
 * 1..the context (ctx_given, the --context, when in 1..package_ctx, else package_ctx; the
 * message says which), and not given with --kv-keep-all (which
 * keeps every row, so a reach would mean nothing); else a message on stderr and false (the
 * caller exits 2, as for any usage error); when it holds, cli_kv_env_note. cli_kv_env_note: a
 * note on stderr when n (0: not given) is moot because SLATE_KV_KEEP_ALL is set.
 * cli_kv_options_ok_ctx: the same for a command whose context option is not --context
 * (serve's --ctx): ctx_option is how the message names it. */
bool cli_kv_rollback_parse(const char *cmd, const char *v, int32_t *out);
bool cli_kv_options_ok(const char *cmd, int32_t n, bool keep_all, int32_t ctx_given,
                       int32_t package_ctx);
bool cli_kv_options_ok_ctx(const char *cmd, const char *ctx_option, int32_t n, bool keep_all,
                           int32_t ctx_given, int32_t package_ctx);
void cli_kv_env_note(const char *cmd, int32_t n);

#endif
