/* memory.c — every host allocation of the library, through the context's allocator hooks:
 * plain blocks, 64-byte aligned column blocks with a small reuse cache, and the growable
 * string buffer. Depends on nothing but the context's fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/context.h"

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

/* Aligned blocks: over-allocate through the hooks and keep, just below the aligned address,
 * the original pointer and the usable size. Large blocks go back to the context's cache on
 * free and are handed out again for a request of at most their size and at least half of
 * it: result batches of a stream are usually the same size, and reusing a block skips the
 * page faults (and the kernel's zeroing) of a fresh mapping. */
enum { SL_ALIGN = 64, SL_HEADER = 2 * sizeof(void *) };

typedef struct block_header {
    void *raw;
    size_t size;
} block_header;

static void *cache_take(sluice_context *ctx, size_t size) {
    struct sl_block_cache *c = &ctx->blocks;
    int best = -1;
    for (int i = 0; i < SL_BLOCK_CACHE_SLOTS; i++) {
        if (!c->raw[i] || c->size[i] < size || c->size[i] / 2 > size) continue;
        if (best < 0 || c->size[i] < c->size[best]) best = i;
    }
    if (best < 0) return NULL;
    void *raw = c->raw[best];
    c->bytes -= c->size[best];
    c->raw[best] = NULL;
    return raw;
}

static bool cache_put(sluice_context *ctx, void *raw, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
    /* Under ASan every block really goes back, so a use after sluice_batch_free is caught. */
    (void)ctx, (void)raw, (void)size;
    return false;
#endif
    struct sl_block_cache *c = &ctx->blocks;
    if (size < SL_BLOCK_CACHE_MIN || c->bytes + size > SL_BLOCK_CACHE_MAX_BYTES) return false;
    for (int i = 0; i < SL_BLOCK_CACHE_SLOTS; i++) {
        if (c->raw[i]) continue;
        c->raw[i] = raw;
        c->size[i] = size;
        c->bytes += size;
        return true;
    }
    return false;
}

void sl_block_cache_release(sluice_context *ctx) {
    for (int i = 0; i < SL_BLOCK_CACHE_SLOTS; i++) {
        sl_free(ctx, ctx->blocks.raw[i]);
        ctx->blocks.raw[i] = NULL;
    }
    ctx->blocks.bytes = 0;
}

/* The aligned address inside a raw block; its header sits just below it. */
static void *aligned_in(void *raw) {
    return (void *)(((uintptr_t)raw + SL_HEADER + SL_ALIGN - 1) & ~(uintptr_t)(SL_ALIGN - 1));
}

void *sl_alloc_aligned(sluice_context *ctx, size_t size) {
    if (size > SIZE_MAX - SL_ALIGN - SL_HEADER) return NULL;
    /* A cached block keeps its header (raw pointer and its full capacity). */
    void *raw = size >= SL_BLOCK_CACHE_MIN ? cache_take(ctx, size) : NULL;
    if (raw) return aligned_in(raw);
    raw = sl_alloc(ctx, size + SL_ALIGN + SL_HEADER);
    if (!raw) return NULL;
    void *aligned = aligned_in(raw);
    block_header *h = (block_header *)aligned - 1;
    h->raw = raw;
    h->size = size;
    return aligned;
}

void sl_free_aligned(sluice_context *ctx, void *ptr) {
    if (!ptr) return;
    block_header *h = (block_header *)ptr - 1;
    if (!cache_put(ctx, h->raw, h->size)) sl_free(ctx, h->raw);
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
