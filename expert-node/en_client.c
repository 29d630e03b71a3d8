/* expert-node/en_client.c — per-client bookkeeping of the serve loop (see en_client.h). */
#include "expert-node/en_client.h"
#include "expert-node/en_internal.h"
#include "expert-node/en_node.h"
#include "util/mw_platform.h"
#include "util/mw_time.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

en__client *en__client_find(en_node *n, const uint8_t *id, size_t id_len) {
    for (int i = 0; i < n->n_clients; i++) {
        en__client *c = n->clients[i];
        if (c->id_len == id_len && !memcmp(c->id, id, id_len)) return c;
    }
    return NULL;
}

static void release(en__client *c) {
    while (c->q_n) {
        wr_rx_free(&c->q[c->q_head].rx);
        c->q_head = (c->q_head + 1) % EN__CLIENT_QUEUE;
        c->q_n--;
    }
}

/* Room for one more client: forgets the one silent longest, if it has been silent a while and
 * holds nothing; else the table grows up to EN__MAX_CLIENTS. */
static int make_room(en_node *n, uint64_t now) {
    int old = -1;
    for (int i = 0; i < n->n_clients; i++) {
        const en__client *c = n->clients[i];
        if (c->q_n || c->outstanding ||
            now - c->last_ns < (uint64_t)EN__CLIENT_IDLE_S * 1000000000ull)
            continue;
        if (old < 0 || c->last_ns < n->clients[old]->last_ns) old = i;
    }
    if (old >= 0 && n->n_clients >= 64) {
        en__client *c = n->clients[old];
        if (c->n_errors + c->n_dropped + c->n_discarded + c->n_overflow)
            en__client_note(n, c, -1, NULL);
        release(c);
        free(c->lag_ns);
        free(c);
        n->clients[old] = n->clients[--n->n_clients];
        return 0;
    }
    if (n->n_clients >= EN__MAX_CLIENTS) return -1;
    if (n->n_clients == n->clients_cap) {
        int cap = n->clients_cap ? 2 * n->clients_cap : 16;
        en__client **p = realloc(n->clients, (size_t)cap * sizeof *p);
        if (!p) return -1;
        n->clients = p;
        n->clients_cap = cap;
    }
    return 0;
}

en__client *en__client_of(en_node *n, const wr_rx *rx, int fd) {
    uint64_t now = mw_now_ns();
    en__client *c = en__client_find(n, rx->id, rx->id_len);
    if (!c) {
        if (make_room(n, now) || !(c = calloc(1, sizeof *c))) return NULL;
        if (!(c->lag_ns = calloc((size_t)n->n_layers, sizeof *c->lag_ns))) {
            free(c);
            return NULL;
        }
        c->last_layer = -1;
        memcpy(c->id, rx->id, rx->id_len);
        c->id_len = rx->id_len;
        c->fd = c->acked_fd = -1;
        n->clients[n->n_clients++] = c;
    }
    if (fd >= 0 && fd != c->fd) {
        c->fd = fd;
        wr_relay_peer(n->relay, fd, c->peer, sizeof c->peer);
    }
    c->last_ns = now;
    return c;
}

bool en__client_stalled(en_node *n, en__client *c) {
    if (c->fd < 0) return false;
    /* What a connection acknowledged only grows: while what was sent is within the limit of the
     * last count, it cannot be over it now, and the count (two or three system calls, asked at
     * every request) is not taken again. */
    if (c->acked_fd == c->fd && c->sent <= c->acked + n->opts.peer_limit) return false;
    uint64_t acked;
    /* without the relay (--recv-bound off) the descriptor is libzmq's TCP connection itself */
    if ((n->relay ? wr_relay_acked(n->relay, c->fd, &acked) : mw_tcp_acked(c->fd, &acked)) != 0)
        return false;
    c->acked = acked;
    c->acked_fd = c->fd;
    /* c->sent counts payload only, so this is a lower bound of what waits for the client */
    return c->sent > acked && c->sent - acked > n->opts.peer_limit;
}

bool en__client_defer(en_node *n, en__client *c, wr_rx *rx, uint64_t t_rx) {
    uint64_t bytes = 0;
    for (int i = 0; i < rx->n_parts; i++) bytes += rx->parts[i].len;
    if (c->q_n == EN__CLIENT_QUEUE || c->q_bytes + bytes > n->opts.peer_limit) return false;
    en__held *h = &c->q[(c->q_head + c->q_n) % EN__CLIENT_QUEUE];
    wr_rx_move(&h->rx, rx);
    h->t_rx = t_rx;
    h->bytes = bytes;
    c->q_n++;
    c->q_bytes += bytes;
    return true;
}

bool en__client_take(en__client *c, wr_rx *rx, uint64_t *t_rx) {
    if (!c->q_n) return false;
    en__held *h = &c->q[c->q_head];
    wr_rx_free(rx);
    wr_rx_move(rx, &h->rx);
    *t_rx = h->t_rx;
    c->q_bytes -= h->bytes;
    c->q_head = (c->q_head + 1) % EN__CLIENT_QUEUE;
    c->q_n--;
    return true;
}

/* The client's counted faults as one line, then the counters restart. */
static void log_line(en_node *n, en__client *c, uint64_t now) {
    char what[512] = "";
    size_t len = 0;
#define ADD(cnt, text)                                                                             \
    if (cnt)                                                                                       \
        len += (size_t)snprintf(what + len, sizeof what - len, "%s%" PRIu64 " " text,              \
                                len ? ", " : "", cnt);
    ADD(c->n_errors, "request(s) refused")
    ADD(c->n_dropped, "reply(ies) dropped: its queue is full")
    ADD(c->n_discarded, "request(s) discarded unexecuted: it does not take its replies")
    ADD(c->n_overflow, "request(s) dropped: its backlog exceeds the per-client queue")
#undef ADD
    if (len) {
        char hex[2 * WR_MAX_ROUTING_ID + 1];
        for (size_t i = 0; i < c->id_len && i < 8; i++) snprintf(hex + 2 * i, 3, "%02x", c->id[i]);
        hex[2 * (c->id_len < 8 ? c->id_len : 8)] = '\0';
        fprintf(stderr, "expert-node %s: client %s (id %s): %s%s%s%s\n", n->node_id,
                c->peer[0] ? c->peer : "?", hex, what, c->first_error[0] ? "; first: " : "",
                c->first_error, c->log_ns ? "" : " (more are counted, one line per 10 s)");
    }
    c->n_errors = c->n_dropped = c->n_discarded = c->n_overflow = 0;
    c->first_error[0] = '\0';
    c->log_ns = now;
}

void en__client_note(en_node *n, en__client *c, en__fault f, const char *msg) {
    uint64_t now = mw_now_ns();
    switch ((int)f) {
    case EN__F_ERROR:
        if (n->opts.quiet) return; /* --quiet: refused requests are not logged */
        c->n_errors++;
        if (!c->first_error[0] && msg) snprintf(c->first_error, sizeof c->first_error, "%s", msg);
        break;
    case EN__F_DROPPED:
        c->n_dropped++;
        break;
    case EN__F_DISCARDED:
        c->n_discarded++;
        break;
    case EN__F_OVERFLOW:
        c->n_overflow++;
        break;
    default:
        break; /* a flush */
    }
    if ((int)f < 0 || !c->log_ns || now - c->log_ns >= (uint64_t)EN__LOG_INTERVAL_S * 1000000000ull)
        log_line(n, c, now);
}

void en__clients_flush(en_node *n) {
    for (int i = 0; i < n->n_clients; i++) en__client_note(n, n->clients[i], -1, NULL);
}

void en__clients_new_round(en_node *n) {
    for (int i = 0; i < n->n_clients; i++) n->clients[i]->in_round = 0;
}

bool en__clients_pending(const en_node *n) {
    for (int i = 0; i < n->n_clients; i++)
        if (n->clients[i]->q_n) return true;
    return false;
}

void en__clients_free(en_node *n) {
    for (int i = 0; i < n->n_clients; i++) {
        release(n->clients[i]);
        free(n->clients[i]->lag_ns);
        free(n->clients[i]);
    }
    free(n->clients);
    n->clients = NULL;
    n->n_clients = n->clients_cap = 0;
}
