#!/usr/bin/env bash
# GGUF K-quant and other non-Q4/Q8 block formats: Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
# IQ4_NL, IQ4_XS. No such GGUF ships in ../shared/models, so tests/tools/hf_to_gguf.py writes
# them (tests/tools/ggml_quants.py: encoders and ggml's dequantize_row_* in NumPy, checked
# against llama.cpp's gguf-py) from a tiny Phi-3 folder whose matrices have rows of 256 or 512
# (one or two super-blocks; phi3 also splits the fused attn_qkv / ffn_up rows). For each type,
# and for a mixed file as llama.cpp's Q4_K_M mixes them (Q4_K, Q6_K head and one ffn_down, plus
# a Q5_0 and an IQ4_NL tensor):
# - --dtype fp32 gives, tensor by tensor and bit for bit, the package of the F32 GGUF holding
#   the NumPy-decoded weights (so the same logits, checked within 1e-4 relative too), and
#   formats no block can be transcoded to (--quantize int8; mixed: fp16, int4 with blocks of
#   64) that F32 GGUF's package byte for byte;
# - the default conversion keeps what can be kept: Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_NL, IQ4_XS
#   become slate's q4_k, q5_k, q6_k, q3_k, q2_k, iq4_nl, iq4_xs holding the GGUF rows' bytes
#   unchanged (compared byte for byte; their logits then match the --dtype fp32 package's within
#   1e-4 relative, as every value is kept); Q5_0 becomes q8_0 with its codes as int8 (q - 16) and
#   its own d (exact); Q5_1 becomes q8_0
#   with exactly the bytes slate's own int8-b32 quantizer gives the decoded weights (and so does
#   Q5_K with --quantize int8-b32); the logits (reference kernels) stay near the reference's,
#   within a bound stated below; asked for the layout they transcode to (Q4_K: --quantize
#   int4 --asym; Q2_K: int4 --asym --block-size 16; Q3_K: int4 --block-size 16; IQ4_NL, IQ4_XS:
#   int8-b32), Q4_K, Q2_K, Q3_K and the IQ4 types are transcoded: each sub-block's scale (and
#   offset) the f16 nearest to ggml's d * sc (and -dmin * m), the codes unchanged (the IQ4
#   levels as int8; IQ4_NL keeps its own d, exact);
# - a Q4_K_M-like file (Q4_K, Q6_K head and one ffn_down), also tied (Q6_K embedding, no
#   output.weight: the head reads the embedding), and a Q5_K_M-like one (Q5_K, Q6_K head and one
#   ffn_down; tied: Q5_K embedding) give packages whose tensors are exactly the GGUF's tensor
#   bytes plus rope.freqs, the file adding only alignment, the header, META and the TOKENIZER
#   section (stated precisely in sizes()), logits within 1e-4 relative of the --dtype fp32
#   package's, and a `slate info` weights line with each dtype's bytes and bits per weight; so
#   do a Q3_K_M-like file (Q3_K, Q4_K attn_output, Q5_K and Q4_K ffn_down, Q6_K head), a
#   Q2_K-like one (Q2_K, Q3_K and Q4_K ffn_down, Q4_K attn_output, Q6_K head), IQ4_XS-like and
#   IQ4_NL-like ones (the IQ4 type, Q6_K head; IQ4_XS tied too: an iq4_xs embedding and head);
# - with random bytes in every block (all values of every code and sub-block scale field) and
#   edge values in its super-block scales (f16 subnormals, zero, -0, negative, near the f16
#   limit once times a sub-block scale) --dtype fp32 still gives ggml's values bit for bit and
#   the default the GGUF's bytes (the K-quants) or each transcoded scale as the f16 nearest the
#   exact product, the codes kept; a Q4_K sub-block scale that rounds past f16 (65520) is copied
#   by default (its values are finite) and refused naming the tensor when q4 b32 asym is asked
#   for (or kept f32);
# - bad files are refused naming the tensor: rows that are not whole super-blocks, truncated
#   data, a super-block scale that is not finite, unsupported types (IQ2_XXS, NVFP4) by name.
source "$(dirname "$0")/lib.sh"
ids=(304 72 101 108 108 111 44 32 119 111 114 108 100 33)
csv=$(IFS=,; echo "${ids[*]}")
check "the NumPy codecs pass their self-check (round trip, every field used)" \
  $PY "$TOOLS/ggml_quants.py"

d="$WORK/m"
$PY "$TOOLS/hfmodel.py" make --variant phi3 --out "$d" --seed 11 --set hidden_size=256 \
  --set intermediate_size=512 --set num_hidden_layers=2 >/dev/null

# The checks, in one Python run per file (NumPy's start-up is most of this test's time); each
# prints "ok|FAIL <tab> description <tab> detail" lines that report() counts.
cat >"$WORK/kq.py" <<'PY'
import struct
import sys
import numpy as np
import ggml_quants as gq
import slatefiles as sf

COPY = {"Q4_K": "q4_k", "Q5_K": "q5_k", "Q6_K": "q6_k", "Q3_K": "q3_k", "Q2_K": "q2_k",
        "IQ4_NL": "iq4_nl", "IQ4_XS": "iq4_xs"}  # their bytes
Q4 = {}  # transcoded to q4 by default: none since Q2_K / Q3_K are copied
Q4_ASKED = {"Q4_K": (32, True), "Q2_K": (16, True), "Q3_K": (16, False)}  # when that q4 is asked for
Q8 = ("Q5_0",)  # transcoded to q8_0 by default
Q8_ASKED = ("IQ4_NL", "IQ4_XS")  # transcoded to q8_0 when it is asked for (--quantize int8-b32)
REQUANT = ("Q5_1",)  # requantized to q8_0
EXACT = set(COPY) | {"Q5_0", "IQ4_NL"}  # the default keeps every value


def say(ok, what, detail):
    print("%s\t%s\t%s" % ("ok" if ok else "FAIL", what, detail), flush=True)


def package(path):
    """name -> (entry, bytes); a failed conversion (no package) raises with its message."""
    try:
        return sf.package_tensors(path)
    except OSError:
        raise RuntimeError("no package: " + open(path + ".err").read().strip().split("\n")[-1])


def rows_of(src):
    """package matrix name -> (ggml type name, n_in, GGUF bytes, first row, end row): phi3's
    fused attn_qkv -> attn_q | attn_k | attn_v and ffn_up -> ffn_gate | ffn_up, by rows."""
    parts = {}
    for name, (ne, tt, data) in src.items():
        if len(ne) != 2:
            continue
        splits = [(name, 0, ne[1])]
        kv = (ne[1] - ne[0]) // 2  # attn_qkv: q has hidden rows, k and v the rest
        for fused, outs in (("attn_qkv", (("attn_q", ne[0]), ("attn_k", kv), ("attn_v", kv))),
                            ("ffn_up", (("ffn_gate", ne[1] // 2), ("ffn_up", ne[1] // 2)))):
            if name.endswith(fused + ".weight"):
                p, r0, splits = name[:-len(fused + ".weight")], 0, []
                for o, n in outs:
                    splits.append((p + o + ".weight", r0, r0 + n))
                    r0 += n
        for out, r0, r1 in splits:
            parts[out] = (gq.TYPE_IDS[tt], ne[0], bytes(data), r0, r1)
    return parts


def same(a, b):
    """Every tensor of package a has package b's dtype, shape and bytes (names too)."""
    pa, pb = package(a), package(b)
    fa = {n: (t["dtype"], t["shape"], bytes(x)) for n, (t, x) in pa.items()}
    fb = {n: (t["dtype"], t["shape"], bytes(x)) for n, (t, x) in pb.items()}
    bad = sorted(n for n in set(fa) | set(fb) if fa.get(n) != fb.get(n))
    return not bad and len(fa) >= 15, "%d tensors, %d differ: %s" % (len(fa), len(bad), bad[:3])


def fp32(pkg_path, gguf_path):
    """Every matrix of the package is f32 holding NumPy's decoding of its GGUF rows, bit for bit."""
    pkg, n_ok, bad = package(pkg_path), 0, []
    for out, (qt, n_in, data, r0, r1) in sorted(rows_of(sf.gguf_tensors(gguf_path)).items()):
        t, blob = pkg[out]
        want = gq.decode(data, qt, n_in * r1)[r0 * n_in:].view("<u4")
        got = np.frombuffer(blob, dtype="<u4") if t["dtype"] == "f32" else None
        if got is None or not np.array_equal(got, want):
            i = int(np.flatnonzero(got != want)[0]) if got is not None else -1
            bad.append("%s (%s): %s" % (out, qt, "%s, not f32" % t["dtype"] if got is None else
                       "element %d is %r, ggml gives %r" % (i, float(got[i:i + 1].view("<f4")[0]),
                                                             float(want[i:i + 1].view("<f4")[0]))))
        else:
            n_ok += 1
    return not bad and n_ok >= 15, "%d matrices bit for bit, %d not: %s" % (n_ok, len(bad), bad[:3])


def default(pkg_path, gguf_path, q8_path, q4=Q4, q8t=()):
    """The default conversion: COPY types as their own dtypes holding the GGUF rows' bytes
    unchanged; Q4 types (q4: Q4_ASKED too) as q4 with transcode_q4's d, m and codes; Q8 types
    (q8t: Q8_ASKED too) as q8_0 with transcode_q8's d and codes; REQUANT types as the tensor of
    q8_path (the decoded F32 GGUF converted with --quantize int8-b32: the same requantization)."""
    pkg, n_ok, bad, kinds = package(pkg_path), 0, [], {}
    q8 = package(q8_path) if q8_path else {}
    for out, (qt, n_in, data, r0, r1) in sorted(rows_of(sf.gguf_tensors(gguf_path)).items()):
        t, blob = pkg[out]
        blob = bytes(blob)
        got = (t["dtype"], t.get("block"), bool(t.get("asym")), t["shape"])
        kinds.setdefault(qt, set()).add(got[:3])
        if qt in COPY and qt not in q4 and qt not in q8t:
            _, blk, size = gq.TYPES[qt]
            row = n_in // blk * size  # bytes per row: whole (super-)blocks
            want = (COPY[qt], blk, False, [r1 - r0, n_in])
            if got != want or blob != data[r0 * row:r1 * row]:
                bad.append("%s (%s): %s block %s asym %s shape %s, expected %s block %s shape %s "
                           "holding the GGUF's bytes (%s)" % ((out, qt) + got + want[:2] + want[3:]
                                                             + ("they differ" if got == want
                                                                else "-",)))
                continue
            n_ok += 1
            continue
        if qt in REQUANT:
            w = q8[out]
            if (t["dtype"], t["shape"], blob) != (w[0]["dtype"], w[0]["shape"], bytes(w[1])):
                bad.append("%s (%s): %s %s, expected int8-b32 (%s) of the decoded weights, "
                           "byte for byte" % (out, qt, t["dtype"], t["shape"], w[0]["dtype"]))
                continue
            n_ok += 1
            continue
        blk, asym = q4.get(qt, (32, False))
        want = ("q4" if qt in q4 else "q8_0", blk if qt in q4 else got[1], asym, [r1 - r0, n_in])
        if got != want:
            bad.append("%s: %s as %s block %s asym %s shape %s, expected %s block %s asym %s"
                       % ((out, qt) + got + want[:3]))
            continue
        sub, n = n_in // blk, n_in * (r1 - r0)  # sub-blocks per row, values
        if qt in q4:
            _, _, d, m, q = gq.transcode_q4(data, qt, n_in * r1)
            pd, pm, pq = gq.q4_fields(blob, blk, asym, n)
        else:
            (d, q), m = gq.transcode_q8(data, qt, n_in * r1), None
            (pd, pq), pm = gq.q8_fields(blob, n), None
        d, q, m = d[r0 * sub:], q[r0 * sub:], None if m is None else m[r0 * sub:]
        diff = [f for f, a, b in (("scales", pd, d), ("codes", pq, q), ("offsets", pm, m))
                if b is not None and not np.array_equal(a, b)]
        if diff:
            off = (pm != m) if m is not None else np.zeros(len(d), dtype=bool)
            i = int(np.flatnonzero((pd != d) | (pq != q).any(axis=1) | off)[:1].sum())
            bad.append("%s (%s): %s differ from the transcoding; sub-block %d: scale %r, "
                       "expected %r%s" % (out, qt, " and ".join(diff), i, float(pd[i]), float(d[i]),
                                          "" if m is None else "; offset %r, expected %r"
                                          % (float(pm[i]), float(m[i]))))
            continue
        n_ok += 1
    return not bad and n_ok >= 15, ("%d matrices as documented, %d not: %s; layouts: %s"
                                    % (n_ok, len(bad), bad[:3],
                                       {k: sorted(v) for k, v in kinds.items()}))


def logits(path):
    x = np.fromfile(path, dtype="<f4").astype(np.float64)
    if x.size != 320:
        raise RuntimeError("%s: the run failed" % path)
    return x


def close(a, b):
    a, b = logits(a), logits(b)
    err = np.abs(a - b) - 1e-4 * np.abs(b)
    return bool((err <= 1e-6).all()), "max |diff| %.3g" % np.abs(a - b).max()


def transcoded(qt, data, n):
    """The values of n elements of qt as the default conversion stores them (transcode_q4/_q8;
    the COPY types' own values)."""
    if qt in COPY:
        return gq.decode(data, qt, n)
    if qt in Q4:
        blk, asym, d, m, q = gq.transcode_q4(data, qt, n)
        v = d[:, None] * q.astype(np.float32)
        return (v + m[:, None] if asym else v - 8 * d[:, None]).reshape(-1)
    d, q = gq.transcode_q8(data, qt, n)
    return (d[:, None] * q.astype(np.float32)).reshape(-1)


def drift_bound(g):
    # Tolerance. The drift D(p) = max |logit_p - logit_ref| / max |logit_ref| from the logits of
    # the decoded F32 GGUF (this random model amplifies weight errors: int8-b32 rounding alone
    # moves its logits by a few 1e-2). Requantizing is the same int8-b32 rounding of the same
    # values as slate's --quantize int8-b32 of the decoded GGUF (q8), so it may drift by D(q8)
    # and no more. Transcoding changes a weight only by the f16 rounding of its sub-block's
    # d * sc (and dmin * m): NumPy computes those changed weights, and their RMS change against
    # that of rounding every weight to f16 (--dtype fp16 of the decoded GGUF, drift D(f16))
    # gives r; drift grows about linearly with the perturbation, so transcoding may drift by
    # 5 r D(f16) (measured: 0.5..2.1 r D(f16) over Q2_K, Q3_K, Q4_K, IQ4_XS and four seeds);
    # Q5_0 and IQ4_NL keep their values exactly (r = 0). A file with several kinds adds the
    # bounds. Copied types (the K-quants) keep their values (r = 0). A misread field or a
    # misplaced block moves the logits by O(1).
    ref, dflt, q8, f16 = (logits(g + x) for x in (".ref.f32", ".def.f32", ".q8.f32", ".f16.f32"))
    d_tc = d_f16 = 0.0
    kinds = set()
    for name, (ne, tt, data) in sf.gguf_tensors(g + ".gguf").items():
        if len(ne) != 2:
            continue
        qt = gq.TYPE_IDS[tt]
        if qt in REQUANT:
            kinds.add("requant")
            continue
        y = gq.decode(bytes(data), qt, ne[0] * ne[1]).astype(np.float64)
        d_tc += float(((transcoded(qt, bytes(data), ne[0] * ne[1]) - y) ** 2).sum())
        d_f16 += float(((y.astype(np.float16).astype(np.float64) - y) ** 2).sum())
        kinds.add("transcoded")
    r = (d_tc / d_f16) ** 0.5 if "transcoded" in kinds else 0.0
    drift = lambda x: float(np.abs(x - ref).max() / np.abs(ref).max())
    bound = 1e-6 + 5 * r * drift(f16) + (drift(q8) if "requant" in kinds else 0.0)
    return drift(dflt) <= bound, ("drift %.3g, bound %.3g (int8-b32 of the decoded weights %.3g, "
                                  "fp16 %.3g, r %.3g: drift / (r fp16) = %.2f)"
                                  % (drift(dflt), bound, drift(q8), drift(f16), r,
                                     drift(dflt) / (r * drift(f16)) if r else 0))


# Edge values of the f16 scales written into every random block's super-block d (and dmin): f16
# subnormals (2^-24, the largest), zero and -0, a negative subnormal, the smallest normal, plain
# values, 1023.5 and 1024 (times a 6-bit scale of 63: 64480 and 64512, near the f16 limit of
# 65504 but within it).
EDGES = [0x0001, 0x03ff, 0x0000, 0x8200, 0x0400, 0x3555, 0xb800, 0x8000, 0x0155, 0x63ff,
         0x6400, 0x5c00, 0x1000]
SCALE_AT = {"Q5_0": (0,), "Q5_1": (0, 2), "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2),
            "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_NL": (0,), "IQ4_XS": (0,)}


def edges(src, out):
    """src with every block of every matrix random bytes (every value of every code and
    sub-block scale field), except the super-block d (and dmin) taken from EDGES."""
    buf = bytearray(open(src, "rb").read())
    g = sf.Gguf(buf)
    rng = np.random.default_rng(7)
    for name, ne, tt, off in g.tensors:
        if len(ne) == 2:
            qt = gq.TYPE_IDS[tt]
            _, blk, size = gq.TYPES[qt]
            n_bytes = ne[0] * ne[1] // blk * size
            buf[g.data0 + off:g.data0 + off + n_bytes] = rng.bytes(n_bytes)
            for b in range(ne[0] * ne[1] // blk):
                for k, at in enumerate(SCALE_AT[qt]):
                    val = EDGES[(b + 5 * k) % len(EDGES)]
                    struct.pack_into("<H", buf, g.data0 + off + b * size + at, val)
    open(out, "wb").write(buf)


# Asking for the layout a type is transcoded to (docs/format.md: "transcoded instead when that
# format is the source's own layout"), for the embedding and the head too.
OWN = {"Q5_0": "--quantize int8-b32"}
# Mixes as llama.cpp makes them: tag -> (the types, the tied embedding's type, the head's type)
MIXES = {"q4km": ({"Q4_K", "Q6_K"}, "Q6_K", "Q6_K"), "q5km": ({"Q5_K", "Q6_K"}, "Q5_K", "Q6_K"),
         "q3km": ({"Q3_K", "Q4_K", "Q5_K", "Q6_K"}, None, "Q6_K"),
         "q2k": ({"Q2_K", "Q3_K", "Q4_K", "Q6_K"}, None, "Q6_K"),
         "iq4xs": ({"IQ4_XS", "Q6_K"}, "IQ4_XS", "Q6_K"), "iq4nl": ({"IQ4_NL", "Q6_K"}, None, "Q6_K")}


def sizes(pkg_path, gguf_path):
    """The package's size against the GGUF's, for a file of copied and F32 tensors only (a
    Q4_K_M-like mix). Stated precisely: every tensor's size in the package equals its GGUF
    bytes (phi3's fused rows split into parts of whole rows), plus the tensors the converter
    computes (rope.freqs: no GGUF bytes); DATA is those sizes plus under 64 bytes of alignment
    padding per tensor; the file is DATA plus the header, the section table, META and the
    TOKENIZER section (the tokenizer and the program, which the GGUF keeps in its metadata)."""
    buf = open(pkg_path, "rb").read()
    sec = sf.package_sections(buf)
    pkg = package(pkg_path)
    src = sf.gguf_tensors(gguf_path)
    parts = rows_of(src)
    g_bytes = 0
    for name, (ne, tt, data) in src.items():  # F32 (type 0) 1-D tensors, or blocks
        n = int(np.prod(ne))
        g_bytes += 4 * n if tt == 0 else n // gq.TYPES[gq.TYPE_IDS[tt]][1] * gq.TYPES[gq.TYPE_IDS[tt]][2]
    from_src = set(parts) | {n for n, (ne, _, _) in src.items() if len(ne) == 1}
    computed = sorted(n for n in pkg if n not in from_src)
    p_src = sum(t["size"] for n, (t, _) in pkg.items() if n in from_src)
    p_comp = sum(pkg[n][0]["size"] for n in computed)
    data, meta, tok = (sec[k][1] for k in (sf.SEC_DATA, sf.SEC_META, sf.SEC_TOKENIZER))
    pad = len(buf) - (64 + 32 * len(sec) + meta + tok + data)  # before DATA, to a multiple of 64
    ok = (p_src == g_bytes and from_src <= set(pkg) and
          p_src + p_comp <= data <= p_src + p_comp + 63 * len(pkg) and 0 <= pad < 64)
    return ok, ("GGUF tensor bytes %d = package tensors from them %d; computed %s %d; DATA %d "
                "(alignment %d); file %d = GGUF tensor bytes + %d (computed + alignment + "
                "header and table %d + META %d + TOKENIZER %d + padding %d)"
                % (g_bytes, p_src, computed, p_comp, data, data - p_src - p_comp, len(buf),
                   len(buf) - g_bytes, 64 + 32 * len(sec), meta, tok, pad))


def checks(g, tag):
    types = {gq.TYPE_IDS[tt] for ne, tt, _ in sf.gguf_tensors(g + ".gguf").values() if len(ne) == 2}
    todo = [
        ("--dtype fp32: every tensor is the NumPy-decoded F32 GGUF's, bit for bit",
         lambda: same(g + ".f32.slate", g + ".ref.slate")),
        ("--dtype fp32: logits within 1e-4 relative of the decoded F32 GGUF's",
         lambda: close(g + ".f32.f32", g + ".ref.f32")),
        ("--quantize int8: the decoded F32 GGUF's int8 package, byte for byte",
         lambda: same(g + ".i8.slate", g + ".ri8.slate")),
        ("default: q4_k / q5_k / q6_k / q3_k / q2_k / iq4_nl / iq4_xs holding the GGUF's "
         "bytes, transcoded q8_0, or requantized q8_0, as documented", lambda: default(g + ".def.slate", g + ".gguf", g + ".q8.slate")),
        ("default: logits (reference kernels) drift from the reference within the bound",
         lambda: drift_bound(g)),
        ("scales at f16 edges, --dtype fp32: ggml's values bit for bit",
         lambda: fp32(g + ".edge.f32.slate", g + ".edge.gguf")),
    ]
    if types <= EXACT:
        todo.append(("default: every value kept, so the logits are within 1e-4 relative of "
                     "--dtype fp32's", lambda: close(g + ".def.f32", g + ".f32.f32")))
    if not types & set(REQUANT):
        todo.append(("scales at f16 edges, default: the GGUF's bytes where copied, each "
                     "transcoded scale the nearest f16",
                     lambda: default(g + ".edge.def.slate", g + ".edge.gguf", None)))
    if tag in OWN:
        todo.append(("%s: transcoded as by default, byte for byte" % OWN[tag],
                     lambda: same(g + ".own.slate", g + ".def.slate")))
    if tag in Q4_ASKED:
        blk, asym = Q4_ASKED[tag]
        todo.append(("--quantize int4%s --block-size %d (the embedding and head too): %s "
                     "transcoded to q4 b%d%s, each scale the nearest f16, the codes kept"
                     % (" --asym" if asym else "", blk, tag, blk, " asym" if asym else ""),
                     lambda: default(g + ".own.slate", g + ".gguf", None,
                                     q4={tag: Q4_ASKED[tag]})))
    if tag in Q8_ASKED:
        todo.append(("--quantize int8-b32 (the embedding and head too): %s transcoded to q8_0, "
                     "each scale the nearest f16, the levels as int8" % tag,
                     lambda: default(g + ".own.slate", g + ".gguf", None, q8t=(tag,))))
    if tag == "Q5_K":
        todo.append(("--quantize int8-b32 (the requantization Q5_K had before q5_k, for a "
                     "runtime without it): the decoded F32 GGUF's int8-b32 package, byte for byte",
                     lambda: same(g + ".own.slate", g + ".q8.slate")))
    if tag.split("_")[0] in MIXES:
        mix, emb, head = MIXES[tag.split("_")[0]]
        todo += [("has %s tensors only, %s" % (" ".join(sorted(mix)), "the embedding %s and no "
                  "output.weight (tied)" % emb if tag.endswith("tied") else "the head " + head),
                  lambda: (types == mix and (
                      ("output.weight" not in package(g + ".def.slate") and
                       package(g + ".def.slate")["token_embd.weight"][0]["dtype"] ==
                       COPY[emb])
                      if tag.endswith("tied") else
                      package(g + ".def.slate")["output.weight"][0]["dtype"] == COPY[head]),
                           sorted(types))),
                 ("default: no larger than the GGUF's tensor bytes plus rope.freqs, alignment, "
                  "META and TOKENIZER", lambda: sizes(g + ".def.slate", g + ".gguf"))]
    if tag == "mixed":
        todo += [("has Q4_K, Q6_K, Q5_0 and IQ4_NL tensors",
                  lambda: ({"Q4_K", "Q6_K", "Q5_0", "IQ4_NL"} <= types, sorted(types))),
                 ("--dtype fp16: the decoded F32 GGUF's package, byte for byte",
                  lambda: same(g + ".h.slate", g + ".rh.slate")),
                 ("--quantize int4 --asym --block-size 64: the decoded F32 GGUF's package, "
                  "byte for byte", lambda: same(g + ".i4.slate", g + ".ri4.slate"))]
    for what, fn in todo:
        try:
            ok, detail = fn()
        except (RuntimeError, KeyError, ValueError) as e:
            ok, detail = False, "%s: %s" % (type(e).__name__, e)
        say(ok, "%s %s" % (tag, what), detail)


if sys.argv[1] == "edges":
    edges(*sys.argv[2:4])
else:
    checks(*sys.argv[2:4])
    print("done")
PY

# report COMMAND...: counts the command's "ok|FAIL <tab> what <tab> detail" lines as checks (a
# command that stops before its "done" line is one more failure).
report() {
  local st what detail done=0
  while IFS=$'\t' read -r st what detail; do
    case $st in
      ok) ok "$what"; echo "     $detail" ;;
      FAIL) bad "$what: $detail" ;;
      done) done=1 ;;
    esac
  done < <("$@" 2>&1)
  [ $done = 1 ] || bad "checker stopped early: $*"
}

# conv SRC OUT OPTION...: slate convert, the error message in OUT.err when it fails.
conv() {
  local src=$1 out=$2; shift 2
  "$SLATE" convert "$src" -o "$out" --kv-dtype fp32 "$@" >/dev/null 2>"$out.err" || true
}
# logits PKG OUT: the last position's logits with the reference kernels (exact f32 products of
# the stored weights, no int8 activations), or an empty file when the run fails.
logits() {
  SLATE_KERNELS=ref "$SLATE" run "$1" --ids "$csv" -n 1 --temp 0 --dump-logits "$2" \
    >/dev/null 2>&1 || : >"$2"
}

# check_type TAG QUANT_ARGS...: a GGUF with those --quant rules, its decoded F32 twin, their
# conversions, and the checks above.
check_type() {
  local tag=$1; shift
  local g="$WORK/$tag"
  local i8=(--quantize int8 --keep int8:token_embd.weight --keep int8:output.weight)
  # a tied model has no output.weight for a rule to match (a rule matching nothing is refused)
  [[ $tag != *_tied ]] || i8=(--quantize int8 --keep int8:token_embd.weight)
  $PY "$TOOLS/hf_to_gguf.py" "${SRC:-$d}" "$g.gguf" "$@" --dequant-gguf "$g.ref.gguf"
  conv "$g.ref.gguf" "$g.ref.slate"
  conv "$g.ref.gguf" "$g.q8.slate" --quantize int8-b32
  conv "$g.ref.gguf" "$g.f16.slate" --dtype fp16
  conv "$g.gguf" "$g.f32.slate" --dtype fp32
  conv "$g.gguf" "$g.def.slate"
  # A format no block transcodes to (int8 per channel, for the embedding and the head too: they
  # would otherwise stay int8-b32): the decoded values through slate's own quantizer.
  conv "$g.gguf" "$g.i8.slate" "${i8[@]}"
  conv "$g.ref.gguf" "$g.ri8.slate" "${i8[@]}"
  # The layout the type is transcoded to, asked for (the embedding and the head too).
  local own= keep4="--keep int4:token_embd.weight --keep int4:output.weight"
  case $tag in
    Q4_K) own="--quantize int4 --asym --block-size 32 $keep4" ;;
    Q2_K) own="--quantize int4 --asym --block-size 16 $keep4" ;;
    Q3_K) own="--quantize int4 --block-size 16 $keep4" ;;
    Q5_0 | IQ4_NL | IQ4_XS | Q5_K) own="--quantize int8-b32" ;;
  esac
  # shellcheck disable=SC2086
  [ -z "$own" ] || conv "$g.gguf" "$g.own.slate" $own
  if [ "$tag" = mixed ]; then
    conv "$g.gguf" "$g.h.slate" --dtype fp16
    conv "$g.ref.gguf" "$g.rh.slate" --dtype fp16
    conv "$g.gguf" "$g.i4.slate" --quantize int4 --asym --block-size 64
    conv "$g.ref.gguf" "$g.ri4.slate" --quantize int4 --asym --block-size 64
  fi
  for p in ref q8 f16 f32 def; do logits "$g.$p.slate" "$g.$p.f32"; done
  $PY "$WORK/kq.py" edges "$g.gguf" "$g.edge.gguf"
  conv "$g.edge.gguf" "$g.edge.f32.slate" --dtype fp32
  conv "$g.edge.gguf" "$g.edge.def.slate"
  report $PY "$WORK/kq.py" checks "$g" "$tag"
}

for t in Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS; do
  check_type "$t" --quant "$t:weight"
done
# As llama.cpp's Q4_K_M mixes them: Q4_K, the head and one ffn_down Q6_K; a Q5_0 and an IQ4_NL
# tensor besides ("output.weight" also matches attn_output, set again after it).
check_type mixed --quant Q4_K:weight --quant Q6_K:output.weight --quant Q4_K:attn_output \
  --quant Q6_K:blk.0.ffn_down --quant Q5_0:blk.1.attn_output --quant IQ4_NL:blk.1.ffn_down
# Q4_K_M-like (llama.cpp's mix): Q4_K, with Q6_K for the head and half of ffn_down (blk.0); and
# the same tied (no output.weight: the head is token_embd's matmul, Q6_K as llama.cpp makes a
# tied embedding), so the embedding lookup and the head read q6_k / q4_k.
check_type q4km --quant Q4_K:weight --quant Q6_K:output.weight --quant Q4_K:attn_output \
  --quant Q6_K:blk.0.ffn_down
$PY "$TOOLS/hfmodel.py" make --variant phi3 --out "$WORK/mt" --seed 12 --set hidden_size=256 \
  --set intermediate_size=512 --set num_hidden_layers=2 --set tie_word_embeddings=true >/dev/null
SRC="$WORK/mt" check_type q4km_tied --quant Q4_K:weight --quant Q6_K:token_embd \
  --quant Q6_K:blk.1.ffn_down
# Q5_K_M-like (llama.cpp's other common mix): Q5_K, with Q6_K for the head and half of ffn_down;
# and tied, the embedding Q5_K this time, so the embedding lookup and the head read q5_k.
check_type q5km --quant Q5_K:weight --quant Q6_K:output.weight --quant Q5_K:attn_output \
  --quant Q6_K:blk.0.ffn_down
SRC="$WORK/mt" check_type q5km_tied --quant Q5_K:weight --quant Q6_K:blk.1.ffn_down
# Q3_K_M-like (llama.cpp's 3-bit mix: Q3_K, attn_output Q4_K, ffn_down Q5_K then Q4_K, the head
# Q6_K) and Q2_K-like (Q2_K, ffn_down Q3_K then Q4_K, attn_output Q4_K, the head Q6_K).
check_type q3km --quant Q3_K:weight --quant Q6_K:output.weight --quant Q4_K:attn_output \
  --quant Q5_K:blk.0.ffn_down --quant Q4_K:blk.1.ffn_down
check_type q2k --quant Q2_K:weight --quant Q6_K:output.weight --quant Q4_K:attn_output \
  --quant Q3_K:blk.0.ffn_down --quant Q4_K:blk.1.ffn_down
# IQ4_XS-like and IQ4_NL-like (llama.cpp's IQ4_XS / IQ4_NL files: the 4-bit type everywhere, the
# head Q6_K); IQ4_XS tied too, so the embedding lookup and the head read iq4_xs.
check_type iq4xs --quant IQ4_XS:weight --quant Q6_K:output.weight --quant IQ4_XS:attn_output
SRC="$WORK/mt" check_type iq4xs_tied --quant IQ4_XS:weight --quant Q6_K:blk.1.ffn_down
check_type iq4nl --quant IQ4_NL:weight --quant Q6_K:output.weight --quant IQ4_NL:attn_output
# slate info on the mixes: every K / IQ4 dtype's bytes (the GGUF's) and bits per weight (bytes
# per block: q4_k 144 / 256 = 4.50, q6_k 210 = 6.56, q5_k 176 = 5.50, q3_k 110 = 3.44, q2_k 84 =
# 2.62, iq4_xs 136 = 4.25; iq4_nl 18 / 32 = 4.50).
for m in q4km q5km q3km q2k iq4xs iq4nl; do
  "$SLATE" info "$WORK/$m.def.slate" >"$WORK/$m.info" 2>&1 || true
  check "slate info lists each K / IQ4 dtype's bytes of the $m package with its bits per weight" $PY -c '
import re, sys
import ggml_quants as gq
import slatefiles as sf
text = open(sys.argv[1]).read()
want = {}
for ne, tt, _ in sf.gguf_tensors(sys.argv[2]).values():
    qt = gq.TYPE_IDS.get(tt)
    if qt and (qt.endswith("_K") or qt.startswith("IQ4")):
        want[qt] = want.get(qt, 0) + ne[0] * ne[1] // gq.TYPES[qt][1] * gq.TYPES[qt][2]
line = [l for l in text.splitlines() if "weights" in l]
miss = [qt for qt, n in want.items() if not line or "%s %d = %.2f bits per weight" % (
    qt.lower(), n, gq.TYPES[qt][2] * 8 / gq.TYPES[qt][1]) not in line[0]]
if not line or "f16 0, bf16 0;" not in line[0]:  # nothing dequantized on the way
    miss.append("f16 0, bf16 0")
print(line, want, "missing:", miss)
sys.exit(0 if len(want) >= 2 and not miss else 1)' "$WORK/$m.info" "$WORK/$m.gguf"
done

# Refusals. The small phi3 folder has rows of 64 (hidden 64): whole blocks of 32, not of 256.
s="$WORK/small"
$PY "$TOOLS/hfmodel.py" make --variant phi3 --out "$s" --seed 5 >/dev/null
gguf_refused "Q4_K rows of 64 (not whole super-blocks of 256) are refused, naming the tensor" \
  SLATE_E_FORMAT "blk.0.attn_qkv.weight" "$s" --quant-flat Q4_K:blk.0.attn_qkv
G="$WORK/Q4_K.gguf"
patch_f16 "$G" "$WORK/inf_d.gguf" blk.0.attn_output.weight 5 0 7c00
expect_fail "a Q4_K super-block d of +inf is refused (default: copied as q4_k), naming the tensor" \
  SLATE_E_FORMAT "blk.0.attn_output.weight" "$SLATE" convert "$WORK/inf_d.gguf" -o "$WORK/x.slate"
expect_fail "... and asked for as q4 b32 asym (the transcode)" SLATE_E_FORMAT \
  "blk.0.attn_output.weight" "$SLATE" convert "$WORK/inf_d.gguf" -o "$WORK/x.slate" --quantize \
  int4 --asym
patch_f16 "$G" "$WORK/nan_dmin.gguf" blk.1.ffn_down.weight 3 2 7e00
expect_fail "a Q4_K super-block dmin of NaN is refused (--dtype fp32), naming the tensor" \
  SLATE_E_FORMAT "blk.1.ffn_down.weight" \
  "$SLATE" convert "$WORK/nan_dmin.gguf" -o "$WORK/x.slate" --dtype fp32
patch_f16 "$WORK/Q6_K.gguf" "$WORK/inf_q6.gguf" blk.1.attn_output.weight 7 208 fc00
expect_fail "a Q6_K super-block d of -inf is refused (default: copied as q6_k), naming the tensor" \
  SLATE_E_FORMAT "blk.1.attn_output.weight" \
  "$SLATE" convert "$WORK/inf_q6.gguf" -o "$WORK/x.slate"
patch_f16 "$WORK/Q5_K.gguf" "$WORK/nan_q5.gguf" blk.0.attn_output.weight 6 2 7e00
expect_fail "a Q5_K super-block dmin of NaN is refused (default: copied as q5_k), naming it" \
  SLATE_E_FORMAT "blk.0.attn_output.weight" \
  "$SLATE" convert "$WORK/nan_q5.gguf" -o "$WORK/x.slate"
patch_f16 "$WORK/Q3_K.gguf" "$WORK/inf_q3.gguf" blk.1.ffn_up.weight 4 108 7c00
expect_fail "a Q3_K super-block d of +inf is refused (default: copied as q3_k), naming the tensor" \
  SLATE_E_FORMAT "blk.1.ffn_up.weight" "$SLATE" convert "$WORK/inf_q3.gguf" -o "$WORK/x.slate"
patch_f16 "$WORK/Q2_K.gguf" "$WORK/nan_q2.gguf" blk.0.attn_qkv.weight 2 82 7e00
expect_fail "a Q2_K super-block dmin of NaN is refused (default: copied as q2_k), naming it" \
  SLATE_E_FORMAT "blk.0.attn_qkv.weight" "$SLATE" convert "$WORK/nan_q2.gguf" -o "$WORK/x.slate"
patch_f16 "$WORK/IQ4_XS.gguf" "$WORK/inf_iq4xs.gguf" blk.1.ffn_up.weight 3 0 fc00
expect_fail "an IQ4_XS super-block d of -inf is refused (default: copied as iq4_xs), naming it" \
  SLATE_E_FORMAT "blk.1.ffn_up.weight" "$SLATE" convert "$WORK/inf_iq4xs.gguf" -o "$WORK/x.slate"
patch_f16 "$WORK/IQ4_NL.gguf" "$WORK/nan_iq4nl.gguf" blk.0.attn_output.weight 9 0 7e00
expect_fail "an IQ4_NL block d of NaN is refused (default: copied as iq4_nl), naming the tensor" \
  SLATE_E_FORMAT "blk.0.attn_output.weight" \
  "$SLATE" convert "$WORK/nan_iq4nl.gguf" -o "$WORK/x.slate"
head -c -1000 "$WORK/Q6_K.gguf" >"$WORK/trunc.gguf"
expect_fail "a truncated Q6_K file is refused, naming the last tensor" SLATE_E_FORMAT \
  "blk.1.ffn_down.weight" "$SLATE" convert "$WORK/trunc.gguf" -o "$WORK/x.slate"
$PY "$TOOLS/gguf_patch.py" "$G" "$WORK/iq2.gguf" tensor:blk.0.ffn_down.weight:16
expect_fail "an IQ2_XXS tensor is refused by type name, naming the tensor" SLATE_E_UNSUPPORTED \
  "IQ2_XXS" "$SLATE" convert "$WORK/iq2.gguf" -o "$WORK/x.slate"
expect_fail "... and the message names the tensor" SLATE_E_UNSUPPORTED "blk.0.ffn_down.weight" \
  "$SLATE" convert "$WORK/iq2.gguf" -o "$WORK/x.slate"
# ggml's newest ids at the llama.cpp commit ../shared/models was made with (81ff7abe, ggml.h):
# NVFP4 = 40, Q1_0 = 41, Q2_0 = 42 (GGML_TYPE_COUNT 43): unsupported, but named, not "unknown".
$PY "$TOOLS/gguf_patch.py" "$G" "$WORK/nvfp4.gguf" tensor:blk.1.attn_output.weight:40
expect_fail "an NVFP4 tensor (ggml type 40) is refused by type name" SLATE_E_UNSUPPORTED \
  "NVFP4" "$SLATE" convert "$WORK/nvfp4.gguf" -o "$WORK/x.slate"

# A valid but extreme Q4_K block: d = 1040, so the sub-block whose 6-bit scale is 63 (every
# block has one: the encoder maps the largest sub-block to 63) has d * sc = 65520, which f16
# rounds to infinity (halfway between 65504 and 65536, ties to even). Its values (up to about
# 1e6) are finite: --dtype fp32 must give NumPy's decoding, the default copies the bytes as
# q4_k, whose reference dequantization is ggml's (logits checked against the fp32 package), and
# asked for q4 b32 asym (the transcode) the scale cannot be stored: refused naming the tensor
# (docs/format.md: a block scale past the f16 range is refused, never stored as infinity), while
# --keep f32 for that tensor keeps it exact.
patch_f16 "$G" "$WORK/big.gguf" blk.0.attn_output.weight 2 0 6410
cat >"$WORK/big.py" <<'PY'
# argv 1 holds blk.0.attn_output.weight as f32 with exactly NumPy's decoding of argv 2's, or
# (argv 3 "copy") as q4_k with argv 2's bytes.
import sys
import numpy as np
import ggml_quants as gq
import slatefiles as sf
ne, tt, data = sf.gguf_tensors(sys.argv[2])["blk.0.attn_output.weight"]
want = gq.decode(bytes(data), "Q4_K", ne[0] * ne[1])
t, blob = sf.package_tensors(sys.argv[1])["blk.0.attn_output.weight"]
if sys.argv[3:] == ["copy"]:
    same = t["dtype"] == "q4_k" and bytes(blob) == bytes(data[:len(blob)]) and len(blob) == \
        ne[0] * ne[1] // 256 * 144
else:
    got = np.frombuffer(blob, dtype="<f4") if t["dtype"] == "f32" else None
    same = got is not None and np.array_equal(got, want)
print("%s, max |value| %.3g, as expected: %s" % (t["dtype"], np.abs(want).max(), same))
sys.exit(0 if same and np.abs(want).max() > 5e5 else 1)
PY
if "$SLATE" convert "$WORK/big.gguf" -o "$WORK/big.slate" --dtype fp32 2>"$WORK/big.err"; then
  check "a Q4_K block with d = 1040 converts with --dtype fp32 to ggml's values" \
    $PY "$WORK/big.py" "$WORK/big.slate" "$WORK/big.gguf"
else
  bad "a Q4_K block with d = 1040 and --dtype fp32: $(tail -1 "$WORK/big.err")"
fi
logits "$WORK/big.slate" "$WORK/big.f32.f32"
if "$SLATE" convert "$WORK/big.gguf" -o "$WORK/bigq.slate" 2>"$WORK/big.err"; then
  check "... by default it is copied as q4_k, byte for byte" \
    $PY "$WORK/big.py" "$WORK/bigq.slate" "$WORK/big.gguf" copy
  logits "$WORK/bigq.slate" "$WORK/bigq.f32"
  check "... and its logits are within 1e-4 relative of the fp32 package's" $PY -c '
import sys, numpy as np
a, b = (np.fromfile(p, dtype="<f4").astype(np.float64) for p in sys.argv[1:3])
sys.exit(0 if a.size == b.size == 320 and (np.abs(a - b) <= 1e-4 * np.abs(b) + 1e-6).all() else 1)
' "$WORK/bigq.f32" "$WORK/big.f32.f32"
else
  bad "a Q4_K block with d = 1040, default: $(tail -1 "$WORK/big.err")"
fi
expect_fail "... asked for as q4 b32 asym its sub-block scale 65520 is refused, naming the tensor" \
  SLATE_E_UNSUPPORTED "blk.0.attn_output.weight" "$SLATE" convert "$WORK/big.gguf" -o \
  "$WORK/x.slate" --quantize int4 --asym
"$SLATE" convert "$WORK/big.gguf" -o "$WORK/big.slate" --keep f32:blk.0.attn_output.weight \
  2>/dev/null || true
check "... and with --keep f32 for that tensor its f32 values are ggml's" \
  $PY "$WORK/big.py" "$WORK/big.slate" "$WORK/big.gguf"
finish
