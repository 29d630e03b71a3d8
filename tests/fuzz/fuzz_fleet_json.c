/* tests/fuzz/fuzz_fleet_json.c — the fleet's JSON inputs: a topology file (vindex/vx_topology.h)
 * and routing statistics as `vindex routing-stats --json` writes them (vindex/vx_rstats.h), both
 * read from the same input. A topology that loads must be within its bounds: hosts 1 .. 64, every
 * host with an endpoint, a platform and a link, min_owners <= max_owners <= hosts. */
#include <stdint.h>
#include <string.h>

#include "tests/fuzz/fz.h"
#include "vindex/vx_rstats.h"
#include "vindex/vx_topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file("fleet.json", data, size);
    vx_topology t;
    if (vx_topology_load(path, &t, NULL) == 0) {
        if (t.n_hosts < 1 || t.n_hosts > VX_TOPO_MAX_HOSTS || t.n_coords < 1 || t.min_owners < 1 ||
            t.min_owners > t.max_owners || t.max_owners > t.n_hosts)
            __builtin_trap();
        for (int h = 0; h < t.n_hosts; h++)
            if (!t.hosts[h].endpoint[0] || !t.hosts[h].platform || !(t.hosts[h].link.gbit > 0))
                __builtin_trap();
        vx_topology_free(&t);
    }
    vx_rstats s;
    if (vx_rstats_load_json(path, &s, NULL) == 0) {
        for (uint32_t l = 0; l < s.info.n_layer; l++)
            for (uint32_t e = 0; s.layers[l].count && e < s.info.n_expert; e++)
                if (s.layers[l].count[e] > s.layers[l].rows) __builtin_trap();
        vx_rstats_free(&s);
    }
    return 0;
}
