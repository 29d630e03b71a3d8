/* vindex/vx_input.h — a source checkpoint as `vindex extract` sees it.
 *
 * Whatever the source (a GGUF file, a Hugging Face safetensors directory), extract receives its
 * metadata under GGUF-style keys and its tensors under GGUF names, each readable as the bytes it
 * will be stored as. A tensor may come from a lossless relayout of the source (gpt-oss's MXFP4
 * nibble order, the interleaved gate_up split into gate and up); the rule is named so the manifest
 * records it. Every source tensor is accounted for: consumed by one or more input tensors, dropped
 * by a named rule, or listed as unrecognised (the coverage audit). */
#ifndef VX_INPUT_H
#define VX_INPUT_H

#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"
#include "vindex/vx_map.h"
#include "vindex/vx_meta.h"

struct vx_input;

/* One byte range of one source file that a tensor was built from (provenance). */
typedef struct vx_input_range {
    int file;             /* index into vx_input.files */
    const char *src_name; /* tensor name in the source file */
    uint64_t offset;      /* absolute byte offset in that file */
    uint64_t nbytes;
} vx_input_range;

typedef struct vx_input_tensor {
    const char *name; /* GGUF name, e.g. "blk.3.ffn_gate_exps.weight" */
    kn_type type;     /* stored format */
    int n_dims;
    int64_t ne[4]; /* ggml order; unused dims 1 */
    uint64_t nbytes;
    const char *relayout; /* NULL when stored bytes equal source bytes; else the rule's name */
    int n_ranges;
    const vx_input_range *ranges;
    /* Reads bytes [off, off + len) of the tensor in its stored layout into dst. */
    int (*read)(const struct vx_input *in, const struct vx_input_tensor *t, uint64_t off, void *dst,
                uint64_t len, mw_err *err);
    /* Optional: rows [row0, row0 + n) (of ne[0] elements) as the exact f32 values the stored
     * type rounds (FP8 checkpoints' dequantized weights, stored as bf16): a transcode to another
     * format starts from these, so it rounds once. NULL: the stored values are exact. */
    int (*read_f32)(const struct vx_input *in, const struct vx_input_tensor *t, uint64_t row0,
                    uint64_t n, float *dst, mw_err *err);
    void *impl; /* reader-private */
} vx_input_tensor;

typedef struct vx_input_file {
    const char *path; /* as opened */
    const char *name; /* file name recorded in provenance (relative to the checkpoint) */
    uint64_t size;
    const uint8_t *data; /* the whole file as mapped (what the tensors are read from), or NULL */
    vx_file_id id;       /* the file as opened; extract refuses to finish when it changed */
} vx_input_file;

typedef struct vx_input_drop {
    const char *src_name; /* tensor name in the source */
    const char *rule;     /* why it is not stored ("rotary inv_freq is recomputed", ...) */
} vx_input_drop;

typedef struct vx_input {
    const char *kind; /* "gguf" or "safetensors" */
    vx_meta *meta;    /* GGUF-style keys, general.architecture included */
    size_t n_files;
    vx_input_file *files;
    size_t n_tensors;
    vx_input_tensor *tensors;
    size_t n_dropped;
    vx_input_drop *dropped;
    size_t n_unrecognised;
    const char **unrecognised; /* source tensor names no rule consumed or dropped */
    /* Extra files carried over verbatim into the vindex (tokenizer.json, ...): paths. */
    size_t n_carry;
    const char **carry;
    void (*close)(struct vx_input *in);
    void *impl;
} vx_input;

/* Opens a GGUF file as an input. */
int vx_input_open_gguf(const char *path, vx_input **out, mw_err *err);
/* Opens a Hugging Face checkpoint directory (config.json, *.safetensors, optional
 * model.safetensors.index.json) as an input. */
int vx_input_open_hf(const char *dir, vx_input **out, mw_err *err);
/* Either of the above by looking at PATH. */
int vx_input_open(const char *path, vx_input **out, mw_err *err);
void vx_input_close(vx_input *in);
const vx_input_tensor *vx_input_find(const vx_input *in, const char *name);

#endif
