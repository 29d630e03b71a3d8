/* vindex/main.c — the vindex program: extract, inspect, verify, slice, synth.
 * A thin command line over vindex/vx_vindex.h and vindex/vx_synth.h; exit 0 on success, 1 on a
 * failure (a bad checksum included), 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vindex/vx_plan.h"
#include "vindex/vx_rstats.h"
#include "vindex/vx_source.h"
#include "vindex/vx_strmap.h"
#include "vindex/vx_synth.h"
#include "vindex/vx_vindex.h"
#include "util/mw_progress.h"
#include "util/mw_time.h"

static void usage(FILE *f) {
    char archs[128];
    vx_synth_family_names(archs, sizeof archs, "|");
    fprintf(f,
            "usage:\n"
            "  vindex extract SRC OUT [--strict] [--transcode experts=TYPE[,dense=TYPE]]\n"
            "      SRC is a .gguf file or a Hugging Face safetensors directory\n"
            "  vindex inspect DIR [--json]\n"
            "  vindex verify DIR\n"
            "  vindex slice DIR --experts SPEC OUT [--no-dense]\n"
            "      SPEC: all | L0-L1:E0-E1[,...] | @shard.json\n"
            "  vindex routing-stats TRACE... [--json] [--pairs N]\n"
            "      per layer and expert: load, pairs chosen together, distinct experts per batch\n"
            "  vindex plan --topology T [--model M] [--routing-stats TRACE|STATS.json] --out DIR\n"
            "      places every (layer, expert) extent on the topology's hosts; one shard per host\n"
            "  vindex synth --arch %s --layers L --hidden H --heads NH\n"
            "               [--kv-heads N] [--head-dim D] --experts E --top-k K --expert-ff F\n"
            "               --vocab V --seed S [--expert-format mxfp4|q6_K]\n"
            "               [--dense-format f32|f16|q8_0] [--sliding-window W] [--context N]\n"
            "               deepseek2 (--head-dim is qk_nope; defaults are DeepSeek-V3's):\n"
            "               [--q-lora R] [--kv-lora R] [--rope-dim D] [--v-dim D]\n"
            "               [--dense-layers N] [--dense-ff F] [--shared-experts N]\n"
            "               [--groups G] [--groups-used U] [--gating 1|2]\n"
            "               [--weights-norm 0|1] [--weights-scale S]\n"
            "               gpt-oss, deepseek2: [--hot-experts N [--hot-bias B]] (a skewed router)\n"
            "               kimi-linear (the deepseek2 options but --q-lora, --groups and\n"
            "               --weights-norm; defaults are Kimi Linear 48B-A3B's):\n"
            "               [--kda-head-dim D] [--conv-kernel K] [--full-attn-every N]\n"
            "               kimi-k3 (kimi-linear's options and --q-lora, --weights-norm):\n"
            "               [--expert-latent L] [--attn-res-block B] [--situ-beta B]\n"
            "               [--situ-linear-beta B] [--gate-lower-bound LB]\n"
            "               --format gguf|vindex OUT\n",
            archs);
}

/* Progress on stderr (util/mw_progress.h): a bar on a terminal, lines in a log. */
static mw_progress progress(const char *what, bool bytes) {
    mw_progress p;
    mw_progress_init(&p, stderr, what, bytes);
    return p;
}

/* Writes s with control characters (C0, DEL, UTF-8 C1) escaped: messages and tensor names come
 * from untrusted files and must not drive the terminal. */
static void put_escaped(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            fprintf(f, "\\u%04x", *++p);
        else
            fputc(*p, f);
    }
}

static int fail(const mw_err *err) {
    fputs("vindex: ", stderr);
    put_escaped(stderr, err->msg);
    fputc('\n', stderr);
    return 1;
}

/* Source tensors consumed by at least one stored tensor. */
static size_t count_consumed(const vx_input *in) {
    vx_strmap seen = {0};
    size_t n = 0;
    for (size_t i = 0; i < in->n_tensors; i++)
        for (int r = 0; r < in->tensors[i].n_ranges; r++)
            if (vx_strmap_put(&seen, in->tensors[i].ranges[r].src_name, 0) == 0) n++;
    vx_strmap_free(&seen);
    return n;
}

static void print_audit(const vx_input *in) {
    size_t consumed = count_consumed(in);
    printf("coverage: %zu source tensors: %zu consumed, %zu dropped by rule, %zu unrecognised\n",
           consumed + in->n_dropped + in->n_unrecognised, consumed, in->n_dropped,
           in->n_unrecognised);
    for (size_t i = 0; i < in->n_dropped; i++) {
        fputs("  dropped       ", stdout);
        put_escaped(stdout, in->dropped[i].src_name);
        printf(" (%s)\n", in->dropped[i].rule);
    }
    for (size_t i = 0; i < in->n_unrecognised; i++) {
        fputs("  unrecognised  ", stdout);
        put_escaped(stdout, in->unrecognised[i]);
        fputc('\n', stdout);
    }
}

static int cmd_extract(int argc, char **argv) {
    const char *src = NULL, *out = NULL;
    vx_extract_opts opts = {0};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--strict"))
            opts.strict = true;
        else if (!strcmp(argv[i], "--transcode") && i + 1 < argc)
            opts.transcode = argv[++i];
        else if (argv[i][0] == '-')
            return usage(stderr), 2;
        else if (!src)
            src = argv[i];
        else if (!out)
            out = argv[i];
        else
            return usage(stderr), 2;
    }
    if (!src || !out) return usage(stderr), 2;
    mw_err err;
    vx_input *in;
    if (vx_input_open(src, &in, &err)) return fail(&err);
    print_audit(in);
    mw_progress b = progress("vindex extract", true);
    opts.progress = mw_progress_cb;
    opts.progress_ctx = &b;
    vx_extract_stats st;
    double t0 = mw_now_s();
    int rc = vx_extract(in, out, &opts, &st, &err);
    double dt = mw_now_s() - t0;
    vx_input_close(in);
    if (rc) return fail(&err);
    uint64_t bytes = st.dense_bytes + st.expert_bytes;
    printf("wrote %s: dense.bin %.1f MB (%zu tensors), %zu expert files with %zu extents "
           "(%.1f MB, %zu tensors)%s\n",
           out, (double)st.dense_bytes / 1e6, st.n_dense, st.n_moe_layers, st.n_extents,
           (double)st.expert_bytes / 1e6, st.n_expert_tensors,
           st.n_transcoded ? ", some transcoded (see the manifest)" : "");
    printf("extract: %.2f s, %.0f MB/s written (source %.1f MB hashed for provenance)\n", dt,
           (double)bytes / 1e6 / (dt > 1e-9 ? dt : 1e-9), (double)st.source_bytes / 1e6);
    return 0;
}

static int cmd_inspect(int argc, char **argv) {
    bool json = false;
    const char *dir = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!dir && argv[i][0] != '-')
            dir = argv[i];
        else
            return usage(stderr), 2;
    }
    if (!dir) return usage(stderr), 2;
    mw_err err;
    return vx_inspect(dir, json, stdout, &err) ? fail(&err) : 0;
}

static int cmd_verify(int argc, char **argv) {
    if (argc != 1 || argv[0][0] == '-') return usage(stderr), 2;
    mw_err err;
    mw_progress b = progress("vindex verify", true);
    uint64_t bytes = 0;
    double t0 = mw_now_s();
    int rc = vx_verify(argv[0], mw_progress_cb, &b, &bytes, &err);
    double dt = mw_now_s() - t0;
    if (rc) return fail(&err);
    printf("%s: ok (%.1f MB checked in %.2f s, %.0f MB/s)\n", argv[0], (double)bytes / 1e6, dt,
           (double)bytes / 1e6 / (dt > 1e-9 ? dt : 1e-9));
    return 0;
}

static int cmd_slice(int argc, char **argv) {
    const char *dir = NULL, *spec = NULL, *out = NULL;
    bool dense = true;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--experts") && i + 1 < argc)
            spec = argv[++i];
        else if (!strcmp(argv[i], "--no-dense"))
            dense = false;
        else if (argv[i][0] == '-')
            return usage(stderr), 2;
        else if (!dir)
            dir = argv[i];
        else if (!out)
            out = argv[i];
        else
            return usage(stderr), 2;
    }
    if (!dir || !spec || !out) return usage(stderr), 2;
    mw_err err;
    if (vx_slice(dir, spec, out, dense, &err)) return fail(&err);
    printf("wrote %s (experts %s%s)\n", out, spec, dense ? "" : ", no dense tensors");
    return 0;
}

static int cmd_routing_stats(int argc, char **argv) {
    bool json = false;
    long pairs = 32;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) {
            char *end;
            pairs = strtol(argv[++i], &end, 10);
            if (*end || pairs < 0 || pairs > VX_RSTATS_MAX_PAIRS) return usage(stderr), 2;
        } else if (argv[i][0] == '-') {
            return usage(stderr), 2;
        } else {
            argv[n++] = argv[i];
        }
    }
    if (n == 0) return usage(stderr), 2;
    vx_rstats st = {0};
    mw_err err;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = vx_rstats_add_trace(&st, argv[i], &err);
    if (!rc) rc = vx_rstats_top_pairs(&st, (size_t)pairs, &err);
    if (!rc && json) rc = vx_rstats_write_json(&st, stdout, &err);
    if (!rc && !json) vx_rstats_print(&st, stdout);
    vx_rstats_free(&st);
    return rc ? fail(&err) : 0;
}

static int cmd_plan(int argc, char **argv) {
    vx_fleet_opts o = {0};
    for (int i = 0; i < argc; i++) {
        const char **slot = !strcmp(argv[i], "--topology")        ? &o.topology
                            : !strcmp(argv[i], "--model")         ? &o.model
                            : !strcmp(argv[i], "--routing-stats") ? &o.stats
                            : !strcmp(argv[i], "--out")           ? &o.out
                                                                  : NULL;
        if (!slot || i + 1 >= argc) return usage(stderr), 2;
        *slot = argv[++i];
    }
    if (!o.topology || !o.out) return usage(stderr), 2;
    mw_progress b = progress("vindex plan: layers placed", false);
    o.progress = mw_progress_cb;
    o.progress_ctx = &b;
    mw_err err;
    if (vx_fleet_plan(&o, stdout, &err)) return fail(&err);
    printf("wrote %s: plan.json, report.txt, a shard file per host, nodes.tsv, "
           "coordinator.tsv, coordinator.nodes\n",
           o.out);
    return 0;
}

static int cmd_synth(int argc, char **argv) {
    vx_synth_opts o;
    vx_synth_defaults(&o);
    const char *format = NULL, *out = NULL;
    mw_err err;
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] == '-' && i + 1 < argc) {
            const char *k = argv[i] + 2, *v = argv[++i];
            if (!strcmp(k, "format"))
                format = v;
            else if (vx_synth_set(&o, k, v, &err))
                return fprintf(stderr, "vindex synth: %s\n", err.msg), 2;
        } else if (argv[i][0] != '-' && !out) {
            out = argv[i];
        } else {
            return usage(stderr), 2;
        }
    }
    if (!out || !format || (strcmp(format, "gguf") && strcmp(format, "vindex")))
        return usage(stderr), 2;
    vx_input *in;
    if (vx_synth_input(&o, &in, &err)) return fprintf(stderr, "vindex synth: %s\n", err.msg), 2;
    mw_progress b = progress("vindex synth", true);
    double t0 = mw_now_s();
    int rc;
    if (!strcmp(format, "gguf")) {
        rc = vx_input_write_gguf(in, out, mw_progress_cb, &b, &err);
    } else {
        vx_extract_opts eo = {.progress = mw_progress_cb, .progress_ctx = &b};
        rc = vx_extract(in, out, &eo, NULL, &err);
    }
    vx_input_close(in);
    if (rc) return fail(&err);
    printf("wrote %s (%s) in %.2f s\n", out, format, mw_now_s() - t0);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2) return usage(stderr), 2;
    /* Inputs and vindex files are mapped: one shrunk by another process under a page being read
     * raises SIGBUS, reported naming the file (the output of an extract is then never renamed
     * into place). */
    vx_catch_sigbus("vindex");
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"extract", cmd_extract},
                {"inspect", cmd_inspect},
                {"verify", cmd_verify},
                {"slice", cmd_slice},
                {"routing-stats", cmd_routing_stats},
                {"plan", cmd_plan},
                {"synth", cmd_synth}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 2, argv + 2);
    usage(stderr);
    return 2;
}
