/*
 * main.c - the slate command line: dispatches to one file per subcommand. Every error is
 * printed with its status name and message, and the exit status is non-zero.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
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
            "usage: slate <command> [options]\n"
            "\n"
            "commands:\n"
            "  convert SRC -o OUT.slate [--tokenizer FILE] [--dtype f32|f16|bf16] [--context N]\n"
            "          [--max-query N]        SRC: llama2.c .bin, .gguf, or Hugging Face folder\n"
            "  run MODEL.slate -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
            "          [--repeat-penalty R] [--seed S] [--stop STR]... [-t THREADS]\n"
            "          [--dump-logits FILE] [--mmap]\n"
            "  info MODEL.slate               program summary, states, memory plan\n"
            "  tokenize SOURCE [--no-bos] [--parse-special] < text\n"
            "                                 SOURCE: .slate, tokenizer.json, .gguf, llama2.c .bin\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "convert") == 0) return slate_cli_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0) return slate_cli_run(argc - 1, argv + 1);
    if (strcmp(cmd, "info") == 0) return slate_cli_info(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return slate_cli_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "slate: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
