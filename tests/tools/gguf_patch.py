#!/usr/bin/env python3
"""gguf_patch.py - a copy of a GGUF file with metadata or tensor-info edits, to break one thing
at a time in refusal tests (tests/e2e/test_bad_inputs.sh). The data section is copied as it is.

    gguf_patch.py IN.gguf OUT.gguf EDIT...

EDIT is kv:KEY:TYPE:VALUE (TYPE u32|i32|f32|f64|str; the pair is replaced where it stands, or
appended) or tensor:NAME:GGML_TYPE (rewrites the type number only, not the offsets).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slatefiles  # noqa: E402

# GGUF value type and struct format of each numeric TYPE.
FMT = {"u32": (4, "<I"), "i32": (5, "<i"), "f32": (6, "<f"), "f64": (12, "<d")}


def _str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv_record(key, typ, val):
    if typ == "str":
        return _str(key) + struct.pack("<I", slatefiles.STRING) + _str(val)
    t, f = FMT[typ]
    v = float(val) if typ in ("f32", "f64") else int(val, 0)
    return _str(key) + struct.pack("<I", t) + struct.pack(f, v)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    src, dst, edits = argv[0], argv[1], argv[2:]
    b = open(src, "rb").read()
    g = slatefiles.Gguf(b)
    magic, version, n_tensors, _ = struct.unpack_from("<IIQQ", b, 0)
    kvs = [[key, b[start:end]] for key, _, start, _, end in g.kvs]
    infos, pos = [], g.kv_end
    for name, ne, _, _ in g.tensors:
        size = 8 + len(name.encode()) + 4 + 8 * len(ne) + 12
        infos.append([name, len(ne), bytearray(b[pos:pos + size])])
        pos += size
    for e in edits:
        kind, rest = e.split(":", 1)
        if kind == "kv":
            key, typ, val = rest.split(":")
            for kv in kvs:
                if kv[0] == key:
                    kv[1] = kv_record(key, typ, val)
                    break
            else:
                kvs.append([key, kv_record(key, typ, val)])
        elif kind == "tensor":
            name, typ = rest.split(":")
            for n, n_dims, rec in infos:
                if n == name:
                    struct.pack_into("<I", rec, 8 + len(name.encode()) + 4 + 8 * n_dims, int(typ))
        else:
            sys.exit("gguf_patch.py: unknown edit '%s' (kv:... or tensor:...)" % e)
    head = struct.pack("<IIQQ", magic, version, n_tensors, len(kvs))
    head += b"".join(kv[1] for kv in kvs) + b"".join(bytes(rec) for _, _, rec in infos)
    with open(dst, "wb") as fo:
        fo.write(head + b"\0" * ((-len(head)) % g.align) + b[g.data0:])


if __name__ == "__main__":
    main(sys.argv[1:])
