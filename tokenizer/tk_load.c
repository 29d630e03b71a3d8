/* tokenizer/tk_load.c — finding a model's tokenizer wherever it is kept.
 *
 * A vindex carries its tokenizer as a file of its own (tokenizer.gguf, written by extract and
 * synth from the source's tokenizer.ggml.* keys, or a Hugging Face checkpoint's tokenizer.json or
 * tiktoken.model with its tokenizer_config.json), checksummed in the manifest; the mount checks it
 * before it is read. A vindex without one (written before tokenizers were carried) falls back to
 * the metadata its manifest keeps. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer/tk_internal.h"
#include "vindex/vx_source.h"

int tk_load_source(const vx_source *src, tk_tokenizer **out, mw_err *err) {
    char path[4096];
    *out = NULL;
    int rc = vx_source_carried(src, "tokenizer.gguf", path, sizeof path, err);
    if (rc < 0) return -1;
    if (rc == 1) return tk_load_gguf(path, out, err);
    rc = vx_source_carried(src, "tokenizer.json", path, sizeof path, err);
    if (rc < 0) return -1;
    if (rc == 1) {
        char cfg[4096];
        /* the config is checked too when the vindex carries it */
        if (vx_source_carried(src, "tokenizer_config.json", cfg, sizeof cfg, err) < 0) return -1;
        return tk_load_hf(path, vx_source_arch(src), out, err);
    }
    rc = vx_source_carried(src, "tiktoken.model", path, sizeof path, err);
    if (rc < 0) return -1;
    if (rc == 1) {
        /* the files read beside it are checked too */
        static const char *const beside[] = {"tokenizer_config.json", "config.json",
                                             "generation_config.json", "tokenization_kimi.py",
                                             "chat_template.jinja"};
        char other[4096];
        for (size_t i = 0; i < sizeof beside / sizeof *beside; i++)
            if (vx_source_carried(src, beside[i], other, sizeof other, err) < 0) return -1;
        return tk_load_tiktoken(path, vx_source_arch(src), out, err);
    }
    return tk_load_meta(vx_source_meta(src), vx_source_path(src), out, err);
}

int tk_load_path(const char *path, tk_tokenizer **out, mw_err *err) {
    struct stat st;
    *out = NULL;
    if (stat(path, &st)) return mw_errf(err, "%s: no such file or directory", path);
    size_t n = strlen(path);
    if (!S_ISDIR(st.st_mode)) {
        if (n >= 5 && !strcmp(path + n - 5, ".json")) return tk_load_hf(path, NULL, out, err);
        if (n >= 14 && !strcmp(path + n - 14, "tiktoken.model"))
            return tk_load_tiktoken(path, NULL, out, err);
        return tk_load_gguf(path, out, err);
    }
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/manifest.json", path);
    if (stat(probe, &st)) { /* not a vindex: a Hugging Face checkpoint directory */
        snprintf(probe, sizeof probe, "%s/tokenizer.json", path);
        if (!stat(probe, &st)) return tk_load_hf(path, NULL, out, err);
        snprintf(probe, sizeof probe, "%s/tiktoken.model", path);
        if (!stat(probe, &st)) return tk_load_tiktoken(path, NULL, out, err);
        return mw_errf(err,
                       "%s: neither a vindex nor a directory with tokenizer.json or tiktoken.model",
                       path);
    }
    vx_expert_set none = {0};
    vx_source_opts so = {.experts = &none, .dense = false, .verify_on_mount = false};
    vx_source *src;
    if (vx_source_open(path, &so, &src, err)) return -1;
    int rc = tk_load_source(src, out, err);
    vx_source_close(src);
    return rc;
}
