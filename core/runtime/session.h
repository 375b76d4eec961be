/* session.h — the session object shared by all backends, the validated input, result
 * batches, and the backend interface (one table of operations per backend).
 *
 * Flow: sluice_session_push (core/runtime/session.c) validates the caller's columns against the
 * pipeline and hands an sl_input to the shared executor (core/runtime/exec.h), which cuts it into
 * pieces, walks the plan groups calling the backend's operations, buffers stream-wide sorts
 * and queues finished result batches with sl_batch_emit. */
#ifndef SL_SESSION_H
#define SL_SESSION_H

#include "plan/plan.h"

/* A validated batch: data[i] is input column i's data (pipeline input order), rows the row
 * count; for an offsets input, data[i] holds nsegments+1 int64 values (checked: start at 0,
 * non-decreasing, end at rows). Memory is the caller's: host unless on_device. */
typedef struct sl_input {
    int64_t rows;
    const void *const *data;
    int64_t nsegments;     /* -1 when the pipeline has no offsets input */
    bool on_device;
} sl_input;

/* A scan's carried state in a form every backend can hand out and take back (the
 * distributed session reads and seeds it through core/runtime/carry.h): the state after the
 * rows so far, and what a rank needs to join its part to the parts before it. */
typedef struct sl_scan_carry {
    sl_value v[SL_MAX_FIELDS]; /* the state after the last row */
    uint64_t last_key;         /* key / offsets segments: the last row's key bits */
    bool has_key;              /* a key was seen (false before the first row) */
    /* Since the carry was last set (or the stream began): */
    bool has_first;            /* a row reached the scan; first_key is the first one's key */
    uint64_t first_key;
    bool headed;               /* a segment started at one of those rows because of the data
                                  (a head flag, or a key unlike the one before it), not
                                  merely because no key was carried */
    /* The record of a reduce's first value also holds the reduce's own state: */
    int64_t segments;          /* segments emitted so far in the stream (the next index) */
    bool open;                 /* rows of a segment not emitted yet were seen */
    bool continues;            /* (seeded only) the stream goes on past this session's part
                                  with the open segment or, for a whole-stream reduce, its
                                  row is another part's to give: flush emits nothing */
} sl_scan_carry;

/* The stream-sort exchange hook of a session (NULL unless a distributed session set it,
 * core/runtime/carry.h). At flush, before stream-wide sort group gi sorts, the executor hands
 * it the rows the sort holds (cols per column id, backend memory; rows may be 0 and then
 * cols may be NULL) and continues with the rows it returns instead: out_cols[c] for each
 * column the group takes, allocated with the backend's alloc and freed by the executor. */
typedef sluice_status (*sl_sort_exchange_fn)(void *arg, sluice_session *s, int gi,
                                             void *const *cols, int64_t rows, void **out_cols,
                                             int64_t *out_rows);

typedef struct sl_backend_ops sl_backend_ops;
typedef struct sl_piece sl_piece; /* core/runtime/exec.h */
typedef struct sl_exec sl_exec;   /* core/runtime/exec.h */

struct sluice_session {
    sl_owned link;           /* in ctx's list while open */
    sluice_context *ctx;
    sluice_pipeline *pipeline;
    const sl_backend_ops *backend;
    sl_plan plan;
    sl_exec *exec;           /* the shared executor's state (core/runtime/exec.c) */
    sl_value *params;        /* current value of each pipeline param */
    int64_t max_batch_rows;
    int depth;                 /* pieces in flight at most (sluice_session_options.pipeline_depth) */
    int64_t sort_memory_bytes; /* stream-sort budget before spilling (0: none; exec.c) */
    char *spill_dir;           /* where spilled runs go; NULL: $TMPDIR, else /tmp */
    bool flushed;
    int64_t rows_in, rows_out;

    /* pending result batches, FIFO */
    sluice_batch **queue;
    size_t queue_head, queue_len, queue_cap;

    void *impl;              /* the backend's state */
    void *cuda_stream;       /* CUDA: the caller's cudaStream_t, NULL for the default */
    bool outputs_on_device;  /* CUDA: leave result columns in device memory */

    sl_sort_exchange_fn sort_exchange; /* see sl_sort_exchange_fn; NULL: none */
    void *sort_exchange_arg;
};

/* A result batch: columns in pipeline output order. */
struct sluice_batch {
    sl_owned link;           /* in ctx's list once handed to the caller */
    sluice_context *ctx;
    int64_t rows;
    size_t ncolumns;
    sluice_column *columns;
    void **owned;            /* per column: memory to free (host aligned or device) */
    bool on_device;
    void (*free_device)(void *ptr); /* set when on_device */
    /* Set when host columns are not the context allocator's (the CUDA backend's pinned
     * result pool, core/cuda/pinned.h): how sluice_batch_free gives owned[i] back. */
    void (*free_host)(sluice_context *ctx, void *ptr);
};

/* A result batch of p's outputs with its columns named and typed, no rows and no memory
 * (data and owned NULL): backends fill it from their own memory. NULL when out of memory.
 * The columns and owned tables share the batch's one allocation: fill their entries, never
 * replace the table pointers. */
sluice_batch *sl_batch_shell(sluice_context *ctx, const sluice_pipeline *p);
/* Allocates an empty result batch for the pipeline's outputs with rows rows of host memory
 * per column (64-byte aligned, from the context's allocator). NULL on allocation failure. */
sluice_batch *sl_batch_new_host(sluice_context *ctx, const sluice_pipeline *p, int64_t rows);
/* Concatenates host result batches of one pipeline into a new batch (sluice_run). */
sluice_status sl_batch_concat(sluice_context *ctx, const sluice_pipeline *p, sluice_batch **parts,
                              size_t nparts, sluice_batch **out);
/* Appends a finished batch to the session's output queue (takes ownership; on allocation
 * failure frees it and returns SLUICE_ERR_NO_MEMORY). */
sluice_status sl_batch_emit(sluice_session *s, sluice_batch *b);

/* Validates and pushes a batch; on_device: the column pointers are device memory (CUDA). */
sluice_status sl_session_push(sluice_session *s, const sluice_column *columns, size_t count,
                              bool on_device);

/* The backend interface: what the shared executor (core/runtime/exec.h) asks of a backend. Every
 * function gets a session whose plan and params are set; "backend memory" is host memory on
 * the CPU and device memory on CUDA. Unless said otherwise an operation may only enqueue its
 * work (the CUDA backend runs on a stream); `settle` is where the backend makes sure
 * everything enqueued has run, and reports a failure found there. */
struct sl_backend_ops {
    sluice_backend id;
    const char *name;
    bool (*available)(void);
    sl_backend_caps caps;      /* checked against the plan at open (sl_plan_check) */
    int64_t max_sort_rows;     /* rows a stream-wide sort may hold; 0: no limit */
    sluice_status (*open)(sluice_session *s);  /* sizes and allocates scratch; sets s->impl */
    void (*close)(sluice_session *s);

    /* Backend memory for stream-sort buffers: alloc, free, copy within it. */
    sluice_status (*alloc)(sluice_session *s, size_t bytes, void **out);
    void (*free)(sluice_session *s, void *ptr);
    sluice_status (*copy)(sluice_session *s, void *dst, const void *src, size_t bytes);
    /* NULL when backend memory is host memory; else copies between it and host memory,
     * complete when the call returns (spilling a stream-wide sort, reading it back). */
    sluice_status (*to_host)(sluice_session *s, void *host, const void *src, size_t bytes);
    sluice_status (*from_host)(sluice_session *s, void *dst, const void *host, size_t bytes);

    /* NULL, or checks a batch the host could not (device offsets) and sets in->rows when
     * only the offsets give it. Called before anything else of a push. */
    sluice_status (*check_input)(sluice_session *s, sl_input *in);
    /* NULL, or makes the per-batch buffers hold a piece of `rows` rows and `nsegments`
     * segments: called before a piece larger than max_batch_rows (a batch that cannot be
     * cut). Buffers may stay that large. */
    sluice_status (*reserve)(sluice_session *s, int64_t rows, int64_t nsegments);
    /* Puts rows [first, first + piece->rows) of the pushed batch where the backend computes
     * and sets piece->cols of the inputs; piece->offsets is the piece's offsets in host
     * memory (rebased to 0) when in is on the host, or in->data's device offsets of a whole
     * batch. Called once per piece of a pushed batch, before group 0. */
    sluice_status (*load)(sluice_session *s, const sl_input *in, int64_t first, sl_piece *piece);
    /* Runs plan group piece->group (a fused group, or a sort `per: batch` or at flush) over
     * the piece: replaces piece->cols with what the group leaves and piece->rows with its
     * rows out. When it is the last group the backend may write the result in place
     * (piece->result). */
    sluice_status (*run_group)(sluice_session *s, sl_piece *piece);
    /* At flush, for a group whose plan says emits_at_flush (a reduce holding its open
     * segment): puts what the group holds back in the piece as the group's output, as
     * run_group would (piece->cols, piece->rows, piece->result), and forgets it; the
     * executor then runs the groups after it. NULL for a backend whose caps refuse every
     * such group. */
    sluice_status (*flush_group)(sluice_session *s, sl_piece *piece);
    /* The piece's result batch: piece->rows rows of every output column (piece->result is
     * taken over, or a new batch made from piece->cols). */
    sluice_status (*finish)(sluice_session *s, sl_piece *piece, sluice_batch **out);
    /* NULL, or takes over piece->result (possibly NULL) of a piece that ended with no rows,
     * nothing to queue, so that a later piece can write into its memory; NULL: the executor
     * frees it. */
    void (*recycle)(sluice_session *s, sl_piece *piece);

    /* Transactions: begin before a push or flush touches anything; settle when its work is
     * issued (waits for it where it must, reports a failure found then); then exactly one of
     * commit (the call succeeded) or rollback (carries back to what begin saw). reset: every
     * carry to its identity. */
    void (*begin)(sluice_session *s);
    sluice_status (*settle)(sluice_session *s);
    void (*commit)(sluice_session *s);
    void (*rollback)(sluice_session *s);
    sluice_status (*reset)(sluice_session *s);

    /* Pieces in flight (core/runtime/exec.h). All NULL on a backend whose work is complete
     * when each operation returns (the CPU); default_depth is then unused.
     * progress: advances the pieces in flight, in order, waiting at most timeout_ns (< 0: as
     * long as it takes; 0: not at all) until piece `until` and every piece before it are
     * complete: their result batches' data and row counts final (rows may shrink to the
     * kept-row count of a compaction read only now), nothing on the device still reading
     * their buffers. *done: the number of the first piece not complete. On a failure found
     * in piece f it returns its status (diagnostic set) with *done = f, having waited until
     * the device no longer works for f or any later piece, and forgotten them (their result
     * batches are the executor's to free).
     * end_piece: piece's journey ended, its result (if any) in `batch` (NULL: buffered by a
     * stream-wide sort, empty, or failed): the backend records what tells it is complete.
     * mark_bytes / mark / restore: the backend's part of a push's mark (the carries as they
     * were before the push), kept until its pieces are complete; restore puts them back
     * after a failure in flight (the device idle then). */
    int default_depth;
    sluice_status (*progress)(sluice_session *s, int64_t until, int64_t timeout_ns, int64_t *done);
    void (*end_piece)(sluice_session *s, const sl_piece *piece, sluice_batch *batch);
    size_t (*mark_bytes)(const sluice_session *s);
    void (*mark)(sluice_session *s, void *out);
    void (*restore)(sluice_session *s, const void *mark);

    /* NULL when the backend cannot; else copy fused group gi's scan carries out of / into
     * the session (one sl_scan_carry per scan of the group, in stage order), complete when
     * the call returns (core/runtime/carry.h). */
    sluice_status (*carry_get)(sluice_session *s, int gi, sl_scan_carry *out);
    sluice_status (*carry_set)(sluice_session *s, int gi, const sl_scan_carry *in);
};

extern const sl_backend_ops sl_cpu_backend;
/* NULL in builds without CUDA (SLUICE_WITH_CUDA off). */
const sl_backend_ops *sl_cuda_backend(void);
/* For tests of failures in flight (CUDA builds only): piece `seq` of the CUDA session s
 * (counted since open; the push of that number when no batch is cut and nothing is
 * flushed) reports a fault found on the device, as a device-side check would, when it is
 * waited for; -1 disarms. The piece's work itself runs normally. */
void sl_cuda_fault_at_piece(sluice_session *s, int64_t seq);

#endif
