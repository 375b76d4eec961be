/* output.h — where `sluice run` puts its results: OUTDIR/COLUMN.npy per output column, all or
 * nothing. Each column streams into a temporary file beside its final name (the same
 * directory, so the rename is atomic), named .COLUMN.npy.partial-PID so that it never looks
 * like a result; the header's length is patched at the end, so the output never has to fit
 * in memory. Only a run that succeeded renames the temporaries into place; a failed run
 * removes them and leaves OUTDIR as it was: earlier results untouched, and OUTDIR itself
 * removed again when the run created it. (Outputs are always row columns: an offsets input
 * cannot be an output.)
 *
 * One output is open at a time in the process: a signal handler finds its temporaries
 * through sl_output_discard_from_signal. */
#ifndef SL_CLI_OUTPUT_H
#define SL_CLI_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

typedef struct sl_output sl_output;

/* Creates dir if needed (its last component only) and one temporary file per output column
 * of `pipeline`. Returns 0, or -1 with the reason in err (nothing is left behind then). */
int sl_output_open(sl_output **out, const sluice_pipeline *pipeline, const char *dir, char *err,
                   size_t errcap);
/* Appends a result batch to the temporaries. Returns 0, or -1 (write error, or the batch
 * lacks a column). */
int sl_output_append(sl_output *o, const sluice_batch *batch, char *err, size_t errcap);
/* The same in parts, for writer threads that must not call the library (cli/flow.h):
 * sl_output_columns, on the thread that owns the batch, fills cols (one per output column,
 * sl_output_column_count of them) with the batch's columns, checked against the pipeline's
 * outputs, and returns 0, or -1 with the reason in err; sl_output_place, on that thread too
 * and in batch order, takes where each column of the batch goes in its file (pos, one per
 * column); sl_output_write_at then writes `bytes` of column `col` at a position, from
 * several threads at once, and returns 0, or -1 with the reason in err. An output is filled
 * either this way or by sl_output_append, never both. */
size_t sl_output_column_count(const sl_output *o);
int sl_output_columns(const sl_output *o, const sluice_batch *batch, sluice_column *cols,
                      char *err, size_t errcap);
void sl_output_place(sl_output *o, const sluice_column *cols, uint64_t *pos);
int sl_output_write_at(sl_output *o, size_t col, uint64_t pos, const void *data, size_t bytes,
                       char *err, size_t errcap);
/* Rows written so far (0 when the pipeline has no outputs). */
int64_t sl_output_rows(const sl_output *o);
/* Bytes of column data written so far, headers not counted. */
uint64_t sl_output_bytes(const sl_output *o);
/* The end of a successful run: patches the headers, writes every temporary to disk (fsync),
 * then renames them into place and syncs the directory. Returns 0, or -1 with the reason in
 * err, having removed the temporaries (a rename that fails after others succeeded, which
 * needs the directory to change under the run, is named in err). Returns -1 without
 * renaming anything when a signal handler is already discarding the output. Frees o. */
int sl_output_commit(sl_output *o, char *err, size_t errcap);
/* The end of a failed run: removes the temporaries (and the directory when open created it
 * and it is empty again). Frees o; NULL is harmless. */
void sl_output_discard(sl_output *o);
/* For a signal handler (async-signal-safe, from any thread): removes the temporaries of the
 * open output and the directory open created, and returns true; or returns false, doing
 * nothing, while sl_output_commit is renaming (the handler lets the commit finish: the
 * outputs are then complete). True when no output is open. */
bool sl_output_discard_from_signal(void);

#endif
