/* tokenizer/tk_utf8.c — UTF-8 checks and GPT-2's byte-level alphabet.
 *
 * Byte-level BPE vocabularies store every byte as a printable character: the printable Latin-1
 * bytes stand for themselves, the other 68 bytes for U+0100 upwards in byte order. Token texts are
 * decoded through this mapping once at load time; encoding then works on raw bytes. */
#include <string.h>

#include "tokenizer/tk_internal.h"

static bool printable(int b) {
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

uint32_t tk__byte_char(uint8_t b) {
    if (printable(b)) return b;
    uint32_t k = 0; /* rank of b among the non-printable bytes */
    for (int i = 0; i < b; i++) k += !printable(i);
    return 256 + k;
}

int tk__char_byte(uint32_t cp) {
    if (cp < 256) return printable((int)cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t k = cp - 256;
    for (int i = 0; i < 256; i++)
        if (!printable(i) && k-- == 0) return i;
    return -1;
}

int tk__utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return 2;
    if (c >= 0xe0 && c <= 0xef) return 3;
    if (c >= 0xf0 && c <= 0xf4) return 4;
    return 0;
}

/* Length of the valid character at s (n bytes available), 0 when invalid or truncated. */
static size_t char_at(const unsigned char *s, size_t n) {
    int k = tk__utf8_len(s[0]);
    if (k == 0 || (size_t)k > n) return 0;
    for (int i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (k == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f))) return 0;
    if (k == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))) return 0;
    return (size_t)k;
}

size_t tk__utf8_valid_prefix(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = char_at(s + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

int tk__utf8_put(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

long tk__unbyte(const char *str, size_t len, char *out) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, o = 0;
    while (i < len) {
        size_t k = char_at(s + i, len - i);
        if (!k) return -1;
        uint32_t cp = k == 1   ? s[i]
                      : k == 2 ? ((uint32_t)(s[i] & 0x1f) << 6) | (s[i + 1] & 0x3f)
                               : 0x110000;
        int b = tk__char_byte(cp);
        if (b < 0) return -1;
        out[o++] = (char)b;
        i += k;
    }
    return (long)o;
}
