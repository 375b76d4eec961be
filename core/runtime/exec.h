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
 * count before the call, and nothing emitted by the call left in the queue.
 *
 * Pieces in flight. A backend with ops->progress completes pieces asynchronously: a push
 * returns once its pieces are issued, and their result batches wait in the queue, not yet
 * pullable, until the backend says the pieces are complete. Every piece gets a number (seq,
 * counted since open); the backend may use seq % depth as the piece's set of buffers,
 * because before piece seq starts the executor waits until piece seq - depth is complete.
 * Each push leaves a mark (what a rollback needs: sort-buffer rows, queue length, the
 * backend's ops->mark) that is kept until all its pieces are complete. A batch becomes
 * pullable only once every piece of its push is complete, so a push is handed out whole or
 * not at all. When the backend reports a failure in a piece of push P, push P and every
 * push after it are rejected: the session goes back to P's mark (sluice.h, "Errors with
 * batches in flight"). */
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
    int64_t seq;               /* the piece's number since the session opened (below) */
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
/* Forgets carries and buffered rows (sluice_session_reset), after the work in flight. */
sluice_status sl_exec_reset(sluice_session *s);
/* The next result batch once complete (*out NULL when none is), waiting up to timeout_ns
 * (< 0: as long as it takes) while pushes are in flight; reports a failure found in flight
 * (the failed push and those after it are then rejected). The batch is still in the queue:
 * the caller takes it with sl_exec_take. */
sluice_status sl_exec_next(sluice_session *s, int64_t timeout_ns, sluice_batch **out);
/* Removes the batch sl_exec_next returned from the head of the queue. */
void sl_exec_take(sluice_session *s);
/* Pushes whose pieces are not all complete; pushes standing (sluice_session_push_count). */
int64_t sl_exec_in_flight(const sluice_session *s);
int64_t sl_exec_push_count(const sluice_session *s);

#endif
