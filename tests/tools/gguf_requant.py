#!/usr/bin/env python3
"""gguf_requant.py - rewrite a GGUF file with its 2-D F16/F32 matrices quantized to ggml's Q4_1
(blocks of 32: f16 d, f16 m, 16 bytes of nibbles; value = d * q + m, element j < 16 in the low
nibble of byte j, element j + 16 in its high nibble). Metadata and every other tensor are
copied unchanged. Test fixture writer for slate's GGUF import (no GGUF with Q4_1 tensors ships
in ../shared/models). Needs NumPy (Debian's /usr/bin/python3).

    gguf_requant.py IN.gguf OUT.gguf [--skip NAME]...
"""
import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slatefiles  # noqa: E402

GGML_F32, GGML_F16, GGML_Q4_1 = 0, 1, 3


def quantize_q4_1(x):
    """x: float32 [rows, cols], cols % 32 == 0 -> Q4_1 bytes as ggml's reference writes them."""
    blocks = x.reshape(-1, 32).astype(np.float32)
    lo, hi = blocks.min(axis=1), blocks.max(axis=1)
    d = (hi - lo) / 15.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
    q = np.clip(np.floor((blocks - lo[:, None]) * inv[:, None] + 0.5), 0, 15).astype(np.uint8)
    out = np.empty((blocks.shape[0], 20), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = lo.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 4:20] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--skip", action="append", default=[], help="tensor names to copy unchanged")
    a = ap.parse_args(argv)
    buf = open(a.src, "rb").read()
    try:
        g = slatefiles.Gguf(buf)
    except ValueError:
        sys.exit("gguf_requant.py: %s is not a GGUF v2/v3 file" % a.src)
    magic, version, n_tensors, n_kv = struct.unpack_from("<IIQQ", buf, 0)
    kv_bytes, align, data0 = buf[24:g.kv_end], g.align, g.data0
    elem = {GGML_F32: 4, GGML_F16: 2}
    out_tensors = []
    for name, ne, ttype, off in g.tensors:
        n = int(np.prod(ne))
        convert = (ttype in elem and len(ne) == 2 and ne[0] % 32 == 0 and name not in a.skip)
        if convert:
            dt = np.float32 if ttype == GGML_F32 else np.float16
            x = np.frombuffer(buf, dtype=dt, count=n, offset=data0 + off).astype(np.float32)
            out_tensors.append((name, ne, GGML_Q4_1, quantize_q4_1(x)))
        else:
            size = {GGML_F32: 4 * n, GGML_F16: 2 * n}.get(ttype)
            if size is None:
                sys.exit("gguf_requant.py: tensor %s has type %d; only F32/F16 sources" % (name, ttype))
            out_tensors.append((name, ne, ttype, buf[data0 + off:data0 + off + size]))
    head = bytearray(struct.pack("<IIQQ", magic, version, n_tensors, n_kv)) + kv_bytes
    off, offs = 0, []
    for _, _, _, blob in out_tensors:
        offs.append(off)
        off = (off + len(blob) + align - 1) // align * align
    for (name, ne, ttype, _), o in zip(out_tensors, offs):
        nb = name.encode()
        head += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(ne))
        head += struct.pack("<%dQ" % len(ne), *ne) + struct.pack("<IQ", ttype, o)
    head += b"\0" * ((len(head) + align - 1) // align * align - len(head))
    with open(a.dst, "wb") as fo:
        fo.write(head)
        for (_, _, _, blob), o in zip(out_tensors, offs):
            fo.write(blob)
            fo.write(b"\0" * ((len(blob) + align - 1) // align * align - len(blob)))


if __name__ == "__main__":
    main(sys.argv[1:])
