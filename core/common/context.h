/* context.h — the context object: allocator hooks, options, and the diagnostics of the last
 * failed call. Internal; the public face is sluice_context in sluice.h. */
#ifndef SL_CONTEXT_H
#define SL_CONTEXT_H

#include "common/diag.h"

/* Block cache bounds: blocks of at least MIN bytes are cached, at most SLOTS of them and
 * MAX_BYTES together. */
#define SL_BLOCK_CACHE_SLOTS 16
#define SL_BLOCK_CACHE_MIN ((size_t)1 << 20)
#define SL_BLOCK_CACHE_MAX_BYTES ((size_t)1 << 30)

typedef struct sl_diag_entry {
    sluice_diagnostic pub;  /* strings below are owned by the entry */
    char *message, *file, *source_line;
} sl_diag_entry;

struct sluice_context {
    sluice_allocator allocator;
    int cpu_threads;
    char *kernel_cache_dir;  /* NULL: default lookup; "" disabled */

    sl_diag_entry *diags;
    size_t ndiags, diags_cap;
    bool diag_oom;           /* recording a diagnostic failed: report static OOM entry */

    /* the pipeline source being loaded, for quoting lines */
    const char *src_file;
    const char *src_text;
    size_t src_len;

    /* Large aligned blocks freed recently (result batches' columns), kept for reuse so a
     * stream of equal-sized batches does not fault fresh pages in for every batch. */
    struct sl_block_cache {
        void *raw[SL_BLOCK_CACHE_SLOTS];
        size_t size[SL_BLOCK_CACHE_SLOTS];
        size_t bytes;
    } blocks;

    sl_owned *owned;         /* live pipelines, sessions, handed-out batches; newest first */

    void *cuda;              /* CUDA backend's per-context state (kernel cache), or NULL */
    void (*cuda_free)(sluice_context *ctx, void *state);
};

/* Frees the blocks kept in ctx's aligned-block cache (core/common/memory.c). */
void sl_block_cache_release(sluice_context *ctx);

#endif
