/*
 * serialize.c - the tokenizer blob stored in packages (TOKENIZER section): everything needed to
 * rebuild the same tokenizer, self-contained, versioned, little-endian, no padding.
 *
 * Byte layout, version 1 (offsets from the start of the blob):
 *
 *   0   u8[4]  magic "STOK"
 *   4   u32    version = 1
 *   8   u32    kind: 1 = SPM (SentencePiece-style BPE with scores), 2 = BPE (byte-level)
 *   12  u32    flags: bit 0 add_bos, bit 1 add_space_prefix, bit 2 byte_fallback,
 *              bit 3 space_is_plain, bit 4 nfc, bit 5 ignore_merges, bit 6
 *              prefix_unless_spaced, bit 7 prefix_first_only (HF Metaspace), bit 8
 *              has_attrs (the attribute table below follows), bit 9 fuse_unk (HF BPE
 *              model.fuse_unk: a run of unknown characters gives one unk_id), bits 10-11
 *              decode_strip (how decode drops the dummy-prefix mark, slate__tok_dstrip in
 *              tok.h: 0 sentencepiece, 1 none, 2 HF Strip decoder, 3 HF Metaspace decoder),
 *              bit 12 decode_added_marks (an HF decoder that makes U+2581 a space in added
 *              tokens too; not with bit 3), bit 13 merge_ranks (SPM merges only the pairs
 *              that the merges list, lowest rank first: HF tokenizer.json; without it SPM
 *              merges by score and has no merges), bit 14 split_marks (HF Metaspace split:
 *              true: each piece from one word mark to the next is merged on its own); other
 *              bits must be 0; bits 1-3, 6-7 and 9-14 are SPM only and bit 5 BPE only
 *   16  i32    bos_id   \
 *   20  i32    eos_id    |
 *   24  i32    unk_id    |  -1 = none, else 0 .. n_tokens-1
 *   28  i32    pad_id    |
 *   32  i32    eot_id   /
 *   36  u32    n_tokens   1 .. 4194304
 *   40  u32    n_merges   0 .. 8388608 (0 for SPM without flag bit 13)
 *   44  u32    n_pre      pre-tokenizer regexes: 0 for SPM, 1 .. 16 for BPE
 *   48  tokens, n_tokens records, in id order:
 *         f32  score (SPM merge priority; not NaN)
 *         u8   type: 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 4 USER_DEFINED, 5 UNUSED, 6 BYTE
 *         u32  len (0 .. 65536)
 *         u8   text[len]: as the vocabulary spells it (SPM: U+2581 for space unless
 *              space_is_plain; BPE: GPT-2 byte-to-unicode alphabet; added tokens: plain text)
 *       merges, n_merges records, in rank order (first = merged first):
 *         u32  left id, u32 right id  (text(left) + text(right) must be a token; a pair
 *              listed again keeps its first rank for BPE, takes the later one for SPM as HF)
 *       pre-tokenizer regexes, n_pre records, applied in order:
 *         u32  len (1 .. 65536)
 *         u8   pattern[len]: PCRE2 syntax, UTF-8, no NUL
 *       token attributes, only with flag bit 8:
 *         u32  n_attrs   1 .. n_tokens
 *         n_attrs records, ids strictly ascending:
 *           u32  id (an added token: type 2 UNKNOWN, 3 CONTROL or 4 USER_DEFINED)
 *           u8   attrs: bit 0 lstrip, bit 1 rstrip, bit 2 normalized (HF AddedToken); not 0,
 *                other bits 0
 *   The blob ends right after the last record: trailing bytes are an error.
 *
 * The attribute table was added without a version change: a tokenizer without attributes
 * writes exactly the bytes it always did (bit 8 clear), so blobs from earlier builds read
 * unchanged and blobs without attributes stay readable by earlier builds; a blob with them is
 * refused by an earlier build ("unknown flag bits 0x100") instead of being misread. Later
 * additions follow the same rule: the normalized bit (2) of a token's attributes is refused by
 * builds that only know lstrip / rstrip ("attributes 0x4"), and fuse_unk (flag bit 9) by builds
 * that predate it ("unknown flag bits 0x200"); so are decode_strip modes other than 0 (bits
 * 10-11) and decode_added_marks (bit 12, "unknown flag bits 0x1000"), and merge_ranks (bit 13,
 * "unknown flag bits 0x2000"): an SPM tokenizer with ranks cannot be read as one that merges
 * by score, which would give other ids; likewise split_marks (bit 14, "unknown flag bits
 * 0x4000").
 *
 * Derived, not stored: the end-of-generation set (eos, eot, and added tokens spelled
 * "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>", "<|eom_id|>", "<|end|>",
 * "<end_of_turn>"), hash tables and decoded pieces.
 *
 * The reader trusts nothing: every count is checked against its limit and against the bytes
 * left before anything is allocated, every id against n_tokens, every enum against its range;
 * the first problem is reported as E_FORMAT with its offset in the blob. Version > 1 is
 * E_UNSUPPORTED.
 */
#include "tok/tok.h"

#include <math.h>
#include <string.h>

#define STOK_VERSION 1u
#define FLAG_ADD_BOS (1u << 0)
#define FLAG_ADD_SPACE_PREFIX (1u << 1)
#define FLAG_BYTE_FALLBACK (1u << 2)
#define FLAG_SPACE_IS_PLAIN (1u << 3)
#define FLAG_NFC (1u << 4)
#define FLAG_IGNORE_MERGES (1u << 5)
#define FLAG_PREFIX_UNLESS_SPACED (1u << 6)
#define FLAG_PREFIX_FIRST_ONLY (1u << 7)
#define FLAG_HAS_ATTRS (1u << 8)
#define FLAG_FUSE_UNK (1u << 9)
#define FLAG_DSTRIP_SHIFT 10
#define FLAG_DSTRIP (3u << FLAG_DSTRIP_SHIFT)
#define FLAG_ADDED_MARKS (1u << 12)
#define FLAG_MERGE_RANKS (1u << 13)
#define FLAG_SPLIT_MARKS (1u << 14)
#define FLAG_ALL 0x7FFFu

void slate__tok_serialize(const slate_tokenizer *tok, slate__buf *b) {
    if (!tok || !b) return;
    slate__buf_append(b, "STOK", 4);
    slate__buf_u32(b, STOK_VERSION);
    slate__buf_u32(b, (uint32_t)tok->kind);
    uint32_t flags = (tok->add_bos ? FLAG_ADD_BOS : 0) |
                     (tok->add_space_prefix ? FLAG_ADD_SPACE_PREFIX : 0) |
                     (tok->byte_fallback ? FLAG_BYTE_FALLBACK : 0) |
                     (tok->space_is_plain ? FLAG_SPACE_IS_PLAIN : 0) | (tok->nfc ? FLAG_NFC : 0) |
                     (tok->ignore_merges ? FLAG_IGNORE_MERGES : 0) |
                     (tok->prefix_unless_spaced ? FLAG_PREFIX_UNLESS_SPACED : 0) |
                     (tok->prefix_first_only ? FLAG_PREFIX_FIRST_ONLY : 0) |
                     (tok->attrs ? FLAG_HAS_ATTRS : 0) | (tok->fuse_unk ? FLAG_FUSE_UNK : 0) |
                     (uint32_t)tok->decode_strip << FLAG_DSTRIP_SHIFT |
                     (tok->decode_added_marks ? FLAG_ADDED_MARKS : 0) |
                     (tok->merge_ranks ? FLAG_MERGE_RANKS : 0) |
                     (tok->split_marks ? FLAG_SPLIT_MARKS : 0);
    slate__buf_u32(b, flags);
    slate__buf_i32(b, tok->bos_id);
    slate__buf_i32(b, tok->eos_id);
    slate__buf_i32(b, tok->unk_id);
    slate__buf_i32(b, tok->pad_id);
    slate__buf_i32(b, tok->eot_id);
    slate__buf_u32(b, (uint32_t)tok->n_tokens);
    slate__buf_u32(b, (uint32_t)tok->n_merges);
    slate__buf_u32(b, (uint32_t)tok->n_pre);
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        uint32_t len = tok->text_off[i + 1] - tok->text_off[i];
        slate__buf_f32(b, tok->scores[i]);
        slate__buf_append(b, &tok->types[i], 1);
        slate__buf_u32(b, len);
        slate__buf_append(b, tok->text + tok->text_off[i], len);
    }
    for (int32_t r = 0; r < tok->n_merges; r++) {
        slate__buf_u32(b, (uint32_t)tok->merges[2 * r]);
        slate__buf_u32(b, (uint32_t)tok->merges[2 * r + 1]);
    }
    for (int32_t i = 0; i < tok->n_pre; i++) {
        uint32_t len = (uint32_t)strlen(tok->pre_src[i]);
        slate__buf_u32(b, len);
        slate__buf_append(b, tok->pre_src[i], len);
    }
    if (tok->attrs) { /* set only when some token has attributes (slate__tok_create) */
        uint32_t n_attrs = 0;
        for (int32_t i = 0; i < tok->n_tokens; i++) n_attrs += tok->attrs[i] != 0;
        slate__buf_u32(b, n_attrs);
        for (int32_t i = 0; i < tok->n_tokens; i++) {
            if (!tok->attrs[i]) continue;
            slate__buf_u32(b, (uint32_t)i);
            slate__buf_append(b, &tok->attrs[i], 1);
        }
    }
}

static slate_status bad(slate_error *err, size_t at, const char *what) {
    return slate__fail_at(err, SLATE_E_FORMAT, at, "tokenizer blob: %s at offset %zu", what, at);
}

/* The attribute table (flag bit 8) into attrs[n_tokens] (zeroed). */
static slate_status read_attrs(slate__rd *r, uint32_t n_tokens, const uint8_t *types,
                               uint8_t *attrs, slate_error *err) {
    size_t at = r->pos;
    uint32_t n_attrs = slate__rd_u32(r);
    if (r->failed || n_attrs < 1 || n_attrs > n_tokens || (uint64_t)n_attrs * 5 > r->len - r->pos)
        return slate__fail_at(err, SLATE_E_FORMAT, at,
                              "tokenizer blob: attribute table at offset %zu: count %u, expected "
                              "1..%u records of 5 bytes within the blob",
                              at, n_attrs, n_tokens);
    int64_t prev = -1;
    for (uint32_t k = 0; k < n_attrs; k++) {
        at = r->pos;
        uint32_t id = slate__rd_u32(r);
        uint8_t a = slate__rd_u8(r);
        if (id >= n_tokens || (int64_t)id <= prev)
            return slate__fail_at(err, SLATE_E_FORMAT, at,
                                  "tokenizer blob: attribute record %u names id %u, expected "
                                  "ascending ids below %u",
                                  k, id, n_tokens);
        if (a == 0 || (a & ~SLATE__TOK_ATTR_ALL))
            return slate__fail_at(err, SLATE_E_FORMAT, at + 4,
                                  "tokenizer blob: token %u has attributes 0x%x, expected 1..7 "
                                  "(bits lstrip 1, rstrip 2, normalized 4)",
                                  id, (unsigned)a);
        if (types[id] != SLATE__TOKT_UNKNOWN && types[id] != SLATE__TOKT_CONTROL &&
            types[id] != SLATE__TOKT_USER_DEFINED)
            return slate__fail_at(err, SLATE_E_FORMAT, at,
                                  "tokenizer blob: token %u has attributes but type %u, "
                                  "expected an added token (2, 3 or 4)",
                                  id, (unsigned)types[id]);
        attrs[id] = a;
        prev = id;
    }
    return SLATE_OK;
}

slate_status slate__tok_deserialize(const uint8_t *data, size_t len, slate_tokenizer **out,
                                    slate_error *err) {
    if (out) *out = NULL;
    if (!out || (!data && len > 0))
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_deserialize: NULL argument");
    slate__rd r = {data, len, 0, false};
    const uint8_t *magic = slate__rd_bytes(&r, 4);
    if (!magic || memcmp(magic, "STOK", 4) != 0)
        return slate__fail_at(err, SLATE_E_FORMAT, 0,
                              "tokenizer blob: magic is not \"STOK\" (%zu bytes)", len);
    uint32_t version = slate__rd_u32(&r);
    if (r.failed) return bad(err, 4, "truncated header");
    if (version != STOK_VERSION)
        return slate__fail_at(err, version > STOK_VERSION ? SLATE_E_UNSUPPORTED : SLATE_E_FORMAT, 4,
                              "tokenizer blob: version %u, this build reads version %u", version,
                              STOK_VERSION);
    uint32_t kind = slate__rd_u32(&r);
    uint32_t flags = slate__rd_u32(&r);
    int32_t ids[5];
    for (int i = 0; i < 5; i++) ids[i] = slate__rd_i32(&r);
    uint32_t n_tokens = slate__rd_u32(&r);
    uint32_t n_merges = slate__rd_u32(&r);
    uint32_t n_pre = slate__rd_u32(&r);
    if (r.failed)
        return slate__fail_at(err, SLATE_E_FORMAT, len,
                              "tokenizer blob: header needs 48 bytes, blob has %zu (truncated?)",
                              len);
    if (kind != SLATE__TOK_SPM && kind != SLATE__TOK_BPE)
        return slate__fail_at(err, SLATE_E_FORMAT, 8,
                              "tokenizer blob: kind %u, expected 1 (SPM) or 2 (BPE)", kind);
    if (flags & ~FLAG_ALL)
        return slate__fail_at(err, SLATE_E_FORMAT, 12, "tokenizer blob: unknown flag bits 0x%x",
                              flags & ~FLAG_ALL);
    uint32_t foreign = kind == SLATE__TOK_SPM
                           ? FLAG_IGNORE_MERGES
                           : FLAG_ADD_SPACE_PREFIX | FLAG_BYTE_FALLBACK | FLAG_SPACE_IS_PLAIN |
                                 FLAG_PREFIX_UNLESS_SPACED | FLAG_PREFIX_FIRST_ONLY |
                                 FLAG_FUSE_UNK | FLAG_DSTRIP | FLAG_ADDED_MARKS |
                                 FLAG_MERGE_RANKS | FLAG_SPLIT_MARKS;
    if (flags & foreign)
        return slate__fail_at(err, SLATE_E_FORMAT, 12,
                              "tokenizer blob: flag bits 0x%x do not apply to %s tokenizers",
                              flags & foreign, kind == SLATE__TOK_SPM ? "SPM" : "BPE");
    /* The Metaspace refinements qualify the dummy prefix: without it they mean nothing (and
     * would not survive a round trip). */
    if ((flags & (FLAG_PREFIX_UNLESS_SPACED | FLAG_PREFIX_FIRST_ONLY)) &&
        !(flags & FLAG_ADD_SPACE_PREFIX))
        return slate__fail_at(err, SLATE_E_FORMAT, 12,
                              "tokenizer blob: flag bits 0x%x need bit 1 (add_space_prefix)",
                              flags & (FLAG_PREFIX_UNLESS_SPACED | FLAG_PREFIX_FIRST_ONLY));
    /* Added tokens' marks are U+2581: a vocabulary that spells spaces plainly has none. */
    if ((flags & FLAG_ADDED_MARKS) && (flags & FLAG_SPACE_IS_PLAIN))
        return slate__fail_at(err, SLATE_E_FORMAT, 12,
                              "tokenizer blob: flag bit 12 (decode_added_marks) with bit 3 "
                              "(space_is_plain)");
    if (n_tokens < 1 || n_tokens > SLATE__TOK_MAX_TOKENS)
        return slate__fail_at(err, SLATE_E_FORMAT, 36,
                              "tokenizer blob: n_tokens %u, expected 1..%d", n_tokens,
                              SLATE__TOK_MAX_TOKENS);
    static const char *const id_names[5] = {"bos_id", "eos_id", "unk_id", "pad_id", "eot_id"};
    for (int i = 0; i < 5; i++)
        if (ids[i] < -1 || ids[i] >= (int64_t)n_tokens)
            return slate__fail_at(err, SLATE_E_FORMAT, 16 + 4 * (size_t)i,
                                  "tokenizer blob: %s %d, expected -1..%u", id_names[i],
                                  (int)ids[i], n_tokens - 1);
    bool spm = kind == SLATE__TOK_SPM;
    bool ranks = (flags & FLAG_MERGE_RANKS) != 0;
    if (n_merges > SLATE__TOK_MAX_MERGES || (spm && !ranks && n_merges != 0))
        return slate__fail_at(err, SLATE_E_FORMAT, 40, "tokenizer blob: n_merges %u, expected %s",
                              n_merges,
                              spm && !ranks ? "0 for SPM without flag bit 13 (merge_ranks)"
                                            : "0..8388608");
    if (spm ? n_pre != 0 : (n_pre < 1 || n_pre > SLATE__TOK_MAX_PRE))
        return slate__fail_at(err, SLATE_E_FORMAT, 44, "tokenizer blob: n_pre %u, expected %s",
                              n_pre, spm ? "0 for SPM" : "1..16 for BPE");
    /* Each token record has at least 9 bytes, each merge 8, each regex 5: refuse counts that
     * cannot fit before allocating for them. */
    uint64_t min_rest = (uint64_t)n_tokens * 9 + (uint64_t)n_merges * 8 + (uint64_t)n_pre * 5;
    if (min_rest > len - r.pos)
        return slate__fail_at(err, SLATE_E_FORMAT, 36,
                              "tokenizer blob: %u tokens, %u merges and %u regexes need at least "
                              "%llu bytes after the header, %zu left (truncated?)",
                              n_tokens, n_merges, n_pre, (unsigned long long)min_rest, len - r.pos);

    const char **tokens = slate__malloc((size_t)n_tokens * sizeof *tokens);
    uint32_t *lens = slate__malloc((size_t)n_tokens * sizeof *lens);
    float *scores = slate__malloc((size_t)n_tokens * sizeof *scores);
    uint8_t *types = slate__malloc((size_t)n_tokens);
    int32_t *merges = slate__malloc(((size_t)n_merges + 1) * 2 * sizeof *merges);
    uint8_t *attrs = (flags & FLAG_HAS_ATTRS) ? slate__calloc((size_t)n_tokens, 1) : NULL;
    char **pre = slate__calloc((size_t)n_pre + 1, sizeof *pre);
    slate_status st = SLATE_OK;
    if (!tokens || !lens || !scores || !types || !merges || !pre ||
        ((flags & FLAG_HAS_ATTRS) && !attrs)) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory reading a tokenizer of %u tokens",
                         n_tokens);
        goto done;
    }
    for (uint32_t i = 0; i < n_tokens; i++) {
        size_t at = r.pos;
        scores[i] = slate__rd_f32(&r);
        types[i] = slate__rd_u8(&r);
        lens[i] = slate__rd_u32(&r);
        if (r.failed) {
            st = slate__fail_at(err, SLATE_E_FORMAT, at,
                                "tokenizer blob: token %u record needs 9 bytes at offset %zu, blob "
                                "ends at %zu",
                                i, at, len);
            goto done;
        }
        if (isnan(scores[i])) {
            st = slate__fail_at(err, SLATE_E_FORMAT, at, "tokenizer blob: token %u has a NaN score",
                                i);
            goto done;
        }
        if (types[i] < SLATE__TOKT_NORMAL || types[i] > SLATE__TOKT_BYTE) {
            st = slate__fail_at(err, SLATE_E_FORMAT, at + 4,
                                "tokenizer blob: token %u has type %u, expected 1..6", i,
                                (unsigned)types[i]);
            goto done;
        }
        if (lens[i] > SLATE__TOK_MAX_TOKEN_BYTES) {
            st = slate__fail_at(err, SLATE_E_FORMAT, at + 5,
                                "tokenizer blob: token %u is %u bytes long, at most %d", i, lens[i],
                                SLATE__TOK_MAX_TOKEN_BYTES);
            goto done;
        }
        tokens[i] = (const char *)slate__rd_bytes(&r, lens[i]);
        if (!tokens[i]) {
            st = slate__fail_at(err, SLATE_E_FORMAT, at + 9,
                                "tokenizer blob: token %u needs %u bytes at offset %zu, blob ends "
                                "at %zu (truncated?)",
                                i, lens[i], at + 9, len);
            goto done;
        }
    }
    for (uint32_t m = 0; m < n_merges; m++) {
        size_t at = r.pos;
        uint32_t a = slate__rd_u32(&r), b = slate__rd_u32(&r);
        if (r.failed) {
            st =
                slate__fail_at(err, SLATE_E_FORMAT, at,
                               "tokenizer blob: merge %u needs 8 bytes at offset %zu, blob ends at "
                               "%zu",
                               m, at, len);
            goto done;
        }
        if (a >= n_tokens || b >= n_tokens) {
            st = slate__fail_at(err, SLATE_E_FORMAT, at,
                                "tokenizer blob: merge %u joins ids %u and %u, expected < %u", m, a,
                                b, n_tokens);
            goto done;
        }
        merges[2 * m] = (int32_t)a;
        merges[2 * m + 1] = (int32_t)b;
    }
    for (uint32_t i = 0; i < n_pre; i++) {
        size_t at = r.pos;
        uint32_t plen = slate__rd_u32(&r);
        const uint8_t *p = r.failed || plen == 0 || plen > SLATE__TOK_MAX_REGEX_BYTES
                               ? NULL
                               : slate__rd_bytes(&r, plen);
        if (!p || memchr(p, '\0', plen)) {
            st = slate__fail_at(err, SLATE_E_FORMAT, at,
                                "tokenizer blob: regex %u (length %u) is truncated, empty, longer "
                                "than %d bytes or contains NUL",
                                i, plen, SLATE__TOK_MAX_REGEX_BYTES);
            goto done;
        }
        pre[i] = slate__strndup((const char *)p, plen);
        if (!pre[i]) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory reading regex %u", i);
            goto done;
        }
    }
    if (attrs && (st = read_attrs(&r, n_tokens, types, attrs, err)) != SLATE_OK) goto done;
    if (r.pos != len) {
        st = slate__fail_at(err, SLATE_E_FORMAT, r.pos,
                            "tokenizer blob: %zu unexpected bytes after the last record",
                            len - r.pos);
        goto done;
    }
    slate__tok_spec spec = {
        .kind = (slate__tok_kind)kind,
        .n_tokens = (int32_t)n_tokens,
        .tokens = tokens,
        .token_lens = lens,
        .scores = scores,
        .types = types,
        .n_merges = (int32_t)n_merges,
        .merge_ids = merges,
        .pre_regexes = (const char *const *)pre,
        .n_pre_regexes = (int32_t)n_pre,
        .bos_id = ids[0],
        .eos_id = ids[1],
        .unk_id = ids[2],
        .pad_id = ids[3],
        .eot_id = ids[4],
        .add_bos = (flags & FLAG_ADD_BOS) != 0,
        .add_space_prefix = (flags & FLAG_ADD_SPACE_PREFIX) != 0,
        .byte_fallback = (flags & FLAG_BYTE_FALLBACK) != 0,
        .space_is_plain = (flags & FLAG_SPACE_IS_PLAIN) != 0,
        .nfc = (flags & FLAG_NFC) != 0,
        .ignore_merges = (flags & FLAG_IGNORE_MERGES) != 0,
        .prefix_unless_spaced = (flags & FLAG_PREFIX_UNLESS_SPACED) != 0,
        .prefix_first_only = (flags & FLAG_PREFIX_FIRST_ONLY) != 0,
        .attrs = attrs,
        .fuse_unk = (flags & FLAG_FUSE_UNK) != 0,
        .decode_strip = (uint8_t)((flags & FLAG_DSTRIP) >> FLAG_DSTRIP_SHIFT),
        .decode_added_marks = (flags & FLAG_ADDED_MARKS) != 0,
        .merge_ranks = ranks,
        .split_marks = (flags & FLAG_SPLIT_MARKS) != 0,
    };
    st = slate__tok_create(&spec, out, err);
done:
    slate__free(tokens);
    slate__free(lens);
    slate__free(scores);
    slate__free(types);
    slate__free(merges);
    slate__free(attrs);
    if (pre)
        for (uint32_t i = 0; i < n_pre; i++) slate__free(pre[i]);
    slate__free(pre);
    return st;
}
