/* expert-node/en_group.h — the group window (expert-node --group-window-us W): several
 * coordinators on one node, their rows of the same layer run as one grouped execution (each
 * expert's weights read once for all of them).
 *
 * Independent coordinators drift out of phase, so holding a round "for a while" rarely brings the
 * other's rows. Instead the node learns each client's pace: per layer, the time from the answer to
 * its request of the layer served before to its request of this one (its trunk, the other nodes'
 * answers, the wire), and how long its requests stay here. From these it predicts when a client
 * whose rows do not wait here will send a given layer. A group whose layer another client is
 * predicted to send within W of the group's first request is held — set aside while the node
 * goes on serving everyone else, the held client's other layers included — until that client's
 * request joins it, or its predicted time plus a slack (half the predicted wait, 200 us at least)
 * has passed, and never beyond W (auto: half the token of the client whose rows wait, as this
 * node has measured it, 100 ms at most). Of two coordinators out of phase, the one ahead waits for
 * the one behind, the nearer way round: a client more than half its token from the layer is not
 * awaited there (it will await the other at the layer it reaches next). Once two coordinators'
 * rows have met, both get their answers at once and reach the next layer together: they stay in
 * step, each later hold lasting only the difference of their paces.
 *
 * Bounded and fair: a group waits W at most; a client awaited in vain (slow, or gone) is not
 * awaited again until it sends, so a dead coordinator costs the others one hold, not one per
 * layer; a client whose rows are held here is never awaited, so two held groups cannot wait for
 * each other; a round that is full runs everything; the per-client quotas of
 * en_client.h hold as before. Rows never change with the company they run in: the kernels are
 * batch-invariant (tests/unit/test_en_group.c checks the bits in exact mode). */
#ifndef EN_GROUP_H
#define EN_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "expert-node/en_client.h"

struct en_node;

/* Client c's request of layer `layer` arrived at `now`: its pace and position. */
void en__group_arrived(struct en_node *n, en__client *c, int layer, uint64_t now);
/* Client c's request that arrived at t_rx was answered at `now`. */
void en__group_answered(en__client *c, uint64_t t_rx, uint64_t now);
/* Marks the clients with rows in a held group (before the round's en__group_waits calls). */
void en__group_mark_held(struct en_node *n);
/* Whether the round's group gi waits for another client's rows at `now`; true with *until, when
 * it stops waiting at the latest. Counts the hold, and marks awaited clients that let it pass. */
bool en__group_waits(struct en_node *n, int gi, uint64_t now, uint64_t *until);

#endif
