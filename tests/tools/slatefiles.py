"""slatefiles.py - readers for the files the tests look inside, so that a test states what it
checks rather than how to parse: a .slate package (docs/format.md: 64-byte header, the section
table at 64 with 32 bytes per section, META JSON holding the program and the tensor table, DATA
with each tensor at its table offset) and a GGUF v2/v3 file (key/value records, tensor infos,
the data section aligned to general.alignment, 32 when absent). Standard library only; the e2e
tests find it through PYTHONPATH (tests/e2e/lib.sh).

    import slatefiles as sf
    sf.package_program("m.slate")   # META["program"]: the list of ops
    sf.package_meta("m.slate")      # all of META ("tensors" is the tensor table)
    sf.package_tensors("m.slate")   # name -> (tensor-table entry, its bytes)
    sf.gguf_tensors("m.gguf")       # name -> (ne, ggml type, file bytes from its offset on)
"""
import json
import struct

# Byte sizes of the fixed-size GGUF value types (uint8 .. float64 as numbered by GGUF).
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
GGUF_MAGIC = 0x46554747
SEC_META, SEC_TOKENIZER, SEC_DATA = 1, 2, 3


def skip_value(buf, pos, vtype):
    """Position just past one GGUF value of type vtype at pos."""
    if vtype in SCALAR:
        return pos + SCALAR[vtype]
    if vtype == STRING:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == ARRAY:
        etype, n = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype in SCALAR:
            return pos + SCALAR[etype] * n
        for _ in range(n):
            pos = skip_value(buf, pos, etype)
        return pos
    raise ValueError("unknown GGUF value type %d" % vtype)


class Gguf:
    """A parsed GGUF header. kvs: (key, vtype, record_start, value_pos, record_end) per pair, in
    file order (buf[record_start:record_end] is the whole record); tensors: (name, ne, ggml_type,
    offset) per tensor (ne innermost first, offset inside the data section); data0: the file
    offset of the data section."""

    def __init__(self, buf):
        magic, self.version, n_tensors, n_kv = struct.unpack_from("<IIQQ", buf, 0)
        if magic != GGUF_MAGIC or self.version not in (2, 3):
            raise ValueError("not a GGUF v2/v3 file")
        pos, self.align, self.kvs = 24, 32, []
        for _ in range(n_kv):
            start = pos
            (klen,) = struct.unpack_from("<Q", buf, pos)
            key = bytes(buf[pos + 8:pos + 8 + klen]).decode()
            (vtype,) = struct.unpack_from("<I", buf, pos + 8 + klen)
            vpos = pos + 12 + klen
            if key == "general.alignment":
                (self.align,) = struct.unpack_from("<I", buf, vpos)
            pos = skip_value(buf, vpos, vtype)
            self.kvs.append((key, vtype, start, vpos, pos))
        self.kv_end = pos
        self.tensors = []
        for _ in range(n_tensors):
            (nlen,) = struct.unpack_from("<Q", buf, pos)
            name = bytes(buf[pos + 8:pos + 8 + nlen]).decode()
            pos += 8 + nlen
            (n_dims,) = struct.unpack_from("<I", buf, pos)
            ne = list(struct.unpack_from("<%dQ" % n_dims, buf, pos + 4))
            pos += 4 + 8 * n_dims
            ttype, off = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            self.tensors.append((name, ne, ttype, off))
        self.data0 = (pos + self.align - 1) // self.align * self.align


def gguf_tensors(path):
    """name -> (ne, ggml type, a memoryview of the file from the tensor's first byte on)."""
    buf = memoryview(open(path, "rb").read())
    g = Gguf(buf)
    return {name: (ne, tt, buf[g.data0 + off:]) for name, ne, tt, off in g.tensors}


def package_sections(buf):
    """kind -> (offset, size) from a package's section table."""
    (n,) = struct.unpack_from("<I", buf, 12)
    sec = {}
    for i in range(n):
        kind, _, off, size = struct.unpack_from("<IIQQ", buf, 64 + 32 * i)
        sec[kind] = (off, size)
    return sec


def _package(path):
    buf = open(path, "rb").read()
    sec = package_sections(buf)
    off, size = sec[SEC_META]
    return buf, sec, json.loads(buf[off:off + size])


def package_meta(path):
    """The package's META object."""
    return _package(path)[2]


def package_program(path):
    """The package's program: META["program"], a list of op objects."""
    return package_meta(path)["program"]


def package_tensors(path):
    """name -> (tensor-table entry, the tensor's bytes)."""
    buf, sec, meta = _package(path)
    d0 = sec[SEC_DATA][0]
    return {t["name"]: (t, buf[d0 + t["offset"]:d0 + t["offset"] + t["size"]])
            for t in meta["tensors"]}
