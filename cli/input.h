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

#include <stdatomic.h>
#include <stdbool.h>
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

/* A batch's memory for one column: page-aligned (BUFFER_ALIGN in input.c), owned by whoever
 * holds the struct. {NULL, 0} is an empty buffer. */
typedef struct sl_buffer {
    void *data;
    size_t cap; /* bytes */
} sl_buffer;
/* Makes room for `bytes` (at least one page, so data is never NULL afterwards), keeping the
 * first `keep` bytes when it moves. Returns 0, or -1 when out of memory (b unchanged). */
int sl_buffer_reserve(sl_buffer *b, size_t bytes, size_t keep);
void sl_buffer_free(sl_buffer *b);

/* The next batch of at most max_rows data rows (max_rows >= 1). cols receives one column per
 * pipeline input, in declaration order (sluice_pipeline_input_count entries); their data stay
 * valid until the next call or close. *rows receives the batch's data rows. Returns 1 for a
 * batch, 0 when the input is exhausted, -1 on a data error (reason in err). */
int sl_input_next(sl_input *in, int64_t max_rows, sluice_column *cols, int64_t *rows,
                  char *err, size_t errcap);

/* The pieces sl_input_next is made of, for readers that prepare batches ahead of the session
 * (cli/flow.c): the next batch's place is decided in stream order by one thread
 * (sl_input_next_window, sl_input_next_csv), and a window's column data may then be read in
 * (sl_input_populate) or read into buffers (sl_input_read_rows) by several threads at once. */
bool sl_input_is_csv(const sl_input *in);
/* The pipeline's inputs, in declaration order (the order of sl_input_next's cols). */
size_t sl_input_column_count(const sl_input *in);
const sluice_column_info *sl_input_column(const sl_input *in, size_t index);
/* sl_input_bytes_read once the rows before row_end are read (column files; the CSV reader's
 * position for a CSV). */
int64_t sl_input_bytes_at(const sl_input *in, int64_t row_end);

/* Where a batch of column files lies: data rows [first_row, first_row + rows), and with an
 * offsets input its segments [first_seg, first_seg + segs). */
typedef struct sl_input_window {
    int64_t first_row, rows, first_seg, segs;
} sl_input_window;
/* Column files only: the next batch's window (cut as sl_input_next cuts). Returns 1, or 0
 * when the input is exhausted. */
int sl_input_next_window(sl_input *in, int64_t max_rows, sl_input_window *w);
/* The window's segs + 1 offsets, rebased to start at 0, into dst. */
void sl_input_window_offsets(const sl_input *in, const sl_input_window *w, int64_t *dst);
/* Where input column `col` (not the offsets) holds data row `first` in the file's mapping,
 * to be pushed as it is; NULL when the file misaligns the data for their type (read them
 * with sl_input_read_rows then). */
const void *sl_input_mapped(const sl_input *in, size_t col, int64_t first);
/* Reads the mapped pages of `count` rows from `first` in, so that whoever reads the window
 * next finds them resident. Safe from several threads at once. Returns 0, or -1 with the
 * reason in err (a file that shrank since it was opened). */
int sl_input_populate(const sl_input *in, size_t col, int64_t first, int64_t count, char *err,
                      size_t errcap);
/* Hands back the mapped pages of every column wholly before data row `row` (a batch pushed
 * already is not read again), so the resident set stays a few batches. */
void sl_input_release(sl_input *in, int64_t row);
/* Reads `count` elements of input column `col` (not the offsets) from data row `first` into
 * dst. Safe from several threads at once (pread). Returns 0, or -1 with the reason in err
 * (a read error, a file that shrank since it was opened). */
int sl_input_read_rows(const sl_input *in, size_t col, int64_t first, int64_t count, void *dst,
                       char *err, size_t errcap);
/* CSV only: parses the next batch of at most max_rows rows into bufs (one per input column,
 * grown as needed, page-aligned). Returns 1 with *rows, 0 at the end of the file (or when
 * *cancel became nonzero, checked every 4096 rows; cancel may be NULL), -1 on a data error
 * (reason in err, naming the file, line, row and column). */
int sl_input_next_csv(sl_input *in, int64_t max_rows, sl_buffer *bufs, int64_t *rows,
                      const atomic_int *cancel, char *err, size_t errcap);

/* Where the next batch of a ragged stream ends: from segment `first` of offsets[0..segments]
 * (non-decreasing), the segment index e such that segments first..e-1 are whole segments
 * holding at most max_rows rows, or just segment `first` when it alone holds more. Requires
 * first < segments. */
int64_t sl_next_segment_cut(const int64_t *offsets, int64_t segments, int64_t first,
                            int64_t max_rows);

#endif
