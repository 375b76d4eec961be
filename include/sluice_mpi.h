/* sluice_mpi.h — one pipeline over many MPI ranks: a distributed session (libsluice_mpi, built
 * only where MPI is found; the core library has no MPI dependency).
 *
 * The model. Every rank of a communicator opens a distributed session on the same pipeline
 * and pushes its own part of the stream. The global stream is the ranks' parts in rank order
 * (rank 0's rows first), and every result is what one process would produce over that whole
 * stream: scans and segmented scans carry across ranks (each rank's incoming state is the
 * ordered combination of the states of the ranks before it, never assuming commutativity),
 * compactions and filters give rows global positions, and a stream-wide sort is a
 * distributed sample sort after which rank r holds the r-th part of the sorted stream.
 * A reduce gives the rows one process gives: its values carry across ranks as scans do; a
 * segment (a key run, a head-flag segment) spanning ranks is emitted once, by the rank where
 * it ends (at flush: by the last rank with rows reaching the reduce); a whole-stream reduce's
 * one row comes from the last rank (identities when the global stream is empty); `per:
 * batch` and offsets segments are each rank's own; the index counts segments over the global
 * stream, and the reduced rows and the stages after them have global positions.
 * notes/DISTRIBUTED.md says what crosses ranks per stage and what it costs.
 *
 * Passes. A rank's incoming carried state depends on the other ranks' data, and where a scan
 * reads another scan's result (a "carry phase", see `sluice explain`) it depends on the
 * earlier phase's incoming state too. So the session walks the rank's part several times:
 * once per carry phase (each ends in one small exchange of states), once more when the
 * number of rows out is not known by then (a compaction by a value that depends on the last
 * phase, or a pipeline with no scan; a reduce whose segments cross ranks: which rank emits a
 * segment is known only after its values' phase), and a final pass that produces the
 * results. The caller pushes the same rows, in the same batches or not, in every pass:
 *
 *     sluice_mpi_session *ds;  int more;
 *     sluice_mpi_session_open(pipeline, NULL, MPI_COMM_WORLD, &ds);     // collective
 *     while (sluice_mpi_session_begin_pass(ds, &more) == SLUICE_OK && more) {  // collective
 *         for each batch of this rank's part:
 *             sluice_mpi_session_push(ds, cols, ncols);                  // local
 *             while (sluice_mpi_session_pull(ds, &b) == SLUICE_OK && b) use(b);
 *         sluice_mpi_session_flush(ds);                                   // collective
 *         while (sluice_mpi_session_pull(ds, &b) == SLUICE_OK && b) use(b);
 *     }
 *
 * Batches come out in the final pass only (pull returns none before); the rank's result rows
 * are rows [first, first + rows) of the global result, known from the start of the final
 * pass (sluice_mpi_session_output_range). A rank with no rows still takes part in every pass.
 *
 * Collective calls: open, begin_pass, flush and close must be called by every rank of the
 * communicator, in the same order. push and pull are local.
 *
 * Errors. A failure on one rank (a bad batch, out of memory) fails that call on that rank
 * and marks the session failed there; the next collective call (flush or begin_pass) then
 * fails on every rank with the failing rank's status and a diagnostic naming the rank and
 * its message, so no rank goes on alone. After a failure only close is useful. A rank that
 * dies is MPI's to report: with MPI's default error handler the job ends on every rank.
 *
 * Memory: each rank holds its batches as a local session does; a stream-wide sort holds the
 * rank's share of the stream (in memory: a distributed session does not spill sort runs).
 *
 * Backends: the options' backend (CPU or CUDA, one device per rank chosen by the caller with
 * cudaSetDevice before open, e.g. local rank modulo devices); SLUICE_BACKEND_AUTO picks CUDA
 * where sluice_session_open would. Both backends carry scan and reduce state between ranks:
 * the CUDA backend reads its scans' and reduces' states from the device after each pass (once
 * the pass's work on the device is done) and seeds them before the next; a reduce's open
 * segment and next index go into the device state, and whether its flush emits the open
 * segment the backend decides on the host. Carried state crosses ranks through MPI in host
 * memory (176 bytes a scan or reduce value). The CUDA side of a distributed reduce has not
 * been run on a GPU yet (notes/DISTRIBUTED.md).
 *
 * Row transport: only a stream-wide sort moves rows between ranks. The environment variable
 * SLUICE_MPI_TRANSPORT, read at open and the same on every rank, picks what moves them:
 *   auto (or unset): NCCL where it can be used — the session runs on the CUDA backend,
 *        NCCL (libnccl.so.2, loaded at run time; SLUICE_NCCL_LIBRARY names another file)
 *        loads on every rank, and every rank drives a GPU of its own (NCCL refuses two ranks
 *        on one GPU) — else MPI through host memory;
 *   mpi: MPI through host memory;
 *   nccl: NCCL, and open fails on every rank (SLUICE_ERR_BACKEND_UNAVAILABLE, the diagnostic
 *        says which rank could not and why) where it cannot be used.
 * A pipeline without a stream-wide sort moves no rows and sets up no transport, whatever the
 * value. sluice_mpi_session_transport says which one a session uses and why. With NCCL the rows a
 * rank sends are packed on the host (where the sort's order is worked out), copied once to
 * the device and sent GPU to GPU into the receivers' device memory; an NCCL failure during
 * the exchange fails the flush on every rank with SLUICE_ERR_CUDA and NCCL's error text. The
 * NCCL path has not been run on GPUs yet (notes/DISTRIBUTED.md).
 *
 * Numerics: exact results (integers, bool, min/max/and/or/xor, count, compaction, sort) are
 * bit-identical to one process. Float sum/prod/linrec and declared operators are combined in
 * stream order but grouped at rank boundaries, so they may differ from one process in their
 * last bits, as two batch cuttings may (pipelines/SCHEMA.md, Determinism).
 *
 * Threading: as sluice.h (one thread at a time per context); MPI must be initialised with
 * at least MPI_THREAD_FUNNELED and the calls made from the thread that initialised it.
 *
 * Linking: libsluice_mpi (shared and static, with this header) is built and installed beside
 * libsluice where CMake finds MPI. It holds the whole sluice API as well as sluice_mpi_*, so a
 * program links it INSTEAD of libsluice, never both (the static libraries would define the
 * API twice): CMake `find_package(sluice COMPONENTS mpi)` and target sluice::sluice_mpi (or
 * sluice::sluice_mpi_static), or `pkg-config --cflags --libs sluice-mpi`. Like libsluice, it
 * defines no global symbol outside sluice*; MPI itself comes from the caller's MPI (the one
 * the library was built with). */
#ifndef SLUICE_MPI_H
#define SLUICE_MPI_H

#include <mpi.h>

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_mpi_session sluice_mpi_session;

/* Opens a distributed session on every rank of `comm` (collective). `pipeline` must be the
 * same file on every rank (checked: the pipelines' names, inputs and stages must match),
 * `options` as sluice_session_open's (NULL: defaults; its sort_memory_bytes is ignored).
 * The communicator is duplicated: the session's messages never mix with the caller's. The
 * session, like the pipeline, belongs to the pipeline's context (its diagnostics go there).
 * Errors: SLUICE_ERR_INVALID_ARGUMENT (NULL pointer, MPI not initialised, comm null),
 * SLUICE_ERR_MISUSE (the ranks' pipelines differ, or their SLUICE_MPI_TRANSPORT),
 * SLUICE_ERR_BACKEND_UNAVAILABLE (SLUICE_MPI_TRANSPORT=nccl where NCCL cannot be used:
 * above), SLUICE_ERR_INVALID_ARGUMENT (SLUICE_MPI_TRANSPORT not auto, mpi or
 * nccl), every error of sluice_session_open (on any rank: every rank fails). On failure *out is
 * NULL. */
SLUICE_API sluice_status sluice_mpi_session_open(sluice_pipeline *pipeline,
                                      const sluice_session_options *options, MPI_Comm comm,
                                      sluice_mpi_session **out);

/* What moves this session's rows between ranks, and why: one line starting with "mpi" or
 * "nccl" (e.g. "mpi: not NCCL, since rank 0: the session runs on the CPU backend (...)").
 * Owned by the session, valid until close; "" for NULL. Local. */
SLUICE_API const char *sluice_mpi_session_transport(const sluice_mpi_session *session);

/* The passes over the rank's part this pipeline needs, the final one included (>= 1). */
SLUICE_API int sluice_mpi_session_passes(const sluice_mpi_session *session);

/* Starts the next pass (collective): *more is 1 when there is one to make (push the rank's
 * whole part again), 0 when every pass is done. Errors: SLUICE_ERR_MISUSE (the previous
 * pass was not flushed), a failure of any rank (above). */
SLUICE_API sluice_status sluice_mpi_session_begin_pass(sluice_mpi_session *session, int *more);

/* 1 during the final pass (the one whose batches are the results), else 0. */
SLUICE_API int sluice_mpi_session_final_pass(const sluice_mpi_session *session);

/* Pushes a batch of this rank's part (local); as sluice_session_push. The columns are read
 * during the call only. Errors: as sluice_session_push; SLUICE_ERR_MISUSE outside a pass. */
SLUICE_API sluice_status sluice_mpi_session_push(sluice_mpi_session *session, const sluice_column *columns,
                                      size_t count);

/* Ends the pass (collective): flushes the local session; between passes, exchanges the
 * ranks' carried states; in a stream-wide sort, exchanges the rows. */
SLUICE_API sluice_status sluice_mpi_session_flush(sluice_mpi_session *session);

/* The next result batch, in stream order (local); *out NULL when none is ready, and always
 * outside the final pass. The caller owns the batch (sluice_batch_free). */
SLUICE_API sluice_status sluice_mpi_session_pull(sluice_mpi_session *session, sluice_batch **out);

/* From the start of the final pass: this rank's results are rows [*first, *first + *rows)
 * of the global result, which has *total rows (any pointer may be NULL). Errors:
 * SLUICE_ERR_MISUSE before the final pass. */
SLUICE_API sluice_status sluice_mpi_session_output_range(const sluice_mpi_session *session, int64_t *first,
                                              int64_t *rows, int64_t *total);

/* Closes the session (collective: frees the duplicated communicator). NULL is harmless (and
 * then not collective). */
SLUICE_API void sluice_mpi_session_close(sluice_mpi_session *session);

/* What a distributed run of `pipeline` sends between ranks, per stage, as text (the plan's
 * fusion groups, each scan's carried state and phase, each reduce's values' states and its
 * segment counts, each stream-wide sort's exchange and, with one, what SLUICE_MPI_TRANSPORT
 * makes of it on this machine),
 * allocated with the context's allocator and freed with sluice_free_text. Not collective:
 * needs no communicator. Errors: SLUICE_ERR_INVALID_ARGUMENT, SLUICE_ERR_NO_MEMORY. */
SLUICE_API sluice_status sluice_mpi_explain(const sluice_pipeline *pipeline, char **text);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_MPI_H */
