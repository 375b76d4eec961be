/* context.h — the context object: allocator hooks, options, and the diagnostics of the last
 * failed call. Internal; the public face is sluice_context in sluice.h. */
#ifndef SL_CONTEXT_H
#define SL_CONTEXT_H

#include "diag.h"

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

    void *cuda;              /* CUDA backend's per-context state (kernel cache), or NULL */
    void (*cuda_free)(sluice_context *ctx, void *state);
};

#endif
