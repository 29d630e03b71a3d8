/* bench/bench_wire.c — wire codec throughput and size: encode / decode GB/s of each row codec,
 * the LZ4 ratio (and whether the 10 % rule lets LZ4 through), and whole-message pack + parse time
 * for decode-sized batches, on activation-like rows of width 2880 (gpt-oss-20b's hidden size).
 *
 * Rows are synthetic: gaussian values times per-channel scales drawn log-normally, plus a few
 * outlier channels ~50× larger, which is the shape of transformer residual streams and normed MoE
 * inputs. Prints one JSON object per line. `bench_wire --help` lists the options. */
#include <lz4.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "kernels/kn.h"
#include "wire/wr_codec.h"
#include "wire/wr_msg.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static double uniform(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double gaussian(void) {
    return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
}

static float *activation_rows(int rows, int width) {
    float *scale = malloc((size_t)width * sizeof *scale);
    for (int c = 0; c < width; c++) scale[c] = (float)exp(0.5 * gaussian());
    for (int k = 0; k < 4; k++) scale[(int)(uniform() * width)] *= 50.0f;
    float *x = malloc((size_t)rows * (size_t)width * sizeof *x);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < width; c++) x[(size_t)r * width + c] = (float)gaussian() * scale[c];
    free(scale);
    return x;
}

/* Runs fn repeatedly for about `seconds`; returns seconds per call (best of 3 rounds). */
typedef void (*op_fn)(void *ctx);
static double time_op(op_fn fn, void *ctx, double seconds) {
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        long iters = 0;
        double t0 = bu_now(), t;
        do {
            fn(ctx);
            iters++;
            t = bu_now();
        } while (t - t0 < seconds / 3);
        double per = (t - t0) / (double)iters;
        if (per < best) best = per;
    }
    return best;
}

typedef struct codec_ctx {
    wr_dtype d;
    const float *x;
    size_t n;
    void *enc;
    float *dec;
    void *lz4;
    size_t lz4_len;
} codec_ctx;

static void op_encode(void *p) {
    codec_ctx *c = p;
    wr_encode(c->d, c->x, c->n, c->enc);
}
static void op_decode(void *p) {
    codec_ctx *c = p;
    wr_decode(c->d, c->enc, c->n, c->dec);
}
static void op_lz4(void *p) {
    codec_ctx *c = p;
    c->lz4_len = wr_lz4_compress(c->enc, c->n * wr_dtype_size(c->d), c->lz4, c->n * 4);
}

typedef struct msg_ctx {
    wr_out out;
    wr_in in;
    wr_msg m;
    wr_codec codec;
    int ok;
} msg_ctx;

static void op_pack_parse(void *p) {
    msg_ctx *c = p;
    wr_pack(&c->out, &c->m, c->codec, NULL);
    wr_part parts[WR_MAX_PARTS];
    for (int i = 0; i < c->out.n_parts; i++)
        parts[i] = (wr_part){c->out.part[i], c->out.part_len[i]};
    wr_msg r;
    wr_code code;
    c->ok = wr_parse(&c->in, parts, c->out.n_parts, 0, &r, &code, NULL) == 0;
}

/* Each row codec over `rows` rows: encode / decode speed, LZ4's ratio, the rounding error. */
static void bench_codecs(const float *x, int rows, int width, double seconds) {
    size_t n = (size_t)rows * (size_t)width;
    codec_ctx cc = {
        .x = x, .n = n, .enc = malloc(n * 4), .dec = malloc(n * 4), .lz4 = malloc(n * 4)};
    const char *isa = kn_isa_name(kn_isa_active());
    for (int d = WR_F32; d < WR_DTYPE_END; d++) {
        cc.d = (wr_dtype)d;
        double te = time_op(op_encode, &cc, seconds);
        double td = time_op(op_decode, &cc, seconds);
        double tz = time_op(op_lz4, &cc, seconds);
        size_t raw = n * wr_dtype_size(cc.d);
        /* Ratio LZ4 achieves on its own, with no 10 % cap, to show how far from paying it is. */
        char *probe = malloc((size_t)LZ4_COMPRESSBOUND(raw));
        int plain = LZ4_compress_default(cc.enc, probe, (int)raw, LZ4_COMPRESSBOUND(raw));
        free(probe);
        double max_abs = 0, err2 = 0, sig2 = 0;
        for (size_t i = 0; i < n; i++) {
            double err = fabs((double)cc.dec[i] - (double)x[i]);
            if (err > max_abs) max_abs = err;
            err2 += err * err;
            sig2 += (double)x[i] * (double)x[i];
        }
        printf("{\"bench\":\"wire_codec\",\"codec\":\"%s\",\"isa\":\"%s\",\"width\":%d,\"rows\":%d,"
               "\"bytes_per_row\":%zu,\"encode_gbps\":%.2f,\"decode_gbps\":%.2f,"
               "\"lz4_ratio\":%.4f,\"lz4_sent\":%s,\"lz4_compress_gbps\":%.2f,"
               "\"max_abs_err\":%.3g,\"rms_rel_err\":%.3g}\n",
               wr_dtype_name(cc.d), isa, width, rows, (size_t)width * wr_dtype_size(cc.d),
               (double)n * 4 / te / 1e9, (double)n * 4 / td / 1e9,
               plain > 0 ? (double)plain / (double)raw : 1.0, cc.lz4_len ? "true" : "false",
               (double)raw / tz / 1e9, max_abs, sqrt(err2 / sig2));
    }
    free(cc.enc);
    free(cc.dec);
    free(cc.lz4);
}

/* Whole messages: T rows with top-4 routing, packed and parsed in one process. */
static void bench_messages(const float *x, int width, double seconds) {
    static const int Ts[] = {1, 8, 64};
    static const char *codecs[] = {"f32", "f16", "bf16", "f16+lz4"};
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        int T = Ts[ti];
        wr_assign *a = malloc((size_t)T * 4 * sizeof *a);
        for (int j = 0; j < T * 4; j++) a[j] = (wr_assign){j / 4, (j * 11) % 32, 0.25f};
        for (size_t ci = 0; ci < sizeof codecs / sizeof codecs[0]; ci++) {
            msg_ctx mc;
            wr_out_init(&mc.out);
            wr_in_init(&mc.in, NULL);
            wr_codec_parse(codecs[ci], &mc.codec, NULL);
            mc.m = (wr_msg){.kind = WR_MSG_EXPERT_BATCH,
                            .seq = 1,
                            .batch = {.rows = (uint32_t)T,
                                      .width = (uint32_t)width,
                                      .n_assign = (uint32_t)(T * 4),
                                      .reply = mc.codec,
                                      .x = x,
                                      .assign = a}};
            double t = time_op(op_pack_parse, &mc, seconds / 2);
            printf("{\"bench\":\"wire_message\",\"codec\":\"%s\",\"rows\":%d,\"assignments\":%d,"
                   "\"wire_bytes\":%zu,\"pack_parse_us\":%.2f,\"ok\":%s}\n",
                   codecs[ci], T, T * 4, mc.out.bytes, t * 1e6, mc.ok ? "true" : "false");
            wr_out_free(&mc.out);
            wr_in_free(&mc.in);
        }
        free(a);
    }
}

int main(int argc, char **argv) {
    int width = 2880;
    double seconds = 0.3;
    const bu_opt opt[] = {
        BU_OPT_IN("--width", BU_INT, &width, "2880", "row width", 1, 65536),
        BU_OPT_IN("--seconds", BU_NUM, &seconds, "0.3", "time budget per measurement", 0.001, 3600),
    };
    const bu_cli cli = {"bench_wire",
                        "Wire codec throughput and size on activation-like rows: encode / decode "
                        "GB/s per codec, the LZ4\nratio, the codec's error, and pack + parse of "
                        "decode-sized ExpertBatch messages.",
                        NULL,
                        NULL,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, NULL);
    if (status != BU_RUN) return status;
    const int rows = 64; /* a prefill-sized block: per-row work dominates call overhead */
    float *x = activation_rows(rows, width);
    bench_codecs(x, rows, width, seconds);
    bench_messages(x, width, seconds);
    free(x);
    return 0;
}
