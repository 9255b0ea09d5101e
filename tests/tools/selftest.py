#!/usr/bin/python3
"""Self-check of the test tools (hfmodel.py, llama2c_to_hf.py, compare_logits.py).

    /usr/bin/python3 tests/tools/selftest.py [--keep DIR]

Runs in a few seconds, so ctest runs all of it (tests/e2e/test_tools_selftest.sh). Writes every
hfmodel.py variant to a temporary folder (removed at the end; --keep DIR keeps them), runs the
reference forward (hfmodel.py's command line, called in this process) and checks it against a
second, deliberately naive implementation, naive_forward: one position at a time with a growing
KV list, explicit 2-D rotations, scalar softmax and caps. It reads the safetensors files and
interprets config.json itself, from transformers' modelling code, and calls none of hfmodel's
helpers, so a mistake in hfmodel's maths (or in how it reads a config key) shows up as a
difference instead of being shared: partial rotary (the unrotated dims pass through, LongRoPE's
attention factor scales only the rotated ones), LongRoPE's list choice (also at --context 64),
llama3 / linear scaling, sliding windows, Gemma 1/2/3 (1 + w norms, the embedding scale, GeGLU,
the sandwich norms, query_pre_attn_scalar, the soft-caps, local RoPE on the sliding layers),
SmolLM3's NoPE layers, q/k/v biases, q/k norms, fused Phi-3 projections, tied heads. Plus:
causality, --last, determinism, the sliding window's first changed position, that each Gemma
feature changes the logits, llama3 rope regimes, F16/BF16 and sharded files, the byte-level
tokenizer, the stories260K conversion against run.c and compare_logits.py's exit codes (these
two skipped when $SLATE_MODELS_DIR, default /work/shared/models, has no stories260K). Exit 0
when all pass.
"""

import argparse
import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hfmodel  # noqa: E402

# The real models (stories260K, GPT-2's encoder.json): SLATE_MODELS_DIR as for the e2e tests.
MODELS = os.environ.get("SLATE_MODELS_DIR", "/work/shared/models")
FAILS = []


def check(cond, what):
    print("%s  %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)


def naive_load(model_dir):
    """config.json and the weights as float64, read here (not with hfmodel's reader): the
    safetensors header, then each tensor's bytes as F32, F16 or BF16 (the high half of an F32)."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for fname in files:
        with open(os.path.join(model_dir, fname), "rb") as f:
            data = f.read()
        n = int.from_bytes(data[:8], "little")
        for name, info in json.loads(data[8:8 + n]).items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            raw = data[8 + n + b:8 + n + e]
            if info["dtype"] == "BF16":
                a = (np.frombuffer(raw, "<u2").astype("<u4") << 16).view("<f4")
            else:
                a = np.frombuffer(raw, {"F32": "<f4", "F16": "<f2"}[info["dtype"]])
            w[name] = a.astype(np.float64).reshape(info["shape"])
    return cfg, w


def naive_forward(model_dir, tokens, context=None):
    """Independent re-implementation: incremental decode (one position at a time with a growing
    KV list), scalar loops for RoPE, softmax and the caps. Reads the folder and interprets the
    config itself, from transformers' modelling code, using none of hfmodel's helpers. context:
    the converted context (LongRoPE's list; default max_position_embeddings)."""
    cfg, w = naive_load(model_dir)
    mt = cfg["model_type"]
    gemma = mt in ("gemma", "gemma2", "gemma3_text")
    gemma2, gemma3 = mt == "gemma2", mt == "gemma3_text"
    post = gemma2 or gemma3  # four norms per layer, query_pre_attn_scalar, two layer kinds
    # the soft-caps (Gemma2Config's defaults 50 / 30 when absent, null: off; Gemma 3's default off)
    attn_cap = final_cap = None
    if gemma2:
        attn_cap = cfg.get("attn_logit_softcapping", 50.0)
        final_cap = cfg.get("final_logit_softcapping", 30.0)
    elif gemma3:
        attn_cap = cfg.get("attn_logit_softcapping")
        final_cap = cfg.get("final_logit_softcapping")
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or (256 if gemma else cfg["hidden_size"] // nh)
    eps = cfg["rms_norm_eps"]
    # RoPE settings: transformers 5's rope_parameters, else rope_theta / rope_scaling
    rp = cfg.get("rope_parameters") or {}
    theta = rp.get("rope_theta", cfg.get("rope_theta", 2e6 if mt == "smollm3" else 1e4))
    sc = dict(rp) if rp else (cfg.get("rope_scaling") or {})
    rtype = sc.get("rope_type", sc.get("type", "default"))
    prf = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor"))
    rd = int(hd * prf) if prf is not None else hd  # Phi3: only the first rd dims of a head turn
    half = rd // 2
    inv = [theta ** (-(2.0 * i) / rd) for i in range(half)]
    # Gemma 3's sliding layers: base rope_local_base_freq, unscaled
    inv_local = [cfg.get("rope_local_base_freq", 10000.0) ** (-(2.0 * i) / rd)
                 for i in range(half)]
    mscale = 1.0
    if rtype in ("longrope", "su"):  # Phi-3 128k: written out
        maxp = cfg["max_position_embeddings"]
        orig = sc.get("original_max_position_embeddings") or \
            cfg.get("original_max_position_embeddings")
        if orig:
            f = maxp / orig
        else:
            orig, f = maxp, sc.get("factor") or 1.0
        mscale = sc.get("attention_factor")
        if mscale is None:
            mscale = math.sqrt(1 + math.log(f) / math.log(orig)) if f > 1 else 1.0
        ext = sc["long_factor"] if (context or maxp) > orig else sc["short_factor"]
        assert len(ext) == half, "%d LongRoPE factors for %d rotated pairs" % (len(ext), half)
        inv = [x / e for x, e in zip(inv, ext)]
    elif rtype == "linear":
        inv = [x / sc["factor"] for x in inv]
    elif rtype == "llama3":  # written out per frequency
        f, lo, hi, L = (sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"],
                        sc["original_max_position_embeddings"])
        out = []
        for x in inv:
            wl = 2 * math.pi / x
            if wl < L / hi:
                out.append(x)
            elif wl > L / lo:
                out.append(x / f)
            else:
                s = (L / wl - lo) / (hi - lo)
                out.append((1 - s) * x / f + s * x)
        inv = out
    else:
        assert rtype == "default", "rope type %r" % rtype
    tied = cfg.get("tie_word_embeddings", gemma or mt == "smollm3")
    head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    # Granite: GraniteConfig's four multipliers, 1.0 when absent (1 for other families)
    gm = {k: float(cfg.get(k, 1.0)) if mt == "granite" else 1.0
          for k in ("embedding_multiplier", "residual_multiplier", "logits_scaling")}

    def nope(l):  # SmolLM3's layers without RoPE
        if mt != "smollm3":
            return False
        if cfg.get("no_rope_layers") is not None:
            return cfg["no_rope_layers"][l] == 0
        return (l + 1) % cfg.get("no_rope_layer_interval", 4) == 0

    def slides(l):  # Gemma 2 / 3: a "sliding_attention" layer
        if cfg.get("layer_types"):
            return cfg["layer_types"][l] == "sliding_attention"
        if gemma2:  # layers 0, 2, 4, ...
            return l % 2 == 0
        return (l + 1) % cfg.get("sliding_window_pattern", 6) != 0

    def window(l):  # positions a query at layer l sees (itself included), None: all
        sw = cfg.get("sliding_window")
        if not sw:
            return None
        if mt in ("mistral", "phi3"):  # every layer
            return sw
        if post:
            return sw if slides(l) else None
        if mt in ("qwen2", "qwen3") and cfg.get("use_sliding_window"):
            if cfg.get("layer_types"):
                return sw if cfg["layer_types"][l] == "sliding_attention" else None
            return sw if l >= cfg.get("max_window_layers", 0) else None
        return None

    def norm(x, g):  # Gemma stores g - 1
        return x / math.sqrt(float(np.dot(x, x)) / len(x) + eps) * (g + 1 if gemma else g)

    def act(g):  # tanh GELU for Gemma, elementwise
        if not gemma:
            return np.array([a / (1 + math.exp(-a)) for a in g])
        return np.array([0.5 * a * (1 + math.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
                         for a in g])

    def rope(v, pos, freqs):  # pairs (i, i + rd/2) turn, scaled by mscale; dims rd.. as they are
        r = v.copy()
        for i in range(half):
            c, s = math.cos(pos * freqs[i]) * mscale, math.sin(pos * freqs[i]) * mscale
            r[i] = v[i] * c - v[i + half] * s
            r[i + half] = v[i + half] * c + v[i] * s
        return r

    L_ = cfg["num_hidden_layers"]
    kcache = [[] for _ in range(L_)]
    vcache = [[] for _ in range(L_)]
    rows = []
    for pos, t in enumerate(tokens):
        x = w["model.embed_tokens.weight"][t].copy()
        if gemma:  # HF multiplies by the normalizer as a tensor of the model's dtype (float32)
            x *= float(np.float32(math.sqrt(cfg["hidden_size"])))
        x *= gm["embedding_multiplier"]
        for l in range(L_):
            p = "model.layers.%d.self_attn." % l
            h = norm(x, w["model.layers.%d.input_layernorm.weight" % l])

            def proj(name):
                y = w[p + name + ".weight"] @ h
                return y + w[p + name + ".bias"] if (p + name + ".bias") in w else y
            if (p + "qkv_proj.weight") in w:  # Phi-3: split the fused rows here
                qkv = proj("qkv_proj")
                q = qkv[:nh * hd].reshape(nh, hd)
                k = qkv[nh * hd:(nh + nkv) * hd].reshape(nkv, hd)
                v = qkv[(nh + nkv) * hd:].reshape(nkv, hd)
            else:
                q = proj("q_proj").reshape(nh, hd)
                k = proj("k_proj").reshape(nkv, hd)
                v = proj("v_proj").reshape(nkv, hd)
            if (p + "q_norm.weight") in w:
                q = np.array([norm(qq, w[p + "q_norm.weight"]) for qq in q])
                k = np.array([norm(kk, w[p + "k_norm.weight"]) for kk in k])
            sw = window(l)
            fr = inv_local if gemma3 and slides(l) else inv
            if not nope(l):
                q = np.array([rope(qq, pos, fr) for qq in q])
                k = np.array([rope(kk, pos, fr) for kk in k])
            kcache[l].append(k)
            vcache[l].append(v)
            scale = cfg.get("query_pre_attn_scalar", 256) ** -0.5 if post else 1 / math.sqrt(hd)
            if mt == "granite":
                scale = float(cfg.get("attention_multiplier", 1.0))
            first = 0 if sw is None else max(0, pos - sw + 1)
            o = np.zeros(nh * hd)
            for hh in range(nh):
                kvh = hh * nkv // nh
                sc_ = [float(np.dot(q[hh], kcache[l][j][kvh])) * scale
                       for j in range(first, pos + 1)]
                if attn_cap is not None:
                    sc_ = [attn_cap * math.tanh(s / attn_cap) for s in sc_]
                m = max(sc_)
                e = [math.exp(s - m) for s in sc_]
                z = sum(e)
                acc = np.zeros(hd)
                for j, ej in zip(range(first, pos + 1), e):
                    acc += ej / z * vcache[l][j][kvh]
                o[hh * hd:(hh + 1) * hd] = acc
            lp = "model.layers.%d." % l
            if post:  # sandwich: the attention output normalized, then the MLP's input norm
                x = x + norm(w[p + "o_proj.weight"] @ o, w[lp + "post_attention_layernorm.weight"])
                h = norm(x, w[lp + "pre_feedforward_layernorm.weight"])
            else:
                x = x + (w[p + "o_proj.weight"] @ o) * gm["residual_multiplier"]
                h = norm(x, w[lp + "post_attention_layernorm.weight"])
            m_ = "model.layers.%d.mlp." % l
            if (m_ + "gate_up_proj.weight") in w:
                gu = w[m_ + "gate_up_proj.weight"] @ h
                g, u = gu[:len(gu) // 2], gu[len(gu) // 2:]
            else:
                g = w[m_ + "gate_proj.weight"] @ h
                u = w[m_ + "up_proj.weight"] @ h
            mo = w[m_ + "down_proj.weight"] @ (act(g) * u)
            x = x + (norm(mo, w[lp + "post_feedforward_layernorm.weight"]) if post
                     else mo * gm["residual_multiplier"])
        row = head @ norm(x, w["model.norm.weight"]) / gm["logits_scaling"]
        if final_cap is not None:
            row = np.array([final_cap * math.tanh(z / final_cap) for z in row])
        rows.append(row)
    return np.array(rows)


def run_cli(*args):
    return subprocess.run([sys.executable] + list(args), capture_output=True, text=True)


def run_hfmodel(*args):
    """hfmodel.py's command line (main(argv)) in this process: a new interpreter per call would
    spend most of the run importing NumPy. -> (exit status, last 200 characters of output)."""
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            rc = hfmodel.main(list(args))
    except SystemExit as e:  # argparse
        rc = e.code
    except Exception as e:  # noqa: BLE001 (any failure of the tool is a check's failure)
        rc = 1
        buf.write("%s: %s" % (type(e).__name__, e))
    return rc or 0, buf.getvalue().strip()[-200:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", help="write the folders here and keep them (default: a temporary "
                                   "directory, removed at the end)")
    a = ap.parse_args()
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        return run_checks(a.keep)
    with tempfile.TemporaryDirectory(prefix="slate-hfmodel-") as tmp:
        return run_checks(tmp)


def run_checks(tmp):
    toks = [5, 17, 300, 42, 99, 256, 1, 7, 8, 250, 123, 77, 304, 3]  # 14 > sliding window 8

    for var in sorted(hfmodel.VARIANTS):
        d = os.path.join(tmp, var)
        rc, msg = run_hfmodel("make", "--variant", var, "--out", d)
        check(rc == 0, "%s: make (%s)" % (var, msg))
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        check(size < 1 << 20, "%s: folder %d bytes < 1 MiB" % (var, size))
        out = os.path.join(tmp, var + ".f32")
        rc, msg = run_hfmodel("forward", d, "--tokens", ",".join(map(str, toks)), "--out", out)
        check(rc == 0, "%s: forward (%s)" % (var, msg))
        if rc != 0:
            continue
        lg = np.fromfile(out, dtype="<f4").reshape(len(toks), -1)
        check(np.isfinite(lg).all() and lg.std(axis=1).min() > 0.1,
              "%s: logits finite, per-row std min %.3g" % (var, lg.std(axis=1).min()))
        check(len({int(np.argmax(r_)) for r_ in lg}) > 1, "%s: argmax varies over positions" % var)
        # Both compute in float64; hfmodel's output is rounded to float32 (about 1e-6 at these
        # logits' magnitudes), so 1e-5 leaves room for that and nothing else.
        ref = naive_forward(d, toks)
        dd = float(np.max(np.abs(ref - lg)))
        check(dd < 1e-5, "%s: naive incremental forward agrees (max abs %.2g)" % (var, dd))
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            rs = json.load(f).get("rope_scaling") or {}
        if rs.get("rope_type", rs.get("type")) == "longrope":
            # the original context 64: short_factor instead of the default's long_factor
            rc, _ = run_hfmodel("forward", d, "--tokens", ",".join(map(str, toks)), "--out",
                                out + ".64", "--context", "64")
            lg64 = np.fromfile(out + ".64", dtype="<f4").reshape(len(toks), -1) if rc == 0 \
                else np.full_like(lg, np.nan)
            dd = float(np.max(np.abs(naive_forward(d, toks, context=64) - lg64)))
            d_long = float(np.max(np.abs(lg64 - lg)))
            check(dd < 1e-5 and d_long > 1e-3,
                  "%s: --context 64 (short factors) agrees too (max abs %.2g; %.2g from the "
                  "default context's)" % (var, dd, d_long))
        pre = hfmodel.forward(d, toks[:5])
        check(np.array_equal(pre, lg[:5]) or float(np.max(np.abs(pre - lg[:5]))) < 1e-6,
              "%s: causal (prefix logits unchanged)" % var)
        run_hfmodel("forward", d, "--tokens", ",".join(map(str, toks)), "--out", out + ".last",
                    "--last")
        last = np.fromfile(out + ".last", dtype="<f4")
        check(np.array_equal(last, lg[-1]), "%s: --last writes the last row" % var)

    # Determinism: same seed -> same bytes; another seed -> different weights.
    d2 = os.path.join(tmp, "llama-again")
    hfmodel.make_model("llama", d2, seed=0)
    same = open(os.path.join(tmp, "llama", "model.safetensors"), "rb").read() == \
        open(os.path.join(d2, "model.safetensors"), "rb").read()
    check(same, "deterministic: seed 0 twice gives identical model.safetensors")

    # Sliding window: positions < 8 match the model without a window, later ones do not.
    cfg, w = hfmodel.load_model(os.path.join(tmp, "mistral"))
    with_sw = hfmodel.forward((cfg, w), toks)
    nosw = hfmodel.forward((dict(cfg, sliding_window=None), w), toks)
    dpos = np.max(np.abs(with_sw - nosw), axis=1)
    check(dpos[:8].max() == 0 and dpos[8:].min() > 1e-3,
          "mistral: window 8 changes exactly positions >= 8 (diffs %s)"
          % " ".join("%.2g" % x for x in dpos))
    cfg9 = dict(cfg, sliding_window=9)
    d9 = np.max(np.abs(hfmodel.forward((cfg9, w), toks) - nosw), axis=1)
    check(d9[:9].max() == 0 and d9[9] > 1e-3, "mistral: window 9 first differs at position 9")

    # Gemma 3: each of its features changes the logits of the test sequence, so a converter
    # that dropped one would fail test_hf_variants.sh: the window 6 exactly from position 6 on,
    # the local RoPE base, the global layers' linear scaling, query_pre_attn_scalar, which
    # layers slide, and the post-feedforward norm weights.
    cfg, w = hfmodel.load_model(os.path.join(tmp, "gemma3"))
    base = hfmodel.forward((cfg, w), toks)
    nosw = hfmodel.forward((dict(cfg, sliding_window=10 ** 6), w), toks)
    dpos = np.max(np.abs(base - nosw), axis=1)
    check(dpos[:6].max() == 0 and dpos[6:].min() > 1e-3,
          "gemma3: window 6 changes exactly positions >= 6 (diffs %s)"
          % " ".join("%.2g" % x for x in dpos))
    for what, cfg2 in (("local rope base", dict(cfg, rope_local_base_freq=1e6)),
                       ("global linear scaling", dict(cfg, rope_scaling=None)),
                       ("query_pre_attn_scalar", dict(cfg, query_pre_attn_scalar=32)),
                       ("choice of sliding layers", dict(cfg, sliding_window_pattern=3))):
        d = float(np.max(np.abs(hfmodel.forward((cfg2, w), toks) - base)))
        check(d > 1e-3, "gemma3: the %s matters (max abs %.2g)" % (what, d))
    w2 = dict(w)
    for k in list(w2):
        if k.endswith("post_feedforward_layernorm.weight"):
            w2[k] = w2[k] * 0
    d = float(np.max(np.abs(hfmodel.forward((cfg, w2), toks) - base)))
    check(d > 1e-3, "gemma3: the post-feedforward norm weights matter (max abs %.2g)" % d)

    # Gemma 2: each cap changes the test logits (so a converter or runtime that dropped one
    # would fail test_hf_variants.sh), as do the window (exactly from position 6 on) and which
    # layers slide; the variant with the attention cap left out gets Gemma2Config's 50.
    cfg, w = hfmodel.load_model(os.path.join(tmp, "gemma2"))
    base = hfmodel.forward((cfg, w), toks)
    nosw = hfmodel.forward((dict(cfg, sliding_window=10 ** 6), w), toks)
    dpos = np.max(np.abs(base - nosw), axis=1)
    check(dpos[:6].max() == 0 and dpos[6:].min() > 1e-3,
          "gemma2: window 6 changes exactly positions >= 6 (diffs %s)"
          % " ".join("%.2g" % x for x in dpos))
    for what, cfg2 in (("attention cap", dict(cfg, attn_logit_softcapping=None)),
                       ("final logit cap", dict(cfg, final_logit_softcapping=None)),
                       ("choice of sliding layers",
                        dict(cfg, layer_types=["full_attention", "sliding_attention"] * 2))):
        d = float(np.max(np.abs(hfmodel.forward((cfg2, w), toks) - base)))
        check(d > 1e-2, "gemma2: the %s matters (max abs %.2g)" % (what, d))
    check(float(np.max(np.abs(base))) <= 3.0, "gemma2: logits within the final cap 3")
    cfg, w = hfmodel.load_model(os.path.join(tmp, "gemma2-types"))
    base = hfmodel.forward((cfg, w), toks)
    d = float(np.max(np.abs(hfmodel.forward((dict(cfg, attn_logit_softcapping=None), w), toks)
                     - base)))
    check(0 < d, "gemma2-types: the default attention cap 50 is applied (max abs %.2g)" % d)

    # llama3 rope: one unchanged, one smoothed, the rest divided by factor.
    cfg, _ = hfmodel.load_model(os.path.join(tmp, "llama3-rope"))
    th, sc = hfmodel.rope_params(cfg)
    base = hfmodel.rope_inv_freq(16, th)
    scaled = hfmodel.rope_inv_freq(16, th, sc)
    ratio = scaled / base
    check(ratio[0] == 1.0 and 1 / 8 < ratio[1] < 1 and np.allclose(ratio[2:], 1 / 8),
          "llama3-rope: inv_freq ratios %s" % " ".join("%.4g" % x for x in ratio))

    # Storage dtypes and shards.
    lg32 = np.fromfile(os.path.join(tmp, "llama.f32"), dtype="<f4").reshape(len(toks), -1)
    for dt, tol in (("F16", 0.02), ("BF16", 0.2)):
        d = os.path.join(tmp, "llama-" + dt.lower())
        hfmodel.make_model("llama", d, seed=0, dtype=dt)
        tens, _ = hfmodel.read_safetensors(os.path.join(d, "model.safetensors"))
        hdr_len = int.from_bytes(open(os.path.join(d, "model.safetensors"), "rb").read(8), "little")
        check(hdr_len % 8 == 0, "%s: header length %d is a multiple of 8" % (dt, hdr_len))
        lg = hfmodel.forward(d, toks)
        dd = float(np.max(np.abs(lg - lg32)))
        check(0 < dd < tol, "%s: logits within %.2g of F32 (max abs %.3g)" % (dt, tol, dd))
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38], dtype=np.float32)
    bits = hfmodel.f32_to_bf16_bits(x)
    check(list(bits) == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F62],
          "bf16 rounding to nearest even %s" % [hex(b) for b in bits])
    d = os.path.join(tmp, "qwen3-sharded")
    hfmodel.make_model("qwen3", d, seed=0, shards=2)
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    files = sorted(set(idx["weight_map"].values()))
    check(files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"],
          "shards: %s" % files)
    lgq = np.fromfile(os.path.join(tmp, "qwen3.f32"), dtype="<f4").reshape(len(toks), -1)
    check(np.array_equal(hfmodel.forward(d, toks), lgq), "shards: same logits as one file")

    # Byte-level tokenizer.
    tj = json.load(open(os.path.join(tmp, "llama", "tokenizer.json")))
    vocab = tj["model"]["vocab"]
    ids = sorted(vocab.values()) + [t["id"] for t in tj["added_tokens"]]
    check(ids == list(range(hfmodel.N_BYTE_BPE_TOKENS)), "byte BPE: ids dense 0..%d"
          % (hfmodel.N_BYTE_BPE_TOKENS - 1))
    ok = all(a_ in vocab and b_ in vocab and vocab[a_ + b_] > max(vocab[a_], vocab[b_])
             for a_, b_ in (m.split(" ") for m in tj["model"]["merges"]))
    check(ok, "byte BPE: every merge's parts precede its result")
    enc = os.path.join(MODELS, "tokenizers", "gpt2", "encoder.json")
    if os.path.exists(enc):
        g = json.load(open(enc, encoding="utf-8"))
        check(all(g.get(k) == v for k, v in vocab.items()),
              "byte BPE: ids equal GPT-2 encoder.json ids")

    # stories260K conversion against run.c, then compare_logits' exit codes on its logits.
    st = os.path.join(MODELS, "stories260K")
    if os.path.isdir(st):
        check_stories(tmp, st)
    else:
        print("skipping the stories260K and compare_logits checks: %s not found" % st)

    print("\n%s" % ("ALL PASS" if not FAILS else "%d FAILED" % len(FAILS)))
    return 1 if FAILS else 0


def check_stories(tmp, st):
    d = os.path.join(tmp, "stories260K")
    r = run_cli(os.path.join(HERE, "llama2c_to_hf.py"), "--out", d, "--verify",
                "--bin", os.path.join(st, "stories260K.bin"),
                "--tok", os.path.join(st, "tok512.bin"))
    print(r.stdout.strip())
    check(r.returncode == 0, "stories260K: converted folder reproduces run.c logits")
    rtxt = os.path.join(st, "reference", "once-upon-a-time.pos4.logits.txt")
    nf = naive_forward(d, [1, 403, 407, 261, 378])
    check(float(np.max(np.abs(nf[-1] - np.loadtxt(rtxt)))) < 1e-4,
          "stories260K: naive forward agrees too")

    cl = os.path.join(HERE, "compare_logits.py")
    stf = os.path.join(tmp, "stories.f32")
    hfmodel.write_logits(stf, hfmodel.forward(d, [1, 403, 407, 261, 378]))
    r = run_cli(cl, stf, rtxt, "--vocab", "512", "--rows-a", "last", "--argmax")
    check(r.returncode == 0,
          "compare_logits: pass case -> 0 (%s)" % r.stdout.strip().split("\n")[-1])
    r = run_cli(cl, stf, rtxt, "--vocab", "512", "--rows-a", "0")
    check(r.returncode == 1, "compare_logits: fail case -> 1")
    r = run_cli(cl, stf, rtxt, "--vocab", "512")
    check(r.returncode == 2, "compare_logits: row count mismatch -> 2")


if __name__ == "__main__":
    sys.exit(main())
