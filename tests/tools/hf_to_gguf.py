#!/usr/bin/python3
"""hf_to_gguf.py - write a GGUF file (llama.cpp's "phi3" layout) from a small Phi3ForCausalLM
folder made by hfmodel.py, or (llama.cpp's "gemma" / "gemma2" / "gemma3" layout, gemma_layout
below) from a Gemma / Gemma 2 / Gemma 3 one, or (llama.cpp's "smollm3" layout: llama's, with
permuted Q/K rows, smollm3_layout below) from a SmolLM3 one, or (llama.cpp's "granite" layout:
the same with Granite's four multiplier keys, granite_layout below) from a Granite one. Test fixture writer for slate's GGUF phi3 and gemma imports: the GGUF holds
the folder's weights, so the two conversions must give the same logits. Needs NumPy (Debian's
/usr/bin/python3).

    hf_to_gguf.py DIR OUT.gguf [--quant TYPE:PATTERN]... [--quant-flat TYPE:PATTERN]...
                  [--dequant-out DIR2] [--dequant-gguf OUT2.gguf] [--vocab-from V.gguf]
                  [--drop NAME]... [--rows NAME:N]... [--key KEY:u32|f32:VALUE]...
                  [--no-key KEY]...

Layout as llama.cpp's convert_hf_to_gguf.py (Phi3MiniModel) writes it:
  - keys phi3.context_length, embedding_length, feed_forward_length, block_count,
    attention.head_count, attention.head_count_kv, attention.layer_norm_rms_epsilon,
    rope.dimension_count (int(head_dim * partial_rotary_factor): the rotated dims),
    rope.freq_base, attention.sliding_window (0 for none),
    rope.scaling.original_context_length; with rope_scaling longrope also
    rope.scaling.attn_factor = sqrt(1 + ln(max / orig) / ln(orig)) and the f32 tensors
    rope_factors_long.weight / rope_factors_short.weight;
  - tensors token_embd, output_norm, output (none when tie_word_embeddings), blk.N.attn_norm, attn_qkv (qkv_proj as stored: q, k,
    v rows; NeoX rope order, no permutation), attn_output, ffn_norm, ffn_up (gate_up_proj as
    stored: gate rows, then up), ffn_down; GGUF dims are innermost first ([in, out]);
  - the tokenizer as tokenizer.ggml.model "gpt2" (the folder's byte-level BPE: tokens in id
    order, merges, added tokens CONTROL) and tokenizer.chat_template from tokenizer_config.json.
--quant TYPE:NAME_SUBSTRING stores the matching 2-D tensors in that ggml format (the last
matching rule wins): Q8_0 or Q4_0 as ggml's reference quantizers (Q8_0 d = amax / 127, q =
round(x / d); Q4_0 d = max / -8 with max the signed value of largest magnitude, q = min(15,
trunc(x / d + 8.5))), or Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS as
ggml_quants.py encodes them (simple valid encodings, not ggml's search). Rows must be whole
blocks (32, or 256 for the K types and IQ4_XS). --quant-flat TYPE:NAME_SUBSTRING encodes the
values as one sequence even when rows are not whole blocks: an invalid file, for refusal tests.
--vocab-from V.gguf takes every tokenizer.* key from V.gguf instead (e.g. llama.cpp's
ggml-vocab-phi-3.gguf: Phi-3's SentencePiece vocabulary and first chat template) and pads
token_embd and output with zero rows up to its token count.
--drop, --rows (keep the first N rows) and --key (set or add a phi3.* key) break one thing at a
time, for refusal tests.
--dequant-out DIR2 writes a copy of DIR whose weights are the GGUF's values decoded back from
its bytes (ggml_quants.decode: ggml's dequantize_row_* to the bit), so hfmodel.py forward on
DIR2, or DIR2 written as an F32 GGUF, is the reference for the quantized GGUF. --dequant-gguf
OUT2.gguf writes that F32 GGUF directly: OUT.gguf with every tensor F32, decoded from its bytes.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_quants  # noqa: E402
import hfmodel  # noqa: E402

T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_Q4_0, GGML_Q8_0 = 0, 2, 8
ALIGN = 32


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key, vtype, value):
    out = _str(key) + struct.pack("<I", vtype)
    if vtype == T_U32:
        return out + struct.pack("<I", value)
    if vtype == T_I32:
        return out + struct.pack("<i", value)
    if vtype == T_F32:
        return out + struct.pack("<f", value)
    if vtype == T_BOOL:
        return out + struct.pack("<B", 1 if value else 0)
    if vtype == T_STR:
        return out + _str(value)
    etype, items = value
    out += struct.pack("<IQ", etype, len(items))
    if etype == T_STR:
        return out + b"".join(_str(x) for x in items)
    if etype == T_I32:
        return out + struct.pack("<%di" % len(items), *items)
    raise ValueError("array type %d" % etype)


def quantize_q8_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
    q = np.round(b * inv[:, None]).astype(np.int8)
    out = np.empty((b.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    idx = np.argmax(np.abs(b), axis=1)
    mx = b[np.arange(b.shape[0]), idx]
    d = mx / -8.0
    inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0.0)
    q = np.minimum(15, np.trunc(b * inv[:, None] + 8.5)).astype(np.uint8)
    out = np.empty((b.shape[0], 18), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def dequantize(raw, gtype, shape):
    """The values of a tensor of ggml type gtype as ggml decodes them, float32 of shape."""
    n = int(np.prod(shape))
    return ggml_quants.decode(raw, ggml_quants.TYPE_IDS[gtype], n).reshape(shape)


def byte_bpe_keys(model_dir, cfg):
    """tokenizer.* keys of the folder's byte-level BPE (gpt2 model) and chat template."""
    tj = json.load(open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8"))
    vocab = dict(tj["model"]["vocab"])
    special = set()
    for t in tj["added_tokens"]:
        vocab[t["content"]] = t["id"]
        special.add(t["id"])
    toks = sorted(vocab, key=vocab.get)
    if [vocab[t] for t in toks] != list(range(len(toks))):
        raise SystemExit("token ids are not dense")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    kv = [_kv("tokenizer.ggml.model", T_STR, "gpt2"),
          _kv("tokenizer.ggml.pre", T_STR, "gpt-2"),
          _kv("tokenizer.ggml.tokens", T_ARR, (T_STR, toks)),
          _kv("tokenizer.ggml.token_type", T_ARR,
              (T_I32, [3 if i in special else 1 for i in range(len(toks))])),
          _kv("tokenizer.ggml.merges", T_ARR, (T_STR, merges)),
          _kv("tokenizer.ggml.eos_token_id", T_U32, cfg["eos_token_id"]),
          _kv("tokenizer.ggml.add_bos_token", T_BOOL, False)]
    tc = json.load(open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8"))
    if isinstance(tc.get("chat_template"), str):
        kv.append(_kv("tokenizer.chat_template", T_STR, tc["chat_template"]))
    return kv


def vocab_keys(path, tensors):
    """The raw tokenizer.* key/value records of another GGUF; pads the embedding and the head in
    tensors (a list of (name, array)) with zero rows up to its token count."""
    import slatefiles
    b = open(path, "rb").read()
    out, n_tok = [], None
    for key, _, start, vpos, end in slatefiles.Gguf(b).kvs:
        if key.startswith("tokenizer."):
            out.append(b[start:end])
        if key == "tokenizer.ggml.tokens":
            n_tok = struct.unpack_from("<IQ", b, vpos)[1]
    for i, (name, arr) in enumerate(tensors):
        if name in ("token_embd.weight", "output.weight"):
            if arr.shape[0] > n_tok:
                raise SystemExit("the folder's vocabulary is larger than %s's" % path)
            pad = np.zeros((n_tok - arr.shape[0], arr.shape[1]), dtype=arr.dtype)
            tensors[i] = (name, np.concatenate([arr, pad]))
    return out


def gemma_layout(cfg, w):
    """llama.cpp's GemmaModel / Gemma3Model layout (convert_hf_to_gguf.py): keys <arch>.* with
    key_length / value_length = head_dim, rope.freq_base the global layers' rope_theta, gemma3's
    attention.sliding_window and linear rope.scaling.*; every *norm.weight stored with the + 1 of
    Gemma's RMSNorm added; no output.weight when tied; NeoX q/k order (no permutation). GGUF has
    no sliding_window_pattern, query_pre_attn_scalar or rope_local_base_freq: llama.cpp fixes
    them to 6, head_dim and 10000, so the folder must have those values (checked here).
    Gemma2Model: gemma2.attention.sliding_window and both soft-caps; llama.cpp slides the even
    layers and scales by 1/sqrt(head_dim) (the folder must agree; the 46-layer 27B aside)."""
    g3 = cfg["model_type"] == "gemma3_text"
    g2 = cfg["model_type"] == "gemma2"
    arch = "gemma3" if g3 else "gemma2" if g2 else "gemma"
    hd = cfg.get("head_dim") or 256
    nh = cfg["num_attention_heads"]
    theta, sc = hfmodel.rope_params(cfg)
    if g3 and (cfg.get("layer_types") or cfg.get("sliding_window_pattern", 6) != 6
               or cfg.get("query_pre_attn_scalar", 256) != hd
               or cfg.get("rope_local_base_freq", 10000.0) != 10000.0):
        raise SystemExit("gemma3 in GGUF: llama.cpp assumes pattern 6, query_pre_attn_scalar = "
                         "head_dim and local base 10000; this folder differs")
    even = ["sliding_attention" if i % 2 == 0 else "full_attention"
            for i in range(cfg["num_hidden_layers"])]
    if g2 and ((cfg.get("layer_types") or even) != even
               or cfg.get("query_pre_attn_scalar", 256) != hd
               or cfg.get("attn_logit_softcapping", 50.0) is None
               or cfg.get("final_logit_softcapping", 30.0) is None):
        raise SystemExit("gemma2 in GGUF: llama.cpp assumes the even layers slide, "
                         "query_pre_attn_scalar = head_dim and both caps; this folder differs")
    kv = [_kv("general.architecture", T_STR, arch),
          _kv("general.name", T_STR, "tiny %s test model" % arch),
          _kv(arch + ".context_length", T_U32, cfg["max_position_embeddings"]),
          _kv(arch + ".embedding_length", T_U32, cfg["hidden_size"]),
          _kv(arch + ".block_count", T_U32, cfg["num_hidden_layers"]),
          _kv(arch + ".feed_forward_length", T_U32, cfg["intermediate_size"]),
          _kv(arch + ".attention.head_count", T_U32, nh),
          _kv(arch + ".attention.head_count_kv", T_U32, cfg.get("num_key_value_heads") or nh),
          _kv(arch + ".attention.layer_norm_rms_epsilon", T_F32, cfg["rms_norm_eps"]),
          _kv(arch + ".attention.key_length", T_U32, hd),
          _kv(arch + ".attention.value_length", T_U32, hd),
          _kv(arch + ".rope.freq_base", T_F32, theta)]
    if g3 or g2:
        kv.append(_kv(arch + ".attention.sliding_window", T_U32, cfg["sliding_window"]))
    if g2:
        kv += [_kv(arch + ".attn_logit_softcapping", T_F32,
                   cfg.get("attn_logit_softcapping", 50.0)),
               _kv(arch + ".final_logit_softcapping", T_F32,
                   cfg.get("final_logit_softcapping", 30.0))]
    if sc is not None:
        if sc["rope_type"] != "linear":
            raise SystemExit("rope_scaling %r: only linear" % sc["rope_type"])
        kv += [_kv(arch + ".rope.scaling.type", T_STR, "linear"),
               _kv(arch + ".rope.scaling.factor", T_F32, sc["factor"])]

    def norm(name):  # Gemma's 1 + w, as llama.cpp's converter stores it (f32)
        return (w[name].astype(np.float32) + np.float32(1)).astype(np.float32)
    tensors = [("token_embd.weight", w["model.embed_tokens.weight"]),
               ("output_norm.weight", norm("model.norm.weight"))]
    if "lm_head.weight" in w and not cfg.get("tie_word_embeddings", True):
        tensors.append(("output.weight", w["lm_head.weight"]))
    for i in range(cfg["num_hidden_layers"]):
        p, b = "model.layers.%d." % i, "blk.%d." % i
        tensors += [(b + "attn_norm.weight", norm(p + "input_layernorm.weight")),
                    (b + "attn_q.weight", w[p + "self_attn.q_proj.weight"]),
                    (b + "attn_k.weight", w[p + "self_attn.k_proj.weight"]),
                    (b + "attn_v.weight", w[p + "self_attn.v_proj.weight"]),
                    (b + "attn_output.weight", w[p + "self_attn.o_proj.weight"]),
                    (b + "ffn_gate.weight", w[p + "mlp.gate_proj.weight"]),
                    (b + "ffn_up.weight", w[p + "mlp.up_proj.weight"]),
                    (b + "ffn_down.weight", w[p + "mlp.down_proj.weight"])]
        if g3:
            tensors += [(b + "attn_q_norm.weight", norm(p + "self_attn.q_norm.weight")),
                        (b + "attn_k_norm.weight", norm(p + "self_attn.k_norm.weight"))]
        if g3 or g2:
            tensors += [(b + "post_attention_norm.weight",
                         norm(p + "post_attention_layernorm.weight")),
                        (b + "ffn_norm.weight", norm(p + "pre_feedforward_layernorm.weight")),
                        (b + "post_ffw_norm.weight", norm(p + "post_feedforward_layernorm.weight"))]
        else:
            tensors.append((b + "ffn_norm.weight", norm(p + "post_attention_layernorm.weight")))
    return kv, tensors


def permute_llama(w, n_head):
    """llama.cpp's LlamaModel.permute: each head's rows i and i + head_dim/2 (HF rotate_half
    pairs) become rows 2i and 2i + 1 (ggml's adjacent-pair "normal" RoPE)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def granite_layout(cfg, w):
    """llama.cpp's GraniteModel (a LlamaModel, convert_hf_to_gguf.py): smollm3_layout's keys and
    tensors under "granite.", plus the f32 keys granite.embedding_scale, residual_scale,
    attention.scale and logit_scale from config.json's embedding_multiplier,
    residual_multiplier, attention_multiplier and logits_scaling (each written when the folder
    gives it, as the converter does)."""
    return smollm3_layout(cfg, w, "granite")


def smollm3_layout(cfg, w, arch="smollm3"):
    """llama.cpp's SmolLM3Model (a LlamaModel, convert_hf_to_gguf.py): the llama keys under
    "smollm3." (context_length, embedding_length, block_count, feed_forward_length,
    rope.dimension_count = head_dim, attention.head_count / head_count_kv,
    attention.layer_norm_rms_epsilon, rope.freq_base, key_length / value_length when config.json
    gives head_dim), attn_q / attn_k rows permuted (permute_llama), no output.weight when tied.
    llama.cpp fixes the NoPE layers at (l + 1) % 4 == 0 and reads no window, so the folder must
    have that pattern and no sliding window (checked here)."""
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = hfmodel.head_dim_of(cfg)
    n_layers = cfg["num_hidden_layers"]
    ropes = ([hfmodel.smollm3_uses_rope(cfg, i) for i in range(n_layers)] if arch == "smollm3"
             else [True] * n_layers)
    if ropes != [arch != "smollm3" or (i + 1) % 4 != 0 for i in range(n_layers)]:
        raise SystemExit("smollm3 in GGUF: llama.cpp's NoPE layers are (l + 1) %% 4 == 0; this "
                         "folder has RoPE on %s" % ropes)
    theta, sc = hfmodel.rope_params(cfg)
    if sc is not None:
        raise SystemExit("%s in GGUF: rope_scaling is not written by this tool" % arch)
    a = arch + "."
    kv = [_kv("general.architecture", T_STR, arch),
          _kv("general.name", T_STR, "tiny %s test model" % arch),
          _kv(a + "context_length", T_U32, cfg["max_position_embeddings"]),
          _kv(a + "embedding_length", T_U32, cfg["hidden_size"]),
          _kv(a + "block_count", T_U32, n_layers),
          _kv(a + "feed_forward_length", T_U32, cfg["intermediate_size"]),
          _kv(a + "rope.dimension_count", T_U32, hd),
          _kv(a + "attention.head_count", T_U32, nh),
          _kv(a + "attention.head_count_kv", T_U32, nkv),
          _kv(a + "attention.layer_norm_rms_epsilon", T_F32, cfg["rms_norm_eps"]),
          _kv(a + "rope.freq_base", T_F32, theta)]
    if cfg.get("head_dim"):
        kv += [_kv(a + "attention.key_length", T_U32, hd),
               _kv(a + "attention.value_length", T_U32, hd)]
    for hf_key, key in (("embedding_multiplier", "embedding_scale"),
                        ("residual_multiplier", "residual_scale"),
                        ("attention_multiplier", "attention.scale"),
                        ("logits_scaling", "logit_scale")):
        if arch == "granite" and hf_key in cfg:
            kv.append(_kv(a + key, T_F32, cfg[hf_key]))
    tensors = [("token_embd.weight", w["model.embed_tokens.weight"]),
               ("output_norm.weight", w["model.norm.weight"])]
    if not cfg.get("tie_word_embeddings", arch == "smollm3"):
        tensors.append(("output.weight", w["lm_head.weight"]))
    for i in range(n_layers):
        p, b = "model.layers.%d." % i, "blk.%d." % i
        tensors += [(b + "attn_norm.weight", w[p + "input_layernorm.weight"]),
                    (b + "attn_q.weight", permute_llama(w[p + "self_attn.q_proj.weight"], nh)),
                    (b + "attn_k.weight", permute_llama(w[p + "self_attn.k_proj.weight"], nkv)),
                    (b + "attn_v.weight", w[p + "self_attn.v_proj.weight"]),
                    (b + "attn_output.weight", w[p + "self_attn.o_proj.weight"]),
                    (b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"]),
                    (b + "ffn_gate.weight", w[p + "mlp.gate_proj.weight"]),
                    (b + "ffn_up.weight", w[p + "mlp.up_proj.weight"]),
                    (b + "ffn_down.weight", w[p + "mlp.down_proj.weight"])]
    return kv, tensors


def write_gguf(path, kv, infos, blobs):
    """A GGUF v3 file of the key/value records, tensor infos and padded data blobs."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kv)) + b"".join(kv) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--quant", action="append", default=[], help="TYPE:NAME_SUBSTRING")
    ap.add_argument("--quant-flat", action="append", default=[],
                    help="TYPE:NAME_SUBSTRING, rows need not be whole blocks (invalid file)")
    ap.add_argument("--dequant-out", help="copy of the folder with the GGUF's decoded weights")
    ap.add_argument("--dequant-gguf", help="OUT.gguf with the decoded weights, all F32")
    ap.add_argument("--vocab-from", help="a GGUF whose tokenizer.* keys to use")
    ap.add_argument("--drop", action="append", default=[], help="leave tensor NAME out")
    ap.add_argument("--rows", action="append", default=[], help="NAME:N keeps N rows of NAME")
    ap.add_argument("--key", action="append", default=[], help="KEY:u32|f32:VALUE")
    ap.add_argument("--no-key", action="append", default=[], help="leave key KEY out")
    a = ap.parse_args(argv)
    cfg, w = hfmodel.load_model(a.model_dir)
    gemma = cfg.get("model_type") in hfmodel.GEMMA_TYPES
    smollm3 = cfg.get("model_type") == "smollm3"
    granite = cfg.get("model_type") == "granite"
    if cfg.get("model_type") != "phi3" and not gemma and not smollm3 and not granite:
        raise SystemExit("only Phi3ForCausalLM, GemmaForCausalLM, Gemma2ForCausalLM, "
                         "Gemma3ForCausalLM, SmolLM3ForCausalLM and GraniteForCausalLM folders")
    if gemma or smollm3 or granite:
        if a.dequant_out:
            raise SystemExit("--dequant-out: phi3 folders only")
        kv, tensors = (gemma_layout(cfg, w) if gemma else granite_layout(cfg, w) if granite
                       else smollm3_layout(cfg, w))
        hf_name = {}
    else:
        nh = cfg["num_attention_heads"]
        nkv = cfg.get("num_key_value_heads") or nh
        hd = hfmodel.head_dim_of(cfg)
        max_pos = cfg["max_position_embeddings"]
        orig = cfg.get("original_max_position_embeddings", max_pos)
        theta, sc = hfmodel.rope_params(cfg)
        kv = [
            _kv("general.architecture", T_STR, "phi3"),
            _kv("general.name", T_STR, "tiny phi3 test model"),
            _kv("phi3.context_length", T_U32, max_pos),
            _kv("phi3.rope.scaling.original_context_length", T_U32, orig),
            _kv("phi3.embedding_length", T_U32, cfg["hidden_size"]),
            _kv("phi3.feed_forward_length", T_U32, cfg["intermediate_size"]),
            _kv("phi3.block_count", T_U32, cfg["num_hidden_layers"]),
            _kv("phi3.attention.head_count", T_U32, nh),
            _kv("phi3.attention.head_count_kv", T_U32, nkv),
            _kv("phi3.attention.layer_norm_rms_epsilon", T_F32, cfg["rms_norm_eps"]),
            _kv("phi3.rope.dimension_count", T_U32, hfmodel.rotary_dim(cfg, hd)),
            _kv("phi3.rope.freq_base", T_F32, theta),
            _kv("phi3.attention.sliding_window", T_U32, cfg.get("sliding_window") or 0),
        ]
        tensors = [("token_embd.weight", w["model.embed_tokens.weight"]),
                   ("output_norm.weight", w["model.norm.weight"])]
        if not cfg.get("tie_word_embeddings", False):  # tied (Phi-4-mini): no output.weight
            tensors.append(("output.weight", w["lm_head.weight"]))
        if sc is not None:
            if sc["rope_type"] not in ("longrope", "su"):
                raise SystemExit("rope_scaling %r: only longrope" % sc["rope_type"])
            scale = max_pos / orig
            attn = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
            kv.append(_kv("phi3.rope.scaling.attn_factor", T_F32, attn))
            tensors.append(("rope_factors_long.weight", np.asarray(sc["long_factor"])))
            tensors.append(("rope_factors_short.weight", np.asarray(sc["short_factor"])))
        for i in range(cfg["num_hidden_layers"]):
            p, b = "model.layers.%d." % i, "blk.%d." % i
            tensors += [(b + "attn_norm.weight", w[p + "input_layernorm.weight"]),
                        (b + "attn_qkv.weight", w[p + "self_attn.qkv_proj.weight"]),
                        (b + "attn_output.weight", w[p + "self_attn.o_proj.weight"]),
                        (b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"]),
                        (b + "ffn_up.weight", w[p + "mlp.gate_up_proj.weight"]),
                        (b + "ffn_down.weight", w[p + "mlp.down_proj.weight"])]
        hf_name = {"token_embd.weight": "model.embed_tokens.weight",
                   "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
        for i in range(cfg["num_hidden_layers"]):
            for g, h in (("attn_norm", "input_layernorm"), ("attn_qkv", "self_attn.qkv_proj"),
                         ("attn_output", "self_attn.o_proj"), ("ffn_norm", "post_attention_layernorm"),
                         ("ffn_up", "mlp.gate_up_proj"), ("ffn_down", "mlp.down_proj")):
                hf_name["blk.%d.%s.weight" % (i, g)] = "model.layers.%d.%s.weight" % (i, h)
    if a.vocab_from:
        kv += vocab_keys(a.vocab_from, tensors)
    else:
        kv += byte_bpe_keys(a.model_dir, cfg)
    # Tensor infos and data.
    rules = [r.split(":", 1) + [False] for r in a.quant]
    rules += [r.split(":", 1) + [True] for r in a.quant_flat]
    for qt, _, _ in rules:
        if qt not in ggml_quants.TYPES:
            raise SystemExit("--quant type %s: one of %s" % (qt, ", ".join(ggml_quants.TYPES)))
    decoded = {}
    infos, blobs, off = [], [], 0
    f32_infos, f32_blobs, f32_off = [], [], 0
    for e in a.key:
        key, typ, val = e.split(":")
        rec = _kv(key, T_U32 if typ == "u32" else T_F32, int(val) if typ == "u32" else float(val))
        kv = [r for r in kv if not r.startswith(_str(key))] + [rec]
    for key in a.no_key:
        kv = [r for r in kv if not r.startswith(_str(key))]
    cut = dict((r.split(":")[0], int(r.split(":")[1])) for r in a.rows)
    tensors = [(n_, arr[:cut[n_]] if n_ in cut else arr) for n_, arr in tensors if n_ not in a.drop]
    for name, arr in tensors:
        arr = np.asarray(arr, dtype=np.float32)
        gtype, raw = GGML_F32, arr.astype("<f4").tobytes()
        rule = [r for r in rules if r[1] in name and arr.ndim == 2][-1:]
        for qt, pat, flat in rule:
            blk = ggml_quants.TYPES[qt][1]
            if arr.shape[1] % blk and not flat:
                raise SystemExit("--quant %s:%s: rows of %s (%d) are not whole blocks of %d"
                                 % (qt, pat, name, arr.shape[1], blk))
            if qt == "Q8_0":
                gtype, raw = GGML_Q8_0, quantize_q8_0(arr)
            elif qt == "Q4_0":
                gtype, raw = GGML_Q4_0, quantize_q4_0(arr)
            else:
                gtype, raw = ggml_quants.TYPES[qt][0], ggml_quants.encode(arr, qt)
        value = arr if gtype == GGML_F32 else dequantize(raw, gtype, arr.shape)
        if name in hf_name:
            decoded[hf_name[name]] = value
        ne = list(reversed(arr.shape))

        def info(t, at):
            return (_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
                    + struct.pack("<IQ", t, at))
        infos.append(info(gtype, off))
        pad = (-len(raw)) % ALIGN
        blobs.append(raw + b"\0" * pad)
        off += len(raw) + pad
        if a.dequant_gguf:
            f32_infos.append(info(GGML_F32, f32_off))
            raw32 = value.astype("<f4").tobytes()
            f32_blobs.append(raw32 + b"\0" * ((-len(raw32)) % ALIGN))
            f32_off += len(f32_blobs[-1])
    write_gguf(a.out, kv, infos, blobs)
    if a.dequant_gguf:
        write_gguf(a.dequant_gguf, kv, f32_infos, f32_blobs)
    if a.dequant_out:
        os.makedirs(a.dequant_out, exist_ok=True)
        for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(a.model_dir, f), "rb") as src, \
                    open(os.path.join(a.dequant_out, f), "wb") as dst:
                dst.write(src.read())
        hfmodel.write_weights(a.dequant_out, decoded, "F32")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
