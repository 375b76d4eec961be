/* diag.h — recording diagnostics in a context: status, message, file:line:column and the
 * source line, plus the did-you-mean helper every "unknown X" message uses. */
#ifndef SL_DIAG_H
#define SL_DIAG_H

#include "common/base.h"

/* A position in a pipeline file; line/col are 1-based, 0 when unknown. */
typedef struct sl_srcloc {
    int line, col;
} sl_srcloc;

/* The source a loader is reading, so diagnostics can quote the offending line. Set while a
 * pipeline loads (sl_diag_set_source), cleared after. */
void sl_diag_set_source(sluice_context *ctx, const char *file, const char *text, size_t len);
void sl_diag_clear_source(sluice_context *ctx);

/* Forgets previous diagnostics; every public entry point calls this first. */
void sl_diag_clear(sluice_context *ctx);

/* Adds a diagnostic at loc (loc.line 0: no position) and returns its status, so callers can
 * `return sl_diag(...)`. If memory runs out while recording, the context keeps a static
 * out-of-memory diagnostic instead and SLUICE_ERR_NO_MEMORY is returned. */
sluice_status sl_diag(sluice_context *ctx, sluice_status status, sl_srcloc loc, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
sluice_status sl_diag_v(sluice_context *ctx, sluice_status status, sl_srcloc loc,
                        const char *fmt, va_list ap);
/* No location, no source: for API and data errors. */
#define sl_error(ctx, status, ...) sl_diag((ctx), (status), (sl_srcloc){0, 0}, __VA_ARGS__)

/* Status of the first recorded diagnostic, SLUICE_OK when none. */
sluice_status sl_diag_first_status(const sluice_context *ctx);
size_t sl_diag_count(const sluice_context *ctx);

/* The candidate closest to `word` by edit distance, if close enough to be a likely typo
 * (distance <= max(1, strlen(word)/3)); NULL otherwise. */
const char *sl_suggest(const char *word, const char *const *candidates, size_t count);

#endif
