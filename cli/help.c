/*
 * help.c - `slate CMD --help`: every option of every command, with its default, in one place.
 * The parsers print the usage part (up to the first blank line) when arguments are missing, and
 * point at --help for an unknown option; tests/e2e/test_cli_help.sh checks that every option a
 * parser accepts is listed here.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

typedef struct help {
    const char *cmd;
    const char *text;
} help;

static const help HELP[] = {
    {"convert",
     "usage: slate convert SRC -o OUT.slate [options]\n"
     "  SRC: a Hugging Face folder (config.json + *.safetensors + tokenizer.json), a .gguf file,\n"
     "  or a llama2.c .bin. The package is written to a temp file beside OUT.slate and renamed\n"
     "  when complete.\n"
     "\n"
     "options:\n"
     "  -o OUT.slate          the package to write (required)\n"
     "  --tokenizer FILE      llama2.c sources: the tokenizer .bin (default: tok<V>.bin or\n"
     "                        tokenizer.bin beside SRC)\n"
     "  --dtype T             weight dtype: fp32, fp16, bf16, int8, int8-b32, int4,\n"
     "                        int4-b16|b32|b64|b128 (default fp32, whatever the source's: fp16\n"
     "                        and bf16 sources become fp32; GGUF quantized tensors get their\n"
     "                        nearest format: Q8_0/Q4_0/Q4_1, Q2_K..Q6_K and IQ4_NL/IQ4_XS\n"
     "                        kept byte for byte (as q2_k..q6_k, iq4_nl, iq4_xs), Q5_0 ->\n"
     "                        int8-b32, transcoded without re-rounding the weights; Q5_1\n"
     "                        requantized to int8-b32. A given --dtype applies to them too:\n"
     "                        fp32 is ggml's exact dequantization; int4 --asym transcodes Q4_K,\n"
     "                        int4 [--asym] --block-size 16 Q3_K [Q2_K] and int8-b32 the IQ4\n"
     "                        types, for runtimes without those dtypes; int8-b32 requantizes\n"
     "                        Q5_K, for runtimes without q5_k)\n"
     "  --quantize int8|int8-b32|int4\n"
     "                        int8: symmetric, one scale per output channel; int8-b32: blocks of\n"
     "                        32 with an f16 scale (GGUF Q8_0); int4: blocks of --block-size\n"
     "  --block-size N        int4 block: 16, 32, 64 or 128 (default 32)\n"
     "  --asym                int4 with a per-block offset (scale + zero point)\n"
     "  --palettize N         k-means palettization, N bits: 2, 3, 4, 6 or 8\n"
     "  --group-size G        --palettize: output rows sharing one table of 2^N fp16 centroids\n"
     "                        (default 16)\n"
     "  --keep DTYPE:PATTERN  tensors whose names match the glob keep DTYPE (f32, f16, bf16,\n"
     "                        int8, int8-b32, int4, pal); the last matching rule wins. Default:\n"
     "                        embedding and output head int8-b32 when compressing\n"
     "  --kv-dtype fp16|fp32  the declared cache dtype (default fp16; int8 is chosen per\n"
     "                        state: slate run --kv-dtype int8)\n"
     "  --context N           the declared context (default: the source's)\n"
     "  --max-query N         the most query rows one call may feed (default min(512,\n"
     "                        context))\n"
     "  --threads N           quantization / k-means threads (default: one per online core)\n"
     "  --progress            tensor i/n, bytes and ETA on stderr (default: when it is a terminal)\n"},
    {"run",
     "usage: slate run MODEL.slate -p PROMPT [options]\n"
     "       slate run MODEL.slate --ids 1,2,3 [options]\n"
     "  Generated text on stdout (streamed); statistics on stderr.\n"
     "\n"
     "options:\n"
     "  -p, --prompt TEXT     the prompt (BOS added; \"\" is BOS only)\n"
     "  --ids LIST            token ids instead of -p, comma-separated without spaces\n"
     "                        (e.g. 1,2,3; no BOS added)\n"
     "  -n N                  tokens to generate (default 256; -1: until the context is full)\n"
     "  --temp T              temperature, 0 = greedy (default 0.8)\n"
     "  --top-k K             keep the K most likely tokens, 0 = off (default 40)\n"
     "  --top-p P             nucleus sampling, (0, 1] (default 0.95)\n"
     "  --min-p P             drop tokens below P x the best one's probability (default 0.05)\n"
     "  --repeat-penalty R    penalty on the last 64 tokens, 1 = off (default 1)\n"
     "  --seed S              sampler seed (default 0); same seed, same tokens\n"
     "  --stop STR            stop when STR is generated (repeatable, up to 64)\n"
     "  -t, --threads N       threads per call (default: one per online core)\n"
     "  --context N           the state's context (default: the package's)\n"
     "  --kv-dtype fp16|fp32|int8   the state's cache dtype (default: the package's)\n"
     "  --kv-rollback N       sliding-window caches keep N positions behind the window, so the\n"
     "                        state can go back N tokens (a --prompt-cache that departs up to N\n"
     "                        tokens before the end of the cached prompt is reused); 1..context\n"
     "                        (default: the package's max query)\n"
     "  --kv-keep-all         keep every row of sliding-window caches (default: the rows behind\n"
     "                        the window and the reach are released; SLATE_KV_KEEP_ALL=1 too)\n"
     "  --prompt-cache FILE   reuse FILE's state for the longest common prefix, then save the\n"
     "                        state after the prompt to FILE. A state file of another model\n"
     "                        or a damaged one is replaced; a FILE that is not a slate state\n"
     "                        file (a package, a text file) is left untouched (with a note);\n"
     "                        a save that fails is a note, not an error\n"
     "  --dump-logits FILE    write each step's logits (float32 rows of n_vocab) to FILE\n"
     "  --mmap                map the weights from the file instead of reading them into memory\n"
     "  --mem-stats           print RSS and the state's reserved/resident memory\n"},
    {"chat",
     "usage: slate chat MODEL.slate [options]\n"
     "  A conversation on stdin/stdout, one user turn per line (/help inside for commands).\n"
     "\n"
     "options:\n"
     "  --system TEXT         the system message\n"
     "  --template NAME       chat template: chatml, qwen3, llama3, llama31, llama2, mistral,\n"
     "                        gemma, phi3, zephyr, mistral-v1, phi3-v1, phi4-mini (default:\n"
     "                        detected from the model's template)\n"
     "  -n N                  most tokens per reply (default 256; -1: until the context is full)\n"
     "  --temp T              temperature, 0 = greedy (default 0.8)\n"
     "  --top-k K             keep the K most likely tokens, 0 = off (default 40)\n"
     "  --top-p P             nucleus sampling, (0, 1] (default 0.95)\n"
     "  --seed S              sampler seed (default 0)\n"
     "  --ctx-policy refuse|roll|summarize\n"
     "                        when the conversation no longer fits: refuse the turn (default),\n"
     "                        drop the oldest turns, or replace them by a summary\n"
     "  --context N           the state's context (default: the package's)\n"
     "  --reserve N           positions kept free for the reply (default: context / 4)\n"
     "  --kv-rollback N       sliding-window caches keep N positions behind the window, so a\n"
     "                        turn whose prompt departs from the cached one up to N tokens\n"
     "                        before its end (after /undo, say) reuses the rest; 1..context\n"
     "                        (default: the package's max query)\n"
     "  --kv-keep-all         keep every row of sliding-window caches (default: the rows behind\n"
     "                        the window and the reach are released; SLATE_KV_KEEP_ALL=1 too)\n"
     "  -t, --threads N       threads per call (default: one per online core)\n"},
    {"info",
     "usage: slate info MODEL.slate [options]\n"
     "  The program (ops, tensors), its states, the tokenizer and the memory plan.\n"
     "\n"
     "options:\n"
     "  --kv-rollback N       plan sliding-window caches keeping N positions behind the window;\n"
     "                        1..context (default: the package's max query)\n"
     "  --kv-keep-all         plan sliding-window caches whole (default: at their resident\n"
     "                        bound; SLATE_KV_KEEP_ALL=1 too)\n"},
    {"plan",
     "usage: slate plan MODEL.slate [options]\n"
     "       slate plan --devices\n"
     "  Memory needed (weights, KV, scratch) against a budget; exit status 3 when it does not fit.\n"
     "\n"
     "options:\n"
     "  --context N           the context to plan for (default: the package's)\n"
     "  --kv-dtype fp16|fp32|int8   the cache dtype (default: the package's)\n"
     "  --states K            conversations held at once (default 1)\n"
     "  --device NAME         budget of a device from the table (slate plan --devices)\n"
     "  --budget BYTES        a budget in bytes, suffixes K/M/G/T binary (e.g. 3.5G)\n"
     "                        (default budget: this machine's available memory)\n"
     "  --mmap                weights mapped from the file (counted as page cache)\n"
     "  --kv-rollback N       plan sliding-window caches keeping N positions behind the window;\n"
     "                        1..context (default: the package's max query)\n"
     "  --kv-keep-all         plan sliding-window caches whole (default: at their resident\n"
     "                        bound; SLATE_KV_KEEP_ALL=1 too)\n"
     "  --devices             print the device table\n"},
    {"tokenize",
     "usage: slate tokenize SOURCE [options] < text\n"
     "  The token ids of stdin, on one line. SOURCE: a .slate package, tokenizer.json, a .gguf\n"
     "  file or a llama2.c tokenizer .bin.\n"
     "\n"
     "options:\n"
     "  --no-bos              add no BOS token\n"
     "  --parse-special       turn special-token text (e.g. <|im_start|>) into its id\n"},
    {"serve",
     "usage: slate serve MODEL.slate [options]\n"
     "  OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions, /v1/models,\n"
     "  /health, /metrics.\n"
     "\n"
     "options:\n"
     "  --host ADDR           address to listen on (default 127.0.0.1)\n"
     "  --port N              port (default 8080)\n"
     "  --slots N             conversations decoded at once, one state each (default 2)\n"
     "  --queue M             requests waiting for a slot before 503 (default 16)\n"
     "  --queue-timeout S     seconds a request may wait for a slot (default 60)\n"
     "  --api-key KEY         require \"Authorization: Bearer KEY\"\n"
     "  --ctx N               each slot's context (default: the package's)\n"
     "  --kv-rollback N       sliding-window caches keep N positions behind the window, so a\n"
     "                        request that departs up to N tokens before the end of the slot's\n"
     "                        cached prompt reuses the rest; 1..context (default: the package's\n"
     "                        max query)\n"
     "  --kv-keep-all         keep every row of sliding-window caches (default: the rows behind\n"
     "                        the window and the reach are released; SLATE_KV_KEEP_ALL=1 too)\n"
     "  --max-tokens N        cap on a request's max_tokens (default: the context)\n"
     "  --max-body BYTES      largest request body (default 1048576)\n"
     "  --idle-timeout S      close a connection idle this long; never one being served\n"
     "                        (default 30)\n"
     "  --request-timeout S   a request's headers and body must arrive within S seconds of the\n"
     "                        connection opening or its previous reply (default 30)\n"
     "  --conns-per-ip N      connections one client address may hold open (default: slots +\n"
     "                        queue + 128, half the spare room; 0: no limit, e.g. behind a proxy)\n"
     "  --template NAME       chat template (default: detected from the model's template)\n"
     "  -t, --threads N       threads per call (default: one per online core)\n"},
    {"synth",
     "usage: slate synth --shape NAME|--dims K=V,... [--like NAME] -o DIR [options]\n"
     "       slate synth --shape NAME|--dims K=V,... [--like NAME] --dry-run\n"
     "  A Hugging Face folder (config.json + safetensors) with seeded random weights.\n"
     "\n"
     "options:\n"
     "  -o DIR                the folder to write (required unless --dry-run)\n"
     "  --shape NAME          a real model's shape (listed below)\n"
     "  --dims K=V,...        a custom shape instead: hidden, layers, heads, ffn, vocab (required),\n"
     "                        kv_heads (default: heads), ctx (default 2048), head_dim (default\n"
     "                        hidden / heads), window (sliding window; --like shapes with one),\n"
     "                        each once\n"
     "  --like NAME           with --dims: the custom shape has NAME's architecture (family,\n"
     "                        tensor names and fusing, norms, rope, window pattern, soft-caps,\n"
     "                        tie) with the --dims sizes, e.g. a 2-layer Gemma 2 for tests\n"
     "  --dry-run             print the parameter count, tensors and bytes; write nothing\n"
     "  --seed S              weight seed (default 0); same seed, same bytes\n"
     "  --dtype f32|f16|bf16  tensor dtype (default bf16)\n"
     "  --shard-mib N         largest safetensors shard in MiB (default 4096)\n"
     "  --progress            tensor i/n on stderr (default: when it is a terminal)\n"},
    {"bench",
     "usage: slate bench MODEL.slate [options]\n"
     "       slate bench MODEL.slate --mode recompute|kv-io|state|all[,...] [options]\n"
     "  Prefill and decode tok/s, time to first token, load time, peak RSS, weight GB/s against\n"
     "  this machine's measured read bandwidth; --mode: the cache run three ways.\n"
     "\n"
     "options:\n"
     "  -t, --threads N       threads per call (default: one per online core)\n"
     "  -n N                  decode tokens per measurement (default 32)\n"
     "  --json                one JSON object on stdout instead of the table\n"
     "  --profile             per-op report: kernel, ISA, dtype, time share, GB/s, GFLOP/s\n"
     "  --profile-depth N     --profile: cache depth of the profiled decode (default 512, or\n"
     "                        what the context leaves; N + -n must fit the context)\n"
     "  --mmap                map the weights instead of reading them into memory\n"
     "  --kv-dtype fp16|fp32|int8   the states' cache dtype (default: the package's)\n"
     "  --kv-rollback N       sliding-window caches keep N positions behind the window; 1..context\n"
     "                        (default: the package's max query); not with --mode kv-io\n"
     "  --kv-keep-all         keep every row of sliding-window caches (default: release them;\n"
     "                        --mode kv-io always keeps them, as it exports every row)\n"
     "  --bw-mib N            buffer of the read-bandwidth test (default 1024)\n"
     "  --seed S              seed of the synthetic token ids (default 1234)\n"
     "  --mode M[,M...]       recompute (no cache), kv-io (cache copied in and out each call),\n"
     "                        state (cache in place), all\n"
     "  --prompt N            --mode: prompt tokens (default 128)\n"
     "  --ctx N               --mode: the state's context = kv-io's cache shape (default\n"
     "                        min(package context, max(2048, prompt + n + 1)))\n"
     "  --kv-io ctx|live      --mode kv-io: copy all ctx rows (default) or only the live ones\n"
     "  (--profile, --profile-depth and --bw-mib go with the default run only; --prompt, --ctx\n"
     "  and --kv-io with --mode only: given with the other, they are refused)\n"},
    {"eval",
     "usage: slate eval MODEL.slate --ref REF.slate --text FILE [options]\n"
     "  KL divergence, top-1 agreement and perplexity of MODEL against REF over FILE.\n"
     "\n"
     "options:\n"
     "  --ref REF.slate       the reference package (same tokenizer), e.g. its fp32/fp16 form\n"
     "  --text FILE           the text to score\n"
     "  --ctx N               tokens per window, each from an empty state (default\n"
     "                        min(512, the smaller context))\n"
     "  --max-tokens N        score at most the first N tokens (default: all)\n"
     "  -t, --threads N       threads per call (default: one per online core)\n"
     "  --json                one JSON object on stdout instead of the table\n"},
};

static const help *find(const char *cmd) {
    for (size_t i = 0; i < sizeof HELP / sizeof HELP[0]; i++)
        if (strcmp(HELP[i].cmd, cmd) == 0) return &HELP[i];
    return NULL;
}

bool cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

int cli_help(const char *cmd, FILE *f) {
    const help *h = find(cmd);
    if (!h) return 2;
    fputs(h->text, f);
    if (strcmp(cmd, "synth") == 0) { /* the shapes as the library knows them */
        fputs("\nshapes:", f);
        int col = 7;
        for (int32_t i = 0; slate_synth_shape_name(i); i++) {
            const char *name = slate_synth_shape_name(i);
            if (col + 1 + (int)strlen(name) > 96) {
                fputs("\n       ", f);
                col = 7;
            }
            col += fprintf(f, " %s", name);
        }
        fputc('\n', f);
    }
    return 0;
}

int cli_usage(const char *cmd) {
    const help *h = find(cmd);
    if (h) {
        const char *end = strstr(h->text, "\n\n");
        fwrite(h->text, 1, end ? (size_t)(end - h->text) + 1 : strlen(h->text), stderr);
    }
    fprintf(stderr, "(slate %s --help lists every option)\n", cmd);
    return 2;
}

int cli_bad_option(const char *cmd, const char *arg) {
    fprintf(stderr, "slate %s: unknown or incomplete option '%s' (slate %s --help lists every "
                    "option)\n", cmd, arg, cmd);
    return 2;
}
