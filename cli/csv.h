/* csv.h — an incremental CSV reader for the command line: a header row of column names, then
 * one record per line, read one at a time so that a file larger than memory streams through.
 * Fields may be quoted ("a ""b"""), lines may end in CRLF, blank lines are skipped. Typed
 * parsing of one field is separate (sl_csv_parse_value) so that both halves can be fuzzed
 * from memory buffers. Every error names the file and line (and the reader's callers add the
 * column). */
#ifndef SL_CLI_CSV_H
#define SL_CLI_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

typedef struct sl_csv_reader sl_csv_reader;

/* Opens `path` and reads its header row. Returns 0, or -1 with the reason in err. */
int sl_csv_open_file(sl_csv_reader **out, const char *path, char *err, size_t errcap);
/* The same over `len` bytes in memory (not copied: they must outlive the reader); `name`
 * stands for the file name in messages. */
int sl_csv_open_memory(sl_csv_reader **out, const void *data, size_t len, const char *name,
                       char *err, size_t errcap);
void sl_csv_close(sl_csv_reader *r);

/* The header's column names. */
size_t sl_csv_column_count(const sl_csv_reader *r);
const char *sl_csv_column_name(const sl_csv_reader *r, size_t index);
/* -1 when no header column has this name. */
long sl_csv_column_index(const sl_csv_reader *r, const char *name);
const char *sl_csv_name(const sl_csv_reader *r);

/* Reads the next record: *fields receives sl_csv_column_count() field texts, valid until the
 * next call. Returns 1 for a record, 0 at the end of the file, -1 on error (a ragged row, an
 * unterminated quote, a read error) with "FILE:LINE: reason" in err. */
int sl_csv_next(sl_csv_reader *r, char *const **fields, char *err, size_t errcap);
/* The 1-based line on which the last record returned started. */
int64_t sl_csv_line(const sl_csv_reader *r);
/* Bytes of the file read so far; -1 when the stream has no position (a pipe). */
int64_t sl_csv_bytes_read(const sl_csv_reader *r);

/* Parses a field as a value of `type` and stores its sluice_type_size(type) bytes at dst
 * (f16 as its bit pattern). Surrounding spaces are ignored. bool accepts true/false, True/
 * False, 1/0. Integers must be in the type's range, floats finite unless written inf/nan; an
 * empty field is NaN in a float column (as NumPy and pandas read it) and an error in an
 * integer or bool column. A number beyond the type's range is "'1e400' is out of range for
 * f32", text that is not one "cannot parse 'abc' as f32: expected a number".
 * Returns 0, or -1 with the reason ("cannot parse 'abc' as f32: …") in err. */
int sl_csv_parse_value(const char *text, sluice_type type, void *dst, char *err,
                       size_t errcap);

#endif
