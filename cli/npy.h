/* npy.h — NumPy .npy files for the command line: parsing a header held in memory (the part
 * the fuzzers drive), formatting a fixed-size header, and a column writer that streams
 * batches to a file and patches the row count into the header when it closes.
 *
 * Only what sluice columns can be is accepted: 1-D, C order, little-endian (or byte-sized)
 * bool / intN / uintN / floatN. Everything else is refused with a message that says what to
 * change, never a crash. */
#ifndef SL_CLI_NPY_H
#define SL_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sluice.h"

/* What a .npy header says about the array that follows it. */
typedef struct sl_npy_header {
    sluice_type type;
    int64_t length;     /* elements (the 1-D shape) */
    size_t data_offset; /* bytes from the start of the file to the first element */
} sl_npy_header;

/* Parses the header at the start of a .npy file. `data` holds the first `len` bytes of the
 * file (the whole file or at least its header). Returns 0 on success; otherwise -1 with a
 * one-line reason in err (always NUL-terminated when errcap > 0). Does not look at the
 * array data: see sl_npy_check_size. */
int sl_npy_parse_header(const void *data, size_t len, sl_npy_header *out, char *err,
                        size_t errcap);

/* Checks that a file of `file_size` bytes holds exactly the data its header announces.
 * Returns 0, or -1 with the reason (truncated, or trailing bytes) in err. */
int sl_npy_check_size(const sl_npy_header *h, uint64_t file_size, char *err, size_t errcap);

/* The numpy dtype string of a sluice type ("<f4", "|b1", …). */
const char *sl_npy_descr(sluice_type type);

/* The size of the headers sl_npy_format_header writes (version 1.0, padded so the data
 * starts 64-byte aligned and any int64 length fits without moving the data). */
#define SL_NPY_HEADER_SIZE 128

/* Writes a SL_NPY_HEADER_SIZE-byte header for a 1-D array of `length` elements into buf
 * (cap >= SL_NPY_HEADER_SIZE). Returns 0, or -1 if the arguments are invalid. */
int sl_npy_format_header(void *buf, size_t cap, sluice_type type, int64_t length);

/* A column being written: the header goes first with length 0, elements are appended as
 * batches arrive, and close rewrites the header with the final length. */
typedef struct sl_npy_writer {
    FILE *file;
    sluice_type type;
    int64_t length;
    char *path;
    int sync; /* set by the caller: close waits until the data are on disk (fsync) */
} sl_npy_writer;

/* Creates (truncates) path. Returns 0, or -1 with the reason in err. */
int sl_npy_writer_open(sl_npy_writer *w, const char *path, sluice_type type, char *err,
                       size_t errcap);
/* The same on `fd`, a file the caller created empty and opened for writing; `path` names it
 * in messages. The writer owns fd from here on: it is closed on failure too. */
int sl_npy_writer_open_fd(sl_npy_writer *w, int fd, const char *path, sluice_type type,
                          char *err, size_t errcap);
/* Appends `count` elements. Returns 0, or -1 (write error, reason in err). */
int sl_npy_writer_append(sl_npy_writer *w, const void *data, int64_t count, char *err,
                         size_t errcap);
/* Filling a column from several threads: instead of append (never both on one writer),
 * sl_npy_writer_place, called on one thread in stream order, takes the file position where
 * the next `count` elements go (the length grows as if they were appended), and
 * sl_npy_writer_write_at writes bytes at such a position from any thread, several at once
 * (pwrite), so the file's layout never depends on which write finishes first. write_at
 * returns 0, or -1 with the reason in err (a full disk shows here, not at close). */
uint64_t sl_npy_writer_place(sl_npy_writer *w, int64_t count);
int sl_npy_writer_write_at(const sl_npy_writer *w, uint64_t pos, const void *data, size_t bytes,
                           char *err, size_t errcap);
/* Patches the header, flushes (and with `sync`, fsyncs) and closes. Returns 0, or -1 with the
 * reason in err: a full disk or a file size limit may only show here, when the buffered
 * data are written. The writer is closed either way; closing a writer that was never opened
 * is harmless. */
int sl_npy_writer_close(sl_npy_writer *w, char *err, size_t errcap);

/* Writes a whole column as a .npy file in one call. Returns 0, or -1 with the reason. */
int sl_npy_write_file(const char *path, sluice_type type, const void *data, int64_t length,
                      char *err, size_t errcap);

#endif
