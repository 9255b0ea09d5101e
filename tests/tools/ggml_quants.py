#!/usr/bin/python3
"""ggml_quants.py - NumPy encoders and decoders of ggml's block formats Q8_0, Q4_0, Q4_1, Q5_0,
Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS: test fixtures for slate's GGUF import
(tests/tools/hf_to_gguf.py --quant, tests/e2e/test_gguf_kquant.sh). Needs NumPy (Debian's
/usr/bin/python3).

    import ggml_quants as gq
    raw = gq.encode(x, "Q4_K")        # x: float32, size a multiple of the block -> bytes
    y = gq.decode(raw, "Q4_K", n)     # float32 [n], exactly as ggml's dequantize_row_*
    gq.transcode_q4(raw, "Q4_K", n)   # the (d, m, codes) of slate's q4 equivalent
    gq.transcode_q8(raw, "IQ4_XS", n) # the (d, codes) of slate's q8_0 equivalent

Written from the block layouts in llama.cpp's ggml/src/ggml-common.h (block_q5_0 ..
block_iq4_xs, kvalues_iq4nl) and the dequantize_row_* functions of ggml/src/ggml-quants.c,
used as the specification. Decoding keeps ggml's float order so that the result is the same
float32 value as ggml's, bit for bit (every product below is float32 x float32 rounded once,
left to right as in the C source; x86-64 without FMA contraction):
  Q5_0   d * (q - 16)                       Q5_1   d * q + m          (q: 4 low bits | qh bit)
  Q2_K   (d * (sc & 15)) * q - dmin * (sc >> 4)   16 sub-blocks of 16, q in 0..3
  Q3_K   (d * (sc6 - 32)) * (q - 4)               16 sub-blocks of 16, q in 0..7 (bit 2: hmask)
  Q4_K   (d * sc6) * q - dmin * m6                 8 sub-blocks of 32, q in 0..15
  Q5_K   (d * sc6) * q - dmin * m6                 8 sub-blocks of 32, q in 0..31
  Q6_K   (d * sc8) * (q - 32)                     16 sub-blocks of 16, sc8 signed
  IQ4_NL d * kvalues[q]                    IQ4_XS (d * (ls6 - 32)) * kvalues[q], 8 x 32
The encoders are NOT ggml's optimal searches (quantize_row_*_ref): any valid encoding of the
weights will do for a fixture, so they take the simplest scales (min-max for the types with an
offset, the signed value of largest magnitude mapped to the most negative code for the others,
as ggml's Q4_0 does) rounded to f16 or to the 4/6/8-bit sub-block codes, then the nearest code.
That fills every field: 6-bit scales up to 63 (their high bits packed in separate bytes), Q3_K's
hmask, the Q5 high bits, scales of both signs (Q3_K, Q6_K, IQ4_XS), IQ4_XS's scales_h/scales_l.

Checked on 2026-12-01 against llama.cpp commit 81ff7abe50b95fb81cc70a6cdba1eb1a02a48f62
(scratch only, nothing of it is kept here): gguf-py's gguf.quants.dequantize of the bytes
encode() writes equals decode() bit for bit for all twelve types (4096 blocks each, N(0, 1)
data with blocks scaled by 1e-3 and 1e3, zero, all-positive and all-negative blocks); for the
nine K / Q5 / IQ4 types, also on 4096 blocks of random bytes (inf and NaN scales included:
equal bit for bit, except Q5_1's NaN payloads; every finite value and every NaN position equal);
decode() of gguf-py's own quantize() output (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1: the ones it can
encode) equals its dequantize() bit for bit; ggml-quants.c's dequantize_row_* for the nine
types, compiled with gcc -std=c11 -O2 on x86-64, give decode()'s float32 values bit for bit on
the same encoded and random blocks.
"""
import numpy as np

QK_K = 256
# name -> (ggml type id, elements per block, bytes per block)
TYPES = {
    "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34), "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110),
    "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
    "IQ4_NL": (20, 32, 18), "IQ4_XS": (23, 256, 136),
}
TYPE_IDS = {v[0]: k for k, v in TYPES.items()}
# ggml's IQ4_NL / IQ4_XS code book (ggml-common.h, kvalues_iq4nl)
KVALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                   dtype=np.int8)

_E = np.arange(QK_K)
# Element e of a Q2_K / Q3_K super-block: two halves of 128, each four 2-bit planes of 32
# bytes; sub-block (scale) e // 16.
_LOW2_BYTE = 32 * (_E // 128) + _E % 32
_LOW2_SHIFT = 2 * ((_E % 128) // 32)
_HMASK_BIT = 4 * (_E // 128) + (_E % 128) // 32  # Q3_K: hmask byte e % 32
# Q4_K / Q5_K / IQ4_XS: 64-element chunks, the first 32 in the low nibbles of 32 bytes, the next
# 32 in their high nibbles; Q5_K's fifth bit of element e is bit e // 32 of qh[e % 32].
_NIB_BYTE = 32 * (_E // 64) + _E % 32
_NIB_SHIFT = 4 * ((_E % 64) // 32)
# IQ4_XS: sub-block ib of 32 in 16 bytes, elements 0..15 low nibbles, 16..31 high nibbles.
_XS_BYTE = 16 * (_E // 32) + _E % 16
_XS_SHIFT = 4 * ((_E % 32) // 16)
# Q6_K: halves of 128; quarter g of a half takes low (g < 2) or high nibbles of ql bytes
# 64h + 32(g & 1) + l and bits 2g..2g+1 of qh[32h + l]; scale e // 16.
_Q6_QL_BYTE = 64 * (_E // 128) + 32 * (((_E % 128) // 32) & 1) + _E % 32
_Q6_QL_SHIFT = 4 * (((_E % 128) // 32) >> 1)
_Q6_QH_BYTE = 32 * (_E // 128) + _E % 32
_Q6_QH_SHIFT = 2 * ((_E % 128) // 32)
_E32 = np.arange(32)
_B32_BYTE = _E32 % 16  # 32-element blocks: element j < 16 low nibble of byte j, j + 16 high
_B32_SHIFT = 4 * (_E32 // 16)


def _f16(x):
    """float32 values rounded to the nearest f16 (ties to even), as float32."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def _f16_bytes(x):
    return np.asarray(x, dtype=np.float32).astype("<f2").view(np.uint8).reshape(len(x), 2)


def _rd_f16(b, at):
    return b[:, at:at + 2].copy().view("<f2").astype(np.float32).reshape(-1)


def _pack(codes, byte_idx, shift, n_bytes):
    """OR codes [n, elems] << shift into n_bytes per block (no two codes share bits)."""
    out = np.zeros((codes.shape[0], n_bytes), dtype=np.uint8)
    for s in np.unique(shift):
        sel = shift == s
        out[:, byte_idx[sel]] |= (codes[:, sel].astype(np.uint8) << np.uint8(s))
    return out


def _unpack(data, byte_idx, shift, mask):
    return (data[:, byte_idx] >> shift.astype(np.uint8)) & np.uint8(mask)


def _signed_absmax(b):
    """Per row, the value of largest magnitude with its sign (the first one on a tie)."""
    return np.take_along_axis(b, np.abs(b).argmax(axis=-1)[..., None], axis=-1)[..., 0]


def _div(a, b):
    """a / b, 0 where b is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b != 0, a / np.where(b != 0, b, 1), 0).astype(np.float32)


def _nearest(v, lo, hi):
    return np.clip(np.rint(v), lo, hi).astype(np.int32)


def _pack6(sc, mn):
    """K_SCALE_SIZE bytes of 8 six-bit scales and 8 six-bit mins (get_scale_min_k4 inverse)."""
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    return out


def _unpack6(q):
    """(scales, mins) [n, 8] from K_SCALE_SIZE bytes (ggml's get_scale_min_k4)."""
    sc = np.empty((q.shape[0], 8), dtype=np.uint8)
    mn = np.empty((q.shape[0], 8), dtype=np.uint8)
    sc[:, 0:4] = q[:, 0:4] & 63
    mn[:, 0:4] = q[:, 4:8] & 63
    sc[:, 4:8] = (q[:, 8:12] & 15) | ((q[:, 0:4] >> 6) << 4)
    mn[:, 4:8] = (q[:, 8:12] >> 4) | ((q[:, 4:8] >> 6) << 4)
    return sc, mn


def _pack_q3_scales(s6):
    """12 bytes of 16 six-bit Q3_K scales (stored + 32): low nibbles of scales j and j + 8 in
    byte j < 8, bits 4..5 of scale j in bits 2(j / 4).. of byte 8 + j % 4."""
    s6 = s6.astype(np.uint8)
    out = np.zeros((s6.shape[0], 12), dtype=np.uint8)
    out[:, 0:8] = (s6[:, 0:8] & 15) | ((s6[:, 8:16] & 15) << 4)
    for j in range(16):
        out[:, 8 + j % 4] |= ((s6[:, j] >> 4) & 3) << (2 * (j // 4))
    return out


def _unpack_q3_scales(b):
    s6 = np.empty((b.shape[0], 16), dtype=np.uint8)
    s6[:, 0:8] = b[:, 0:8] & 15
    s6[:, 8:16] = b[:, 0:8] >> 4
    for j in range(16):
        s6[:, j] |= ((b[:, 8 + j % 4] >> (2 * (j // 4))) & 3) << 4
    return s6


# ---------------------------------------------------------------------------------------------
# Encoders: blocks [n, block] float32 -> [n, bytes] uint8


def _enc_q8_0(b):  # ggml's reference: d = amax / 127, q = round(x / d)
    d = _f16(np.abs(b).max(axis=1) / 127)
    q = _nearest(_div(b, d[:, None]), -127, 127)
    return np.concatenate([_f16_bytes(d), q.astype(np.int8).view(np.uint8)], axis=1)


def _enc_q4_0(b):  # ggml's reference: d = signed absmax / -8, q = min(15, trunc(x / d + 8.5))
    d = _signed_absmax(b) / np.float32(-8)
    q = np.minimum(15, np.trunc(_div(b, d[:, None]) + np.float32(8.5))).astype(np.uint8)
    return np.concatenate([_f16_bytes(d), _pack(q, _B32_BYTE, _B32_SHIFT, 16)], axis=1)


def _enc_q4_1(b):
    lo, d = b.min(axis=1), _f16((b.max(axis=1) - b.min(axis=1)) / 15)
    m = _f16(lo)
    q = _nearest(_div(b - m[:, None], d[:, None]), 0, 15)
    return np.concatenate([_f16_bytes(d), _f16_bytes(m), _pack(q, _B32_BYTE, _B32_SHIFT, 16)],
                          axis=1)


def _enc_q5_0(b):
    d = _f16(_signed_absmax(b) / np.float32(-16))
    q = _nearest(_div(b, d[:, None]) + 16, 0, 31)
    qh = _pack(q >> 4, _E32 // 8, _E32 % 8, 4)
    return np.concatenate([_f16_bytes(d), qh, _pack(q & 15, _B32_BYTE, _B32_SHIFT, 16)], axis=1)


def _enc_q5_1(b):
    lo = b.min(axis=1)
    d, m = _f16((b.max(axis=1) - lo) / 31), _f16(lo)
    q = _nearest(_div(b - m[:, None], d[:, None]), 0, 31)
    qh = _pack(q >> 4, _E32 // 8, _E32 % 8, 4)
    return np.concatenate([_f16_bytes(d), _f16_bytes(m), qh,
                           _pack(q & 15, _B32_BYTE, _B32_SHIFT, 16)], axis=1)


def _minmax_subscales(b, n_sub, q_max, s_max):
    """Sub-block scales of the x = (d * sc) * q - dmin * m types: per sub-block s = (hi - lo) /
    q_max with lo = min(min x, 0) (so the offset m = -lo >= 0, as ggml's), then d = max s /
    s_max and dmin = max m / s_max in f16, sc and m rounded to 0..s_max. Returns d, dmin, sc, m
    and the codes q (b: [n, 256])."""
    n = b.shape[0]
    x = b.reshape(n, n_sub, -1)
    lo = np.minimum(x.min(axis=2), 0)
    s = (x.max(axis=2) - lo) / np.float32(q_max)
    d = _f16(s.max(axis=1) / np.float32(s_max))
    dmin = _f16((-lo).max(axis=1) / np.float32(s_max))
    sc = _nearest(_div(s, d[:, None]), 0, s_max)
    mn = _nearest(_div(-lo, dmin[:, None]), 0, s_max)
    ds = (d[:, None] * sc.astype(np.float32)).astype(np.float32)
    dm = (dmin[:, None] * mn.astype(np.float32)).astype(np.float32)
    q = _nearest(_div(x + dm[:, :, None], ds[:, :, None]), 0, q_max)
    return d, dmin, sc, mn, q.reshape(n, -1)


def _signed_subscales(b, n_sub, q_neg, s_neg, s_lo, s_hi):
    """Scales of the symmetric x = (d * sc) * q types: per sub-block s = (signed absmax) /
    -q_neg (so the extreme takes the most negative code), d = (signed absmax of s) / -s_neg in
    f16, sc = round(s / d) in s_lo..s_hi: scales of both signs. Returns d, sc and the scaled
    values x / (d * sc) to be coded."""
    n = b.shape[0]
    x = b.reshape(n, n_sub, -1)
    s = _signed_absmax(x) / np.float32(-q_neg)
    d = _f16(_signed_absmax(s) / np.float32(-s_neg))
    sc = _nearest(_div(s, d[:, None]), s_lo, s_hi)
    ds = (d[:, None] * sc.astype(np.float32)).astype(np.float32)
    return d, sc, _div(x, ds[:, :, None]).reshape(n, -1)


def _enc_q2_k(b):
    d, dmin, sc, mn, q = _minmax_subscales(b, 16, 3, 15)
    scales = (sc | (mn << 4)).astype(np.uint8)
    qs = _pack(q, _LOW2_BYTE, _LOW2_SHIFT, 64)
    return np.concatenate([scales, qs, _f16_bytes(d), _f16_bytes(dmin)], axis=1)


def _enc_q3_k(b):
    d, sc, v = _signed_subscales(b, 16, 4, 32, -32, 31)
    c = _nearest(v, -4, 3) + 4  # stored 0..7: low 2 bits in qs, bit 2 in hmask
    hmask = _pack(c >> 2, _E % 32, _HMASK_BIT, 32)
    qs = _pack(c & 3, _LOW2_BYTE, _LOW2_SHIFT, 64)
    return np.concatenate([hmask, qs, _pack_q3_scales(sc + 32), _f16_bytes(d)], axis=1)


def _enc_q4_k(b):
    d, dmin, sc, mn, q = _minmax_subscales(b, 8, 15, 63)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), _pack6(sc, mn),
                           _pack(q, _NIB_BYTE, _NIB_SHIFT, 128)], axis=1)


def _enc_q5_k(b):
    d, dmin, sc, mn, q = _minmax_subscales(b, 8, 31, 63)
    qh = _pack(q >> 4, _E % 32, _E // 32, 32)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), _pack6(sc, mn), qh,
                           _pack(q & 15, _NIB_BYTE, _NIB_SHIFT, 128)], axis=1)


def _enc_q6_k(b):
    d, sc, v = _signed_subscales(b, 16, 32, 128, -128, 127)
    c = _nearest(v, -32, 31) + 32
    ql = _pack(c & 15, _Q6_QL_BYTE, _Q6_QL_SHIFT, 128)
    qh = _pack(c >> 4, _Q6_QH_BYTE, _Q6_QH_SHIFT, 64)
    return np.concatenate([ql, qh, sc.astype(np.int8).view(np.uint8), _f16_bytes(d)], axis=1)


def _nearest_kvalue(v):
    return np.abs(v[..., None] - KVALUES.astype(np.float32)).argmin(axis=-1).astype(np.uint8)


def _enc_iq4_nl(b):
    d = _f16(_signed_absmax(b) / np.float32(-127))
    q = _nearest_kvalue(_div(b, d[:, None]))
    return np.concatenate([_f16_bytes(d), _pack(q, _B32_BYTE, _B32_SHIFT, 16)], axis=1)


def _enc_iq4_xs(b):
    d, sc, v = _signed_subscales(b, 8, 127, 32, -32, 31)
    ls = (sc + 32).astype(np.uint16)
    scales_h = np.zeros(b.shape[0], dtype="<u2")
    for ib in range(8):
        scales_h |= (ls[:, ib] >> 4) << (2 * ib)
    scales_l = ((ls[:, 0::2] & 15) | ((ls[:, 1::2] & 15) << 4)).astype(np.uint8)
    qs = _pack(_nearest_kvalue(v), _XS_BYTE, _XS_SHIFT, 128)
    return np.concatenate([_f16_bytes(d), scales_h.view(np.uint8).reshape(-1, 2), scales_l, qs],
                          axis=1)


# ---------------------------------------------------------------------------------------------
# Decoders: blocks [n, bytes] uint8 -> [n, block] float32, in ggml's float order


def _dec_q8_0(b):
    return _rd_f16(b, 0)[:, None] * b[:, 2:].view(np.int8).astype(np.float32)


def _dec_q4_0(b):
    q = _unpack(b[:, 2:], _B32_BYTE, _B32_SHIFT, 15).astype(np.float32) - np.float32(8)
    return _rd_f16(b, 0)[:, None] * q


def _dec_q4_1(b):
    q = _unpack(b[:, 4:], _B32_BYTE, _B32_SHIFT, 15).astype(np.float32)
    return _rd_f16(b, 0)[:, None] * q + _rd_f16(b, 2)[:, None]


def _q5_codes(qh, qs):
    return _unpack(qs, _B32_BYTE, _B32_SHIFT, 15) | (_unpack(qh, _E32 // 8, _E32 % 8, 1) << 4)


def _dec_q5_0(b):
    q = _q5_codes(b[:, 2:6], b[:, 6:22]).astype(np.int32) - 16
    return _rd_f16(b, 0)[:, None] * q.astype(np.float32)


def _dec_q5_1(b):
    q = _q5_codes(b[:, 4:8], b[:, 8:24]).astype(np.float32)
    return _rd_f16(b, 0)[:, None] * q + _rd_f16(b, 2)[:, None]


def _rep(per_sub, k):
    return np.repeat(per_sub, k, axis=1)


def _dec_q2_k(b):
    sc = b[:, 0:16]
    d, dmin = _rd_f16(b, 80), _rd_f16(b, 82)
    dl = d[:, None] * (sc & 15).astype(np.float32)
    ml = dmin[:, None] * (sc >> 4).astype(np.float32)
    q = _unpack(b[:, 16:80], _LOW2_BYTE, _LOW2_SHIFT, 3).astype(np.float32)
    return _rep(dl, 16) * q - _rep(ml, 16)


def _dec_q3_k(b):
    hbit = _unpack(b[:, 0:32], _E % 32, _HMASK_BIT, 1)
    low = _unpack(b[:, 32:96], _LOW2_BYTE, _LOW2_SHIFT, 3).astype(np.int32)
    q = low - np.where(hbit != 0, 0, 4)
    sc = _unpack_q3_scales(b[:, 96:108]).astype(np.int32) - 32
    dl = _rd_f16(b, 108)[:, None] * sc.astype(np.float32)
    return _rep(dl, 16) * q.astype(np.float32)


def _dec_kmin(b, q):
    d, dmin = _rd_f16(b, 0), _rd_f16(b, 2)
    sc, mn = _unpack6(b[:, 4:16])
    d1 = d[:, None] * sc.astype(np.float32)
    m1 = dmin[:, None] * mn.astype(np.float32)
    return _rep(d1, 32) * q.astype(np.float32) - _rep(m1, 32)


def _dec_q4_k(b):
    return _dec_kmin(b, _unpack(b[:, 16:144], _NIB_BYTE, _NIB_SHIFT, 15))


def _dec_q5_k(b):
    q = _unpack(b[:, 48:176], _NIB_BYTE, _NIB_SHIFT, 15) | \
        (_unpack(b[:, 16:48], _E % 32, _E // 32, 1) << 4)
    return _dec_kmin(b, q)


def _dec_q6_k(b):
    q = _unpack(b[:, 0:128], _Q6_QL_BYTE, _Q6_QL_SHIFT, 15) | \
        (_unpack(b[:, 128:192], _Q6_QH_BYTE, _Q6_QH_SHIFT, 3) << 4)
    dl = _rd_f16(b, 208)[:, None] * b[:, 192:208].view(np.int8).astype(np.float32)
    return _rep(dl, 16) * (q.astype(np.int32) - 32).astype(np.float32)


def _dec_iq4_nl(b):
    q = _unpack(b[:, 2:18], _B32_BYTE, _B32_SHIFT, 15)
    return _rd_f16(b, 0)[:, None] * KVALUES[q].astype(np.float32)


def _iq4_xs_ls(b):
    scales_h = b[:, 2:4].copy().view("<u2").reshape(-1).astype(np.int32)
    ib = np.arange(8)
    lo = (b[:, 4 + ib // 2] >> (4 * (ib % 2)).astype(np.uint8)) & 15
    return lo.astype(np.int32) | (((scales_h[:, None] >> (2 * ib)) & 3) << 4)


def _dec_iq4_xs(b):
    dl = _rd_f16(b, 0)[:, None] * (_iq4_xs_ls(b) - 32).astype(np.float32)
    q = _unpack(b[:, 8:136], _XS_BYTE, _XS_SHIFT, 15)
    return _rep(dl, 32) * KVALUES[q].astype(np.float32)


_CODEC = {
    "Q8_0": (_enc_q8_0, _dec_q8_0), "Q4_0": (_enc_q4_0, _dec_q4_0),
    "Q4_1": (_enc_q4_1, _dec_q4_1), "Q5_0": (_enc_q5_0, _dec_q5_0),
    "Q5_1": (_enc_q5_1, _dec_q5_1), "Q2_K": (_enc_q2_k, _dec_q2_k),
    "Q3_K": (_enc_q3_k, _dec_q3_k), "Q4_K": (_enc_q4_k, _dec_q4_k),
    "Q5_K": (_enc_q5_k, _dec_q5_k), "Q6_K": (_enc_q6_k, _dec_q6_k),
    "IQ4_NL": (_enc_iq4_nl, _dec_iq4_nl), "IQ4_XS": (_enc_iq4_xs, _dec_iq4_xs),
}


def encode(x, qtype):
    """x (any shape, float32, size a multiple of the block) -> the bytes of ggml type qtype, its
    elements in order (a GGUF tensor [ne1][ne0] is its rows back to back, so rows must be whole
    blocks: ne0 % block == 0 for the file to be valid)."""
    _, blk, size = TYPES[qtype]
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if x.size % blk:
        raise ValueError("%s: %d values is not a multiple of the block %d" % (qtype, x.size, blk))
    with np.errstate(over="ignore"):  # a scale past f16 is the caller's business: it says inf
        raw = _CODEC[qtype][0](x.reshape(-1, blk))
    assert raw.shape[1] == size, (qtype, raw.shape)
    return raw.tobytes()


def decode(raw, qtype, n):
    """The first n values (a multiple of the block) stored in raw as ggml type qtype, as float32
    computed exactly as ggml's dequantize_row_<qtype>."""
    _, blk, size = TYPES[qtype]
    if n % blk or len(raw) < n // blk * size:
        raise ValueError("%s: %d values need %d bytes, have %d" % (qtype, n, n // blk * size,
                                                                  len(raw)))
    b = np.frombuffer(raw, dtype=np.uint8, count=n // blk * size).reshape(-1, size)
    with np.errstate(over="ignore", invalid="ignore"):
        y = _CODEC[qtype][1](b)
    assert y.dtype == np.float32 and y.shape[1] == blk, (qtype, y.dtype, y.shape)
    return y.reshape(-1)


def transcode_q4(raw, qtype, n):
    """slate's lossless-codes q4 equivalent of n values of Q4_K, Q2_K or Q3_K (docs/format.md,
    "Quantized weights": value d * q + m when asymmetric, d * (q - 8) when symmetric): per
    sub-block (32 for Q4_K, 16 for the others) d = f16(d_super * sc) and, asymmetric, m =
    f16(-(dmin * m_sub)), the codes kept (Q3_K's q - 4 becoming q + 4 around 8). The products are
    exact in float32 (an 11-bit f16 times a code of at most 6 bits), so each f16 is the one
    rounding. Returns (block, asym, d [n_blocks] f32, m [n_blocks] f32 or None, codes [n_blocks,
    block] uint8)."""
    _, blk, size = TYPES[qtype]
    b = np.frombuffer(raw, dtype=np.uint8, count=n // blk * size).reshape(-1, size)
    with np.errstate(over="ignore"):
        if qtype == "Q4_K":
            sc, mn = _unpack6(b[:, 4:16])
            d = _f16(_rd_f16(b, 0)[:, None] * sc.astype(np.float32))
            m = _f16(-(_rd_f16(b, 2)[:, None] * mn.astype(np.float32)))
            q = _unpack(b[:, 16:144], _NIB_BYTE, _NIB_SHIFT, 15)
            return 32, True, d.reshape(-1), m.reshape(-1), q.reshape(-1, 32)
        if qtype == "Q2_K":
            sc = b[:, 0:16]
            d = _f16(_rd_f16(b, 80)[:, None] * (sc & 15).astype(np.float32))
            m = _f16(-(_rd_f16(b, 82)[:, None] * (sc >> 4).astype(np.float32)))
            q = _unpack(b[:, 16:80], _LOW2_BYTE, _LOW2_SHIFT, 3)
            return 16, True, d.reshape(-1), m.reshape(-1), q.reshape(-1, 16)
        if qtype == "Q3_K":
            sc = _unpack_q3_scales(b[:, 96:108]).astype(np.int32) - 32
            d = _f16(_rd_f16(b, 108)[:, None] * sc.astype(np.float32))
            hbit = _unpack(b[:, 0:32], _E % 32, _HMASK_BIT, 1)
            low = _unpack(b[:, 32:96], _LOW2_BYTE, _LOW2_SHIFT, 3)
            q = low + np.where(hbit != 0, 8, 4).astype(np.uint8)
            return 16, False, d.reshape(-1), None, q.reshape(-1, 16)
    raise ValueError("%s is not transcoded to q4" % qtype)


def transcode_q8(raw, qtype, n):
    """slate's q8_0 (GGUF Q8_0: value d * q, blocks of 32) holding the codes of n values of
    Q5_0, IQ4_NL or IQ4_XS unchanged: q = code - 16 (Q5_0) or kvalues[code] (the IQ4 types),
    both within int8; d the block's own f16 d (exact), or for IQ4_XS f16(d * (ls - 32)) per
    sub-block of 32 (an exact float32 product, rounded once to f16). Returns (d [n_blocks] f32,
    q [n_blocks, 32] int8)."""
    _, blk, size = TYPES[qtype]
    b = np.frombuffer(raw, dtype=np.uint8, count=n // blk * size).reshape(-1, size)
    if qtype == "Q5_0":
        return _rd_f16(b, 0), (_q5_codes(b[:, 2:6], b[:, 6:22]).astype(np.int32) - 16).astype(
            np.int8)
    if qtype == "IQ4_NL":
        return _rd_f16(b, 0), KVALUES[_unpack(b[:, 2:18], _B32_BYTE, _B32_SHIFT, 15)]
    if qtype == "IQ4_XS":
        with np.errstate(over="ignore"):
            d = _f16(_rd_f16(b, 0)[:, None] * (_iq4_xs_ls(b) - 32).astype(np.float32))
        q = KVALUES[_unpack(b[:, 8:136], _XS_BYTE, _XS_SHIFT, 15)]
        return d.reshape(-1), q.reshape(-1, 32)
    raise ValueError("%s is not transcoded to q8_0" % qtype)


def q8_fields(blob, n):
    """(d [n_blocks] f32, q [n_blocks, 32] int8) of n values in q8_0."""
    b = np.frombuffer(blob, dtype=np.uint8, count=n // 32 * 34).reshape(-1, 34)
    return _rd_f16(b, 0), b[:, 2:].view(np.int8)


def q4_fields(blob, block, asym, n):
    """(d, m or None, codes [n_blocks, block]) of n values in slate's q4 layout."""
    size = (4 if asym else 2) + block // 2
    b = np.frombuffer(blob, dtype=np.uint8, count=n // block * size).reshape(-1, size)
    d = _rd_f16(b, 0)
    m = _rd_f16(b, 2) if asym else None
    qs = b[:, size - block // 2:]
    q = np.concatenate([qs & 15, qs >> 4], axis=1)
    return d, m, q


def _fields(raw, qtype, n):
    """The fields a decoder must read right, as {description: array}, for the coverage check."""
    _, blk, size = TYPES[qtype]
    b = np.frombuffer(raw, dtype=np.uint8, count=n // blk * size).reshape(-1, size)
    if qtype in ("Q5_0", "Q5_1"):
        at = 2 if qtype == "Q5_0" else 4
        return {"fifth bits (qh)": _unpack(b[:, at:at + 4], _E32 // 8, _E32 % 8, 1)}
    if qtype == "Q2_K":
        return {"4-bit scales": b[:, 0:16] & 15, "4-bit mins": b[:, 0:16] >> 4}
    if qtype == "Q3_K":
        return {"hmask bits": _unpack(b[:, 0:32], _E % 32, _HMASK_BIT, 1),
                "signed 6-bit scales": _unpack_q3_scales(b[:, 96:108]).astype(np.int32) - 32}
    if qtype in ("Q4_K", "Q5_K"):
        sc, mn = _unpack6(b[:, 4:16])
        out = {"6-bit scales 4..7 (high bits in bytes 0..3)": sc[:, 4:] >> 4,
               "6-bit mins 4..7 (high bits in bytes 4..7)": mn[:, 4:] >> 4,
               "6-bit scales 0..3": sc[:, :4] >> 4, "6-bit mins 0..3": mn[:, :4] >> 4}
        if qtype == "Q5_K":
            out["fifth bits (qh)"] = _unpack(b[:, 16:48], _E % 32, _E // 32, 1)
        return out
    if qtype == "Q6_K":
        return {"signed 8-bit scales": np.sign(b[:, 192:208].view(np.int8)),
                "high 2 bits (qh)": _unpack(b[:, 128:192], _Q6_QH_BYTE, _Q6_QH_SHIFT, 3)}
    if qtype == "IQ4_NL":
        return {"code book index": _unpack(b[:, 2:18], _B32_BYTE, _B32_SHIFT, 15)}
    if qtype == "IQ4_XS":
        ls = _iq4_xs_ls(b)
        return {"scales_h (2 bits each)": ls >> 4, "scales_l (4 bits each)": ls & 15,
                "code book index": _unpack(b[:, 8:136], _XS_BYTE, _XS_SHIFT, 15)}
    return {}


# Worst per-block relative RMS error of encode() on N(0, 1) blocks (measured 0.01-0.39 over 4096
# blocks per type; the bounds leave room, and a misplaced field would be far off).
_MAX_REL_RMS = {"Q8_0": 0.02, "Q4_0": 0.25, "Q4_1": 0.2, "Q5_0": 0.12, "Q5_1": 0.1,
                "Q2_K": 0.5, "Q3_K": 0.3, "Q4_K": 0.15, "Q5_K": 0.08, "Q6_K": 0.04,
                "IQ4_NL": 0.2, "IQ4_XS": 0.15}


def selfcheck(seed=0, n_blocks=512):
    """encode -> decode stays within _MAX_REL_RMS per block, zero blocks decode to 0,
    transcode_q4 / transcode_q8 give the decoded values (up to their f16 rounding), and every
    field takes more than one value (each possible value for the 2-bit ones). Returns a list of
    failures."""
    rng = np.random.default_rng(seed)
    fails = []
    for qtype, (_, blk, _) in TYPES.items():
        x = rng.standard_normal((n_blocks, blk)).astype(np.float32)
        x[1::5] *= np.float32(1e-2)
        x[3] = 0
        y = decode(encode(x, qtype), qtype, x.size).reshape(n_blocks, blk)
        nz = np.abs(x).max(axis=1) > 0
        rel = np.sqrt(((y - x) ** 2).mean(axis=1)[nz] / (x ** 2).mean(axis=1)[nz])
        if not (np.isfinite(y).all() and rel.max() <= _MAX_REL_RMS[qtype] and not y[3].any()):
            fails.append("%s: worst relative RMS error %.3g > %g, or a zero block is not 0"
                         % (qtype, rel.max(), _MAX_REL_RMS[qtype]))
        raw = encode(x, qtype)
        for what, v in _fields(raw, qtype, x.size).items():
            vals = np.unique(v)
            want = 4 if what.startswith(("scales_h", "high 2")) else 2
            if len(vals) < want:
                fails.append("%s: %s take only the values %s" % (qtype, what, vals.tolist()))
        if qtype in ("Q4_K", "Q2_K", "Q3_K"):
            blk_q4, asym, d, m, q = transcode_q4(raw, qtype, x.size)
            t = d[:, None] * q.astype(np.float32)
            t = t + m[:, None] if asym else t - 8 * d[:, None]
            ref = y.reshape(-1, blk_q4)
            scale = np.abs(d)[:, None] * 15 + (np.abs(m)[:, None] if asym else 0)
            if not (np.abs(t - ref) <= scale * 2.0 ** -10 + 2.0 ** -24).all():
                fails.append("%s: transcode_q4 is off by more than its f16 rounding" % qtype)
        if qtype in ("Q5_0", "IQ4_NL", "IQ4_XS"):
            d, q = transcode_q8(raw, qtype, x.size)
            t = (d[:, None] * q.astype(np.float32)).reshape(-1)
            tol = np.repeat(np.abs(d) * 127 * 2.0 ** -11, 32) + 2.0 ** -24
            if not (np.abs(t - y.reshape(-1)) <= tol).all():
                fails.append("%s: transcode_q8 is off by more than its f16 rounding" % qtype)
    return fails


if __name__ == "__main__":
    import sys
    bad = selfcheck()
    for f in bad:
        print("FAIL " + f)
    print("ggml_quants self-check: %d types, %d failures" % (len(TYPES), len(bad)))
    sys.exit(1 if bad else 0)
