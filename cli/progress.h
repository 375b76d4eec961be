/* progress.h — the progress line of `sluice run` on stderr: rows and bytes read, the rate,
 * rows written, and the share done with an ETA when the input's size is known. On a terminal
 * it is one line rewritten in place (shown once the run has taken a second); when forced on
 * elsewhere (--progress) it is a line per update. A blocking step that reports nothing
 * itself (the flush, where a stream-wide sort orders every row; syncing the outputs) is a
 * named phase whose elapsed time a ticker thread keeps updating; the final write, whose rows
 * are known once the flush is done, also shows its rows out of that total and an ETA. */
#ifndef SL_CLI_PROGRESS_H
#define SL_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum sl_progress_mode {
    SL_PROGRESS_AUTO,   /* on when stderr is a terminal */
    SL_PROGRESS_ALWAYS,
    SL_PROGRESS_NEVER
} sl_progress_mode;

typedef struct sl_progress sl_progress;

/* total_rows / total_bytes: the input's size, -1 when unknown. Returns NULL when progress is
 * off (every call below accepts NULL and does nothing) or cannot be set up. */
sl_progress *sl_progress_start(sl_progress_mode mode, int64_t total_rows, int64_t total_bytes);
/* After each batch: what was read and written so far (bytes_in -1 when unknown). */
void sl_progress_update(sl_progress *pg, int64_t rows_in, int64_t bytes_in, int64_t rows_out);
/* Enters a named phase ("sorting the whole stream", …, a string that outlives the phase)
 * whose elapsed time is shown, with the rows written, until the next phase; NULL leaves it. */
void sl_progress_phase(sl_progress *pg, const char *what);
/* The same for a phase that writes results until rows_out_total rows are out in all: the line
 * then shows the rows out of that total, the share of the phase done and its ETA. */
void sl_progress_phase_rows(sl_progress *pg, const char *what, int64_t rows_out_total);
/* Formats a count with three significant digits and a metric prefix: "1.23 M rows/s",
 * "512 kB", "17 rows" (unit may be ""). */
void sl_format_count(char *buf, size_t cap, double v, const char *unit);
/* Ends the line (a newline after a line rewritten in place, so that what is printed next
 * starts on its own line) and frees pg. */
void sl_progress_finish(sl_progress *pg);

#endif
