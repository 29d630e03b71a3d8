/* expert-node/en_group.c — the group window: learning each client's pace, predicting when it
 * sends a layer, and deciding which groups wait for it (see en_group.h). */
#include "expert-node/en_group.h"
#include "expert-node/en_internal.h"
#include "expert-node/en_node.h"

/* The least slack past a predicted arrival: a loaded host's scheduling. */
#define EN__SLACK_MIN_NS 200000ull
/* A longer pause between a client's layers is no measure of its pace (it had nothing to do). */
#define EN__LAG_MAX_NS 1000000000ull

/* Running averages weigh a new sample 1/4: a coordinator's pace changes with its batch. */
static uint64_t average(uint64_t old, uint64_t sample) {
    return old ? (3 * old + sample) / 4 : sample;
}

/* The layer this node serves before l, cyclically (a token's last layer precedes its first). */
static int served_before(const en_node *n, int l) {
    for (int k = 1; k <= n->n_layers; k++) {
        const int p = (l - k + n->n_layers) % n->n_layers;
        if (n->layer_served[p]) return p;
    }
    return -1;
}

void en__group_arrived(en_node *n, en__client *c, int layer, uint64_t now) {
    if (c->last_layer >= 0 && !c->outstanding && c->replied_ns && now > c->replied_ns &&
        served_before(n, layer) == c->last_layer && now - c->replied_ns < EN__LAG_MAX_NS)
        c->lag_ns[layer] = average(c->lag_ns[layer], now - c->replied_ns);
    c->last_layer = layer;
    c->outstanding++;
    c->missed = false;
}

void en__group_answered(en__client *c, uint64_t t_rx, uint64_t now) {
    if (c->outstanding) c->outstanding--;
    if (now > t_rx) c->svc_ns = average(c->svc_ns, now - t_rx);
    c->replied_ns = now;
}

/* When client c will send its request of `layer`: from its last answer, the lags of the layers
 * it goes through and its stay here at each. False when it cannot be said (it has a request
 * here, it was awaited in vain, or a lag on the way is not known yet). */
static bool predict(const en_node *n, const en__client *c, int layer, uint64_t *at) {
    if (c->outstanding || c->q_n || c->missed || c->last_layer < 0 || !c->replied_ns) return false;
    uint64_t t = c->replied_ns;
    bool first = true;
    for (int k = 1; k <= n->n_layers; k++) {
        const int l = (c->last_layer + k) % n->n_layers;
        if (!n->layer_served[l]) continue;
        if (!c->lag_ns[l]) return false;
        t += c->lag_ns[l] + (first ? 0 : c->svc_ns);
        first = false;
        if (l == layer) {
            *at = t;
            return true;
        }
    }
    return false;
}

bool en__group_waits(en_node *n, en__group *g, uint64_t now, uint64_t *until) {
    const uint64_t w = (uint64_t)n->opts.group_window_us * 1000u;
    if (!w || n->n_clients < 2) return false;
    const uint64_t cap = g->t_first + w;
    uint64_t end = 0;
    bool missed = false;
    for (int i = 0; i < n->n_clients; i++) {
        en__client *c = n->clients[i];
        uint64_t at;
        if (!predict(n, c, g->layer, &at) || at > cap) continue;
        const uint64_t half = (at - c->replied_ns) / 2;
        const uint64_t by = at + (half > EN__SLACK_MIN_NS ? half : EN__SLACK_MIN_NS);
        if (now < cap && now < by) {
            end = by > end ? by : end;
        } else {
            c->missed = true; /* it let the window pass: slow, or gone */
            missed = true;
        }
    }
    if (missed && g->held) n->held_missed++;
    if (!end) return false;
    if (!g->held) n->held_groups++;
    g->held = true;
    *until = end < cap ? end : cap;
    return true;
}
