/* base.h — what every internal file needs: the context's allocator, a growable string
 * buffer, checked size arithmetic, and the error-propagation macro. */
#ifndef SL_BASE_H
#define SL_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

/* Internal symbols are hidden (-fvisibility=hidden); only SLUICE_API ones are exported. */

/* ---- allocation through the context's hooks (core/common/memory.c) -------------------------- */
void *sl_alloc(sluice_context *ctx, size_t size);            /* NULL on failure */
void *sl_calloc(sluice_context *ctx, size_t count, size_t size); /* zeroed; overflow → NULL */
void *sl_realloc(sluice_context *ctx, void *ptr, size_t size);
void sl_free(sluice_context *ctx, void *ptr);                /* NULL harmless */
char *sl_strdup(sluice_context *ctx, const char *s);
char *sl_strndup(sluice_context *ctx, const char *s, size_t n);
/* Aligned (64-byte) host buffers for column data; freed with sl_free_aligned. */
void *sl_alloc_aligned(sluice_context *ctx, size_t size);
void sl_free_aligned(sluice_context *ctx, void *ptr);

/* ---- objects a context owns ------------------------------------------------------------ */
/* Pipelines, sessions and the batches handed to the caller are listed in their context, so
 * that sluice_context_destroy frees those the caller did not, as sluice.h promises. The list
 * is newest first, which is also a safe order to destroy them in: a session goes before the
 * pipeline it runs. A batch still queued in a session is the session's, not listed. */
typedef struct sl_owned {
    struct sl_owned *prev, *next;
    void (*destroy)(struct sl_owned *self); /* frees the object (and unlists it) */
    bool listed;
} sl_owned;
void sl_owned_add(sluice_context *ctx, sl_owned *o, void (*destroy)(sl_owned *self));
void sl_owned_remove(sluice_context *ctx, sl_owned *o); /* harmless when not listed */
#define SL_OWNER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- growable string buffer ----------------------------------------------------------- */
typedef struct sl_strbuf {
    sluice_context *ctx;
    char *data;   /* NUL-terminated when len > 0 or after any append */
    size_t len, cap;
    bool failed;  /* an allocation failed: contents are truncated, report NO_MEMORY */
} sl_strbuf;
void sl_strbuf_init(sl_strbuf *sb, sluice_context *ctx);
void sl_strbuf_append(sl_strbuf *sb, const char *s);
void sl_strbuf_appendn(sl_strbuf *sb, const char *s, size_t n);
void sl_strbuf_printf(sl_strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sl_strbuf_vprintf(sl_strbuf *sb, const char *fmt, va_list ap);
char *sl_strbuf_take(sl_strbuf *sb); /* hands over data (NULL if failed); resets sb */
void sl_strbuf_free(sl_strbuf *sb);

/* ---- checked arithmetic --------------------------------------------------------------- */
static inline bool sl_mul_overflows(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

/* Propagates a non-OK status. */
#define SL_TRY(expr)                                                                       \
    do {                                                                                   \
        sluice_status sl_try_status_ = (expr);                                             \
        if (sl_try_status_ != SLUICE_OK) return sl_try_status_;                            \
    } while (0)

#define SL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
