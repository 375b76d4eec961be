/* sluice.h — the public C API of sluice, an embeddable stream-processing library.
 *
 * This header is the reference manual. Read it top to bottom once:
 *
 *   1. Versions, statuses, types.
 *   2. Contexts: the owner of everything else, of the allocator and of diagnostics.
 *   3. Pipelines: YAML files (schema v1, see pipelines/SCHEMA.md) loaded and checked.
 *   4. Sessions: a stream of batches pushed through a pipeline; outputs pulled.
 *   5. Batches: the columns a session hands back.
 *
 * Conventions
 *   - Every function that can fail returns a sluice_status; SLUICE_OK is 0.
 *   - Out-parameters come first after the object acted on, are written only on success,
 *     and are set to NULL/0 on failure where they are pointers.
 *   - The library never prints, exits or aborts. Details of the last failure are kept in
 *     the context (sluice_context_diagnostic*), with file:line:column for pipeline files.
 *   - Freeing or closing NULL is harmless.
 *   - Lengths and offsets are 64-bit everywhere.
 *
 * Thread safety
 *   A context, and every pipeline, session and batch made from it, is used by one thread at
 *   a time: the caller serialises all calls that reach the same context. Different contexts
 *   share nothing and may be used from different threads at once (one context per thread is
 *   the intended pattern; CUDA sessions on different streams then run concurrently).
 *   sluice_version*, sluice_status_name, sluice_strerror, sluice_type_*, the f16
 *   conversions and sluice_backend_available are safe from any thread.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SLUICE_BUILDING_LIBRARY) && defined(__GNUC__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

/* ---------------------------------------------------------------- 1. versions */

#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 1
#define SLUICE_VERSION_PATCH 0
#define SLUICE_VERSION_STRING "0.1.0"
/* MAJOR*10000 + MINOR*100 + PATCH, comparable with sluice_version_number(). */
#define SLUICE_VERSION_NUMBER \
    (SLUICE_VERSION_MAJOR * 10000 + SLUICE_VERSION_MINOR * 100 + SLUICE_VERSION_PATCH)

/* The version of the library actually linked (may differ from the header's). */
SLUICE_API int sluice_version_number(void);
SLUICE_API const char *sluice_version_string(void);

/* ---------------------------------------------------------------- statuses */

/* One list generates the enum, the names and the messages (see core/common/status.c). */
#define SLUICE_STATUS_LIST(X)                                                              \
    X(OK, "success")                                                                       \
    X(ERR_INVALID_ARGUMENT, "invalid argument (NULL pointer or value out of range)")      \
    X(ERR_MISUSE, "API called in the wrong state")                                         \
    X(ERR_NO_MEMORY, "out of memory")                                                      \
    X(ERR_IO, "cannot read or write a file")                                               \
    X(ERR_LIMIT, "input exceeds a documented limit")                                       \
    X(ERR_YAML_SYNTAX, "YAML syntax error")                                                \
    X(ERR_SCHEMA_VERSION, "missing or unsupported 'sluice:' schema version")               \
    X(ERR_MISSING_KEY, "a required key is missing")                                        \
    X(ERR_UNKNOWN_STAGE, "unknown stage kind")                                             \
    X(ERR_UNKNOWN_KEY, "unknown key")                                                      \
    X(ERR_DUPLICATE_KEY, "key given twice")                                                \
    X(ERR_BAD_VALUE, "a key has a value of the wrong shape or out of range")               \
    X(ERR_DUPLICATE_COLUMN, "column defined twice")                                        \
    X(ERR_UNKNOWN_COLUMN, "unknown column")                                                \
    X(ERR_UNKNOWN_PARAM, "unknown parameter")                                              \
    X(ERR_UNKNOWN_OPERATOR, "unknown scan operator")                                       \
    X(ERR_TYPE, "type error")                                                              \
    X(ERR_EXPR_SYNTAX, "expression syntax error")                                          \
    X(ERR_NOT_ASSOCIATIVE, "declared operator is not associative")                         \
    X(ERR_BAD_IDENTITY, "declared operator's identity is not an identity")                 \
    X(ERR_UNKNOWN_OUTPUT, "unknown output column")                                         \
    X(ERR_BATCH_MISSING_COLUMN, "batch lacks a column the pipeline needs")                 \
    X(ERR_BATCH_TYPE, "batch column has the wrong type")                                   \
    X(ERR_BATCH_LENGTH, "batch columns have mismatched lengths")                           \
    X(ERR_BAD_OFFSETS, "malformed offsets (must start at 0, not decrease, end at n)")      \
    X(ERR_DATA, "malformed input data")                                                    \
    X(ERR_BACKEND_UNAVAILABLE, "backend not available on this machine or build")           \
    X(ERR_COMPILE, "run-time kernel compilation failed")                                   \
    X(ERR_CUDA, "CUDA error")

typedef enum sluice_status {
#define SLUICE_STATUS_ENUM_(name, msg) SLUICE_##name,
    SLUICE_STATUS_LIST(SLUICE_STATUS_ENUM_)
#undef SLUICE_STATUS_ENUM_
    SLUICE_STATUS_COUNT_
} sluice_status;

/* "SLUICE_ERR_TYPE" etc.; "SLUICE_UNKNOWN_STATUS" for values outside the enum. Never NULL. */
SLUICE_API const char *sluice_status_name(sluice_status status);
/* A one-line description of the status. Never NULL. */
SLUICE_API const char *sluice_strerror(sluice_status status);

/* ---------------------------------------------------------------- types */

typedef enum sluice_type {
    SLUICE_BOOL, /* one byte, 0 or 1 */
    SLUICE_I8, SLUICE_I16, SLUICE_I32, SLUICE_I64,
    SLUICE_U8, SLUICE_U16, SLUICE_U32, SLUICE_U64,
    SLUICE_F16, /* IEEE binary16, stored as its 16 bits */
    SLUICE_F32, SLUICE_F64,
    SLUICE_TYPE_COUNT_
} sluice_type;

/* "bool", "i8", … "f64"; NULL for a value outside the enum. */
SLUICE_API const char *sluice_type_name(sluice_type type);
/* Bytes per element; 0 for a value outside the enum. */
SLUICE_API size_t sluice_type_size(sluice_type type);
/* Parses "f32" etc. Returns SLUICE_ERR_INVALID_ARGUMENT for an unknown name. */
SLUICE_API sluice_status sluice_type_from_name(const char *name, sluice_type *out);

/* IEEE binary16 <-> binary32: the conversions the library itself applies to SLUICE_F16
 * columns (whose elements are the 16 bits of a half), for callers that fill or read such
 * columns. They never fail and allocate nothing.
 *
 * sluice_f32_to_f16 rounds to nearest, ties to even. Magnitudes from 65520 up (65504, the
 * largest half, plus half an ulp) become infinity of the same sign; magnitudes of 2^-25 or
 * less (half the smallest subnormal, the tie included) become zero of the same sign;
 * infinities stay infinities; a NaN stays a quiet NaN with its sign and the top bits of its
 * payload.
 *
 * sluice_f16_to_f32 is exact: every half, subnormals included, is a float. A NaN stays a NaN
 * with its sign and payload, so sluice_f32_to_f16(sluice_f16_to_f32(h)) == h for every h
 * that is not a signalling NaN (which comes back quiet). */
SLUICE_API uint16_t sluice_f32_to_f16(float value);
SLUICE_API float sluice_f16_to_f32(uint16_t half);

/* ---------------------------------------------------------------- backends */

typedef enum sluice_backend {
    SLUICE_BACKEND_AUTO, /* CUDA when it is available (below) and runs the pipeline (a stage or
                            limit it refuses sends the pipeline to the CPU), else CPU, silently */
    SLUICE_BACKEND_CPU,
    SLUICE_BACKEND_CUDA
} sluice_backend;

/* 1 when the backend can run here (CUDA: built in, NVRTC loads, the driver loads, a device
 * exists). The CUDA libraries are loaded at run time, not linked: a CUDA-enabled library
 * runs on the CPU where they are absent, and a session asking for CUDA there fails with
 * SLUICE_ERR_BACKEND_UNAVAILABLE and a diagnostic naming what is missing (e.g. libnvrtc). */
SLUICE_API int sluice_backend_available(sluice_backend backend);
/* "auto", "cpu", "cuda"; NULL outside the enum. */
SLUICE_API const char *sluice_backend_name(sluice_backend backend);

/* ---------------------------------------------------------------- 2. contexts */

typedef struct sluice_context sluice_context;
typedef struct sluice_pipeline sluice_pipeline;
typedef struct sluice_session sluice_session;
typedef struct sluice_batch sluice_batch;

/* Host allocator hooks. Every host allocation of the library goes through these, except
 * memory the CUDA backend pins through the CUDA runtime (its staging buffers, the pool of
 * host result batches and sluice_cuda_host_alloc's blocks; sluice_cuda.h) and device
 * memory. alloc(size) returns NULL on failure; realloc follows C's realloc
 * (NULL pointer means alloc; on failure the old block stays valid); free(NULL) is harmless
 * and is never called by the library anyway. Alignment as malloc's. */
typedef struct sluice_allocator {
    void *(*alloc)(size_t size, void *opaque);
    void *(*realloc)(void *ptr, size_t size, void *opaque);
    void (*free)(void *ptr, void *opaque);
    void *opaque;
} sluice_allocator;

#define SLUICE_CONTEXT_OPTIONS_VERSION 1
typedef struct sluice_context_options {
    unsigned version;            /* SLUICE_CONTEXT_OPTIONS_VERSION */
    const sluice_allocator *allocator; /* NULL: malloc/realloc/free. Copied. */
    int cpu_threads;             /* CPU backend worker threads; 0: one per core */
    const char *kernel_cache_dir;/* CUDA kernel cache; NULL: $SLUICE_CACHE_DIR, else
                                    $XDG_CACHE_HOME/sluice, else ~/.cache/sluice; "" disables */
} sluice_context_options;
#define SLUICE_CONTEXT_OPTIONS_INIT {SLUICE_CONTEXT_OPTIONS_VERSION, NULL, 0, NULL}

/* Creates a context. options may be NULL (defaults). Errors: SLUICE_ERR_INVALID_ARGUMENT
 * (out NULL, unknown options version), SLUICE_ERR_NO_MEMORY. */
SLUICE_API sluice_status sluice_context_create(sluice_context **out,
                                               const sluice_context_options *options);
/* Destroys the context. Every pipeline, session and batch made from it must have been
 * freed first; those still alive are freed here too (handles to them become invalid). */
SLUICE_API void sluice_context_destroy(sluice_context *ctx);

/* A diagnostic: what went wrong and, for pipeline files, where. Owned by the context; valid
 * until the next call that fails or clears diagnostics on the same context. */
typedef struct sluice_diagnostic {
    sluice_status status;
    const char *message;     /* one line, says what to change; never NULL */
    const char *file;        /* pipeline path, "<string>" for text, NULL when not a file */
    int line, column;        /* 1-based; 0 when unknown */
    const char *source_line; /* the offending line of the file without newline, or NULL */
} sluice_diagnostic;

/* The diagnostics of the last failed call on this context (a load can report many; the
 * call's status is that of the first). Count 0 after a successful call. */
SLUICE_API size_t sluice_context_diagnostic_count(const sluice_context *ctx);
/* NULL when index >= count. */
SLUICE_API const sluice_diagnostic *sluice_context_diagnostic(const sluice_context *ctx,
                                                              size_t index);
/* Formats as "FILE:LINE:COL: error: MESSAGE\n  SOURCE\n  ^\n" (parts omitted when
 * unknown) into buf (always NUL-terminated when cap > 0). Returns the length the full text
 * needs, excluding the NUL, as snprintf does. */
SLUICE_API size_t sluice_diagnostic_format(const sluice_diagnostic *diag, char *buf, size_t cap);

/* ---------------------------------------------------------------- 3. pipelines */

/* Loads and checks a pipeline file. On failure *out is NULL and the context holds one
 * diagnostic per problem found (all of them, not only the first, up to 100 and then one saying
 * there were more), each with file:line:col.
 * The pipeline is immutable once loaded. Errors: every pipeline status in the list above,
 * SLUICE_ERR_IO, SLUICE_ERR_LIMIT, SLUICE_ERR_NO_MEMORY. */
SLUICE_API sluice_status sluice_pipeline_load_file(sluice_context *ctx, const char *path,
                                                   sluice_pipeline **out);
/* The same from text in memory; `name` is used as the file name in diagnostics (NULL:
 * "<string>"). The text is copied. */
SLUICE_API sluice_status sluice_pipeline_load_string(sluice_context *ctx, const char *text,
                                                     size_t length, const char *name,
                                                     sluice_pipeline **out);
/* Frees a pipeline (NULL is harmless). Close its sessions first, and free or finish reading
 * the result batches they produced: a batch's column names (sluice_column.name) are the
 * pipeline's strings, so they are not valid after the pipeline is freed. */
SLUICE_API void sluice_pipeline_free(sluice_pipeline *pipeline);

/* The pipeline's `name:`. Owned by the pipeline. */
SLUICE_API const char *sluice_pipeline_name(const sluice_pipeline *pipeline);

typedef enum sluice_column_role {
    SLUICE_ROLE_DATA,   /* one value per row */
    SLUICE_ROLE_OFFSETS /* k+1 non-decreasing i64: a ragged batch's segment bounds */
} sluice_column_role;

typedef struct sluice_column_info {
    const char *name; /* owned by the pipeline */
    sluice_type type;
    sluice_column_role role;
} sluice_column_info;

/* The input columns a batch must carry, in declaration order. */
SLUICE_API size_t sluice_pipeline_input_count(const sluice_pipeline *pipeline);
SLUICE_API sluice_status sluice_pipeline_input(const sluice_pipeline *pipeline, size_t index,
                                               sluice_column_info *out);
/* The output columns every result batch carries, in order. */
SLUICE_API size_t sluice_pipeline_output_count(const sluice_pipeline *pipeline);
SLUICE_API sluice_status sluice_pipeline_output(const sluice_pipeline *pipeline, size_t index,
                                                sluice_column_info *out);

typedef struct sluice_param_info {
    const char *name;          /* owned by the pipeline */
    sluice_type type;
    const char *default_text;  /* the default as written in the file */
} sluice_param_info;
SLUICE_API size_t sluice_pipeline_param_count(const sluice_pipeline *pipeline);
SLUICE_API sluice_status sluice_pipeline_param(const sluice_pipeline *pipeline, size_t index,
                                               sluice_param_info *out);

/* Writes the plan for `backend` as text: the stages, the fusion groups and the predicted
 * number of full passes over memory. The text is allocated with the context's allocator and
 * freed with sluice_free_text. *passes_out (may be NULL) receives the predicted passes. */
SLUICE_API sluice_status sluice_pipeline_explain(const sluice_pipeline *pipeline,
                                                 sluice_backend backend, char **text_out,
                                                 int *passes_out);
SLUICE_API void sluice_free_text(sluice_context *ctx, char *text);

/* ---------------------------------------------------------------- 4. sessions */

/* A column handed to a session, or read from a result batch. For an offsets input, length is
 * k+1 (the number of segments plus one) and data holds int64_t values. */
typedef struct sluice_column {
    const char *name;
    sluice_type type;
    const void *data;
    int64_t length;
} sluice_column;

typedef struct sluice_param_value {
    const char *name;
    const char *text; /* parsed by the parameter's type, e.g. "12.5", "-3", "true" */
} sluice_param_value;

#define SLUICE_SESSION_OPTIONS_VERSION 3 /* 2: the same without pipeline_depth; 1: without
                                            the last three fields */
typedef struct sluice_session_options {
    unsigned version;               /* SLUICE_SESSION_OPTIONS_VERSION */
    sluice_backend backend;         /* default SLUICE_BACKEND_AUTO */
    int64_t max_batch_rows;         /* scratch is sized for this many rows. 0: 1<<22.
                                       A bigger batch is still accepted, and its results are
                                       always those of the whole batch, on every backend:
                                       - it is cut into pieces of at most this many rows
                                         when no boundary means anything (no offsets input,
                                         no `reset: batch` scan, no `per: batch` sort or
                                         reduce); each piece is then a result batch of its
                                         own (none when a reduce gave no row for it);
                                       - with an offsets input in host memory (and neither
                                         of the others), it is cut between segments, each
                                         piece holding at most this many rows and segments,
                                         or one segment when a segment alone is longer;
                                       - otherwise (a `reset: batch` scan, a `per: batch`
                                         sort or reduce, or offsets in device memory) it
                                         runs whole:
                                         the session's scratch grows to fit it and stays
                                         that size (SLUICE_ERR_NO_MEMORY if it cannot).
                                       Rows sorted by a stream-wide sort go on through the
                                       stages after it by the same rule at flush. */
    const sluice_param_value *params; /* overrides of the file's defaults */
    size_t param_count;
    int64_t sort_memory_bytes;      /* a stream-wide sort whose held rows reach this many
                                       bytes writes them to a temporary file as a sorted run
                                       before the next push, and merges its runs at flush
                                       (see sluice_session_flush). 0 (default): never; < 0
                                       is SLUICE_ERR_INVALID_ARGUMENT */
    const char *spill_dir;          /* directory for those runs (copied; its files are
                                       unlinked at once, so nothing is left behind); NULL:
                                       $TMPDIR, else /tmp */
    int pipeline_depth;             /* batches in flight at most (see "Batches in flight"
                                       below): 0 (default) the backend's choice, 3 on CUDA;
                                       1: every push waits for its results, the synchronous
                                       path; < 0 or > 64 is SLUICE_ERR_INVALID_ARGUMENT. The
                                       CPU backend completes each batch before push returns,
                                       whatever the depth. Results never depend on it. */
} sluice_session_options;
#define SLUICE_SESSION_OPTIONS_INIT \
    {SLUICE_SESSION_OPTIONS_VERSION, SLUICE_BACKEND_AUTO, 0, NULL, 0, 0, NULL, 0}

/* Opens a session over a pipeline. Scratch memory is sized and allocated here, once.
 * Errors: SLUICE_ERR_INVALID_ARGUMENT, SLUICE_ERR_UNKNOWN_PARAM, SLUICE_ERR_BAD_VALUE (a
 * param text that does not parse as its type), SLUICE_ERR_BACKEND_UNAVAILABLE,
 * SLUICE_ERR_COMPILE, SLUICE_ERR_CUDA, SLUICE_ERR_NO_MEMORY. */
SLUICE_API sluice_status sluice_session_open(sluice_pipeline *pipeline,
                                             const sluice_session_options *options,
                                             sluice_session **out);
/* Closes the session and frees its memory; outputs not pulled are lost. */
SLUICE_API void sluice_session_close(sluice_session *session);
/* The backend actually running the session (never AUTO). */
SLUICE_API sluice_backend sluice_session_backend(const sluice_session *session);

/* Changes a parameter between pushes; it applies to rows pushed afterwards.
 * Errors: SLUICE_ERR_UNKNOWN_PARAM, SLUICE_ERR_BAD_VALUE. */
SLUICE_API sluice_status sluice_session_set_param(sluice_session *session, const char *name,
                                                  const char *text);

/* Batches in flight
 *   A session may work on several pushed batches at once (pipeline_depth, default 3 on the
 *   CUDA backend): while one batch's rows are copied in, the one before computes and the one
 *   before that is copied out. sluice_session_push then returns as soon as the batch is
 *   staged (its rows copied where the backend reads them: the caller's memory is free again),
 *   not when its results exist; it waits only when pipeline_depth batches are already in
 *   flight, for the oldest of them. Results come out in stream order: sluice_session_pull
 *   hands out the next result batch once its data is complete and never one before it, and
 *   sluice_session_pull_wait waits for it. sluice_session_flush waits for every batch in
 *   flight, so after a successful flush every result is ready to pull. A session's results
 *   are the same at every depth and for every way the stream is cut into batches (except
 *   that an offsets input describes whole segments of its own batch).
 *
 * Errors with batches in flight
 *   - A batch rejected on the host (SLUICE_ERR_BATCH_*, SLUICE_ERR_BAD_OFFSETS of host
 *     offsets, resources while staging) is rejected by its own push, which changes nothing.
 *   - A failure found on the device after its push returned (a CUDA error in its work, or a
 *     fault a device-side check found) is reported by the next call on the session that
 *     waits for or polls that batch: a push, pull, pull_wait or flush. The diagnostic names
 *     the failed push by its number (0 for the first push since open or reset). That push
 *     and every push after it are rejected: nothing computed from them is ever handed out,
 *     and the stream's state (scan carries, open segments, rows held by a stream-wide sort)
 *     is as it was after the push before it. Results of earlier pushes are not lost: they
 *     stay in the queue to pull. sluice_session_push_count then says how many pushes stand,
 *     so the caller can push the rejected batches again (a push that reported the failure of
 *     an earlier one was rejected too). A push that itself returns an error always leaves
 *     sluice_session_push_count where it was before the call, or lower.
 *   - After a sticky CUDA error (an illegal address, say) the device is unusable for the
 *     process, as CUDA defines: results already copied to the host can still be pulled, and
 *     every call that needs the device returns SLUICE_ERR_CUDA.
 */

/* Pushes one batch: one sluice_column per pipeline input (any order, matched by name;
 * extra columns are an error). The data is read during the call only; the caller keeps
 * ownership (with batches in flight too: the rows are staged before push returns). A
 * zero-row batch is valid. Stream-wide state (running scan totals, compaction
 * offsets, open segments) carries to the next push: the session's output does not depend on
 * how the stream is cut into batches, except that an offsets input describes whole segments
 * of its own batch.
 * On failure (bad batch: SLUICE_ERR_BATCH_*, SLUICE_ERR_BAD_OFFSETS; or resources) the batch
 * is rejected as a whole: the session is unchanged, stays usable, and outputs already
 * produced remain available to pull. */
SLUICE_API sluice_status sluice_session_push(sluice_session *session,
                                             const sluice_column *columns, size_t count);

/* Ends the stream: a stream-wide sort emits its rows now, a pending segment is closed.
 * After flush, push is SLUICE_ERR_MISUSE until sluice_session_reset.
 *
 * Memory a stream-wide sort holds (a `sort` without `per: batch`). It keeps every row that
 * reaches it until flush, in the backend's memory (host memory on the CPU backend, GPU memory
 * on CUDA), unless sort_memory_bytes is set (below). Let W be the sum of the widths of the
 * columns it takes: its keys and each column a later stage or the output reads (a u32 key and
 * one f32 column: W = 8 bytes). Held until flush: W to 2W bytes a row (the buffer grows by
 * doubling; 3W for a moment while it grows). At flush, in addition: on the CPU 32 bytes a row
 * of radix scratch (two 8-byte key images, two 8-byte row indices) and the sorted columns (W'
 * bytes a row, the widths of the columns needed after the sort; when the sort is the last
 * stage they are the result batch); on CUDA a sorted copy (W bytes a row), 8 to 24 bytes a row
 * of key images and row indices, and CUB's temporary storage. The stages after the sort then
 * run in max_batch_rows pieces. So the peak is about 2W + 32 + W' bytes a row of the whole
 * stream on the CPU (56 for the example) and 3W + 24 on the GPU. A push whose rows no longer
 * fit fails with SLUICE_ERR_NO_MEMORY and changes nothing; on CUDA a stream sort holds at most
 * 2^32 - 1 rows (SLUICE_ERR_LIMIT).
 *
 * To bound it, set sluice_session_options.sort_memory_bytes: before each push, a stream sort
 * holding that many bytes (W a row) or more sorts them and writes them as one run to an
 * unlinked temporary file in spill_dir (records of 8 bytes a key plus W' bytes a row; on CUDA
 * through host memory); flush writes the rest as a last run and merges the runs, equal keys
 * keeping their order of arrival, into pieces of max_batch_rows rows for the stages after the
 * sort (or one piece when they need the sorted stream whole). Memory then stays within about
 * the budget plus one pushed batch, plus, while spilling, 24 bytes and 8 a key per held row of
 * images and indices (and on CUDA a host copy of the held rows). Disk: every spilled row's
 * record until flush. Runs merge as they come: whenever 16 runs of one generation are the
 * newest, they are merged into one run of the next, so a stream spilling R times keeps at most
 * about 15 x log16(R) files open (under 100 for a million spills) and each record is
 * rewritten log16(R) times; every merge, the flush's too, reads 4096 records of each of its
 * runs at a time. A run that cannot be written or read back
 * (or opened) is SLUICE_ERR_IO naming the directory; a failed spill changes nothing. Results
 * are the same with any budget. `per: batch` sorts each batch alone instead. */
SLUICE_API sluice_status sluice_session_flush(sluice_session *session);
/* Drops all stream state and pending outputs; the session starts a new stream. */
SLUICE_API sluice_status sluice_session_reset(sluice_session *session);

/* Takes the next result batch, in stream order. *out is NULL when none is ready (not an
 * error): with batches in flight, when the next one's data is not complete yet (it never
 * waits; see sluice_session_pull_wait). The caller owns the batch and frees it with
 * sluice_batch_free, before or after the session closes (a batch outlives its session, not
 * its context). Errors: a failure found on the device for a batch in flight (see
 * "Errors with batches in flight"); *out is then NULL, and the batches before the failed
 * push can still be pulled. */
SLUICE_API sluice_status sluice_session_pull(sluice_session *session, sluice_batch **out);

/* sluice_session_pull, waiting up to timeout_ms milliseconds (< 0: as long as it takes; 0:
 * as pull) for the next result batch while batches are in flight. *out is NULL when the
 * time ran out, or when nothing is in flight and no result is ready (check
 * sluice_session_in_flight to tell the two apart). A batch whose rows all fell away (a
 * filter kept none) is no result: the wait goes on to the next. Errors: as
 * sluice_session_pull; SLUICE_ERR_INVALID_ARGUMENT for a NULL session or out. */
SLUICE_API sluice_status sluice_session_pull_wait(sluice_session *session, sluice_batch **out,
                                                  int64_t timeout_ms);

/* The number of pushes whose results are not complete yet (0 on the CPU backend, and after
 * a successful flush). It does not wait, and reports nothing: a failure in flight is
 * reported by the calls listed under "Errors with batches in flight". -1 for NULL. */
SLUICE_API int64_t sluice_session_in_flight(const sluice_session *session);

/* The number of pushes since open or reset that stand: every push that returned SLUICE_OK,
 * less those a failure on the device rejected afterwards (see "Errors with batches in
 * flight"). -1 for NULL. */
SLUICE_API int64_t sluice_session_push_count(const sluice_session *session);

/* One-shot: open a session with `options`, push the columns as one batch, flush, and
 * concatenate every output into one batch in *out (caller frees). */
SLUICE_API sluice_status sluice_run(sluice_pipeline *pipeline,
                                    const sluice_session_options *options,
                                    const sluice_column *columns, size_t count,
                                    sluice_batch **out);

/* ---------------------------------------------------------------- 5. batches */

SLUICE_API int64_t sluice_batch_rows(const sluice_batch *batch);
SLUICE_API size_t sluice_batch_column_count(const sluice_batch *batch);
/* Fills *out with the column's view (data owned by the batch, on the host unless the
 * session was asked to leave outputs on the device, see sluice_cuda.h).
 * Errors: SLUICE_ERR_INVALID_ARGUMENT for an index out of range. */
SLUICE_API sluice_status sluice_batch_column(const sluice_batch *batch, size_t index,
                                             sluice_column *out);
/* The same by name; SLUICE_ERR_UNKNOWN_COLUMN when absent. */
SLUICE_API sluice_status sluice_batch_column_by_name(const sluice_batch *batch,
                                                     const char *name, sluice_column *out);
SLUICE_API void sluice_batch_free(sluice_batch *batch);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_H */
