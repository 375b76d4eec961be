/* context.c — creating and destroying contexts, and the list of objects a context owns.
 * Allocation through the context's hooks lives in memory.c. */
#include <stdlib.h>
#include <string.h>

#include "common/context.h"

static void *default_alloc(size_t size, void *opaque) {
    (void)opaque;
    return malloc(size);
}
static void *default_realloc(void *ptr, size_t size, void *opaque) {
    (void)opaque;
    return realloc(ptr, size);
}
static void default_free(void *ptr, void *opaque) {
    (void)opaque;
    free(ptr);
}

SLUICE_API sluice_status sluice_context_create(sluice_context **out,
                                               const sluice_context_options *options) {
    if (!out) return SLUICE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    sluice_context_options defaults = SLUICE_CONTEXT_OPTIONS_INIT;
    if (!options) options = &defaults;
    if (options->version != SLUICE_CONTEXT_OPTIONS_VERSION) return SLUICE_ERR_INVALID_ARGUMENT;
    if (options->cpu_threads < 0) return SLUICE_ERR_INVALID_ARGUMENT;
    sluice_allocator a = {default_alloc, default_realloc, default_free, NULL};
    if (options->allocator) {
        a = *options->allocator;
        if (!a.alloc || !a.realloc || !a.free) return SLUICE_ERR_INVALID_ARGUMENT;
    }
    sluice_context *ctx = a.alloc(sizeof *ctx, a.opaque);
    if (!ctx) return SLUICE_ERR_NO_MEMORY;
    memset(ctx, 0, sizeof *ctx);
    ctx->allocator = a;
    ctx->cpu_threads = options->cpu_threads;
    if (options->kernel_cache_dir) {
        ctx->kernel_cache_dir = sl_strdup(ctx, options->kernel_cache_dir);
        if (!ctx->kernel_cache_dir) {
            a.free(ctx, a.opaque);
            return SLUICE_ERR_NO_MEMORY;
        }
    }
    *out = ctx;
    return SLUICE_OK;
}

SLUICE_API void sluice_context_destroy(sluice_context *ctx) {
    if (!ctx) return;
    while (ctx->owned) ctx->owned->destroy(ctx->owned); /* each unlists itself */
    sl_diag_clear(ctx);
    sl_free(ctx, ctx->diags);
    sl_block_cache_release(ctx);
    if (ctx->cuda && ctx->cuda_free) ctx->cuda_free(ctx, ctx->cuda);
    sl_free(ctx, ctx->kernel_cache_dir);
    ctx->allocator.free(ctx, ctx->allocator.opaque);
}

void sl_owned_add(sluice_context *ctx, sl_owned *o, void (*destroy)(sl_owned *self)) {
    o->destroy = destroy;
    o->prev = NULL;
    o->next = ctx->owned;
    if (ctx->owned) ctx->owned->prev = o;
    ctx->owned = o;
    o->listed = true;
}

void sl_owned_remove(sluice_context *ctx, sl_owned *o) {
    if (!o->listed) return;
    if (o->prev) o->prev->next = o->next;
    else ctx->owned = o->next;
    if (o->next) o->next->prev = o->prev;
    o->prev = o->next = NULL;
    o->listed = false;
}
