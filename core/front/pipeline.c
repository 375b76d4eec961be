/* pipeline.c — the public face of pipelines: loading from a file or a string (the loader
 * proper is core/front/loader*.c), the read-only accessors, and `explain`. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/context.h"
#include "plan/plan.h"
#include "stages/kind.h"

/* Files larger than this are refused before parsing (hostile-input limit, documented in
 * pipelines/SCHEMA.md). */
#define SL_MAX_PIPELINE_FILE_BYTES (1u << 20)

/* Context teardown of a pipeline the caller did not free. */
static void destroy_listed_pipeline(sl_owned *o) {
    sluice_pipeline_free(SL_OWNER_OF(o, sluice_pipeline, link));
}

SLUICE_API sluice_status sluice_pipeline_load_string(sluice_context *ctx, const char *text,
                                                     size_t length, const char *name,
                                                     sluice_pipeline **out) {
    if (out) *out = NULL;
    if (!ctx) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(ctx);
    if (!out || (!text && length)) {
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "sluice_pipeline_load_string: text and out must not be NULL");
    }
    if (!name) name = "<string>";
    if (length > SL_MAX_PIPELINE_FILE_BYTES) {
        return sl_error(ctx, SLUICE_ERR_LIMIT,
                        "%s: pipeline text is %zu bytes; the limit is %u bytes", name, length,
                        SL_MAX_PIPELINE_FILE_BYTES);
    }
    /* The loader gets a NUL-terminated private copy: the caller's buffer need not be. */
    char *copy = sl_strndup(ctx, text ? text : "", length);
    if (!copy) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory copying pipeline text");
    sl_diag_set_source(ctx, name, copy, length);
    sluice_pipeline *p = NULL;
    sluice_status st = ld_parse_pipeline(ctx, copy, length, name, &p);
    sl_diag_clear_source(ctx);
    sl_free(ctx, copy);
    if (st == SLUICE_OK && sl_diag_count(ctx) == 0 && p) {
        sl_owned_add(ctx, &p->link, destroy_listed_pipeline);
        *out = p;
        return SLUICE_OK;
    }
    if (p) sl_pipeline_destroy(p);
    st = sl_diag_first_status(ctx);
    return st == SLUICE_OK ? SLUICE_ERR_NO_MEMORY : st;
}

SLUICE_API sluice_status sluice_pipeline_load_file(sluice_context *ctx, const char *path,
                                                   sluice_pipeline **out) {
    if (out) *out = NULL;
    if (!ctx) return SLUICE_ERR_INVALID_ARGUMENT;
    sl_diag_clear(ctx);
    if (!path || !out) {
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "sluice_pipeline_load_file: path and out must not be NULL");
    }
    FILE *f = fopen(path, "rb");
    if (!f) return sl_error(ctx, SLUICE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = sl_alloc(ctx, SL_MAX_PIPELINE_FILE_BYTES + 1);
    if (!buf) {
        fclose(f);
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory reading %s", path);
    }
    size_t n = fread(buf, 1, SL_MAX_PIPELINE_FILE_BYTES + 1, f);
    int read_errno = ferror(f) ? errno : 0;
    bool read_error = ferror(f) != 0;
    fclose(f);
    sluice_status st;
    if (read_error && read_errno == EISDIR) {
        st = sl_error(ctx, SLUICE_ERR_IO, "%s: is a directory, not a pipeline file", path);
    } else if (read_error) {
        st = sl_error(ctx, SLUICE_ERR_IO, "%s: cannot read: %s", path,
                      strerror(read_errno ? read_errno : EIO));
    } else if (n > SL_MAX_PIPELINE_FILE_BYTES) {
        st = sl_error(ctx, SLUICE_ERR_LIMIT, "%s: pipeline file is larger than the %u-byte limit",
                      path, SL_MAX_PIPELINE_FILE_BYTES);
    } else {
        st = sluice_pipeline_load_string(ctx, buf, n, path, out);
    }
    sl_free(ctx, buf);
    return st;
}

SLUICE_API void sluice_pipeline_free(sluice_pipeline *pipeline) {
    if (!pipeline) return;
    sl_owned_remove(pipeline->ctx, &pipeline->link);
    sl_pipeline_destroy(pipeline);
}

SLUICE_API const char *sluice_pipeline_name(const sluice_pipeline *pipeline) {
    return pipeline ? pipeline->name : NULL;
}

SLUICE_API size_t sluice_pipeline_input_count(const sluice_pipeline *pipeline) {
    return pipeline ? (size_t)pipeline->ninputs : 0;
}

static void column_info(const sl_column *c, sluice_column_info *out) {
    out->name = c->name;
    out->type = c->type;
    out->role = c->role;
}

SLUICE_API sluice_status sluice_pipeline_input(const sluice_pipeline *pipeline, size_t index,
                                               sluice_column_info *out) {
    if (!pipeline || !out || index >= (size_t)pipeline->ninputs) return SLUICE_ERR_INVALID_ARGUMENT;
    column_info(&pipeline->columns[index], out);
    return SLUICE_OK;
}

SLUICE_API size_t sluice_pipeline_output_count(const sluice_pipeline *pipeline) {
    return pipeline ? (size_t)pipeline->noutputs : 0;
}

SLUICE_API sluice_status sluice_pipeline_output(const sluice_pipeline *pipeline, size_t index,
                                                sluice_column_info *out) {
    if (!pipeline || !out || index >= (size_t)pipeline->noutputs) return SLUICE_ERR_INVALID_ARGUMENT;
    column_info(&pipeline->columns[pipeline->outputs[index]], out);
    return SLUICE_OK;
}

SLUICE_API size_t sluice_pipeline_param_count(const sluice_pipeline *pipeline) {
    return pipeline ? (size_t)pipeline->nparams : 0;
}

SLUICE_API sluice_status sluice_pipeline_param(const sluice_pipeline *pipeline, size_t index,
                                               sluice_param_info *out) {
    if (!pipeline || !out || index >= (size_t)pipeline->nparams) return SLUICE_ERR_INVALID_ARGUMENT;
    const sl_param *p = &pipeline->params[index];
    out->name = p->name;
    out->type = p->type;
    out->default_text = p->default_text;
    return SLUICE_OK;
}

SLUICE_API void sluice_free_text(sluice_context *ctx, char *text) {
    if (ctx) sl_free(ctx, text);
}

/* ---- explain --------------------------------------------------------------------------- */

static void explain_stage(sl_strbuf *sb, const sluice_pipeline *p, const sl_stage *s) {
    sl_strbuf_printf(sb, "    %-15s line %-4d", s->kind_name ? s->kind_name : "?", s->loc.line);
    sl_stage_kind_desc_of(s)->explain(sb, p, s);
    sl_strbuf_append(sb, "\n");
}

SLUICE_API sluice_status sluice_pipeline_explain(const sluice_pipeline *pipeline,
                                                 sluice_backend backend, char **text_out,
                                                 int *passes_out) {
    if (text_out) *text_out = NULL;
    if (!pipeline || !text_out) return SLUICE_ERR_INVALID_ARGUMENT;
    sluice_context *ctx = pipeline->ctx;
    sl_diag_clear(ctx);
    if (backend == SLUICE_BACKEND_AUTO)
        backend = sluice_backend_available(SLUICE_BACKEND_CUDA) ? SLUICE_BACKEND_CUDA
                                                                : SLUICE_BACKEND_CPU;
    if (backend != SLUICE_BACKEND_CPU && backend != SLUICE_BACKEND_CUDA)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "explain: unknown backend %d",
                        (int)backend);
    sl_plan plan;
    SL_TRY(sl_plan_build(ctx, pipeline, backend, &plan));
    sl_strbuf sb;
    sl_strbuf_init(&sb, ctx);
    sl_strbuf_printf(&sb, "pipeline %s (%s backend)\n", pipeline->name, sluice_backend_name(backend));
    sl_strbuf_append(&sb, "input:");
    for (int i = 0; i < pipeline->ninputs; i++)
        sl_strbuf_printf(&sb, " %s: %s%s", pipeline->columns[i].name,
                         sluice_type_name(pipeline->columns[i].type),
                         pipeline->columns[i].role == SLUICE_ROLE_OFFSETS ? " (offsets)" : "");
    sl_strbuf_append(&sb, "\n");
    for (int g = 0; g < plan.ngroups; g++) {
        const sl_group *gr = &plan.groups[g];
        if (gr->kind == SL_GROUP_FUSED)
            sl_strbuf_printf(&sb, "group %d: fused, %d stage%s in one pass%s\n", g + 1,
                             gr->last - gr->first, gr->last - gr->first == 1 ? "" : "s",
                             backend == SLUICE_BACKEND_CUDA ? " (one kernel)" : " (one tiled sweep)");
        else
            sl_strbuf_printf(&sb, "group %d: radix sort, %d pass%s\n", g + 1, gr->passes,
                             gr->passes == 1 ? "" : "es");
        for (int s = gr->first; s < gr->last; s++) explain_stage(&sb, pipeline, &pipeline->stages[s]);
    }
    sl_strbuf_append(&sb, "output:");
    for (int i = 0; i < pipeline->noutputs; i++)
        sl_strbuf_printf(&sb, " %s", pipeline->columns[pipeline->outputs[i]].name);
    sl_strbuf_printf(&sb, "\npredicted passes over memory: %d\n", plan.passes);
    int passes = plan.passes;
    sl_plan_free(ctx, &plan);
    char *text = sl_strbuf_take(&sb);
    if (!text) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory writing the plan");
    *text_out = text;
    if (passes_out) *passes_out = passes;
    return SLUICE_OK;
}
