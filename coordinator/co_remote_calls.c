/* coordinator/co_remote_calls.c — several layer calls in flight on one remote backend (ping-pong
 * micro-batches, model/md_lanes.h): a call's state lives in the backend while it is being
 * submitted or waited for, and is parked (swapped out whole) meanwhile, so the one-call story of
 * co_remote.c runs unchanged. Replies to a parked call that arrive while another is awaited are
 * taken into the parked call (co_remote.c, take_reply). */
#include <stdlib.h>

#include "coordinator/co_remote_internal.h"

#define SWAP(a, b)                                                                                 \
    do {                                                                                           \
        __typeof__(a) swap_ = (a);                                                                 \
        (a) = (b);                                                                                 \
        (b) = swap_;                                                                               \
    } while (0)

int co__calls_init(co__remote *r) {
    for (int i = 0; i < CO_CALLS - 1; i++)
        if (!(r->park[i].pending = calloc((size_t)r->cap_nodes, sizeof *r->park[i].pending)))
            return -1;
    return 0;
}

void co__calls_free(co__remote *r, void (*free_state)(co__remote *r)) {
    for (int i = 0; i < CO_CALLS - 1; i++) {
        co__call *c = &r->park[i];
        if (!c->pending) continue;
        co__call_swap(r, c);
        free_state(r);
        co__call_swap(r, c);
        free(c->pending);
        c->pending = NULL;
    }
}

void co__call_swap(co__remote *r, co__call *c) {
    SWAP(r->works, c->works);
    SWAP(r->n_works, c->n_works);
    SWAP(r->n_works_alloc, c->n_works_alloc);
    SWAP(r->works_cap, c->works_cap);
    SWAP(r->pieces, c->pieces);
    SWAP(r->pieces_cap, c->pieces_cap);
    SWAP(r->n_pieces, c->n_pieces);
    SWAP(r->outs, c->outs);
    SWAP(r->outs_cap, c->outs_cap);
    SWAP(r->outs_init, c->outs_init);
    SWAP(r->scratch, c->scratch);
    SWAP(r->scratch_cap, c->scratch_cap);
    SWAP(r->yptr, c->yptr);
    SWAP(r->yptr_cap, c->yptr_cap);
    SWAP(r->weights, c->weights);
    SWAP(r->weights_cap, c->weights_cap);
    SWAP(r->in_flight, c->in_flight);
    SWAP(r->t_submit, c->t_submit);
    SWAP(r->last_tail, c->last_tail);
    SWAP(r->call_batch, c->batch);
    for (int i = 0; i < r->cap_nodes; i++) SWAP(r->nodes[i].pending, c->pending[i]);
}

co__call *co__call_idle(co__remote *r) {
    for (int i = 0; i < CO_CALLS - 1; i++)
        if (!r->park[i].in_flight) return &r->park[i];
    return NULL;
}

co__call *co__call_of_batch(co__remote *r, const md_moe_batch *b) {
    for (int i = 0; i < CO_CALLS - 1; i++)
        if (r->park[i].in_flight && r->park[i].batch == b) return &r->park[i];
    return NULL;
}

co__call *co__call_of_piece(co__remote *r, int node, uint64_t seq) {
    for (int i = 0; i < CO_CALLS - 1; i++) {
        const co__call *c = &r->park[i];
        for (int q = 0; c->in_flight && q < c->n_pieces; q++) {
            const co__piece *p = &c->pieces[q];
            if (p->node == node && p->seq == seq && !p->done && !p->lost) return &r->park[i];
        }
    }
    return NULL;
}
