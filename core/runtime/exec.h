/* exec.h — the shared executor: how a pushed batch travels through a session's plan groups
 * (core/plan/plan.h) on any backend. It owns everything that is not device specific: cutting
 * batches into pieces, walking the groups, buffering the rows of stream-wide sorts until
 * flush, the transactions of core/runtime/session.h, and queueing result batches. A backend
 * supplies the small set of operations in sl_backend_ops (core/runtime/session.h): run a fused
 * group or a sort over a piece, put input rows where it computes, make a result batch, keep
 * memory for sort buffers, and save / restore / commit its carries.
 *
 * A piece. The rows the executor hands to the groups are a piece: a pushed batch, a part of
 * one (cut below), or the sorted rows of a stream-wide sort at flush. A piece is a value
 * (sl_piece) that says which group it reaches next and where its columns are; the executor
 * advances it one group at a time. Today pieces advance one after another on the calling
 * thread; the journey being a value rather than a call stack is what lets several pieces be
 * in flight later (a backend completing a step asynchronously).
 *
 * Cutting (the documented semantics of sluice_session_options.max_batch_rows): rows reaching
 * a group whose sl_cut is SL_CUT_ANYWHERE go through in pieces of at most max_batch_rows
 * rows; SL_CUT_SEGMENTS (an offsets input, batch in host memory) cuts between segments so
 * each piece holds at most max_batch_rows rows unless one segment alone is longer; otherwise
 * (SL_CUT_NEVER, or offsets in device memory) the batch runs whole and the backend first
 * grows its per-batch buffers to fit it (ops->reserve). The same on every backend; results
 * never depend on it.
 *
 * Stream-wide sorts over the session's sort_memory_bytes write their held rows as sorted
 * runs to temporary files before a push and merge them at flush (an external merge sort;
 * sluice.h at sluice_session_flush has the accounting).
 *
 * Transactions. A push or flush that fails leaves the session as it was before the call:
 * the backend's carries restored (ops->rollback), every stream-sort buffer back to its row
 * count before the call, and nothing emitted by the call left in the queue. */
#ifndef SL_EXEC_H
#define SL_EXEC_H

#include "runtime/session.h"

/* One piece's journey (see above). cols[c] is pipeline column c's rows in the backend's
 * memory, NULL when the column does not exist at this point; the backend's operations
 * replace the entries of the columns a group writes. */
struct sl_piece {
    int group;                 /* the next group to run */
    int64_t rows;
    const int64_t *offsets;    /* the piece's offsets (backend memory, starting at 0) before
                                  group 0; NULL when the pipeline has none */
    int64_t nsegments;         /* -1 when there are no offsets */
    const void **cols;         /* per column id (plan ncolumns + 1 entries) */
    sluice_batch *result;      /* a result batch the last group wrote in place, or NULL */
    int64_t room;              /* rows `result` has room for */
};

typedef struct sl_exec sl_exec;

/* Prepares the executor of an open session (after the backend's open). SLUICE_ERR_NO_MEMORY. */
sluice_status sl_exec_open(sluice_session *s);
/* Frees the sort buffers (through the backend, before its close) and the executor. */
void sl_exec_close(sluice_session *s);
/* A validated batch (core/runtime/session.c), transactional. */
sluice_status sl_exec_push(sluice_session *s, const sl_input *in);
/* End of stream: every stream-wide sort sorts what it holds and the groups after it run. */
sluice_status sl_exec_flush(sluice_session *s);
/* Forgets carries and buffered rows (sluice_session_reset). */
sluice_status sl_exec_reset(sluice_session *s);

#endif
