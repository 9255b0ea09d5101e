/*
 * utf8.c - byte-level helpers of the tokenizer: strict UTF-8 validation (RFC 3629: no
 * overlongs, no surrogates, nothing past U+10FFFF; public as slate_utf8_char_len, which the
 * server's clipper uses too) and GPT-2's byte-to-unicode alphabet.
 *
 * GPT-2 (openai/gpt-2 encoder.py, bytes_to_unicode) maps each byte to a printable code point so
 * that byte-level BPE vocabularies can be stored as text: the bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF stand for themselves; the other 68 bytes, in increasing order, become U+0100,
 * U+0101, ... (so ' ' is U+0120 'Ġ' and '\n' is U+010A 'Ċ'). The tables are computed, not
 * stored, and the mapping is a bijection between the 256 bytes and code points < U+0144.
 */
#include "tok/tok.h"

size_t slate__tok_utf8_lead(const uint8_t *s, size_t n, size_t *ok) {
    *ok = 0;
    if (n == 0) return 0;
    uint8_t c = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) {
        need = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0; /* no overlongs */
        else if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F; /* <= U+10FFFF */
    } else {
        return 0;
    }
    size_t k = 1;
    while (k < need && k < n && (k == 1 ? s[1] >= lo && s[1] <= hi : (s[k] & 0xC0) == 0x80)) k++;
    *ok = k;
    return need;
}

size_t slate__tok_utf8_len(const uint8_t *s, size_t n) {
    size_t ok, need = slate__tok_utf8_lead(s, n, &ok);
    return need && ok == need ? need : 0;
}

size_t slate_utf8_char_len(const char *s, size_t n) {
    return s ? slate__tok_utf8_len((const uint8_t *)s, n) : 0;
}

/* The 68 bytes that do not stand for themselves are 0x00..0x20 (33), 0x7F..0xA0 (34) and 0xAD,
 * numbered 0..67 in that order. */
static bool gpt2_self(unsigned b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t slate__tok_gpt2_byte_to_cp(uint8_t b) {
    if (gpt2_self(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (uint32_t)(b - 0x7F);
    return 256u + 67u; /* 0xAD */
}

int32_t slate__tok_gpt2_cp_to_byte(uint32_t cp) {
    if (cp < 256) return gpt2_self(cp) ? (int32_t)cp : -1;
    if (cp < 256 + 33) return (int32_t)(cp - 256);
    if (cp < 256 + 67) return (int32_t)(cp - 256 - 33 + 0x7F);
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

size_t slate__tok_utf8_put(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Unicode White_Space (PropList.txt), the set Rust's regex \s matches: what HF tokenizers'
 * lstrip / rstrip consume. */
static bool is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static uint32_t decode_cp(const uint8_t *s, size_t k) {
    if (k == 1) return s[0];
    uint32_t cp = s[0] & (0x7Fu >> k);
    for (size_t i = 1; i < k; i++) cp = cp << 6 | (s[i] & 0x3Fu);
    return cp;
}

size_t slate__tok_space_len(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    size_t k = slate__tok_utf8_len(u, n);
    return k > 0 && is_white_space(decode_cp(u, k)) ? k : 0;
}

size_t slate__tok_space_len_back(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    for (size_t k = 1; k <= 4 && k <= n; k++)
        if (slate__tok_utf8_len(u + n - k, k) == k)
            return is_white_space(decode_cp(u + n - k, k)) ? k : 0;
    return 0;
}
