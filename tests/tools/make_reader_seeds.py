# make_reader_seeds.py - writes the handcrafted GGUF and safetensors seed corpora in
# tests/fuzz/corpus/{gguf,safetensors} (valid files and one-thing-broken variants).
import struct, os, json
import sys
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fuzz', 'corpus')
G = os.path.join(ROOT, 'gguf')
S = os.path.join(ROOT, 'safetensors')

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack('<Q', len(b)) + b

def kv(key, vtype, payload):
    return gstr(key) + struct.pack('<I', vtype) + payload

def arr(et, items, fmt=None):
    out = struct.pack('<IQ', et, len(items))
    for it in items:
        out += gstr(it) if et == 8 else struct.pack(fmt, it)
    return out

def tinfo(name, ne, typ, off):
    return gstr(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<Q', x) for x in ne) + struct.pack('<IQ', typ, off)

def nbytes(ne, typ):
    n = 1
    for x in ne: n *= x
    return {0: n*4, 1: n*2, 30: n*2, 2: n//32*18, 8: n//32*34}[typ]

def gguf(kvs, tensors, version=3, align=32, magic=b'GGUF', pad=True, n_t=None, n_kv=None):
    out = magic + struct.pack('<IQQ', version, len(tensors) if n_t is None else n_t, len(kvs) if n_kv is None else n_kv)
    out += b''.join(kvs)
    offs = []; off = 0
    for name, ne, typ in tensors:
        offs.append(off); off += nbytes(ne, typ); off = (off + align - 1)//align*align
    for (name, ne, typ), o in zip(tensors, offs):
        out += tinfo(name, ne, typ, o)
    if tensors or pad:
        while len(out) % align: out += b'\0'
    data = bytes((i*7) & 0xff for i in range(off))
    if tensors:
        last = offs[-1] + nbytes(tensors[-1][1], tensors[-1][2])
        data = data[:last]
    return out + data

base_kvs = [kv('general.architecture', 8, gstr('llama')), kv('general.alignment', 4, struct.pack('<I', 32)),
            kv('llama.embedding_length', 4, struct.pack('<I', 32)),
            kv('llama.attention.layer_norm_rms_epsilon', 6, struct.pack('<f', 1e-5)),
            kv('tokenizer.ggml.model', 8, gstr('llama')),
            kv('tokenizer.ggml.tokens', 9, arr(8, ['<unk>', '<s>', '</s>', 'a', 'b'])),
            kv('tokenizer.ggml.scores', 9, arr(6, [0, 0, 0, -1, -2], '<f')),
            kv('tokenizer.ggml.token_type', 9, arr(5, [2, 3, 3, 1, 1], '<i'))]
two = [('token_embd.weight', [32, 5], 0), ('blk.0.attn_q.weight', [32, 32], 8)]
files = {}
files['valid_2tensors_v3.gguf'] = gguf(base_kvs, two)
files['valid_2tensors_v2.gguf'] = gguf(base_kvs, two, version=2)
files['valid_all_types.gguf'] = gguf(base_kvs[:2], [('f32', [32, 2], 0), ('f16', [32, 2], 1), ('bf16', [32], 30), ('q4', [64, 2], 2), ('q8', [32, 3], 8), ('d4', [2, 2, 2, 2], 0)])
allv = [kv('u8', 0, b'\x05'), kv('i8', 1, b'\xfb'), kv('u16', 2, struct.pack('<H', 7)), kv('i16', 3, struct.pack('<h', -7)),
        kv('u32', 4, struct.pack('<I', 1 << 31)), kv('i32', 5, struct.pack('<i', -1)), kv('f32', 6, struct.pack('<f', 2.5)),
        kv('bool', 7, b'\x01'), kv('str', 8, gstr('hello')), kv('u64', 10, struct.pack('<Q', 1 << 40)),
        kv('i64', 11, struct.pack('<q', -5)), kv('f64', 12, struct.pack('<d', 1e300)),
        kv('arr.u8', 9, arr(0, [1, 2, 3], '<B')), kv('arr.bool', 9, arr(7, [0, 1], '<B')), kv('arr.f64', 9, arr(12, [1.5], '<d')),
        kv('arr.empty', 9, arr(8, [])), kv('arr.i64', 9, arr(11, [-1, 2], '<q'))]
files['valid_all_value_types.gguf'] = gguf(allv, [])
files['valid_vocab_only_nopad.gguf'] = gguf(base_kvs[4:], [], pad=False)
files['valid_align64.gguf'] = gguf([kv('general.alignment', 4, struct.pack('<I', 64))], [('a', [3], 0), ('b', [5, 3], 1)], align=64)
files['bad_magic.gguf'] = gguf(base_kvs, two, magic=b'GGML')
files['bad_version1.gguf'] = gguf(base_kvs, two, version=1)
files['bad_bigendian.gguf'] = gguf(base_kvs, two, version=0x03000000)
v = files['valid_2tensors_v3.gguf']
files['bad_truncated_header.gguf'] = v[:20]
files['bad_truncated_kv.gguf'] = v[:150]
files['bad_truncated_data.gguf'] = v[:-1]
files['bad_huge_counts.gguf'] = gguf(base_kvs, two, n_t=1 << 62, n_kv=1 << 62)
files['bad_dup_key.gguf'] = gguf(base_kvs + [base_kvs[2]], two)
files['bad_dup_tensor.gguf'] = gguf(base_kvs, [two[0], two[0]])
files['bad_nested_array.gguf'] = gguf([kv('x', 9, struct.pack('<IQ', 9, 1) + arr(4, [1], '<I'))], [])
files['bad_unknown_vtype.gguf'] = gguf([kv('x', 13, b'\0' * 8)], [])
u = b'GGUF' + struct.pack('<IQQ', 3, 1, 0) + tinfo('t', [256], 12, 0)
while len(u) % 32: u += b'\0'
files['bad_unknown_ggml_type.gguf'] = u + bytes(144)
t = gguf([], [('a', [4], 0), ('b', [4], 0)])
files['bad_unaligned_offset.gguf'] = t.replace(struct.pack('<IQ', 0, 32), struct.pack('<IQ', 0, 33), 1)
files['bad_data_past_end.gguf'] = t.replace(struct.pack('<IQ', 0, 32), struct.pack('<IQ', 0, 4096), 1)
files['bad_array_count.gguf'] = gguf([kv('t', 9, struct.pack('<IQ', 8, 1 << 40) + gstr('a'))], [])
files['bad_string_len.gguf'] = gguf([kv('s', 8, struct.pack('<Q', 1 << 29) + b'abc')], [])
files['bad_zero_dim.gguf'] = gguf([], [('z', [0, 4], 0)])
os.makedirs(G, exist_ok=True)
for k, b in files.items():
    assert len(b) < 64 * 1024
    open(os.path.join(G, k), 'wb').write(b)

def st(header, data=b'', pad=True, hlen=None):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        while len(h) % 8: h += b' '
    return struct.pack('<Q', len(h) if hlen is None else hlen) + h + data

sizes = {'F32': 4, 'F16': 2, 'BF16': 2, 'F64': 8, 'I64': 8, 'I32': 4, 'I16': 2, 'I8': 1, 'U8': 1, 'BOOL': 1}
hdr = {'__metadata__': {'format': 'pt'}, 'w': {'dtype': 'F32', 'shape': [2, 3], 'data_offsets': [0, 24]},
       'b': {'dtype': 'F16', 'shape': [3], 'data_offsets': [24, 30]}, 's': {'dtype': 'I64', 'shape': [], 'data_offsets': [32, 40]},
       'e': {'dtype': 'U8', 'shape': [0], 'data_offsets': [40, 40]}}
data = bytes(i * 3 & 0xff for i in range(40))
sf = {}
sf['valid_small.safetensors'] = st(hdr, data)
sf['valid_empty.safetensors'] = st({}, b'')
sf['valid_meta_only.safetensors'] = st({'__metadata__': {'a': 'b'}})
h = {}; off = 0
for name, sz in sizes.items():
    h['t_' + name] = {'dtype': name, 'shape': [2, 2], 'data_offsets': [off, off + 4 * sz]}; off += 4 * sz
sf['valid_all_dtypes.safetensors'] = st(h, bytes(off))
sf['valid_nopad.safetensors'] = st({'a': {'dtype': 'U8', 'shape': [4], 'data_offsets': [0, 4]}}, b'abcd', pad=False)
sf['bad_hlen_past_end.safetensors'] = st(hdr, data, hlen=10000)
sf['bad_hlen_huge.safetensors'] = st(hdr, data, hlen=1 << 60)
sf['bad_not_json.safetensors'] = st(b'{"a": {dtype', data)
sf['bad_not_object.safetensors'] = st(b'[1, 2, 3]', data)
sf['bad_trailing.safetensors'] = st(b'{} x', data)
def mod(name, **kw):
    h2 = json.loads(json.dumps(hdr)); h2['w'].update(kw)
    for k, v in list(kw.items()):
        if v is None: del h2['w'][k]
    return st(h2, data)
sf['bad_missing_dtype.safetensors'] = mod('w', dtype=None)
sf['bad_unknown_dtype.safetensors'] = mod('w', dtype='F8_E5M2')
sf['bad_shape_mismatch.safetensors'] = mod('w', shape=[2, 4])
sf['bad_negative_dim.safetensors'] = mod('w', shape=[-2, -3])
sf['bad_offsets_past_data.safetensors'] = mod('w', data_offsets=[16, 40 + 24])
sf['bad_overlap.safetensors'] = mod('w', data_offsets=[8, 32])
sf['bad_big_number.safetensors'] = mod('w', shape=[2 ** 64, 1])
sf['bad_dup_name.safetensors'] = st(b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}', b'xy')
sf['bad_meta_not_strings.safetensors'] = st({'__metadata__': {'a': 1}})
sf['bad_truncated.safetensors'] = sf['valid_small.safetensors'][:-3]
sf['bad_deep_nesting.safetensors'] = st(b'{"a": ' + b'[' * 2000 + b']' * 2000 + b'}')
os.makedirs(S, exist_ok=True)
for k, b in sf.items():
    assert len(b) < 64 * 1024
    open(os.path.join(S, k), 'wb').write(b)
print(len(files), len(sf))
