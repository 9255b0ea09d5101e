#!/usr/bin/python3
"""Convert a llama2.c checkpoint (+ its tok*.bin tokenizer) into a Hugging Face Llama folder.

Test tooling for slate. Run with /usr/bin/python3 (needs numpy only).

    llama2c_to_hf.py --out DIR [--bin stories260K.bin] [--tok tok512.bin] [--dtype F32|F16|BF16]
                     [--verify [REFDIR]]

Writes config.json, generation_config.json, model.safetensors, tokenizer.json,
tokenizer_config.json. --verify runs hfmodel.forward on the written folder and compares with
llama2.c run.c's reference logits (REFDIR default: the reference/ folder next to --bin), and
checks that the tokenizer.json encodes the reference prompt to the reference ids; exit 1 on
mismatch.

Checkpoint ("version 0" legacy llama2.c format): 7 int32 (dim, hidden_dim, n_layers, n_heads,
n_kv_heads, vocab_size, seq_len; vocab_size < 0 means a separate classifier follows), then
float32 token_embedding [vocab][dim], rms_att [L][dim], wq [L][dim][dim], wk [L][kv_dim][dim],
wv [L][kv_dim][dim], wo [L][dim][dim], rms_ffn [L][dim], w1 [L][hid][dim], w2 [L][dim][hid],
w3 [L][hid][dim], rms_final [dim], freq_cis_real [seq][hs/2], freq_cis_imag [seq][hs/2],
(wcls [vocab][dim] when not shared).

RoPE layout: llama2.c rotates ADJACENT pairs (x[2i], x[2i+1]) of each head; HF Llama rotates
(x[i], x[i + hs/2]) ("rotate_half"). As transformers' convert_llama_weights_to_hf.py does, wq and
wk rows are permuted per head:
    permute(w, n, d1, d2) = w.reshape(n, d1 // n // 2, 2, d2).transpose(0, 2, 1, 3).reshape(d1, d2)
(n = n_heads, d1 = dim for wq; n = n_kv_heads, d1 = kv_dim for wk), i.e. within a head new row
i = old row 2i and new row hs/2 + i = old row 2i + 1. q.k is unchanged because both sides get
the same permutation; wv, wo and the rest are copied as they are. Output: tied embeddings.

Tokenizer: tok*.bin (int32 max_len; per token float32 score, int32 n, bytes) becomes a Llama-2
style tokenizer.json (BPE, byte_fallback, "\u2581" for space). Merges are derived the way
transformers' SentencePieceExtractor does: for each piece (by score, best first) every split
left+right with both parts in the vocab is a merge, splits of one piece ordered by (id left,
id right).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hfmodel  # noqa: E402

SPM_SPACE = "\u2581"
SHARED = "/work/shared/models/stories260K"


def permute_rope(w, n_heads, dim1, dim2):
    """llama2.c adjacent-pair rows -> HF rotate_half rows (convert_llama_weights_to_hf.permute)."""
    return w.reshape(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(0, 2, 1, 3).reshape(dim1, dim2)


def read_llama2c(path):
    with open(path, "rb") as f:
        data = f.read()
    dim, hid, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack_from("<7i", data, 0)
    shared = vocab > 0
    vocab = abs(vocab)
    hs = dim // n_heads
    kv_dim = n_kv * hs
    off = 28
    p = {}

    def take(name, *shape):
        nonlocal off
        count = int(np.prod(shape))
        if off + 4 * count > len(data):
            raise ValueError("%s: truncated at %s" % (path, name))
        p[name] = np.frombuffer(data, dtype="<f4", count=count, offset=off).reshape(shape)
        off += 4 * count

    take("tok", vocab, dim)
    take("rms_att", n_layers, dim)
    take("wq", n_layers, dim, dim)
    take("wk", n_layers, kv_dim, dim)
    take("wv", n_layers, kv_dim, dim)
    take("wo", n_layers, dim, dim)
    take("rms_ffn", n_layers, dim)
    take("w1", n_layers, hid, dim)
    take("w2", n_layers, dim, hid)
    take("w3", n_layers, hid, dim)
    take("rms_final", dim)
    take("freq_real", seq_len, hs // 2)
    take("freq_imag", seq_len, hs // 2)
    if not shared:
        take("wcls", vocab, dim)
    if off != len(data):
        raise ValueError("%s: %d trailing bytes" % (path, len(data) - off))
    hp = dict(dim=dim, hidden_dim=hid, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
              vocab_size=vocab, seq_len=seq_len, shared=shared)
    return hp, p


def hf_tensors(hp, p):
    dim, n_heads, n_kv = hp["dim"], hp["n_heads"], hp["n_kv_heads"]
    kv_dim = n_kv * (dim // n_heads)
    t = {"model.embed_tokens.weight": p["tok"], "model.norm.weight": p["rms_final"]}
    if not hp["shared"]:
        t["lm_head.weight"] = p["wcls"]
    for i in range(hp["n_layers"]):
        q = "model.layers.%d." % i
        t[q + "input_layernorm.weight"] = p["rms_att"][i]
        t[q + "post_attention_layernorm.weight"] = p["rms_ffn"][i]
        t[q + "self_attn.q_proj.weight"] = permute_rope(p["wq"][i], n_heads, dim, dim)
        t[q + "self_attn.k_proj.weight"] = permute_rope(p["wk"][i], n_kv, kv_dim, dim)
        t[q + "self_attn.v_proj.weight"] = p["wv"][i]
        t[q + "self_attn.o_proj.weight"] = p["wo"][i]
        t[q + "mlp.gate_proj.weight"] = p["w1"][i]
        t[q + "mlp.down_proj.weight"] = p["w2"][i]
        t[q + "mlp.up_proj.weight"] = p["w3"][i]
    return t


def hf_config(hp, dtype="F32"):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hp["dim"],
        "intermediate_size": hp["hidden_dim"],
        "num_hidden_layers": hp["n_layers"],
        "num_attention_heads": hp["n_heads"],
        "num_key_value_heads": hp["n_kv_heads"],
        "hidden_act": "silu",
        "max_position_embeddings": hp["seq_len"],
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "vocab_size": hp["vocab_size"],
        "tie_word_embeddings": bool(hp["shared"]),
        "bos_token_id": 1,
        "eos_token_id": 2,
        "use_cache": True,
        "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype],
        "transformers_version": "4.46.0",
    }


# ----------------------------------------------------------------------------------------------
# Tokenizer

def read_tok_bin(path, vocab_size):
    with open(path, "rb") as f:
        data = f.read()
    off = 4
    toks = []
    for _ in range(vocab_size):
        score, n = struct.unpack_from("<fi", data, off)
        off += 8
        toks.append((score, data[off:off + n]))
        off += n
    if off != len(data):
        raise ValueError("%s: %d trailing bytes" % (path, len(data) - off))
    return toks


def spm_vocab(toks):
    """-> list of (piece, score). Ids 1/2 ("\\n<s>\\n", "\\n</s>\\n" in llama2.c) become <s>, </s>."""
    out = []
    for i, (score, b) in enumerate(toks):
        s = b.decode("utf-8")
        if s.strip() in ("<s>", "</s>", "<unk>") and i < 3:
            s = s.strip()
        else:
            s = s.replace(" ", SPM_SPACE)
        out.append((s, score))
    if len({s for s, _ in out}) != len(out):
        raise ValueError("duplicate pieces after renaming")
    return out


def spm_merges(pieces):
    """transformers SentencePieceExtractor.extract (with scores): all splits of every piece whose
    two parts are pieces, pieces by descending score (stable), splits by (id left, id right)."""
    vocab = {s: i for i, (s, _) in enumerate(pieces)}
    merges = []
    for piece, score in pieces:
        local = []
        for k in range(1, len(piece)):
            l, r = piece[:k], piece[k:]
            if l in vocab and r in vocab:
                local.append((l, r, score))
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)
    return [(l, r) for l, r, _ in merges]


def write_spm_tokenizer(out_dir, toks, model_max_length=512):
    pieces = spm_vocab(toks)
    vocab = {s: i for i, (s, _) in enumerate(pieces)}
    merges = spm_merges(pieces)
    added = [hfmodel._added_token(i, pieces[i][0]) for i in range(3)]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPM_SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPM_SPACE}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPM_SPACE}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": ["%s %s" % m for m in merges]},
    }
    hfmodel.write_json(os.path.join(out_dir, "tokenizer.json"), tok)
    cfg = {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"}
                                 for a in added},
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": None,
        "clean_up_tokenization_spaces": False,
        "legacy": True,
        "model_max_length": model_max_length,
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizer",
    }
    hfmodel.write_json(os.path.join(out_dir, "tokenizer_config.json"), cfg)
    return vocab, merges


def spm_bpe_encode(text, vocab, merges):
    """Minimal encoder for the tokenizer.json above (normalize, BPE by merge rank, byte
    fallback), used only to self-check the written file; no BOS."""
    rank = {m: i for i, m in enumerate(merges)}
    word = list(SPM_SPACE + text.replace(" ", SPM_SPACE))
    while len(word) > 1:
        best = None
        for i in range(len(word) - 1):
            r = rank.get((word[i], word[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        word[i:i + 2] = [word[i] + word[i + 1]]
    ids = []
    for piece in word:
        if piece in vocab:
            ids.append(vocab[piece])
        else:
            ids.extend(vocab["<0x%02X>" % b] for b in piece.encode("utf-8"))
    return ids


# ----------------------------------------------------------------------------------------------

def convert(bin_path, tok_path, out_dir, dtype="F32"):
    hp, p = read_llama2c(bin_path)
    os.makedirs(out_dir, exist_ok=True)
    cfg = hf_config(hp, dtype)
    hfmodel.write_json(os.path.join(out_dir, "config.json"), cfg)
    hfmodel.write_json(os.path.join(out_dir, "generation_config.json"),
                       {"bos_token_id": 1, "eos_token_id": 2,
                        "transformers_version": cfg["transformers_version"]})
    hfmodel.write_weights(out_dir, hf_tensors(hp, p), dtype)
    vocab, merges = write_spm_tokenizer(out_dir, read_tok_bin(tok_path, hp["vocab_size"]),
                                        hp["seq_len"])
    return hp, vocab, merges


def verify(out_dir, ref_dir, vocab, merges, atol=1e-4):
    """Compares hfmodel.forward with run.c's logits at positions 0 and 4 of the reference prompt."""
    ok = True
    with open(os.path.join(ref_dir, "once-upon-a-time.prompt.txt"), encoding="utf-8") as f:
        prompt = f.read()
    with open(os.path.join(ref_dir, "once-upon-a-time.greedy200.trace.txt")) as f:
        ref_ids = [int(t) for t in f.readline().split(":")[1].split()]
    ids = [1] + spm_bpe_encode(prompt, vocab, merges)
    print("tokenizer: %r -> %s (reference %s) %s" % (prompt, ids, ref_ids,
                                                    "ok" if ids == ref_ids else "MISMATCH"))
    ok &= ids == ref_ids
    logits = hfmodel.forward(out_dir, ref_ids)
    for pos in (0, 4):
        ref = np.loadtxt(os.path.join(ref_dir, "once-upon-a-time.pos%d.logits.txt" % pos))
        got = logits[pos].astype(np.float64)
        d = float(np.max(np.abs(got - ref)))
        am = (int(np.argmax(got)), int(np.argmax(ref)))
        good = d <= atol and am[0] == am[1]
        print("pos %d: max abs diff %.3g, argmax %d (reference %d) %s"
              % (pos, d, am[0], am[1], "ok" if good else "MISMATCH"))
        ok &= good
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(SHARED, "stories260K.bin"))
    ap.add_argument("--tok", default=os.path.join(SHARED, "tok512.bin"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--verify", nargs="?", const="", default=None, metavar="REFDIR",
                    help="compare with run.c reference logits (default: <dir of --bin>/reference)")
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args(argv)
    hp, vocab, merges = convert(a.bin, a.tok, a.out, a.dtype)
    print("%s: LlamaForCausalLM dim %d, %d layers, %d/%d heads, vocab %d, %d merges" % (
        a.out, hp["dim"], hp["n_layers"], hp["n_heads"], hp["n_kv_heads"], hp["vocab_size"],
        len(merges)))
    if a.verify is not None:
        ref = a.verify or os.path.join(os.path.dirname(os.path.abspath(a.bin)), "reference")
        if not verify(a.out, ref, vocab, merges, a.atol):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
