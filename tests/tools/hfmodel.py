#!/usr/bin/python3
"""Tiny random Hugging Face-format models and a NumPy reference forward pass.

Test tooling for slate (not part of the runtime). Run with /usr/bin/python3 (needs numpy only).

    hfmodel.py make --variant V --out DIR [--seed S] [--dtype F32|F16|BF16] [--shards N]
    hfmodel.py forward DIR --tokens 1,2,3 --out logits.f32 [--last] [--context N]
    hfmodel.py variants

`make` writes config.json, generation_config.json, model.safetensors (or N shards plus
model.safetensors.index.json), tokenizer.json and tokenizer_config.json. `forward` reads any such
folder (also the one llama2c_to_hf.py writes) and writes the logits of every position as raw
little-endian float32, row-major [n_tokens][vocab_size] (`--last`: only the last row).

Maths follows transformers' Llama / Mistral / Qwen2 / Qwen3 / Phi3 / Gemma / Gemma3 / SmolLM3
modelling code:
  - RMSNorm: x * 1/sqrt(mean(x^2) + eps) * w.
  - RoPE, "rotate_half" layout: dimension i of a head pairs with i + head_dim/2, angle
    pos * inv_freq[i], inv_freq[i] = theta^(-2i/head_dim); llama3 / linear rope_scaling modify
    inv_freq (see rope_inv_freq). Phi3's partial_rotary_factor p (Phi-4-mini: 0.75) rotates only
    the first d = int(head_dim * p) dims: pairs i and i + d/2 for i < d/2, inv_freq over d
    (theta^(-2i/d)), dims d..head_dim unchanged. Written as a complex product (rotary_dim,
    forward), not after transformers' rotate_half code.
  - Attention: scale 1/sqrt(head_dim); causal; GQA: query head h reads kv head
    h // (n_heads / n_kv_heads).
  - Sliding window (Mistral, and Qwen2/3 with use_sliding_window): query at position i sees key j
    iff 0 <= i - j < sliding_window, i.e. the last `sliding_window` positions including itself.
    This is transformers' masking_utils.sliding_window_overlay (`kv_idx > q_idx - sliding_window`)
    and the older `torch.tril(..., diagonal=-sliding_window)` mask, which agree.
  - Qwen3: q_norm / k_norm are RMSNorms over head_dim applied to every head before RoPE.
  - Qwen2: q/k/v have biases (any *_proj.bias present in the file is applied).
  - MLP: down(silu(gate(x)) * up(x)); final norm; lm_head, or embed_tokens when tied.
  - Phi3 (modeling_phi3): the checkpoint's fused self_attn.qkv_proj is applied as one matmul
    whose output is sliced q | k | v (q: heads*head_dim, k and v: kv_heads*head_dim), and
    mlp.gate_up_proj as one matmul chunked in two, gate first: down(up * silu(gate)). The
    sliding window applies to every layer, as Mistral's. rope_scaling "longrope" (or "su"):
    inv_freq[i] = 1 / (ext[i] * theta^(2i/d)) with ext the long_factor list when the context is
    above original_max_position_embeddings, else short_factor (one factor per rotated pair),
    and cos/sin multiplied by the attention factor (rope_inv_freq): only the rotated dims of q
    and k are scaled by it. transformers picks the list per call from the sequence
    length; this reference, like llama.cpp and slate, picks it once from the context the model
    is converted for (--context, default max_position_embeddings), so the two agree whenever
    sequence and context lie on the same side of the original context.
  - Gemma (modeling_gemma) and Gemma 3 text (modeling_gemma3, model_type gemma3_text): the
    embedding output is multiplied by sqrt(hidden_size) (HF: a tensor of the model's dtype,
    float32 here); every RMSNorm computes x / rms(x) * (1 + w) with w as stored; the MLP is
    down(gelu_tanh(gate(x)) * up(x)), gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715
    a^3))) (hidden_activation "gelu_pytorch_tanh"; absent, Gemma uses it whatever hidden_act
    says); the head is embed_tokens (unscaled) unless lm_head is stored. Gemma 3 adds q_norm /
    k_norm (as Qwen3, with 1 + w), post_attention_layernorm on the attention output and
    post_feedforward_layernorm on the MLP output before each residual add (the MLP's input norm
    is pre_feedforward_layernorm), attention scale query_pre_attn_scalar^-0.5, and two layer
    kinds: layer_types when given, else layer i is "full_attention" when (i + 1) %
    sliding_window_pattern == 0 and "sliding_attention" otherwise. Sliding layers see the last
    sliding_window positions (as Mistral) and rotate with base rope_local_base_freq, unscaled;
    full layers see everything and rotate with rope_theta and rope_scaling.
  - SmolLM3 (modeling_smollm3, model_type smollm3): Llama's layer, except that a "NoPE" layer
    (no_rope_layers[i] == 0; without the list, (i + 1) % no_rope_layer_interval == 0) applies no
    rotation to q and k at all (smollm3_uses_rope); tie_word_embeddings and rope_theta default
    to SmolLM3Config's true and 2e6. With LongRoPE the attention factor thus scales only the
    rotated layers' q and k.
  - Gemma 2 (modeling_gemma2, model_type gemma2): Gemma 3's layer without q_norm / k_norm, one
    rotation (rope_theta) for every layer, layer i sliding when layer_types says so, else when
    i is even; and two soft-caps, cap * tanh(x / cap): attn_logit_softcapping on the scores
    after the scale and before the mask (eager_attention_forward), final_logit_softcapping on
    the logits. Absent, they are Gemma2Config's 50 and 30; null turns one off.
  - Granite (modeling_granite, model_type granite): Llama's layer with four multipliers, each
    1.0 when absent (GraniteConfig): the embedding output times embedding_multiplier; the
    attention scores scaled by attention_multiplier instead of 1 / sqrt(head_dim); the attention
    and MLP outputs times residual_multiplier before each residual add; the logits divided by
    logits_scaling. tie_word_embeddings defaults to false.
Precision: weights are upcast to float64 and the whole forward runs in float64 (transformers
runs a float32 model in float32; the difference is ~1e-6 relative). The output is rounded to
float32. F16/BF16 files are read exactly as stored (the reference sees the rounded weights).
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

# ----------------------------------------------------------------------------------------------
# safetensors (written by hand: u64 LE header length, JSON header, raw little-endian data)

_ST_DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2), "F64": ("<f8", 8)}


def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bits, round to nearest even (as torch .to(bfloat16))."""
    u = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2")


def bf16_bits_to_f32(b):
    return (b.astype("<u4") << 16).view("<f4")


def encode_tensor(a, dtype):
    """float array -> bytes in safetensors dtype."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    if dtype == "BF16":
        return f32_to_bf16_bits(a).tobytes()
    if dtype == "F64":
        return a.astype("<f8").tobytes()
    raise ValueError("unsupported dtype " + dtype)


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """tensors: dict name -> float array (or (array, dtype) to override). Sorted by name."""
    header = {"__metadata__": dict(metadata or {"format": "pt"})}
    blobs = []
    off = 0
    for name in sorted(tensors):
        val = tensors[name]
        dt = dtype
        if isinstance(val, tuple):
            val, dt = val
        arr = np.asarray(val)
        raw = encode_tensor(arr, dt)
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return off


def read_safetensors(path):
    """-> dict name -> float32 numpy array (F16/BF16 upcast exactly), dict metadata."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    meta = header.pop("__metadata__", {})
    for name, info in header.items():
        npdt, size = _ST_DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        if e - b != count * size:
            raise ValueError("%s: %s has %d bytes, expected %d" % (path, name, e - b, count * size))
        arr = np.frombuffer(data, dtype=npdt, count=count, offset=base + b)
        if info["dtype"] == "BF16":
            arr = bf16_bits_to_f32(arr)
        out[name] = arr.astype(np.float32).reshape(info["shape"])
    return out, meta


def write_weights(out_dir, tensors, dtype="F32", shards=1):
    """Writes model.safetensors, or model-0000i-of-0000n.safetensors + index when shards > 1."""
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, dtype)
        return
    names = sorted(tensors)
    nbytes = {k: len(encode_tensor(np.zeros(1), dtype)) * int(np.asarray(tensors[k]).size)
              for k in names}
    total = sum(nbytes.values())
    groups = [[] for _ in range(shards)]
    acc = 0
    for k in names:  # contiguous split by cumulative size; every shard gets at least one tensor
        idx = min(shards - 1, acc * shards // total)
        groups[idx].append(k)
        acc += nbytes[k]
    for i in range(shards):
        if not groups[i]:
            raise ValueError("too many shards for %d tensors" % len(names))
    weight_map = {}
    for i, g in enumerate(groups):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        write_safetensors(os.path.join(out_dir, fname), {k: tensors[k] for k in g}, dtype)
        for k in g:
            weight_map[k] = fname
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    write_json(os.path.join(out_dir, "model.safetensors.index.json"), index)


def load_weights(model_dir):
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx, encoding="utf-8") as f:
            wm = json.load(f)["weight_map"]
        out = {}
        for fname in sorted(set(wm.values())):
            t, _ = read_safetensors(os.path.join(model_dir, fname))
            out.update(t)
        missing = set(wm) - set(out)
        if missing:
            raise ValueError("index names tensors missing from shards: %s" % sorted(missing)[:5])
        return out
    t, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    return t


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------
# Byte-level BPE tokenizer (GPT-2 style) for the random variants

def bytes_to_unicode():
    """GPT-2's byte -> printable unicode char map; returns list of (byte, char) in GPT-2 id order."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


# The first 48 merges of OpenAI GPT-2's vocab.bpe (MIT); "\u0120" is GPT-2's char for byte 0x20.
_GPT2_MERGES = (
    "\u0120 t|\u0120 a|h e|i n|r e|o n|\u0120t he|e r|\u0120 s|a t|\u0120 w|\u0120 o|e n|"
    "\u0120 c|i t|i s|a n|o r|e s|\u0120 b|e d|\u0120 f|in g|\u0120 p|o u|\u0120a n|a l|a r|"
    "\u0120t o|\u0120 m|\u0120o f|\u0120 in|\u0120 d|\u0120 h|\u0120an d|i c|a s|l e|\u0120t h|"
    "i on|o m|l l|en t|\u0120 n|\u0120 l|s t|\u0120 re|v e"
).split("|")

BYTE_BPE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def byte_bpe_vocab():
    """-> (vocab dict token->id, merges list of "a b", specials dict content->id)."""
    vocab = {}
    for i, (_, ch) in enumerate(bytes_to_unicode()):
        vocab[ch] = i
    merges = []
    for m in _GPT2_MERGES:
        a, b = m.split(" ")
        if a not in vocab or b not in vocab or (a + b) in vocab:
            raise AssertionError("bad merge " + m)
        vocab[a + b] = len(vocab)
        merges.append(m)
    specials = {}
    for s in BYTE_BPE_SPECIALS:
        specials[s] = len(vocab) + len(specials)
    return vocab, merges, specials


def _added_token(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def write_byte_bpe_tokenizer(out_dir, merges_format="str", template=CHATML_TEMPLATE):
    """tokenizer.json + tokenizer_config.json; returns (n_tokens, specials)."""
    vocab, merges, specials = byte_bpe_vocab()
    if merges_format == "pairs":
        merges = [m.split(" ") for m in merges]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added_token(i, s) for s, i in specials.items()],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": merges},
    }
    write_json(os.path.join(out_dir, "tokenizer.json"), tok)
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(i): {k: v for k, v in _added_token(i, s).items() if k != "id"}
                                 for s, i in specials.items()},
        "bos_token": None,
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "chat_template": template,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 256,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    write_json(os.path.join(out_dir, "tokenizer_config.json"), cfg)
    return len(vocab) + len(specials), specials


# ----------------------------------------------------------------------------------------------
# Variants

N_BYTE_BPE_TOKENS = 256 + len(_GPT2_MERGES) + len(BYTE_BPE_SPECIALS)  # 307
VOCAB_SIZE = 320  # > tokenizer size: rows 307..319 are padding, as in many HF checkpoints
EOT_ID = 256 + len(_GPT2_MERGES)  # "<|endoftext|>"


def _base(arch, model_type, **kw):
    cfg = {
        "architectures": [arch],
        "model_type": model_type,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_act": "silu",
        "max_position_embeddings": 256,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_dropout": 0.0,
        "vocab_size": VOCAB_SIZE,
        "tie_word_embeddings": False,
        "bos_token_id": EOT_ID,
        "eos_token_id": EOT_ID,
        "use_cache": True,
        "torch_dtype": "float32",
        "transformers_version": "4.46.0",
    }
    cfg.update(kw)
    return cfg


GEMMA_TYPES = ("gemma", "gemma2", "gemma3_text")
GEMMA_POST_NORMS = ("gemma2", "gemma3_text")  # four norms per layer
# Gemma's chat template (google/gemma-7b-it's tokenizer_config.json, Gemma 1; Gemma 2 and 3 render
# the same turns): what slate's template detection must recognise as the gemma family.
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
    "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")


def _gemma(arch, model_type, **kw):
    """Gemma-shaped: head_dim 32 != hidden / heads (16), tie_word_embeddings left out (Gemma's
    configs default it to true), rms_norm_eps 1e-6."""
    extra = {"head_dim": 32, "rms_norm_eps": 1e-6, "attention_bias": False, "pad_token_id": 0}
    extra.update(kw)
    cfg = _base(arch, model_type, **extra)
    del cfg["tie_word_embeddings"]
    del cfg["hidden_act"]
    for k, v in kw.items():
        cfg[k] = v
    return cfg


def _llama(**kw):
    extra = {"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1}
    extra.update(kw)
    return _base("LlamaForCausalLM", "llama", **extra)


def _granite(**kw):
    """GraniteForCausalLM with granite-3.1-2b-instruct's config.json keys (scaled down); kw
    overrides, a None value removes the key (GraniteConfig's default 1.0 then applies)."""
    extra = {"attention_bias": False, "mlp_bias": False, "pad_token_id": EOT_ID,
             "rms_norm_eps": 1e-5, "rope_theta": 5000000.0, "tie_word_embeddings": True,
             "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
             "attention_multiplier": 0.015625, "logits_scaling": 8.0}
    extra.update(kw)
    cfg = _base("GraniteForCausalLM", "granite", **extra)
    return {k: v for k, v in cfg.items() if v is not None or k not in kw}


def _smollm3(**kw):
    """SmolLM3ForCausalLM with its config.json keys; kw overrides (None values are written as
    null)."""
    extra = {"attention_bias": False, "mlp_bias": False, "pretraining_tp": 2,
             "no_rope_layer_interval": 4, "use_sliding_window": False, "sliding_window": None,
             "layer_types": ["full_attention"] * 4, "max_window_layers": 28,
             "pad_token_id": EOT_ID, "rms_norm_eps": 1e-6}
    extra.update(kw)
    cfg = _base("SmolLM3ForCausalLM", "smollm3", **extra)
    if "tie_word_embeddings" not in kw:
        del cfg["tie_word_embeddings"]
    return cfg


VARIANTS = {
    # Llama-2 style: no head_dim in config (derived hidden/heads = 16), GQA 4/2, untied.
    "llama": lambda: _llama(),
    "llama-tied": lambda: _llama(tie_word_embeddings=True),
    # Llama 3.1 style rope scaling. With head_dim 16 and theta 5e5 the wavelengths 2*pi/inv_freq
    # are 6.3, 32.6, 167, ... : i=0 is below high_freq_wavelen (64/4 = 16, unchanged), i=1 is in
    # [16, 64] (smoothed), i>=2 are above low_freq_wavelen (64/1, divided by factor 8).
    "llama3-rope": lambda: _llama(
        head_dim=16, rope_theta=500000.0,
        rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64, "rope_type": "llama3"}),
    "qwen2": lambda: _base(
        "Qwen2ForCausalLM", "qwen2", rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=True, use_sliding_window=False, sliding_window=None,
        max_window_layers=4),
    # head_dim 32 != hidden / heads (16): q is [128, 64], o is [64, 128].
    "qwen3": lambda: _base(
        "Qwen3ForCausalLM", "qwen3", head_dim=32, rms_norm_eps=1e-6, rope_theta=1000000.0,
        attention_bias=False, tie_word_embeddings=False, use_sliding_window=False,
        sliding_window=None, max_window_layers=4),
    "mistral": lambda: _base("MistralForCausalLM", "mistral", head_dim=16, sliding_window=8),
    # Phi-3-mini-4k shaped (fused qkv_proj / gate_up_proj, no head_dim key, a sliding window),
    # with GQA 4/2 as Phi-3-medium; window 8 so the test sequence crosses it.
    "phi3": lambda: _base("Phi3ForCausalLM", "phi3", sliding_window=8,
                          original_max_position_embeddings=256, resid_pdrop=0.0,
                          embd_pdrop=0.0, pad_token_id=EOT_ID),
    # Phi-3-mini-128k shaped LongRoPE: original context 64 < max 256, so the default context
    # takes long_factor and attention factor sqrt(1 + ln 4 / ln 64); a window larger than the
    # context (as Phi-3-mini-128k's 262144) and the original context at the top level.
    "phi3-longrope": lambda: _base(
        "Phi3ForCausalLM", "phi3", sliding_window=262144, original_max_position_embeddings=64,
        rope_scaling={"type": "longrope",
                      "short_factor": [1.0, 1.02, 1.05, 1.1, 1.3, 1.6, 2.0, 2.5],
                      "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 12.0, 16.0]},
        resid_pdrop=0.0, embd_pdrop=0.0, pad_token_id=EOT_ID),
    # Gemma 1 (gemma-2b shaped: multi-query, hidden_act "gelu" which modeling_gemma ignores for
    # the tanh GELU, no hidden_activation key).
    "gemma": lambda: _gemma("GemmaForCausalLM", "gemma", num_key_value_heads=1,
                            hidden_act="gelu"),
    # Gemma 2 (gemma-2-2b shaped: GQA, query_pre_attn_scalar, alternate sliding layers from
    # layer 0), with small caps so that both bend the test's scores and logits (selftest.py
    # shows each changes the logits), a window of 6 that the test sequence crosses, and
    # query_pre_attn_scalar 24 != head_dim.
    "gemma2": lambda: _gemma(
        "Gemma2ForCausalLM", "gemma2", hidden_activation="gelu_pytorch_tanh",
        query_pre_attn_scalar=24, sliding_window=6, rope_theta=10000.0,
        attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
        cache_implementation="hybrid"),
    # Gemma 2 with layer_types (layers 1 and 2 slide), no final cap (null), the attention cap
    # left out (Gemma2Config's 50), lm_head stored (untied).
    "gemma2-types": lambda: _gemma(
        "Gemma2ForCausalLM", "gemma2", hidden_activation="gelu_pytorch_tanh",
        query_pre_attn_scalar=32, sliding_window=5,
        layer_types=["full_attention", "sliding_attention", "sliding_attention",
                     "full_attention"],
        final_logit_softcapping=None, tie_word_embeddings=False),
    # Gemma 3 text (gemma-3-4b shaped rope: linear factor 8 on the global layers only): pattern
    # 2 so layers 0 and 2 slide and 1 and 3 are global, a window of 6 that the test sequence
    # crosses, GQA 4/2, query_pre_attn_scalar 24 so the scale differs from 1/sqrt(head_dim).
    "gemma3": lambda: _gemma(
        "Gemma3ForCausalLM", "gemma3_text", hidden_activation="gelu_pytorch_tanh",
        query_pre_attn_scalar=24, sliding_window=6, sliding_window_pattern=2,
        rope_theta=1000000.0, rope_local_base_freq=10000.0,
        rope_scaling={"rope_type": "linear", "factor": 8.0}, attn_logit_softcapping=None,
        final_logit_softcapping=None, cache_implementation="hybrid"),
    # Gemma 3 with the newer layer_types list (which wins over the pattern), gemma-3-1b's null
    # rope_scaling, and lm_head stored (untied).
    "gemma3-types": lambda: _gemma(
        "Gemma3ForCausalLM", "gemma3_text", hidden_activation="gelu_pytorch_tanh",
        query_pre_attn_scalar=32, sliding_window=5, sliding_window_pattern=6,
        layer_types=["sliding_attention", "full_attention", "full_attention",
                     "sliding_attention"],
        rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling=None,
        tie_word_embeddings=False),
    # Gemma 3 as llama.cpp's GGUF gemma3 can express it (test_gemma_gguf.sh): 6 layers with the
    # pattern 6 (layer 5 global), query_pre_attn_scalar = head_dim, local base 10000; ffn 64 keeps
    # the folder under 1 MiB.
    "gemma3-6l": lambda: _gemma(
        "Gemma3ForCausalLM", "gemma3_text", hidden_activation="gelu_pytorch_tanh",
        num_hidden_layers=6, intermediate_size=64, query_pre_attn_scalar=32, sliding_window=6,
        sliding_window_pattern=6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
        rope_scaling={"rope_type": "linear", "factor": 8.0}),
    # Phi-4-mini shaped: partial_rotary_factor 0.75 (12 of each 16-dim head rotated, so 6
    # LongRoPE factors per list), LongRoPE with the original context 64 < max 256 (long_factor
    # and attention factor sqrt(1 + ln 4 / ln 64) by default, short_factor at --context 64), tied
    # embeddings, GQA 6/2 (3 query heads per kv head, as Phi-4-mini's 24/8), a window larger
    # than the context, hidden 96. ffn 96 (not Phi-4-mini's 2.67 x hidden) keeps the folder
    # under 1 MiB (977821 bytes; ffn 160 made it 1268654).
    "phi4-mini": lambda: _base(
        "Phi3ForCausalLM", "phi3", hidden_size=96, intermediate_size=96,
        num_attention_heads=6, num_key_value_heads=2, partial_rotary_factor=0.75,
        tie_word_embeddings=True, sliding_window=262144, original_max_position_embeddings=64,
        rope_scaling={"type": "longrope",
                      "short_factor": [1.0, 1.1, 1.25, 1.5, 2.0, 3.0],
                      "long_factor": [1.0, 2.0, 4.0, 7.0, 11.0, 16.0]},
        resid_pdrop=0.0, embd_pdrop=0.0, pad_token_id=EOT_ID),
    # SmolLM3-3B shaped (config.json of HuggingFaceTB/SmolLM3-3B, scaled down): layer 3 is
    # NoPE by no_rope_layers (as the default no_rope_layer_interval 4 gives, so llama.cpp's
    # fixed rule writes the same model to GGUF), GQA 4/2, tied (tie_word_embeddings left out:
    # SmolLM3Config's default is true), theta 5e6 as the 3B, every layer "full_attention".
    "smollm3": lambda: _smollm3(no_rope_layers=[1, 1, 1, 0], rope_theta=5000000.0),
    # NoPE on layers 0 and 2 (the first layer unrotated), no_rope_layers one entry longer than
    # the layers (the extra one unused, as in transformers), untied, no layer_types key.
    "smollm3-list": lambda: _smollm3(no_rope_layers=[0, 1, 0, 1, 1], tie_word_embeddings=False,
                                     layer_types=None),
    # LongRoPE on the rotated layers only: the attention factor scales their q and k, not the
    # NoPE layer's (layer 1 here, by no_rope_layer_interval 2 with no list: layers 1 and 3).
    "smollm3-longrope": lambda: _smollm3(
        no_rope_layers=None, no_rope_layer_interval=2,
        rope_scaling={"rope_type": "longrope", "original_max_position_embeddings": 64,
                      "short_factor": [1.0, 1.02, 1.05, 1.1, 1.3, 1.6, 2.0, 2.5],
                      "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 12.0, 16.0]}),
    # granite-3.1-2b-instruct shaped (tied, theta 5e6, GQA 4/2) with its multipliers far from 1
    # (12, 0.22, 1/64, 8): dropping any one of them moves every logit.
    "granite": lambda: _granite(),
    # No multiplier keys: GraniteConfig's defaults of 1.0, so the attention scale is 1 (not
    # 1 / sqrt(head_dim)); untied.
    "granite-defaults": lambda: _granite(embedding_multiplier=None, residual_multiplier=None,
                                         attention_multiplier=None, logits_scaling=None,
                                         tie_word_embeddings=False),
    # SmolLM2-shaped: odd head count (3), multi-query (1 kv head), tied, theta 1e5.
    "smollm": lambda: _llama(hidden_size=48, intermediate_size=128, num_hidden_layers=3,
                             num_attention_heads=3, num_key_value_heads=1, head_dim=16,
                             rope_theta=100000.0, tie_word_embeddings=True),
}


def head_dim_of(cfg):
    hd = cfg.get("head_dim")
    return int(hd) if hd else cfg["hidden_size"] // cfg["num_attention_heads"]


def tensor_shapes(cfg):
    """HF tensor names -> shapes ([out, in] for linears) for a config."""
    h = cfg["hidden_size"]
    ff = cfg["intermediate_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = head_dim_of(cfg)
    mt = cfg["model_type"]
    shapes = {"model.embed_tokens.weight": (cfg["vocab_size"], h), "model.norm.weight": (h,)}
    if not cfg.get("tie_word_embeddings", mt in GEMMA_TYPES or mt == "smollm3"):
        shapes["lm_head.weight"] = (cfg["vocab_size"], h)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        if mt == "phi3":  # fused, as Phi-3 checkpoints store them
            shapes[p + "self_attn.qkv_proj.weight"] = ((nh + 2 * nkv) * hd, h)
            shapes[p + "self_attn.o_proj.weight"] = (h, nh * hd)
            shapes[p + "mlp.gate_up_proj.weight"] = (2 * ff, h)
            shapes[p + "mlp.down_proj.weight"] = (h, ff)
            continue
        shapes[p + "self_attn.q_proj.weight"] = (nh * hd, h)
        shapes[p + "self_attn.k_proj.weight"] = (nkv * hd, h)
        shapes[p + "self_attn.v_proj.weight"] = (nkv * hd, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, nh * hd)
        if mt == "qwen2":
            shapes[p + "self_attn.q_proj.bias"] = (nh * hd,)
            shapes[p + "self_attn.k_proj.bias"] = (nkv * hd,)
            shapes[p + "self_attn.v_proj.bias"] = (nkv * hd,)
        if mt in ("qwen3", "gemma3_text"):
            shapes[p + "self_attn.q_norm.weight"] = (hd,)
            shapes[p + "self_attn.k_norm.weight"] = (hd,)
        if mt in GEMMA_POST_NORMS:
            shapes[p + "pre_feedforward_layernorm.weight"] = (h,)
            shapes[p + "post_feedforward_layernorm.weight"] = (h,)
        shapes[p + "mlp.gate_proj.weight"] = (ff, h)
        shapes[p + "mlp.up_proj.weight"] = (ff, h)
        shapes[p + "mlp.down_proj.weight"] = (h, ff)
    return shapes


def random_tensors(cfg, seed):
    """Deterministic random weights: linears N(0, 0.15), embeddings N(0, 0.5), biases N(0, 0.1),
    norm weights 1 + N(0, 0.1) (Gemma: N(0, 0.1), the stored w of its 1 + w). Names are drawn in
    sorted order from one seeded generator."""
    rng = np.random.default_rng(seed)
    out = {}
    norm_base = 0.0 if cfg["model_type"] in GEMMA_TYPES else 1.0
    for name, shape in sorted(tensor_shapes(cfg).items()):
        if name.endswith("norm.weight"):
            a = norm_base + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            a = 0.1 * rng.standard_normal(shape)
        elif name == "model.embed_tokens.weight":
            a = 0.5 * rng.standard_normal(shape)
        else:
            a = 0.15 * rng.standard_normal(shape)
        out[name] = a.astype(np.float32)
    return out


_TORCH_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def make_model(variant, out_dir, seed=0, dtype="F32", shards=1, merges_format="str",
               overrides=None):
    if variant not in VARIANTS:
        raise ValueError("unknown variant %r (have: %s)" % (variant, ", ".join(VARIANTS)))
    cfg = VARIANTS[variant]()
    cfg.update(overrides or {})
    cfg["torch_dtype"] = _TORCH_DTYPE[dtype]
    os.makedirs(out_dir, exist_ok=True)
    gemma = cfg["model_type"] in GEMMA_TYPES
    n_tok, _ = write_byte_bpe_tokenizer(out_dir, merges_format,
                                        GEMMA_TEMPLATE if gemma else CHATML_TEMPLATE)
    assert cfg["vocab_size"] >= n_tok
    write_json(os.path.join(out_dir, "config.json"), cfg)
    write_json(os.path.join(out_dir, "generation_config.json"),
               {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
                "transformers_version": cfg["transformers_version"]})
    write_weights(out_dir, random_tensors(cfg, seed), dtype, shards)
    return cfg


# ----------------------------------------------------------------------------------------------
# Reference forward pass

def rope_params(cfg):
    """(theta, scaling dict or None) from rope_theta/rope_scaling or the newer rope_parameters."""
    rp = cfg.get("rope_parameters")
    dflt = 2000000.0 if cfg.get("model_type") == "smollm3" else 10000.0  # SmolLM3Config's 2e6
    if rp:
        theta = rp.get("rope_theta", cfg.get("rope_theta", dflt))
        sc = dict(rp)
    else:
        theta = cfg.get("rope_theta", dflt)
        sc = dict(cfg["rope_scaling"]) if cfg.get("rope_scaling") else None
    if sc is not None:
        rt = sc.get("rope_type", sc.get("type", "default"))
        sc["rope_type"] = rt
        if rt == "default":
            sc = None
    return float(theta), sc


def longrope(cfg, scaling, context):
    """(ext factors, attention factor) of LongRoPE as transformers'
    _compute_longrope_parameters: original context from rope_scaling or the config's top level;
    factor = max_position_embeddings / original; attention factor given, else
    sqrt(1 + ln(factor) / ln(original)) when factor > 1. The list: long_factor iff the context
    (default max_position_embeddings) exceeds the original context."""
    max_pos = cfg.get("max_position_embeddings", 2048)
    orig = scaling.get("original_max_position_embeddings") or \
        cfg.get("original_max_position_embeddings")
    if orig:
        factor = max_pos / orig
    else:
        orig, factor = max_pos, scaling.get("factor") or 1.0
    attn = scaling.get("attention_factor")
    if attn is None:
        attn = math.sqrt(1 + math.log(factor) / math.log(orig)) if factor > 1.0 else 1.0
    ctx = context or max_pos
    ext = scaling["long_factor"] if ctx > orig else scaling["short_factor"]
    return np.asarray(ext, dtype=np.float64), float(attn)


def rope_inv_freq(head_dim, theta, scaling=None, ext=None):
    """inv_freq[i] = theta^(-2i/d), i < d/2, then rope scaling as transformers'
    modeling_rope_utils: llama3 = _compute_llama3_parameters, linear = inv_freq / factor,
    longrope = inv_freq / ext (ext from longrope())."""
    inv = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    if scaling is None:
        return inv
    rt = scaling["rope_type"]
    if rt == "linear":
        return inv / float(scaling["factor"])
    if rt in ("longrope", "su"):
        return inv / ext
    if rt != "llama3":
        raise ValueError("rope_type %r not supported by the reference" % rt)
    factor = float(scaling["factor"])
    lo = float(scaling["low_freq_factor"])
    hi = float(scaling["high_freq_factor"])
    old_ctx = float(scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_ctx / lo
    high_freq_wavelen = old_ctx / hi
    wavelen = 2.0 * math.pi / inv
    inv_l = np.where(wavelen > low_freq_wavelen, inv / factor, inv)
    smooth = (old_ctx / wavelen - lo) / (hi - lo)
    smoothed = (1.0 - smooth) * inv_l / factor + smooth * inv_l
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(medium, smoothed, inv_l)


def rotary_dim(cfg, head_dim):
    """Rotated dims per head: int(head_dim * partial_rotary_factor) (Phi3's top-level key, or
    rope_parameters' in transformers 5 configs), the whole head without one; must be even."""
    prf = (cfg.get("rope_parameters") or {}).get("partial_rotary_factor",
                                                 cfg.get("partial_rotary_factor"))
    if prf is None:
        return head_dim
    if cfg.get("model_type") != "phi3" and prf != 1.0:
        raise ValueError("partial_rotary_factor is applied by Phi3 only")
    rd = int(head_dim * prf)
    if rd < 2 or rd % 2:
        raise ValueError("partial_rotary_factor %r of head_dim %d: %d rotated dims"
                         % (prf, head_dim, rd))
    return rd


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def sliding_window_of(cfg, layer):
    """Window (in positions, including the query itself) for a layer, or None for full causal."""
    mt = cfg.get("model_type")
    sw = cfg.get("sliding_window")
    if not sw:
        return None
    if mt in ("mistral", "phi3"):
        return int(sw)
    if mt in GEMMA_POST_NORMS:
        return int(sw) if gemma3_sliding(cfg, layer) else None
    if mt in ("qwen2", "qwen3"):
        if not cfg.get("use_sliding_window", False):
            return None
        lt = cfg.get("layer_types")
        if lt:
            return int(sw) if lt[layer] == "sliding_attention" else None
        return int(sw) if layer >= cfg.get("max_window_layers", 0) else None
    return None


def gemma3_sliding(cfg, layer):
    """Gemma 2 / 3: is layer a "sliding_attention" layer (layer_types, else Gemma 2's even
    layers or Gemma 3's pattern)?"""
    lt = cfg.get("layer_types")
    if lt:
        return lt[layer] == "sliding_attention"
    if cfg.get("model_type") == "gemma2":
        return layer % 2 == 0
    return (layer + 1) % cfg.get("sliding_window_pattern", 6) != 0


def smollm3_uses_rope(cfg, layer):
    """SmolLM3 (configuration_smollm3): no_rope_layers[layer] (1: RoPE, 0: NoPE), or without the
    list (absent or null) RoPE unless (layer + 1) % no_rope_layer_interval == 0 (default 4).
    Sliding layers (layer_types, or use_sliding_window with a window on the NoPE layers) are not
    modelled here: refused."""
    nr = cfg.get("no_rope_layers")
    use = (bool(nr[layer]) if nr is not None
           else (layer + 1) % cfg.get("no_rope_layer_interval", 4) != 0)
    lt = cfg.get("layer_types")
    sliding = (lt[layer] == "sliding_attention" if lt else
               cfg.get("use_sliding_window", False) and cfg.get("sliding_window") is not None
               and not use)
    if sliding:
        raise ValueError("SmolLM3 sliding-window layers are not supported by the reference")
    if cfg.get("mlp_bias") or cfg.get("attention_bias"):
        raise ValueError("SmolLM3 biases are not supported by the reference")
    return use


def gelu_tanh(a):
    """PyTorch's gelu(approximate="tanh")."""
    return 0.5 * a * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a ** 3)))


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    w = {k: v.astype(np.float64) for k, v in load_weights(model_dir).items()}
    return cfg, w


def forward(model, tokens, context=None):
    """model: folder path or (cfg, weights). tokens: list of ids at positions 0..n-1. context:
    the converted context (LongRoPE's choice of list; default max_position_embeddings).
    Returns float32 logits [n, vocab_size]."""
    cfg, w = load_model(model) if isinstance(model, str) else model
    mt = cfg.get("model_type")
    if mt not in ("llama", "mistral", "qwen2", "qwen3", "phi3", "smollm3", "granite") + GEMMA_TYPES:
        raise ValueError("model_type %r not supported by the reference" % mt)
    gemma, gemma3 = mt in GEMMA_TYPES, mt == "gemma3_text"
    post = mt in GEMMA_POST_NORMS  # Gemma 2 / 3's four norms and query_pre_attn_scalar
    # Gemma 2's caps: absent, Gemma2Config's defaults; null, none (Gemma 3: none unless set).
    # transformers reads the keys only in Gemma 2 and 3's modeling code: on any other
    # model_type they are ignored, so a stray key must not cap the reference's scores either.
    capped = mt in ("gemma2", "gemma3_text")
    attn_cap = cfg.get("attn_logit_softcapping", 50.0 if mt == "gemma2" else None) if capped else None
    final_cap = cfg.get("final_logit_softcapping", 30.0 if mt == "gemma2" else None) if capped else None
    if gemma and cfg.get("hidden_activation", "gelu_pytorch_tanh") not in (None,
                                                                             "gelu_pytorch_tanh"):
        raise ValueError("hidden_activation %r not supported by the reference"
                         % cfg["hidden_activation"])
    h_dim = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or 256 if gemma else head_dim_of(cfg)
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    group = nh // nkv
    tokens = np.asarray(tokens, dtype=np.int64)
    n = len(tokens)
    emb = w["model.embed_tokens.weight"]
    if tokens.min() < 0 or tokens.max() >= emb.shape[0]:
        raise ValueError("token id out of range [0, %d)" % emb.shape[0])
    tied = cfg.get("tie_word_embeddings", gemma or mt == "smollm3")
    if "lm_head.weight" in w and not tied:
        head = w["lm_head.weight"]
    elif tied:
        head = emb
    else:
        raise ValueError("no lm_head.weight and tie_word_embeddings is false")

    theta, scaling = rope_params(cfg)
    rd = rotary_dim(cfg, hd)
    ext, attn_factor = None, 1.0
    if scaling is not None and scaling["rope_type"] in ("longrope", "su"):
        ext, attn_factor = longrope(cfg, scaling, context)
        if len(ext) != rd // 2:
            raise ValueError("LongRoPE lists have %d factors, expected rotary_dim / 2 = %d"
                             % (len(ext), rd // 2))
    inv = rope_inv_freq(rd, theta, scaling, ext)
    # Rotation as complex multiplication: pair i of the rotated part (dims i and i + rd/2) is
    # z = x[i] + 1j * x[i + rd/2], turned by pos * inv[i] and scaled by the attention factor;
    # dims rd..hd pass through unchanged.
    turn = attn_factor * np.exp(1j * np.arange(n, dtype=np.float64)[:, None] * inv[None, :])
    turn = turn[:, None, :]  # [n, 1, rd/2]
    turn_l = None
    if gemma3:  # the sliding layers' rotation: local base, no scaling
        inv_l = rope_inv_freq(rd, float(cfg.get("rope_local_base_freq", 10000.0)))
        turn_l = np.exp(1j * np.arange(n, dtype=np.float64)[:, None] * inv_l[None, :])[:, None, :]

    def rope(t, tn):  # t: [n, heads, hd]; tn: turn or turn_l
        z = (t[..., :rd // 2] + 1j * t[..., rd // 2:rd]) * tn
        return np.concatenate([z.real, z.imag, t[..., rd:]], axis=-1)
    qi = np.arange(n)[:, None]
    kj = np.arange(n)[None, :]
    scale = float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5 if post else 1.0 / math.sqrt(hd)
    granite = mt == "granite"  # GraniteConfig's four multipliers, 1.0 when absent
    if granite:
        scale = float(cfg.get("attention_multiplier", 1.0))
    resid = float(cfg.get("residual_multiplier", 1.0)) if granite else 1.0

    def norm(x, name):  # Gemma: x / rms(x) * (1 + w)
        return rms_norm(x, w[name] + 1.0 if gemma else w[name], eps)

    def lin(x, name):
        y = x @ w[name + ".weight"].T
        b = w.get(name + ".bias")
        return y + b if b is not None else y

    x = emb[tokens]
    if gemma:
        x = x * float(np.float32(math.sqrt(h_dim)))
    if granite:
        x = x * float(cfg.get("embedding_multiplier", 1.0))
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        hs = norm(x, p + "input_layernorm.weight")
        if p + "self_attn.qkv_proj.weight" in w:  # Phi3: one matmul, sliced q | k | v
            qkv = lin(hs, p + "self_attn.qkv_proj")
            q = qkv[:, :nh * hd].reshape(n, nh, hd)
            k = qkv[:, nh * hd:(nh + nkv) * hd].reshape(n, nkv, hd)
            v = qkv[:, (nh + nkv) * hd:].reshape(n, nkv, hd)
            if qkv.shape[1] != (nh + 2 * nkv) * hd:
                raise ValueError("qkv_proj has %d rows" % qkv.shape[1])
        else:
            q = lin(hs, p + "self_attn.q_proj").reshape(n, nh, hd)
            k = lin(hs, p + "self_attn.k_proj").reshape(n, nkv, hd)
            v = lin(hs, p + "self_attn.v_proj").reshape(n, nkv, hd)
        if p + "self_attn.q_norm.weight" in w:
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        tn = turn_l if gemma3 and gemma3_sliding(cfg, i) else turn
        if mt != "smollm3" or smollm3_uses_rope(cfg, i):  # SmolLM3's NoPE layers: no rotation
            q = rope(q, tn)
            k = rope(k, tn)
        allowed = kj <= qi
        sw = sliding_window_of(cfg, i)
        if sw is not None:
            allowed = allowed & (qi - kj < sw)
        att = np.empty((n, nh, hd))
        for h in range(nh):
            s = (q[:, h, :] @ k[:, h // group, :].T) * scale
            if attn_cap is not None:  # after the scale, before the mask
                s = attn_cap * np.tanh(s / attn_cap)
            s = np.where(allowed, s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            att[:, h, :] = s @ v[:, h // group, :]
        ao = lin(att.reshape(n, nh * hd), p + "self_attn.o_proj")
        if post:  # the attention output normalized before the residual add
            ao = norm(ao, p + "post_attention_layernorm.weight")
        x = x + ao * resid
        hs = norm(x, p + ("pre_feedforward_layernorm.weight" if post else
                          "post_attention_layernorm.weight"))
        if p + "mlp.gate_up_proj.weight" in w:  # Phi3: chunk(2), gate first
            gu = lin(hs, p + "mlp.gate_up_proj")
            g, u = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        else:
            g = lin(hs, p + "mlp.gate_proj")
            u = lin(hs, p + "mlp.up_proj")
        mo = lin((gelu_tanh(g) if gemma else g / (1.0 + np.exp(-g))) * u, p + "mlp.down_proj")
        if post:
            mo = norm(mo, p + "post_feedforward_layernorm.weight")
        x = x + mo * resid
    x = norm(x, "model.norm.weight")
    logits = x @ head.T
    if granite:
        logits = logits / float(cfg.get("logits_scaling", 1.0))
    if final_cap is not None:
        logits = final_cap * np.tanh(logits / final_cap)
    return logits.astype(np.float32)


def write_logits(path, logits):
    np.ascontiguousarray(logits, dtype="<f4").tofile(path)


def parse_tokens(s):
    return [int(t) for t in s.replace(" ", ",").split(",") if t != ""]


# ----------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write a random HF model folder")
    m.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    m.add_argument("--shards", type=int, default=1)
    m.add_argument("--merges", default="str", choices=["str", "pairs"],
                   help='tokenizer.json merges as "a b" strings (default) or ["a","b"] pairs')
    m.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="override a config.json key of the variant before the weights are "
                        "drawn (e.g. max_position_embeddings=1024); repeatable")
    f = sub.add_parser("forward", help="reference logits for a token sequence")
    f.add_argument("model_dir")
    f.add_argument("--tokens", required=True, help="comma-separated ids, position 0 first")
    f.add_argument("--out", required=True, help="raw little-endian float32 [rows][vocab]")
    f.add_argument("--last", action="store_true", help="write only the last row")
    f.add_argument("--context", type=int, default=None,
                   help="the converted context (LongRoPE list choice; default "
                        "max_position_embeddings)")
    sub.add_parser("variants", help="list variants")
    a = ap.parse_args(argv)
    if a.cmd == "variants":
        for k in sorted(VARIANTS):
            print(k)
        return 0
    if a.cmd == "make":
        over = {}
        for kv in a.set:
            if "=" not in kv:
                ap.error("--set wants KEY=JSON, not %r" % kv)
            k, v = kv.split("=", 1)
            over[k] = json.loads(v)
        cfg = make_model(a.variant, a.out, a.seed, a.dtype, a.shards, a.merges, over)
        print("%s: %s, %d layers, vocab %d, %s" % (a.out, cfg["architectures"][0],
                                                   cfg["num_hidden_layers"], cfg["vocab_size"],
                                                   a.dtype))
        return 0
    toks = parse_tokens(a.tokens)
    if not toks:
        ap.error("--tokens is empty")
    logits = forward(a.model_dir, toks, a.context)
    if a.last:
        logits = logits[-1:]
    write_logits(a.out, logits)
    print("%s: %d x %d logits, last-row argmax %d" % (a.out, logits.shape[0], logits.shape[1],
                                                      int(np.argmax(logits[-1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
