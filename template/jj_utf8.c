/* template/jj_utf8.c — UTF-8 as Python's str sees it: lengths and indexes count code points, and
 * whitespace is what str.isspace() accepts (strip(), split() and the "-" tag markers use it). */
#include "template/jj_internal.h"

/* Invalid bytes count as one code point each (U+FFFD), so every index stays inside the string. */
uint32_t jj__u8_get(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[*i];
    int k = c < 0x80                ? 0
            : c >= 0xF0 && c < 0xF5 ? 3
            : c >= 0xE0             ? 2
            : c >= 0xC2 && c < 0xE0 ? 1
                                    : -1;
    if (k < 0 || c >= 0xF5) {
        (*i)++;
        return 0xFFFD;
    }
    if (*i + (size_t)k >= n + (k == 0)) {
        (*i)++;
        return 0xFFFD;
    }
    uint32_t cp = k == 0 ? c : k == 1 ? c & 0x1F : k == 2 ? c & 0x0F : c & 0x07;
    for (int j = 1; j <= k; j++) {
        unsigned d = u[*i + (size_t)j];
        if ((d & 0xC0) != 0x80) {
            (*i)++;
            return 0xFFFD;
        }
        cp = (cp << 6) | (d & 0x3F);
    }
    *i += (size_t)k + 1;
    return cp;
}

size_t jj__u8_len(const char *s, size_t n) {
    size_t i = 0, k = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80)
            i++;
        else
            jj__u8_get(s, n, &i);
        k++;
    }
    return k;
}

size_t jj__u8_off(const char *s, size_t n, size_t k) {
    size_t i = 0;
    while (k-- && i < n) {
        if ((unsigned char)s[i] < 0x80)
            i++;
        else
            jj__u8_get(s, n, &i);
    }
    return i;
}

void jj__u8_put(jj__env *e, jj__buf *b, uint32_t cp) {
    char t[4];
    size_t k;
    if (cp < 0x80) {
        t[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    jj__buf_put(e, b, t, k);
}

bool jj__py_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t jj__space_at(const char *s, size_t n, size_t i) {
    if (i >= n) return 0;
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return jj__py_space(c) ? 1 : 0;
    size_t j = i;
    uint32_t cp = jj__u8_get(s, n, &j);
    return jj__py_space(cp) ? j - i : 0;
}

size_t jj__space_before(const char *s, size_t i) {
    if (!i) return 0;
    unsigned char c = (unsigned char)s[i - 1];
    if (c < 0x80) return jj__py_space(c) ? 1 : 0;
    size_t st = i - 1;
    while (st > 0 && i - st < 4 && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
    size_t j = st;
    uint32_t cp = jj__u8_get(s, i, &j);
    return j == i && jj__py_space(cp) ? i - st : 0;
}
