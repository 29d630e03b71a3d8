/* coordinator/co_info.h — the server's informational endpoints in llama-server's shapes: POST
 * /tokenize (text to ids, optionally with each id's piece), POST /detokenize (ids to text) and
 * GET /props (chat template, default generation settings, limits, model). Bodies are untrusted:
 * the text, the id count and every id are bounded before anything is computed. */
#ifndef CO_INFO_H
#define CO_INFO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "coordinator/co_oai.h"
#include "coordinator/co_serve_text.h"
#include "model/md_config.h"

#define CO_INFO_MAX_CONTENT (1 << 20) /* bytes of text /tokenize takes (it runs on the loop) */
#define CO_INFO_MAX_IDS     (1 << 18) /* ids /detokenize takes */

/* What /props tells of the server. */
typedef struct co_info_props {
    const co_stext *text; /* NULL: no tokenizer */
    const md_config *cfg; /* NULL: no model facts */
    const char *model_id;
    int64_t n_ctx, n_vocab;
    int n_slots, max_queue, max_n;
    uint64_t cache_bytes; /* the prompt cache's bound (0: off) */
    co_oai_limits limits;
} co_info_props;

/* The answers: 0 with *out the JSON (owned by the caller), or -1 with e filled. */
int co_info_tokenize(const co_stext *t, const char *body, size_t len, json_t **out,
                     co_oai_error *e);
int co_info_detokenize(const co_stext *t, int64_t n_vocab, const char *body, size_t len,
                       json_t **out, co_oai_error *e);
json_t *co_info_props_json(const co_info_props *p);

#endif
