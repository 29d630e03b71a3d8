/* template/jj_case.c — letter case for upper(), lower(), title() and capitalize(): ASCII, Latin-1,
 * Latin Extended-A, Greek and Cyrillic (one to one mappings; Python's few one-to-many ones such as
 * ß -> SS are not made). */
#include "template/jj_internal.h"

bool jj__cp_lower_p(uint32_t c) {
    return (c >= 0x3AC && c <= 0x3CE) || (c >= 'a' && c <= 'z') ||
           (c >= 0xDF && c <= 0xFF && c != 0xF7) || (c >= 0x100 && c <= 0x17F && (c & 1)) ||
           (c >= 0x3B1 && c <= 0x3C9) || (c >= 0x430 && c <= 0x45F);
}

bool jj__cp_upper_p(uint32_t c) {
    return c == 0x386 || (c >= 0x388 && c <= 0x38F && c != 0x38B && c != 0x38D) ||
           (c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7) ||
           (c >= 0x100 && c <= 0x17F && !(c & 1)) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
           (c >= 0x400 && c <= 0x42F);
}

uint32_t jj__cp_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F && (c & 1) && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F)
        return c - 1;
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c == 0x3AC) return 0x386;
    if (c >= 0x3AD && c <= 0x3AF) return c - 37;
    if (c == 0x3CC) return 0x38C;
    if (c == 0x3CD || c == 0x3CE) return c - 63;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

uint32_t jj__cp_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x100 && c <= 0x17F && !(c & 1) && c != 0x130 && c != 0x138) return c + 1;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

bool jj__cp_cased(uint32_t c) {
    return jj__cp_lower_p(c) || jj__cp_upper_p(c);
}

/* mode: 'u' upper, 'l' lower, 't' Python's str.title(), 'c' capitalize() */
jj__val jj__case(jj__rt *r, jj__val s, char mode) {
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    size_t i = 0;
    bool prev_cased = false, first = true;
    while (i < s.u.s.n) {
        size_t st = i;
        uint32_t c = jj__u8_get(s.u.s.p, s.u.s.n, &i), o = c;
        bool up = mode == 'u' || (mode == 'c' && first) || (mode == 't' && !prev_cased);
        if (mode == 'u')
            o = jj__cp_upper(c);
        else if (mode == 'l')
            o = jj__cp_lower(c);
        else if (mode == 'c')
            o = first ? jj__cp_upper(c) : jj__cp_lower(c);
        else
            o = prev_cased ? jj__cp_lower(c) : jj__cp_upper(c);
        prev_cased = jj__cp_cased(c);
        first = false;
        if (c == 0xDF && up)
            jj__buf_puts(r->e, &b, mode == 'u' ? "SS" : "Ss"); /* Python's one-to-many case */
        else if (o == c)
            jj__buf_put(r->e, &b, s.u.s.p + st, i - st);
        else
            jj__u8_put(r->e, &b, o);
    }
    return jj__str(b.p, b.n);
}
