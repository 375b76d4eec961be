/* diag.c — diagnostics kept in the context: recording (with the quoted source line),
 * reading through the public API, formatting, and the did-you-mean suggestion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/context.h"

/* Returned when recording a diagnostic itself ran out of memory. */
static const sluice_diagnostic oom_diagnostic = {
    SLUICE_ERR_NO_MEMORY, "out of memory while recording a diagnostic", NULL, 0, 0, NULL};

void sl_diag_set_source(sluice_context *ctx, const char *file, const char *text, size_t len) {
    ctx->src_file = file;
    ctx->src_text = text;
    ctx->src_len = len;
}

void sl_diag_clear_source(sluice_context *ctx) { sl_diag_set_source(ctx, NULL, NULL, 0); }

void sl_diag_clear(sluice_context *ctx) {
    for (size_t i = 0; i < ctx->ndiags; i++) {
        sl_free(ctx, ctx->diags[i].message);
        sl_free(ctx, ctx->diags[i].file);
        sl_free(ctx, ctx->diags[i].source_line);
    }
    ctx->ndiags = 0;
    ctx->diag_oom = false;
}

/* The text of line `line` (1-based) of the current source, without its newline. */
static char *source_line_copy(sluice_context *ctx, int line) {
    if (!ctx->src_text || line <= 0) return NULL;
    const char *p = ctx->src_text, *end = ctx->src_text + ctx->src_len;
    for (int l = 1; l < line && p < end; p++)
        if (*p == '\n') l++;
    if (p >= end && line > 1) return NULL;
    const char *e = p;
    while (e < end && *e != '\n' && *e != '\r') e++;
    return sl_strndup(ctx, p, (size_t)(e - p));
}

/* Records one diagnostic; the cap on their number is applied by sl_diag_v. */
static sluice_status diag_record(sluice_context *ctx, sluice_status status, sl_srcloc loc,
                                 const char *fmt, va_list ap) {
    if (ctx->ndiags == ctx->diags_cap) {
        size_t cap = ctx->diags_cap ? ctx->diags_cap * 2 : 8;
        sl_diag_entry *d = sl_realloc(ctx, ctx->diags, cap * sizeof *d);
        if (!d) {
            ctx->diag_oom = true;
            return SLUICE_ERR_NO_MEMORY;
        }
        ctx->diags = d;
        ctx->diags_cap = cap;
    }
    sl_strbuf sb;
    sl_strbuf_init(&sb, ctx);
    sl_strbuf_vprintf(&sb, fmt, ap);
    char *message = sl_strbuf_take(&sb);
    char *file = NULL, *source = NULL;
    bool failed = !message;
    if (!failed && ctx->src_file && loc.line > 0) {
        file = sl_strdup(ctx, ctx->src_file);
        source = source_line_copy(ctx, loc.line);
        failed = !file;
    }
    if (failed) {
        sl_free(ctx, message);
        sl_free(ctx, file);
        sl_free(ctx, source);
        ctx->diag_oom = true;
        return SLUICE_ERR_NO_MEMORY;
    }
    sl_diag_entry *e = &ctx->diags[ctx->ndiags++];
    e->message = message;
    e->file = file;
    e->source_line = source;
    e->pub.status = status;
    e->pub.message = message;
    e->pub.file = file;
    e->pub.line = file ? loc.line : 0;
    e->pub.column = file ? loc.col : 0;
    e->pub.source_line = source;
    return status;
}

static sluice_status diag_record_f(sluice_context *ctx, sluice_status status, sl_srcloc loc,
                                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static sluice_status diag_record_f(sluice_context *ctx, sluice_status status, sl_srcloc loc,
                                   const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sluice_status s = diag_record(ctx, status, loc, fmt, ap);
    va_end(ap);
    return s;
}

/* A file can hold far more problems than anyone reads. Past this many, one last diagnostic
 * says so and the rest are not recorded (the call's status is still that of the first).
 * This keeps a hostile file full of errors cheap to reject: each diagnostic copies its
 * source line, found by scanning the text from the start. */
#define SL_MAX_DIAGNOSTICS 100

sluice_status sl_diag_v(sluice_context *ctx, sluice_status status, sl_srcloc loc,
                        const char *fmt, va_list ap) {
    if (ctx->ndiags > SL_MAX_DIAGNOSTICS) return status;
    if (ctx->ndiags == SL_MAX_DIAGNOSTICS) {
        diag_record_f(ctx, SLUICE_ERR_LIMIT, (sl_srcloc){0, 0},
                      "more than %d problems: only the first %d are reported; fix those and "
                      "check again", SL_MAX_DIAGNOSTICS, SL_MAX_DIAGNOSTICS);
        return status;
    }
    return diag_record(ctx, status, loc, fmt, ap);
}

sluice_status sl_diag(sluice_context *ctx, sluice_status status, sl_srcloc loc, const char *fmt,
                      ...) {
    va_list ap;
    va_start(ap, fmt);
    sluice_status s = sl_diag_v(ctx, status, loc, fmt, ap);
    va_end(ap);
    return s;
}

sluice_status sl_diag_first_status(const sluice_context *ctx) {
    if (ctx->ndiags) return ctx->diags[0].pub.status;
    return ctx->diag_oom ? SLUICE_ERR_NO_MEMORY : SLUICE_OK;
}

size_t sl_diag_count(const sluice_context *ctx) { return ctx->ndiags; }

SLUICE_API size_t sluice_context_diagnostic_count(const sluice_context *ctx) {
    if (!ctx) return 0;
    return ctx->ndiags + (ctx->diag_oom ? 1 : 0);
}

SLUICE_API const sluice_diagnostic *sluice_context_diagnostic(const sluice_context *ctx,
                                                              size_t index) {
    if (!ctx) return NULL;
    if (index < ctx->ndiags) return &ctx->diags[index].pub;
    if (index == ctx->ndiags && ctx->diag_oom) return &oom_diagnostic;
    return NULL;
}

SLUICE_API size_t sluice_diagnostic_format(const sluice_diagnostic *d, char *buf, size_t cap) {
    if (!d) {
        if (buf && cap) buf[0] = 0;
        return 0;
    }
    /* Written twice at most: once to measure, once to fill. */
    size_t need = 0;
    char tmp[64];
#define SL_EMIT_(...)                                                                      \
    do {                                                                                   \
        int n_ = snprintf(buf && need < cap ? buf + need : NULL,                           \
                          buf && need < cap ? cap - need : 0, __VA_ARGS__);                \
        if (n_ > 0) need += (size_t)n_;                                                    \
    } while (0)
    if (d->file) {
        if (d->line > 0)
            SL_EMIT_("%s:%d:%d: ", d->file, d->line, d->column > 0 ? d->column : 1);
        else
            SL_EMIT_("%s: ", d->file);
    }
    SL_EMIT_("error: %s\n", d->message);
    if (d->source_line) {
        SL_EMIT_("  %s\n", d->source_line);
        if (d->column > 0) {
            SL_EMIT_("  ");
            /* keep tabs so the caret lines up under the column */
            for (int i = 1; i < d->column; i++) {
                char c = (size_t)(i - 1) < strlen(d->source_line) && d->source_line[i - 1] == '\t'
                             ? '\t' : ' ';
                snprintf(tmp, sizeof tmp, "%c", c);
                SL_EMIT_("%s", tmp);
            }
            SL_EMIT_("^\n");
        }
    }
#undef SL_EMIT_
    if (buf && cap && need >= cap) buf[cap - 1] = 0;
    return need;
}

/* ---- did you mean ---------------------------------------------------------------------- */

/* Levenshtein distance with transpositions counted as one edit, capped at 64 characters. */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 1000;
    int d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

const char *sl_suggest(const char *word, const char *const *candidates, size_t count) {
    if (!word) return NULL;
    int limit = (int)strlen(word) / 3;
    if (limit < 1) limit = 1;
    const char *best = NULL;
    int best_d = limit + 1;
    for (size_t i = 0; i < count; i++) {
        if (!candidates[i]) continue;
        int dist = edit_distance(word, candidates[i]);
        if (dist < best_d) {
            best_d = dist;
            best = candidates[i];
        }
    }
    return best;
}
