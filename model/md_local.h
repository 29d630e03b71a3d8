/* model/md_local.h — the in-process expert backend: the MoE step runs md_moe_exec over a source's
 * experts in this process (the same executor an expert node runs). */
#ifndef MD_LOCAL_H
#define MD_LOCAL_H

#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_config.h"
#include "model/md_expert_table.h"
#include "model/md_moe.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"

/* Creates the backend over every (layer, expert) of src, loaded and checked against cfg up front
 * (md_expert_table.h), so a bad file fails here and not mid-generation. src and pool must outlive
 * it. */
int md_local_backend_new(const vx_source *src, const md_config *cfg, kn_pool *pool,
                         md_expert_backend **out, mw_err *err);

/* Copies every expert's matrices out of the source's mapping into one buffer on transparent huge
 * pages (md_expert_table_pin), for a process that streams them from memory (llama.cpp's
 * --no-mmap). Costs their size in memory (md_local_backend_pinned_bytes); the bits are the same. */
int md_local_backend_pin(md_expert_backend *b, mw_err *err);
size_t md_local_backend_pinned_bytes(const md_expert_backend *b);

/* Expert weight bytes (as stored) read so far. */
uint64_t md_local_backend_weight_bytes(const md_expert_backend *b);

#endif
