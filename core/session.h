/* session.h — the session object shared by all backends, the validated input a backend
 * receives, result batches, and the backend interface (one table of functions per backend).
 *
 * Flow: sluice_session_push (core/session.c) validates the caller's columns against the
 * pipeline and hands an sl_input to the backend's push; the backend runs every plan group
 * and appends finished result batches with sl_session_emit. */
#ifndef SL_SESSION_H
#define SL_SESSION_H

#include "plan.h"

/* A validated batch: data[i] is input column i's data (pipeline input order), rows the row
 * count; for an offsets input, data[i] holds nsegments+1 int64 values (checked: start at 0,
 * non-decreasing, end at rows). Memory is the caller's: host unless on_device. */
typedef struct sl_input {
    int64_t rows;
    const void *const *data;
    int64_t nsegments;     /* -1 when the pipeline has no offsets input */
    bool on_device;
} sl_input;

typedef struct sl_backend_ops sl_backend_ops;

struct sluice_session {
    sl_owned link;           /* in ctx's list while open */
    sluice_context *ctx;
    sluice_pipeline *pipeline;
    const sl_backend_ops *backend;
    sl_plan plan;
    sl_value *params;        /* current value of each pipeline param */
    int64_t max_batch_rows;
    bool flushed;
    int64_t rows_in, rows_out;

    /* pending result batches, FIFO */
    sluice_batch **queue;
    size_t queue_head, queue_len, queue_cap;

    void *impl;              /* the backend's state */
    void *cuda_stream;       /* CUDA: the caller's cudaStream_t, NULL for the default */
    bool outputs_on_device;  /* CUDA: leave result columns in device memory */
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
};

/* Allocates an empty result batch for the pipeline's outputs with rows rows of host memory
 * per column (64-byte aligned, from the context's allocator). NULL on allocation failure. */
sluice_batch *sl_batch_new_host(sluice_context *ctx, const sluice_pipeline *p, int64_t rows);
/* Concatenates host result batches of one pipeline into a new batch (sluice_run). */
sluice_status sl_batch_concat(sluice_context *ctx, const sluice_pipeline *p, sluice_batch **parts,
                              size_t nparts, sluice_batch **out);
/* Appends a finished batch to the session's output queue (takes ownership; on allocation
 * failure frees it and returns SLUICE_ERR_NO_MEMORY). */
sluice_status sl_session_emit(sluice_session *s, sluice_batch *b);

/* Validates and pushes a batch; on_device: the column pointers are device memory (CUDA). */
sluice_status sl_session_push(sluice_session *s, const sluice_column *columns, size_t count,
                              bool on_device);

/* The backend interface. Every function gets a session whose plan and params are set.
 * Transactional rule: when push or flush fails, the backend leaves its carried state as it
 * was before the call and emits nothing from the failed batch. */
struct sl_backend_ops {
    sluice_backend id;
    const char *name;
    bool (*available)(void);
    sluice_status (*open)(sluice_session *s);  /* sizes and allocates scratch; sets s->impl */
    sluice_status (*push)(sluice_session *s, const sl_input *in);
    sluice_status (*flush)(sluice_session *s); /* end of stream: stream sorts emit here */
    sluice_status (*reset)(sluice_session *s); /* forget carries and buffered rows */
    void (*close)(sluice_session *s);
};

extern const sl_backend_ops sl_cpu_backend;
/* NULL in builds without CUDA (SLUICE_WITH_CUDA off). */
const sl_backend_ops *sl_cuda_backend(void);

#endif
