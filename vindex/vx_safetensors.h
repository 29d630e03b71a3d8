/* vindex/vx_safetensors.h — safetensors reader (mmapped, fully validated) and Hugging Face
 * checkpoint sets (one file, several files, or shards listed by model.safetensors.index.json).
 *
 * Every file is untrusted: the header length is bounded by the file size and VX_ST_MAX_HEADER, the
 * header must be a JSON object of well-formed entries, every tensor's byte range must lie inside
 * the data area, match its shape and dtype exactly and overlap no other tensor. A fault yields an
 * error naming the file (and the tensor), never a crash or a huge allocation. */
#ifndef VX_SAFETENSORS_H
#define VX_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

#define VX_ST_MAX_DIMS   8
#define VX_ST_MAX_HEADER (100u << 20) /* bytes of header JSON */

/* safetensors dtypes, one row each in the table of vx_safetensors.c. */
typedef enum vx_st_dtype {
    VX_ST_BOOL,
    VX_ST_U8,
    VX_ST_I8,
    VX_ST_U16,
    VX_ST_I16,
    VX_ST_U32,
    VX_ST_I32,
    VX_ST_U64,
    VX_ST_I64,
    VX_ST_F16,
    VX_ST_BF16,
    VX_ST_F32,
    VX_ST_F64,
    VX_ST_C64,
    VX_ST_F8_E4M3,
    VX_ST_F8_E5M2,
    VX_ST_F8_E8M0,
    VX_ST_F6_E2M3,
    VX_ST_F6_E3M2,
    VX_ST_F4,
    VX_ST_DTYPE_COUNT
} vx_st_dtype;

/* Name as written in headers ("BF16"), bits per element, and the ggml type holding the same bytes
 * (a kn_type id), or -1 when ggml has none. */
const char *vx_st_dtype_name(vx_st_dtype d);
int vx_st_dtype_bits(vx_st_dtype d);
int vx_st_dtype_kn(vx_st_dtype d);

typedef struct vx_st_tensor {
    const char *name;
    vx_st_dtype dtype;
    int n_dims;                    /* 0 for a scalar */
    int64_t shape[VX_ST_MAX_DIMS]; /* as in the header: slowest dimension first */
    uint64_t n_elements;
    uint64_t offset; /* absolute byte offset of the data in the file */
    uint64_t nbytes;
    const uint8_t *data; /* points into the mapping */
} vx_st_tensor;

typedef struct vx_st_file vx_st_file;

int vx_st_open(const char *path, vx_st_file **out, mw_err *err);
void vx_st_close(vx_st_file *f);

const char *vx_st_path(const vx_st_file *f);
uint64_t vx_st_file_size(const vx_st_file *f);
const uint8_t *vx_st_base(const vx_st_file *f); /* the whole mapping */
struct vx_file_id;
const struct vx_file_id *vx_st_file_id(const vx_st_file *f); /* the file as mapped */
/* Tensors sorted by name. */
size_t vx_st_n_tensors(const vx_st_file *f);
const vx_st_tensor *vx_st_tensor_at(const vx_st_file *f, size_t i);
const vx_st_tensor *vx_st_find(const vx_st_file *f, const char *name); /* NULL if absent */
/* The header's __metadata__ string map, in header order. */
size_t vx_st_n_meta(const vx_st_file *f);
const char *vx_st_meta_key(const vx_st_file *f, size_t i);
const char *vx_st_meta_value(const vx_st_file *f, size_t i);
const char *vx_st_meta_get(const vx_st_file *f, const char *key); /* NULL if absent */

/* A checkpoint directory's tensors. With model.safetensors.index.json the index decides which
 * files belong to the checkpoint and where each tensor lives: every file it names must exist,
 * every mapped tensor must be in its shard, and every shard tensor must be mapped to that shard.
 * Without an index every *.safetensors file of the directory is read. Either way no tensor name
 * may appear twice. */
typedef struct vx_st_set vx_st_set;

#define VX_ST_INDEX_NAME "model.safetensors.index.json"

int vx_st_set_open(const char *dir, vx_st_set **out, mw_err *err);
void vx_st_set_close(vx_st_set *s);

size_t vx_st_set_n_files(const vx_st_set *s);
const vx_st_file *vx_st_set_file(const vx_st_set *s, size_t i);
const char *vx_st_set_file_name(const vx_st_set *s, size_t i); /* relative to the directory */
/* All tensors of all files, sorted by name; *file (if non-NULL) receives the file index. */
size_t vx_st_set_n_tensors(const vx_st_set *s);
const vx_st_tensor *vx_st_set_tensor_at(const vx_st_set *s, size_t i, int *file);
const vx_st_tensor *vx_st_set_find(const vx_st_set *s, const char *name, int *file);
/* Position of NAME in the sorted order, or -1. */
long vx_st_set_lookup(const vx_st_set *s, const char *name);

#endif
