/* session.c — the public session API: choosing the backend, parameters, validating each
 * pushed batch against the pipeline before the executor (exec.h) sees it, the FIFO of result
 * batches, and the one-shot sluice_run. Backends implement sl_backend_ops (session.h). */
#include <stddef.h>
#include <string.h>

#include "common/context.h"
#include "runtime/exec.h"
#include "runtime/session.h"

#define SL_DEFAULT_MAX_BATCH_ROWS ((int64_t)1 << 22)
#define SL_MAX_DEPTH 64 /* sluice_session_options.pipeline_depth */

SLUICE_API int sluice_backend_available(sluice_backend backend) {
    const sl_backend_ops *cuda = sl_cuda_backend();
    switch (backend) {
    case SLUICE_BACKEND_CPU:
    case SLUICE_BACKEND_AUTO: return 1;
    case SLUICE_BACKEND_CUDA: return cuda && cuda->available() ? 1 : 0;
    }
    return 0;
}

static int find_param(const sluice_pipeline *p, const char *name) {
    for (int i = 0; i < p->nparams; i++)
        if (strcmp(p->params[i].name, name) == 0) return i;
    return -1;
}

static sluice_status unknown_param(sluice_context *ctx, const sluice_pipeline *p,
                                   const char *name) {
    const char *names[64];
    size_t n = 0;
    for (int i = 0; i < p->nparams && n < SL_ARRAY_LEN(names); i++) names[n++] = p->params[i].name;
    const char *hint = sl_suggest(name, names, n);
    if (hint)
        return sl_error(ctx, SLUICE_ERR_UNKNOWN_PARAM,
                        "pipeline '%s' has no parameter '%s'; did you mean '%s'?", p->name, name,
                        hint);
    return sl_error(ctx, SLUICE_ERR_UNKNOWN_PARAM, "pipeline '%s' has no parameter '%s'%s",
                    p->name, name, p->nparams ? "" : " (it declares no params)");
}

static sluice_status set_param(sluice_session *s, const char *name, const char *text) {
    const sluice_pipeline *p = s->pipeline;
    if (!name || !text)
        return sl_error(s->ctx, SLUICE_ERR_INVALID_ARGUMENT, "parameter name and text must not be NULL");
    int i = find_param(p, name);
    if (i < 0) return unknown_param(s->ctx, p, name);
    sl_value v;
    if (!sl_value_parse(text, p->params[i].type, &v))
        return sl_error(s->ctx, SLUICE_ERR_BAD_VALUE,
                        "parameter '%s' is %s; '%s' is not a valid %s value", name,
                        sluice_type_name(p->params[i].type), text,
                        sluice_type_name(p->params[i].type));
    s->params[i] = v;
    return SLUICE_OK;
}

/* Whether a capability check's failure (sl_plan_check) is a refusal another backend may not
 * share: a stage it does not run, or one of its limits. */
static bool refused_by_caps(sluice_status st) {
    return st == SLUICE_ERR_BACKEND_UNAVAILABLE || st == SLUICE_ERR_LIMIT;
}

static const sl_backend_ops *choose_backend(sluice_context *ctx, sluice_backend want,
                                            sluice_status *st) {
    const sl_backend_ops *cuda = sl_cuda_backend();
    *st = SLUICE_OK;
    switch (want) {
    case SLUICE_BACKEND_AUTO:
        return cuda && cuda->available() ? cuda : &sl_cpu_backend;
    case SLUICE_BACKEND_CPU:
        return &sl_cpu_backend;
    case SLUICE_BACKEND_CUDA:
        /* what it lacks (NVRTC, a driver, a device) is named by the backend's open */
        if (!cuda)
            *st = sl_error(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                           "the CUDA backend is not built in (configure with SLUICE_WITH_CUDA=ON)");
        return *st == SLUICE_OK ? cuda : NULL;
    }
    *st = sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "unknown backend %d", (int)want);
    return NULL;
}

/* Context teardown of what the caller did not free. */
static void destroy_listed_session(sl_owned *o) {
    sluice_session_close(SL_OWNER_OF(o, sluice_session, link));
}
static void destroy_listed_batch(sl_owned *o) {
    sluice_batch_free(SL_OWNER_OF(o, sluice_batch, link));
}

static void drop_queue(sluice_session *s) {
    for (size_t i = 0; i < s->queue_len; i++) sluice_batch_free(s->queue[s->queue_head + i]);
    s->queue_head = s->queue_len = 0;
}

SLUICE_API sluice_status sluice_session_open(sluice_pipeline *pipeline,
                                             const sluice_session_options *options,
                                             sluice_session **out) {
    if (out) *out = NULL;
    if (!pipeline) return SLUICE_ERR_INVALID_ARGUMENT;
    sluice_context *ctx = pipeline->ctx;
    sl_diag_clear(ctx);
    if (!out) return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "sluice_session_open: out is NULL");
    sluice_session_options opts = SLUICE_SESSION_OPTIONS_INIT;
    if (options) {
        if (options->version == 1) /* a version 1 caller's struct ends before sort_memory_bytes */
            memcpy(&opts, options, offsetof(sluice_session_options, sort_memory_bytes));
        else if (options->version == 2) /* ... and a version 2 one before pipeline_depth */
            memcpy(&opts, options, offsetof(sluice_session_options, pipeline_depth));
        else if (options->version == SLUICE_SESSION_OPTIONS_VERSION)
            opts = *options;
        else
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                            "session options version %u is not %u: initialise with "
                            "SLUICE_SESSION_OPTIONS_INIT", options->version,
                            SLUICE_SESSION_OPTIONS_VERSION);
    }
    options = &opts;
    if (options->pipeline_depth < 0 || options->pipeline_depth > SL_MAX_DEPTH)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "session options: pipeline_depth %d is not 0 (the backend's choice) to %d",
                        options->pipeline_depth, SL_MAX_DEPTH);
    opts.version = SLUICE_SESSION_OPTIONS_VERSION; /* older versions were copied into opts */
    if (options->sort_memory_bytes < 0)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "session options: sort_memory_bytes must be >= 0 (0: never spill)");
    if (options->max_batch_rows < 0 || (options->param_count && !options->params))
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "session options: max_batch_rows must be >= 0 and params non-NULL when "
                        "param_count > 0");
    sluice_status st;
    const sl_backend_ops *backend = choose_backend(ctx, options->backend, &st);
    if (!backend) return st;

    sluice_session *s = sl_calloc(ctx, 1, sizeof *s);
    if (!s) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a session");
    s->ctx = ctx;
    s->pipeline = pipeline;
    s->backend = backend;
    s->max_batch_rows = options->max_batch_rows ? options->max_batch_rows : SL_DEFAULT_MAX_BATCH_ROWS;
    s->sort_memory_bytes = options->sort_memory_bytes;
    /* A backend without pieces in flight completes each one as it goes: depth 1. */
    s->depth = !backend->progress ? 1
             : options->pipeline_depth ? options->pipeline_depth : backend->default_depth;
    if (options->spill_dir) {
        s->spill_dir = sl_strdup(ctx, options->spill_dir);
        if (!s->spill_dir) st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a session");
    }
    s->params = sl_calloc(ctx, (size_t)pipeline->nparams + 1, sizeof *s->params);
    if (!s->params || st != SLUICE_OK) {
        sl_free(ctx, s->params);
        sl_free(ctx, s->spill_dir);
        sl_free(ctx, s);
        return st != SLUICE_OK ? st : sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory opening a session");
    }
    for (int i = 0; i < pipeline->nparams; i++) s->params[i] = pipeline->params[i].default_value;
    for (size_t i = 0; i < options->param_count && st == SLUICE_OK; i++)
        st = set_param(s, options->params[i].name, options->params[i].text);
    if (st == SLUICE_OK) st = sl_plan_build(ctx, pipeline, backend->id, &s->plan);
    else s->plan.groups = NULL;
    if (st == SLUICE_OK) st = sl_plan_check(ctx, pipeline, &s->plan, &backend->caps);
    if (refused_by_caps(st) && options->backend == SLUICE_BACKEND_AUTO &&
        backend != &sl_cpu_backend) {
        /* auto: a pipeline the GPU backend cannot run (its capability check names why) runs
         * on the CPU, which runs every pipeline; the check's diagnostic is dropped. */
        sl_plan_free(ctx, &s->plan);
        sl_diag_clear(ctx);
        backend = s->backend = &sl_cpu_backend;
        s->depth = 1;
        st = sl_plan_build(ctx, pipeline, backend->id, &s->plan);
        if (st == SLUICE_OK) st = sl_plan_check(ctx, pipeline, &s->plan, &backend->caps);
    }
    if (st == SLUICE_OK) {
        st = backend->open(s);
        if (st == SLUICE_OK) {
            st = sl_exec_open(s);
            if (st != SLUICE_OK) backend->close(s);
        }
    }
    if (st != SLUICE_OK) {
        sl_plan_free(ctx, &s->plan);
        sl_free(ctx, s->params);
        sl_free(ctx, s->spill_dir);
        sl_free(ctx, s);
        return st;
    }
    sl_owned_add(ctx, &s->link, destroy_listed_session);
    *out = s;
    return SLUICE_OK;
}

SLUICE_API void sluice_session_close(sluice_session *s) {
    if (!s) return;
    sluice_context *ctx = s->ctx;
    sl_owned_remove(ctx, &s->link);
    sl_exec_close(s); /* its sort buffers are backend memory */
    s->backend->close(s);
    drop_queue(s);
    sl_free(ctx, s->queue);
    sl_plan_free(ctx, &s->plan);
    sl_free(ctx, s->params);
    sl_free(ctx, s->spill_dir);
    sl_free(ctx, s);
}

SLUICE_API sluice_backend sluice_session_backend(const sluice_session *s) {
    return s ? s->backend->id : SLUICE_BACKEND_AUTO;
}

SLUICE_API sluice_status sluice_session_set_param(sluice_session *s, const char *name,
                                                  const char *text) {
    if (!s) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(s->ctx);
    return set_param(s, name, text);
}

/* Checks an offsets column: k+1 values, starting at 0, non-decreasing, ending at rows. */
static sluice_status check_offsets(sluice_context *ctx, const char *name, const int64_t *off,
                                   int64_t count, int64_t rows) {
    if (count < 1)
        return sl_error(ctx, SLUICE_ERR_BAD_OFFSETS,
                        "offsets column '%s' is empty; it needs k+1 entries (at least [0])", name);
    if (off[0] != 0)
        return sl_error(ctx, SLUICE_ERR_BAD_OFFSETS,
                        "offsets column '%s' starts at %lld; it must start at 0", name,
                        (long long)off[0]);
    for (int64_t i = 1; i < count; i++) {
        if (off[i] < off[i - 1])
            return sl_error(ctx, SLUICE_ERR_BAD_OFFSETS,
                            "offsets column '%s' decreases at entry %lld (%lld after %lld); "
                            "offsets must not decrease", name, (long long)i, (long long)off[i],
                            (long long)off[i - 1]);
    }
    if (off[count - 1] != rows)
        return sl_error(ctx, SLUICE_ERR_BAD_OFFSETS,
                        "offsets column '%s' ends at %lld but the batch has %lld rows; the last "
                        "offset must equal the row count", name, (long long)off[count - 1],
                        (long long)rows);
    return SLUICE_OK;
}

/* Matches the caller's columns to the pipeline's inputs and checks types and lengths. On
 * success data[i] holds input i's pointer. */
static sluice_status validate_batch(sluice_session *s, const sluice_column *columns, size_t count,
                                    bool on_device, const void **data, sl_input *in) {
    const sluice_pipeline *p = s->pipeline;
    sluice_context *ctx = s->ctx;
    if (count && !columns)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "push: columns is NULL but count is %zu", count);
    for (int i = 0; i < p->ninputs; i++) data[i] = NULL;
    int64_t rows = -1;
    int rows_from = -1, offsets_input = -1;
    for (size_t k = 0; k < count; k++) {
        const sluice_column *c = &columns[k];
        if (!c->name)
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "push: column %zu has no name", k);
        int i = 0;
        while (i < p->ninputs && strcmp(p->columns[i].name, c->name) != 0) i++;
        if (i == p->ninputs) {
            const char *names[256];
            size_t n = 0;
            for (int j = 0; j < p->ninputs && n < SL_ARRAY_LEN(names); j++) names[n++] = p->columns[j].name;
            const char *hint = sl_suggest(c->name, names, n);
            return sl_error(ctx, SLUICE_ERR_UNKNOWN_COLUMN,
                            "batch column '%s' is not an input of pipeline '%s'%s%s%s", c->name,
                            p->name, hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
        }
        const sl_column *want = &p->columns[i];
        if (data[i])
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "batch column '%s' is given twice", c->name);
        if (c->type != want->type)
            return sl_error(ctx, SLUICE_ERR_BATCH_TYPE,
                            "batch column '%s' is %s but the pipeline declares it %s",
                            c->name, sluice_type_name(c->type) ? sluice_type_name(c->type) : "an unknown type",
                            sluice_type_name(want->type));
        if (c->length < 0)
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "batch column '%s' has negative length %lld",
                            c->name, (long long)c->length);
        if (c->length > 0 && !c->data)
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "batch column '%s' has %lld rows but no data",
                            c->name, (long long)c->length);
        /* A zero-length column may come with a NULL pointer; give backends a valid one. */
        data[i] = c->data ? c->data : (const void *)"";
        if (want->role == SLUICE_ROLE_OFFSETS) {
            offsets_input = i;
            in->nsegments = c->length - 1;
            continue;
        }
        if (rows < 0) {
            rows = c->length;
            rows_from = (int)k;
        } else if (c->length != rows) {
            return sl_error(ctx, SLUICE_ERR_BATCH_LENGTH,
                            "batch columns have different lengths: '%s' has %lld rows, '%s' has "
                            "%lld", columns[rows_from].name, (long long)rows, c->name,
                            (long long)c->length);
        }
    }
    for (int i = 0; i < p->ninputs; i++) {
        if (!data[i])
            return sl_error(ctx, SLUICE_ERR_BATCH_MISSING_COLUMN,
                            "batch lacks input column '%s' (%s) of pipeline '%s'",
                            p->columns[i].name, sluice_type_name(p->columns[i].type), p->name);
    }
    if (rows < 0) rows = 0; /* only an offsets input: its last entry gives the rows */
    if (offsets_input >= 0) {
        if (rows_from < 0 && in->nsegments >= 0 && !on_device)
            rows = ((const int64_t *)data[offsets_input])[in->nsegments];
        if (!on_device)
            SL_TRY(check_offsets(ctx, p->columns[offsets_input].name,
                                 (const int64_t *)data[offsets_input], in->nsegments + 1, rows));
    }
    in->rows = rows;
    in->data = data;
    in->on_device = on_device;
    return SLUICE_OK;
}

/* Shared by sluice_session_push and the CUDA header's device push. */
sluice_status sl_session_push(sluice_session *s, const sluice_column *columns, size_t count,
                              bool on_device) {
    if (!s) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(s->ctx);
    if (s->flushed)
        return sl_error(s->ctx, SLUICE_ERR_MISUSE,
                        "push after flush: the stream has ended; call sluice_session_reset to "
                        "start a new one");
    const void *stack_data[16];
    const void **data = stack_data;
    int n = s->pipeline->ninputs;
    if (n > (int)SL_ARRAY_LEN(stack_data)) {
        data = sl_calloc(s->ctx, (size_t)n, sizeof *data);
        if (!data) return sl_error(s->ctx, SLUICE_ERR_NO_MEMORY, "out of memory validating a batch");
    }
    sl_input in = {0, NULL, -1, on_device};
    sluice_status st = validate_batch(s, columns, count, on_device, data, &in);
    if (st == SLUICE_OK) {
        st = sl_exec_push(s, &in);
        if (st == SLUICE_OK) s->rows_in += in.rows;
    }
    if (data != stack_data) sl_free(s->ctx, data);
    return st;
}

SLUICE_API sluice_status sluice_session_push(sluice_session *s, const sluice_column *columns,
                                             size_t count) {
    return sl_session_push(s, columns, count, false);
}

SLUICE_API sluice_status sluice_session_flush(sluice_session *s) {
    if (!s) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(s->ctx);
    if (s->flushed)
        return sl_error(s->ctx, SLUICE_ERR_MISUSE, "flush called twice; call sluice_session_reset first");
    SL_TRY(sl_exec_flush(s));
    s->flushed = true;
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_session_reset(sluice_session *s) {
    if (!s) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(s->ctx);
    SL_TRY(sl_exec_reset(s));
    drop_queue(s);
    s->flushed = false;
    s->rows_in = s->rows_out = 0;
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_session_pull_wait(sluice_session *s, sluice_batch **out,
                                                  int64_t timeout_ms) {
    if (out) *out = NULL;
    if (!s || !out) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(s->ctx);
    int64_t ns = timeout_ms < 0 ? -1 : timeout_ms > INT64_MAX / 1000000 ? INT64_MAX : timeout_ms * 1000000;
    sluice_batch *b = NULL;
    SL_TRY(sl_exec_next(s, ns, &b));
    if (!b) return SLUICE_OK;
    sl_exec_take(s);
    sl_owned_add(s->ctx, &b->link, destroy_listed_batch); /* now the caller's */
    *out = b;
    return SLUICE_OK;
}

SLUICE_API sluice_status sluice_session_pull(sluice_session *s, sluice_batch **out) {
    return sluice_session_pull_wait(s, out, 0);
}

SLUICE_API int64_t sluice_session_in_flight(const sluice_session *s) {
    return s ? sl_exec_in_flight(s) : -1;
}

SLUICE_API int64_t sluice_session_push_count(const sluice_session *s) {
    return s ? sl_exec_push_count(s) : -1;
}

SLUICE_API sluice_status sluice_run(sluice_pipeline *pipeline, const sluice_session_options *options,
                                    const sluice_column *columns, size_t count, sluice_batch **out) {
    if (out) *out = NULL;
    if (!pipeline || !out) return SLUICE_ERR_INVALID_ARGUMENT;
    sluice_session *s;
    SL_TRY(sluice_session_open(pipeline, options, &s));
    sluice_status st = sluice_session_push(s, columns, count);
    if (st == SLUICE_OK) st = sluice_session_flush(s);
    if (st == SLUICE_OK) {
        if (s->outputs_on_device) {
            st = sl_error(s->ctx, SLUICE_ERR_INVALID_ARGUMENT,
                          "sluice_run returns host batches; device outputs are for sessions");
        } else if (s->queue_len == 1 && s->queue[s->queue_head]->rows > 0) {
            st = sluice_session_pull(s, out); /* ready: the flush waited for every batch */
        } else {
            st = sl_batch_concat(s->ctx, pipeline, s->queue + s->queue_head, s->queue_len, out);
            if (st == SLUICE_OK) sl_owned_add(s->ctx, &(*out)->link, destroy_listed_batch);
        }
    }
    sluice_session_close(s);
    return st;
}
