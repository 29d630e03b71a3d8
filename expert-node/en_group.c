/* expert-node/en_group.c — the group window: learning each client's pace, predicting when it
 * sends a layer, and deciding which groups wait for it (see en_group.h). */
#include "expert-node/en_group.h"
#include "expert-node/en_internal.h"
#include "expert-node/en_node.h"

/* The longest wait --group-window-us auto allows (as the longest a number may ask). */
#define EN__WINDOW_AUTO_MAX_NS 100000000ull
/* The least slack past a predicted arrival: a loaded host's scheduling. */
#define EN__SLACK_MIN_NS 200000ull
/* Running averages weigh a new sample 1/4, and a sample counts at most twice the average: a
 * coordinator's pace changes with its batch (within a few layers), a pause (it had nothing to do)
 * is no pace. */
static uint64_t average(uint64_t old, uint64_t sample) {
    if (!old) return sample;
    return (3 * old + (sample < 2 * old ? sample : 2 * old)) / 4;
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
        served_before(n, layer) == c->last_layer)
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

/* Client c's token as this node sees it: its lags and stays over the layers served here (0 while
 * a lag is not known). */
static uint64_t token(const en_node *n, const en__client *c) {
    uint64_t t = 0;
    for (int l = 0; l < n->n_layers; l++) {
        if (!n->layer_served[l]) continue;
        if (!c->lag_ns[l]) return 0;
        t += c->lag_ns[l] + c->svc_ns;
    }
    return t;
}

/* When client c will send its request of `layer`: from its last answer (now, when its request is
 * being answered in this round), the lags of the layers it goes through and its stay here at
 * each. False when it cannot be said (its rows wait here themselves, so two held groups never
 * wait for each other; it has requests deferred; it was awaited in vain; a lag on the way is not
 * known yet), or when it is more than half its token away. */
static bool predict(const en_node *n, const en__client *c, int layer, uint64_t now, uint64_t *at) {
    if (c->held_here || c->q_n || c->missed || c->last_layer < 0) return false;
    uint64_t t = c->outstanding ? now : c->replied_ns;
    if (!t) return false;
    bool first = true, found = false;
    for (int k = 1; k <= n->n_layers && !found; k++) {
        const int l = (c->last_layer + k) % n->n_layers;
        if (!n->layer_served[l]) continue;
        if (!c->lag_ns[l]) return false;
        t += c->lag_ns[l] + (first ? 0 : c->svc_ns);
        first = false;
        found = l == layer;
    }
    if (!found) return false;
    /* the nearer way round: a client more than half its own token from the layer would rather
     * be awaited itself, at the other's layer it reaches next */
    if (t > now && 2 * (t - now) > token(n, c)) return false;
    *at = t;
    return true;
}

void en__group_mark_held(en_node *n) {
    for (int i = 0; i < n->n_clients; i++) {
        n->clients[i]->held_here = false;
        n->clients[i]->in_group1 = 0;
    }
    for (int ri = 0; ri < n->n_req; ri++) {
        const en__req *r = &n->req[ri];
        en__client *c = n->group[r->group].held ? en__client_find(n, r->id, r->id_len) : NULL;
        if (c) c->held_here = true;
    }
}

bool en__group_waits(en_node *n, int gi, uint64_t now, uint64_t *until) {
    en__group *g = &n->group[gi];
    if (!n->opts.group_window_us || n->n_clients < 2) return false;
    const en__client *own = NULL;           /* the client of its first request */
    for (int ri = 0; ri < n->n_req; ri++) { /* who is in it already */
        en__client *c =
            n->req[ri].group == gi ? en__client_find(n, n->req[ri].id, n->req[ri].id_len) : NULL;
        if (c) c->in_group1 = gi + 1;
        if (c && !own) own = c;
    }
    uint64_t w = (uint64_t)n->opts.group_window_us * 1000u;
    if (n->opts.group_window_us == EN_WINDOW_AUTO) {
        w = own ? token(n, own) / 2 : 0;
        w = w < EN__WINDOW_AUTO_MAX_NS ? w : EN__WINDOW_AUTO_MAX_NS;
    }
    if (!w) return false;
    const uint64_t cap = g->t_first + w;
    uint64_t end = 0;
    bool missed = false;
    for (int i = 0; i < n->n_clients; i++) {
        en__client *c = n->clients[i];
        uint64_t at;
        if (c->in_group1 == gi + 1 || !predict(n, c, g->layer, now, &at) || at > cap) continue;
        const uint64_t half = (at - (c->outstanding ? now : c->replied_ns)) / 2;
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
