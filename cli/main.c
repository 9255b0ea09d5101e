/*
 * main.c - the slate command line: dispatches to one file per subcommand. Every error is
 * printed with its status name and message, and the exit status is non-zero.
 */
#include "cli.h"
#include "server.h"

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
            "          [--quantize int8|int8c|int4] [--block-size N] [--asym] [--keep DTYPE:GLOB]\n"
            "  run MODEL.slate -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
            "          [--repeat-penalty R] [--seed S] [--stop STR]... [-t THREADS]\n"
            "          [--dump-logits FILE] [--mmap]\n"
            "  chat MODEL.slate [--system TEXT] [--template NAME] [-n N] [--temp T] [--seed S]\n"
            "          [--ctx-policy refuse|roll|summarize] [--context N] [--reserve N] [-t N]\n"
            "                                 conversation on stdin/stdout (/help inside)\n"
            "  info MODEL.slate               program summary, states, memory plan\n"
            "  plan MODEL.slate [--context N] [--kv-dtype fp16|fp32|int8] [--states K]\n"
            "          [--device NAME | --budget BYTES] [--mmap]   memory plan vs a budget\n"
            "                                 (exit 3: does not fit); plan --devices: the table\n"
            "  tokenize SOURCE [--no-bos] [--parse-special] < text\n"
            "                                 SOURCE: .slate, tokenizer.json, .gguf, llama2.c .bin\n"
            "  serve MODEL.slate [--host 127.0.0.1] [--port 8080] [--slots N] [--queue M]\n"
            "          [--api-key KEY] [--ctx N]    OpenAI-compatible HTTP server\n"
            "  synth --shape NAME|--dims K=V,... -o DIR [--seed S] [--dtype f32|f16|bf16]\n"
            "                                 random-weight HF folder of a real model's shape\n"
            "  bench MODEL.slate [-t N] [--json] [--mode recompute|kv-io|state|all] [--profile]\n"
            "          [--mmap]               prefill/decode tok/s, TTFT, load, RSS, GB/s\n"
            "  eval MODEL.slate --ref REF.slate --text FILE [--ctx N] [--json]\n"
            "                                 KL divergence, top-1 agreement, perplexity\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "convert") == 0) return slate_cli_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0) return slate_cli_run(argc - 1, argv + 1);
    if (strcmp(cmd, "chat") == 0) return slate_cli_chat(argc - 1, argv + 1);
    if (strcmp(cmd, "info") == 0) return slate_cli_info(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0) return slate_cli_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return slate_cli_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "synth") == 0) return slate_cli_synth(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return slate_cli_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0) return slate_cli_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0) return srv_main(argc - 1, argv + 1);
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "slate: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
