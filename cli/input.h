/* input.h — where `sluice run` (and `sluice bench --in`) get their batches: a directory of
 * COLUMN.npy or raw COLUMN.bin files, mapped into memory and pushed as windows of rows, or a
 * CSV file read incrementally. Files are checked against the pipeline's declared inputs
 * (type, length, offsets) before the first batch, and every problem is reported naming the
 * file and what to change.
 *
 * For a pipeline with an offsets input, batches are cut at segment boundaries: each batch
 * takes whole segments up to the row budget (at least one, however long), and its offsets are
 * rebased to start at 0. */
#ifndef SL_CLI_INPUT_H
#define SL_CLI_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

typedef struct sl_input sl_input;

/* Opens `path` (a directory or a CSV file, which may be a pipe: `--in <(zcat x.csv.gz)`) for
 * the inputs of `pipeline`. Returns 0, or -1 with the reason in err. */
int sl_input_open(sl_input **out, const sluice_pipeline *pipeline, const char *path, char *err,
                  size_t errcap);
void sl_input_close(sl_input *in);

/* Data rows in the whole input when known before reading (files), -1 for CSV. */
int64_t sl_input_total_rows(const sl_input *in);
/* Bytes of the input in all (the column files, or the CSV file) and consumed so far; -1 when
 * unknown (a CSV stream from a pipe has no size, and no position). */
int64_t sl_input_total_bytes(const sl_input *in);
int64_t sl_input_bytes_read(const sl_input *in);

/* The next batch of at most max_rows data rows (max_rows >= 1). cols receives one column per
 * pipeline input, in declaration order (sluice_pipeline_input_count entries); their data stay
 * valid until the next call or close. *rows receives the batch's data rows. Returns 1 for a
 * batch, 0 when the input is exhausted, -1 on a data error (reason in err). */
int sl_input_next(sl_input *in, int64_t max_rows, sluice_column *cols, int64_t *rows,
                  char *err, size_t errcap);

/* Where the next batch of a ragged stream ends: from segment `first` of offsets[0..segments]
 * (non-decreasing), the segment index e such that segments first..e-1 are whole segments
 * holding at most max_rows rows, or just segment `first` when it alone holds more. Requires
 * first < segments. */
int64_t sl_next_segment_cut(const int64_t *offsets, int64_t segments, int64_t first,
                            int64_t max_rows);

#endif
