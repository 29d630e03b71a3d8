/* tests/posix/bsd.h — forced into every file `make posix-check` compiles: the BSD interfaces
 * macOS declares by default that glibc declares only with _GNU_SOURCE. Nothing else: a call that
 * is neither POSIX.1-2008, nor glibc's _DEFAULT_SOURCE, nor listed here fails the check. */
#ifndef MW_POSIX_BSD_H
#define MW_POSIX_BSD_H
#include <stddef.h>
void *memmem(const void *haystack, size_t hlen, const void *needle, size_t nlen);
#endif
