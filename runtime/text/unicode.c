/*
 * unicode.c — lookups over the generated tables in unicode_data.c (binary
 * search over sorted runs and maps; Latin-1 flags from a direct table since
 * they are the hot path), llama.cpp-compatible UTF-8 decoding, NFC, and the
 * GPT-2 byte map.  No state: every function is pure.
 */
#include "unicode.h"

#include <stdbool.h>

/* ---- properties ----------------------------------------------------------------- */

uint16_t uni_flags(uint32_t cp) {
    if (cp < 256) return uni_flags_latin1[cp];
    if (cp > UNI_MAX_CPT) return UNI_UNDEFINED;
    /* last run whose start is <= cp: runs are (start << 10 | flags), sorted */
    uint32_t key = (cp + 1) << 10;
    size_t lo = 0, hi = uni_n_flag_runs; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (uni_flag_runs[mid] < key) lo = mid;
        else hi = mid;
    }
    return (uint16_t)(uni_flag_runs[lo] & 0x3FF);
}

/* Index of key in a table of rows sorted by their first column, or -1. */
static long find_row(const uint32_t *rows, size_t n, size_t stride, uint32_t key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t k = rows[mid * stride];
        if (k == key) return (long)mid;
        if (k < key) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

uint32_t uni_tolower(uint32_t cp) {
    if (cp < 128) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    long r = find_row(&uni_lower_map[0][0], uni_n_lower_map, 2, cp);
    return r < 0 ? cp : uni_lower_map[r][1];
}

uint8_t uni_ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = uni_n_ccc_runs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < uni_ccc_runs[mid][0]) hi = mid;
        else if (cp > uni_ccc_runs[mid][1]) lo = mid + 1;
        else return (uint8_t)uni_ccc_runs[mid][2];
    }
    return 0;
}

/* Hangul syllable arithmetic (Unicode §3.12). */
enum {
    H_SBASE = 0xAC00, H_LBASE = 0x1100, H_VBASE = 0x1161, H_TBASE = 0x11A7,
    H_LCOUNT = 19, H_VCOUNT = 21, H_TCOUNT = 28, H_NCOUNT = H_VCOUNT * H_TCOUNT, H_SCOUNT = H_LCOUNT * H_NCOUNT,
};

uint32_t uni_nfd_first(uint32_t cp) {
    for (;;) {
        if (cp < 0xC0) return cp;
        if (cp >= H_SBASE && cp < H_SBASE + H_SCOUNT) return H_LBASE + (cp - H_SBASE) / H_NCOUNT;
        long r = find_row(&uni_decomp_map[0][0], uni_n_decomp_map, 3, cp);
        if (r < 0) return cp;
        cp = uni_decomp_map[r][1];
    }
}

/* ---- UTF-8 ----------------------------------------------------------------------- */

uint32_t uni_decode(const char *str, size_t n, size_t *i) {
    const uint8_t *s = (const uint8_t *)str + *i;
    size_t left = n - *i;
    uint8_t b = s[0];
    if (!(b & 0x80)) {
        *i += 1;
        return b;
    }
    if (b & 0x40) {
        if (!(b & 0x20)) {
            if (left > 1 && (s[1] & 0xC0) == 0x80) {
                *i += 2;
                return (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3F);
            }
        } else if (!(b & 0x10)) {
            if (left > 2 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
                *i += 3;
                return (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
            }
        } else if (!(b & 0x08)) {
            if (left > 3 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 && (s[3] & 0xC0) == 0x80) {
                *i += 4;
                return (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
                       (s[3] & 0x3F);
            }
        }
    }
    *i += 1;
    return UNI_REPLACEMENT;
}

size_t uni_encode(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp <= 0x7F) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp <= 0x7FF) {
        o[0] = (uint8_t)(0xC0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp > UNI_MAX_CPT) cp = UNI_REPLACEMENT;
    if (cp <= 0xFFFF) {
        o[0] = (uint8_t)(0xE0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- NFC (UAX #15) ----------------------------------------------------------------- */

static size_t decompose(uint32_t cp, uint32_t *out) {
    if (cp >= H_SBASE && cp < H_SBASE + H_SCOUNT) {
        uint32_t s = cp - H_SBASE, t = s % H_TCOUNT;
        out[0] = H_LBASE + s / H_NCOUNT;
        out[1] = H_VBASE + (s % H_NCOUNT) / H_TCOUNT;
        if (!t) return 2;
        out[2] = H_TBASE + t;
        return 3;
    }
    long r = cp < 0xC0 ? -1 : find_row(&uni_decomp_map[0][0], uni_n_decomp_map, 3, cp);
    if (r < 0) {
        out[0] = cp;
        return 1;
    }
    size_t k = decompose(uni_decomp_map[r][1], out);
    if (uni_decomp_map[r][2]) k += decompose(uni_decomp_map[r][2], out + k);
    return k;
}

/* Primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= H_LBASE && a < H_LBASE + H_LCOUNT && b >= H_VBASE && b < H_VBASE + H_VCOUNT)
        return H_SBASE + ((a - H_LBASE) * H_VCOUNT + (b - H_VBASE)) * H_TCOUNT;
    if (a >= H_SBASE && a < H_SBASE + H_SCOUNT && (a - H_SBASE) % H_TCOUNT == 0 && b > H_TBASE &&
        b < H_TBASE + H_TCOUNT)
        return a + (b - H_TBASE);
    size_t lo = 0, hi = uni_n_comp_map;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const uint32_t *r = uni_comp_map[mid];
        if (r[0] == a && r[1] == b) return r[2];
        if (r[0] < a || (r[0] == a && r[1] < b)) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

bool uni_is_nfc(const uint32_t *in, size_t n) {
    uint8_t last = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = in[i];
        if (c < 0x300) {
            last = 0;
            continue;
        }
        if (uni_flags(c) & UNI_NFC_MAYBE) return false;
        uint8_t cc = uni_ccc(c);
        if (cc && last > cc) return false;
        last = cc;
    }
    return true;
}

size_t uni_nfc(const uint32_t *in, size_t n, uint32_t *buf) {
    if (uni_is_nfc(in, n)) {
        for (size_t i = 0; i < n; i++) buf[i] = in[i];
        return n;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += decompose(in[i], buf + m);
    /* canonical ordering: stable sort of each run of non-starters by class */
    for (size_t i = 1; i < m; i++) {
        uint8_t c = uni_ccc(buf[i]);
        if (!c) continue;
        size_t j = i;
        uint32_t x = buf[i];
        while (j > 0) {
            uint8_t p = uni_ccc(buf[j - 1]);
            if (p <= c) break;
            buf[j] = buf[j - 1];
            j--;
        }
        buf[j] = x;
    }
    if (m == 0) return 0;
    /* canonical composition */
    size_t starter = 0, o = 1;
    int last_class = uni_ccc(buf[0]) ? 256 : 0;
    for (size_t i = 1; i < m; i++) {
        uint32_t ch = buf[i];
        int cls = uni_ccc(ch);
        uint32_t c = (last_class < cls || last_class == 0) ? compose(buf[starter], ch) : 0;
        if (c) {
            buf[starter] = c;
            continue;
        }
        if (cls == 0) starter = o;
        last_class = cls;
        buf[o++] = ch;
    }
    return o;
}

/* ---- GPT-2 byte map ------------------------------------------------------------------ */

/* bytes_to_unicode(): '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves;
 * the other 68 bytes, in order, become U+0100.. */
static inline bool byte_is_visible(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t uni_byte_to_cpt(uint8_t b) {
    if (byte_is_visible(b)) return b;
    /* rank of b among the invisible bytes: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD */
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    return 0x100 + 67; /* 0xAD */
}

int uni_cpt_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_visible(cp) ? (int)cp : -1;
    if (cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp < 0x100 + 67) return (int)(cp - 0x100 - 33 + 0x7F);
    if (cp == 0x100 + 67) return 0xAD;
    return -1;
}
