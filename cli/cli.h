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

#endif
