/* flow.h — the overlapped I/O of `sluice run`: reader threads fill a ring of input batch
 * buffers ahead of the session, and a writer thread appends result batches to the output,
 * so that reading files, the session's work (copies to a device and compute) and writing
 * happen at the same time instead of in turn.
 *
 * Threads and the library. sluice.h allows one thread at a time per context, so only the
 * thread that drives the session (the caller of everything below) ever calls the library:
 * it pushes the batches the readers filled, pulls results, resolves their columns
 * (sl_output_columns) and frees the batches the writer has finished with. The readers only
 * read the input (cli/input.c); the writer only writes column data it is handed. Both block
 * every signal, so that the run's handlers run on the caller's thread.
 *
 * Memory stays bounded: `depth` input batches in the ring (one being pushed, the others
 * being read ahead), and at most `depth` result batches queued for or held by the writer
 * (the caller waits for room: backpressure). */
#ifndef SL_CLI_FLOW_H
#define SL_CLI_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "input.h"
#include "output.h"
#include "sluice.h"

/* ---- reading ahead ------------------------------------------------------------------------ */

typedef struct sl_reader sl_reader;

/* Memory a device reads by DMA (a CUDA session's pinned memory, sluice_cuda_host_alloc):
 * alloc returns `bytes` of it or NULL, release gives it back. Both are called on the thread
 * that calls sl_reader_start and sl_reader_stop (the one that may call the library). */
typedef struct sl_reader_memory {
    void *(*alloc)(void *arg, size_t bytes);
    void (*release)(void *arg, void *p);
    void *arg;
} sl_reader_memory;

/* Starts `threads` reader threads (at least 1; a CSV input, read in order, uses 1) preparing
 * a ring of `depth` (at least 2) batches of at most batch_rows rows from `in`, cut as
 * sl_input_next cuts them: windows of the column files' mappings with their pages read in,
 * or page-aligned host buffers (CSV values, offsets, misaligned columns). With `mem` (NULL:
 * none), every slot gets a buffer of batch_rows rows of that memory per column of the files
 * (offsets excepted), allocated here, and the readers read the column files into it (pread,
 * in chunks shared by every reader) instead of reading the mapping's pages in: a device then
 * copies the batch without a staging copy; a batch larger than the buffer (one long segment)
 * or a column whose buffer could not be had is read as without `mem`. The readers use `in`
 * until sl_reader_stop. Returns 0, or -1 with the reason in err. */
int sl_reader_start(sl_reader **out, sl_input *in, int64_t batch_rows, int threads, int depth,
                    const sl_reader_memory *mem, char *err, size_t errcap);
/* The next batch in stream order; first hands the batch of the previous call back to the
 * ring (so its columns must be finished with: sluice_session_push reads them during the call
 * only). Waits for the readers when they are behind. Returns 1 with cols (one per input,
 * valid until the next call), *rows and *bytes_read (the input's bytes consumed through this
 * batch, -1 when unknown); 0 at the end of the input; -1 with the error the readers met at
 * this point of the stream (a bad CSV value, a read error), after every batch before it; -2
 * once sl_reader_interrupt was called. */
int sl_reader_next(sl_reader *r, sluice_column *cols, int64_t *rows, int64_t *bytes_read,
                   char *err, size_t errcap);
/* Makes a caller waiting in sl_reader_next (now or next) return -2 instead of waiting for
 * the readers: something else needs it (the writer failed). Safe from any thread. */
void sl_reader_interrupt(sl_reader *r);
/* Stops the readers, waits for them and frees the ring; NULL is harmless. Returns true; or
 * false when a reader stays blocked reading a pipe that delivers nothing (half a second): the
 * reader is then left running, nothing is freed, and `in` must not be closed. The caller is
 * about to end the process, which ends the thread. */
bool sl_reader_stop(sl_reader *r);

/* ---- writing behind ----------------------------------------------------------------------- */

typedef struct sl_writer sl_writer;

/* Starts `threads` (at least 1) writer threads filling `out` (sl_output_place and
 * sl_output_write_at), which they use until sl_writer_finish or sl_writer_abort; at most
 * `depth` (at least 1) batches are queued or being written. Each batch's columns are cut
 * into chunks of a few megabytes that any writer takes, so one column is written by several
 * threads and several columns at once; where each chunk goes in its file is fixed when the
 * batch is queued, so the files never depend on the threads' timing. When a write fails, the
 * failing thread calls on_fail(arg) (unless NULL; see sl_writer_on_fail), so that a caller
 * waiting elsewhere (sl_reader_interrupt) learns of it at once. Returns 0, or -1 with the
 * reason in err. */
int sl_writer_start(sl_writer **out, sl_output *o, int depth, int threads,
                    void (*on_fail)(void *arg), void *arg, char *err, size_t errcap);
/* Replaces the failure callback; once it returns, the old one is not running and will not be
 * called (so what its arg points at may go). */
void sl_writer_on_fail(sl_writer *w, void (*on_fail)(void *arg), void *arg);
/* Returns 0 while the writer has not failed, else -1 with its error in err. Frees the batches
 * written so far. */
int sl_writer_check(sl_writer *w, char *err, size_t errcap);
/* Queues result batch b, whose output columns (sl_output_columns of b) are cols, for
 * writing, and frees the batches already written. Waits while the queue is full. Returns 0
 * (the writer owns b now), or -1 with the writer's error in err (b is still the caller's:
 * the writer failed and writes nothing more). */
int sl_writer_put(sl_writer *w, sluice_batch *b, const sluice_column *cols, char *err,
                  size_t errcap);
/* Rows written so far (of whole batches); safe from any thread. */
int64_t sl_writer_rows(const sl_writer *w);
/* Waits until every queued batch is written, calling progress(arg) after each one on the
 * calling thread (progress may be NULL); stops the threads and frees every batch and the
 * writer. Returns 0, or -1 with the first write error in err. */
int sl_writer_finish(sl_writer *w, void (*progress)(void *arg), void *arg, char *err,
                     size_t errcap);
/* Stops the writer without writing what is still queued (a failed run), and frees every
 * batch and the writer. NULL is harmless. */
void sl_writer_abort(sl_writer *w);

#endif
