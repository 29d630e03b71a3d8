/* vindex/vx_source.h — one way to reach a model's weights, whatever holds them.
 *
 * A source is a GGUF file or a vindex directory. The model layer reads hyperparameters from its
 * metadata (GGUF-style keys), dense tensors by their GGUF names, and experts as kn_expert views.
 * An expert node opens a source restricted to the (layer, expert) extents it owns: only those are
 * mapped, and each is checked against its checksum before use (the mount). */
#ifndef VX_SOURCE_H
#define VX_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_meta.h"

/* A set of (layer, expert) pairs. */
typedef struct vx_expert_set {
    int n_layers;
    int n_experts;
    uint8_t *bits; /* n_layers * n_experts bits, layer-major */
} vx_expert_set;

/* Parses SPEC: "all", "L0-L1:E0-E1" ranges joined by ',' (e.g. "0-23:0-15,0-23:20"), or "@FILE"
 * / a path ending in .json naming a JSON shard file ({"experts": {"0": [0,1,...], ...}} or
 * {"spec": "..."}). Every index is bounded by n_layers / n_experts. */
int vx_expert_set_parse(const char *spec, int n_layers, int n_experts, vx_expert_set *out,
                        mw_err *err);
int vx_expert_set_init(vx_expert_set *s, int n_layers, int n_experts, bool all);
void vx_expert_set_free(vx_expert_set *s);
bool vx_expert_set_has(const vx_expert_set *s, int layer, int expert);
void vx_expert_set_put(vx_expert_set *s, int layer, int expert, bool on);
size_t vx_expert_set_count(const vx_expert_set *s);
/* Canonical text form ("0-3:0-7,4:1"); returns a malloc'ed string. */
char *vx_expert_set_format(const vx_expert_set *s);

typedef struct vx_source vx_source;

typedef struct vx_source_opts {
    const vx_expert_set *experts; /* NULL = every expert the source holds; an empty set ({0}:
                                     no layers, no bits) = none (a coordinator with remote
                                     experts) */
    bool dense;                   /* map the dense tensors too (false for an expert node) */
    bool verify_on_mount;         /* check each mapped extent's fast checksum (vindex only) */
    /* Called as long work advances (may be NULL): "mount" (extent bytes checked) while a vindex
     * opens, "fingerprint" (tensor bytes read) when a GGUF file's fingerprint is computed. */
    void (*progress)(void *ctx, const char *what, uint64_t done, uint64_t total);
    void *progress_ctx;
} vx_source_opts;

/* Opens PATH: a regular file is read as GGUF, a directory as a vindex. opts may be NULL (all
 * experts, dense tensors, checksums verified). */
int vx_source_open(const char *path, const vx_source_opts *opts, vx_source **out, mw_err *err);
void vx_source_close(vx_source *s);

const char *vx_source_path(const vx_source *s);
const vx_meta *vx_source_meta(const vx_source *s);
/* general.architecture ("gpt-oss", "qwen3moe", ...). */
const char *vx_source_arch(const vx_source *s);
/* A hex digest identifying the model's weights: the metadata, the tensor table and a digest of
 * every tensor's bytes (see vindex/vx_fingerprint.h). A GGUF file, the vindex extracted from it and
 * every slice of that vindex share it. Nodes and coordinators compare it in the handshake. For a
 * vindex it comes from the manifest; for a GGUF file it is computed on first call (reads all tensor
 * data once). NULL only when out of memory. */
const char *vx_source_fingerprint(const vx_source *s);
/* Bytes vx_source_fingerprint still has to read: 0 for a vindex or once computed, every tensor's
 * bytes for a GGUF file before that. Callers say so (and allow for it) before they wait on it. */
uint64_t vx_source_fingerprint_cost(const vx_source *s);

/* Dense (non-expert) tensor by its GGUF name; NULL if absent or not mapped. */
const vx_tensor *vx_source_tensor(const vx_source *s, const char *name);
/* Number of MoE layers' experts the source describes (from its metadata). */
int vx_source_n_layers(const vx_source *s);
int vx_source_n_experts(const vx_source *s);
/* Whether the model gives layer `layer` routed experts at all (deepseek2's leading dense layers
 * have none), whatever this opening holds. */
bool vx_source_layer_has_experts(const vx_source *s, int layer);
/* Bytes one extent of the layer takes as a vindex stores it (each part 64-byte aligned): what a
 * node holding it maps or pins; 0 for a layer without experts. */
uint64_t vx_source_extent_bytes(const vx_source *s, int layer);
/* Bytes of the dense tensors (what a coordinator reads per token, embedding rows aside). */
uint64_t vx_source_dense_bytes(const vx_source *s);
/* The model's width (embedding_length) and experts per row ({arch}.expert_used_count; 0 when the
 * metadata has none). */
int64_t vx_source_width(const vx_source *s);
int vx_source_experts_used(const vx_source *s);
/* Whether (layer, expert) is available in this opening. */
bool vx_source_has_expert(const vx_source *s, int layer, int expert);
/* Fills a view of expert `expert` of layer `layer`. -1 with err when not held or not mapped. */
int vx_source_expert(const vx_source *s, int layer, int expert, kn_expert *out, mw_err *err);

/* A file the source carries beside its tensors (a vindex's tokenizer.gguf, tokenizer.json,
 * tokenizer_config.json): 1 with its path in path[0..plen) once its checksum matches the
 * manifest's, 0 when the source carries no file of that name, -1 with err when it fails. */
int vx_source_carried(const vx_source *s, const char *name, char *path, size_t plen, mw_err *err);

/* Every tensor the source holds, dense first, for audits and `vindex inspect`. */
size_t vx_source_n_tensors(const vx_source *s);
const vx_tensor *vx_source_tensor_at(const vx_source *s, size_t i);

/* Turns a bus error in a mapped model file (truncated or shrunk under the process: a mapped page
 * no longer exists) into one line on stderr naming the file and the offset, prefixed by program,
 * and exit status 1, instead of a death by SIGBUS with no word. A program calls it once at start;
 * faults elsewhere keep the default action. */
void vx_catch_sigbus(const char *program);

#endif
