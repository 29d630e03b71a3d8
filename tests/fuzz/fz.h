/* tests/fuzz/fz.h — what the libFuzzer harnesses share: the input as a file, for readers that take
 * a path (the GGUF and safetensors readers map their file; the manifest reader opens a
 * directory). Each harness is one file tests/fuzz/fuzz_NAME.c defining LLVMFuzzerTestOneInput;
 * see tests/fuzz/README.md. */
#ifndef FZ_H
#define FZ_H

#include <stddef.h>
#include <stdint.h>

/* A private directory for this fuzzing process (created on first use, removed at exit). */
const char *fz_dir(void);
/* Writes data to NAME inside fz_dir() (replacing it) and returns its path (static buffer). */
const char *fz_file(const char *name, const uint8_t *data, size_t size);
/* Removes everything inside fz_dir() except the files it was given (NULL-terminated names). */
void fz_clean(const char *const *keep);

#endif
