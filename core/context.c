/* context.c — creating and destroying contexts; every host allocation of the library goes
 * through the allocator hooks kept here; the growable string buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"

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
    sl_diag_clear(ctx);
    sl_free(ctx, ctx->diags);
    if (ctx->cuda && ctx->cuda_free) ctx->cuda_free(ctx, ctx->cuda);
    sl_free(ctx, ctx->kernel_cache_dir);
    ctx->allocator.free(ctx, ctx->allocator.opaque);
}

void *sl_alloc(sluice_context *ctx, size_t size) {
    return ctx->allocator.alloc(size ? size : 1, ctx->allocator.opaque);
}

void *sl_calloc(sluice_context *ctx, size_t count, size_t size) {
    size_t total;
    if (sl_mul_overflows(count, size, &total)) return NULL;
    void *p = sl_alloc(ctx, total);
    if (p) memset(p, 0, total);
    return p;
}

void *sl_realloc(sluice_context *ctx, void *ptr, size_t size) {
    return ctx->allocator.realloc(ptr, size ? size : 1, ctx->allocator.opaque);
}

void sl_free(sluice_context *ctx, void *ptr) {
    if (ptr) ctx->allocator.free(ptr, ctx->allocator.opaque);
}

char *sl_strndup(sluice_context *ctx, const char *s, size_t n) {
    char *d = sl_alloc(ctx, n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *sl_strdup(sluice_context *ctx, const char *s) { return sl_strndup(ctx, s, strlen(s)); }

/* Aligned blocks: over-allocate through the hooks and keep the original pointer just below
 * the aligned address. */
enum { SL_ALIGN = 64 };

void *sl_alloc_aligned(sluice_context *ctx, size_t size) {
    if (size > SIZE_MAX - SL_ALIGN - sizeof(void *)) return NULL;
    char *raw = sl_alloc(ctx, size + SL_ALIGN + sizeof(void *));
    if (!raw) return NULL;
    uintptr_t aligned = ((uintptr_t)raw + sizeof(void *) + SL_ALIGN - 1) & ~(uintptr_t)(SL_ALIGN - 1);
    ((void **)aligned)[-1] = raw;
    return (void *)aligned;
}

void sl_free_aligned(sluice_context *ctx, void *ptr) {
    if (ptr) sl_free(ctx, ((void **)ptr)[-1]);
}

/* ---- string buffer --------------------------------------------------------------------- */

void sl_strbuf_init(sl_strbuf *sb, sluice_context *ctx) {
    memset(sb, 0, sizeof *sb);
    sb->ctx = ctx;
}

static bool strbuf_reserve(sl_strbuf *sb, size_t extra) {
    if (sb->failed) return false;
    if (sb->len + extra + 1 <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < sb->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            sb->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *d = sl_realloc(sb->ctx, sb->data, cap);
    if (!d) {
        sb->failed = true;
        return false;
    }
    sb->data = d;
    sb->cap = cap;
    return true;
}

void sl_strbuf_appendn(sl_strbuf *sb, const char *s, size_t n) {
    if (!strbuf_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = 0;
}

void sl_strbuf_append(sl_strbuf *sb, const char *s) { sl_strbuf_appendn(sb, s, strlen(s)); }

void sl_strbuf_vprintf(sl_strbuf *sb, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !strbuf_reserve(sb, (size_t)n)) return;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void sl_strbuf_printf(sl_strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sl_strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
}

char *sl_strbuf_take(sl_strbuf *sb) {
    char *d = NULL;
    if (!sb->failed) {
        if (!sb->data) strbuf_reserve(sb, 0);
        if (!sb->failed) {
            if (sb->len == 0) sb->data[0] = 0;
            d = sb->data;
            sb->data = NULL;
        }
    }
    sl_strbuf_free(sb);
    return d;
}

void sl_strbuf_free(sl_strbuf *sb) {
    sl_free(sb->ctx, sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = false;
}
