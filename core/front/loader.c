/* loader.c — builds a checked sluice_pipeline from pipeline YAML (schema v1,
 * pipelines/SCHEMA.md): the top-level keys, params, inputs, stages (each parsed by its stage
 * kind in stages/) and outputs, using the shared services of loader_scope.c.
 *
 * The loader reports every problem it finds, not only the first: after a bad stage it goes
 * on with the next. A definition that fails still defines its column, marked poisoned, so
 * later stages that use it neither cascade into "unknown column" nor report type errors
 * computed from a guess; diagnostics of an expression that only failed because it read a
 * poisoned column are withdrawn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/context.h"
#include "front/loader_operators.h"
#include "stages/registry.h"

/* ---- top-level sections ----------------------------------------------------------------- */

static void parse_params(sl_loader *L, const ld_node *params) {
    if (params->kind != LD_MAPPING) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, params->loc,
                 "params must be a mapping NAME: {type: T, default: V}, not %s", ld_shape(params));
        return;
    }
    sluice_pipeline *p = L->p;
    if (params->count > SL_MAX_PARAMS) {
        ld_error(L, SLUICE_ERR_LIMIT, params->loc, "%d params; a pipeline has at most %d",
                 params->count, SL_MAX_PARAMS);
        return;
    }
    p->params = sl_calloc(L->ctx, (size_t)params->count ? (size_t)params->count : 1,
                          sizeof *p->params);
    if (!p->params) {
        ld_oom(L);
        return;
    }
    static const char *const keys[] = {"type", "default"};
    for (int i = 0; i < params->count && !L->stop; i++) {
        const ld_node *k = ld_key(params, i), *v = ld_val(params, i);
        if (!ld_is_identifier(k->text)) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, k->loc,
                     "'%s' is not a valid param name: use letters, digits and '_', starting "
                     "with a letter or '_'", k->text);
            continue;
        }
        if (v->kind != LD_MAPPING) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, v->loc,
                     "param '%s' must be a mapping {type: T, default: V}, not %s", k->text,
                     ld_shape(v));
            continue;
        }
        char where[96];
        snprintf(where, sizeof where, "param '%s'", k->text);
        ld_check_keys(L, v, keys, SL_ARRAY_LEN(keys), where);
        const ld_node *tn = ld_require(L, v, k->loc, "type", where);
        const ld_node *dn = ld_require(L, v, k->loc, "default", where);
        sluice_type t;
        if (!tn || !ld_type(L, tn, &t) || !dn) continue;
        const char *text = ld_scalar(L, dn, "a param's default");
        if (!text) continue;
        sl_value value;
        if (!sl_value_parse(text, t, &value)) {
            /* A number beyond a float type's range is a number all the same: say so. */
            char *end = NULL;
            double d = strtod(text, &end);
            double bound = t == SLUICE_F16 ? 65504.0 : 3.4e38;
            bool beyond = sl_type_is_float(t) && end != text && *end == '\0' &&
                          (d > bound || d < -bound);
            ld_error(L, SLUICE_ERR_BAD_VALUE, dn->loc, "default '%s' of param '%s' is %s %s",
                     text, k->text, beyond ? "out of range for" : "not a valid",
                     sluice_type_name(t));
            continue;
        }
        sl_param *prm = &p->params[p->nparams];
        prm->name = sl_strdup(L->ctx, k->text);
        prm->default_text = sl_strdup(L->ctx, text);
        prm->type = t;
        prm->default_value = value;
        prm->loc = k->loc;
        p->nparams++;
        if (!prm->name || !prm->default_text) ld_oom(L);
    }
}

static bool parse_input(sl_loader *L, const ld_node *input) {
    if (input->kind != LD_MAPPING || input->count == 0) {
        return ld_error(L, SLUICE_ERR_BAD_VALUE, input->loc,
                        "input must be a mapping of column names to types (e.g. `x: f32`), not %s",
                        ld_shape(input));
    }
    static const char *const keys[] = {"type", "role"};
    static const char *const roles[] = {"data", "offsets"};
    int declared_data = 0;
    for (int i = 0; i < input->count && !L->stop; i++) {
        const ld_node *k = ld_key(input, i), *v = ld_val(input, i);
        sluice_type t = SLUICE_F64;
        int role = 0;
        bool ok = true;
        if (v->kind == LD_MAPPING) {
            char where[96];
            snprintf(where, sizeof where, "input '%s'", k->text);
            ok = ld_check_keys(L, v, keys, SL_ARRAY_LEN(keys), where);
            const ld_node *tn = ld_require(L, v, k->loc, "type", where);
            ok = tn && ld_type(L, tn, &t) && ok;
            const ld_node *rn = ld_get(v, "role");
            if (rn && (role = ld_enum(L, rn, "role", roles, SL_ARRAY_LEN(roles))) < 0) ok = false;
            if (ok && role == 1 && t != SLUICE_I64)
                ok = ld_error(L, SLUICE_ERR_TYPE, tn->loc,
                              "offsets input '%s' must be i64 (64-bit offsets), not %s", k->text,
                              sluice_type_name(t));
        } else {
            ok = ld_type(L, v, &t);
        }
        declared_data += role != 1;
        int c = ld_define_column(L, k, k->text, t, false, !ok);
        if (c < 0) continue;
        L->p->columns[c].producer = -1;
        if (role == 1) {
            L->p->columns[c].role = SLUICE_ROLE_OFFSETS;
            L->live[c] = false; /* describes the batch, not its rows */
        }
    }
    L->p->ninputs = L->p->ncolumns;
    if (declared_data == 0 && !L->oom)
        return ld_error(L, SLUICE_ERR_BAD_VALUE, input->loc,
                        "input declares no data column (only offsets); rows need at least one");
    return true;
}

static void parse_stages(sl_loader *L, const ld_node *stages) {
    if (stages->kind != LD_SEQUENCE || stages->count == 0) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, stages->loc,
                 "stages must be a non-empty list (`- map: …`), not %s", ld_shape(stages));
        return;
    }
    if (stages->count > SL_MAX_STAGES) {
        ld_error(L, SLUICE_ERR_LIMIT, stages->loc, "%d stages; a pipeline has at most %d",
                 stages->count, SL_MAX_STAGES);
        return;
    }
    size_t nkinds;
    const char *const *kinds = sl_stage_names(&nkinds);
    for (int i = 0; i < stages->count && !L->stop; i++) {
        const ld_node *item = stages->items[i];
        if (item->kind != LD_MAPPING || item->count == 0) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, item->loc,
                     "a stage is a mapping with one key, its kind (e.g. `- map: {…}`), not %s",
                     ld_shape(item));
            continue;
        }
        const ld_node *kind = ld_key(item, 0), *body = ld_val(item, 0);
        const sl_stage_desc *desc = sl_stage_find(kind->text);
        if (!desc) {
            char hint[96];
            ld_did_you_mean(hint, sizeof hint, kind->text, kinds, nkinds);
            ld_error(L, SLUICE_ERR_UNKNOWN_STAGE, kind->loc,
                     "unknown stage '%s'%s (stages: map, flag, compact, filter, scan, "
                     "segmented_scan, sort)", kind->text, hint);
            continue;
        }
        if (item->count > 1) {
            const ld_node *extra = ld_key(item, 1);
            ld_error(L, SLUICE_ERR_BAD_VALUE, extra->loc,
                     "a stage has exactly one key, its kind '%s'; if '%s' belongs to it, indent "
                     "it under '%s:'", kind->text, extra->text, kind->text);
            continue;
        }
        if (desc->keys) {
            if (body->kind != LD_MAPPING) {
                ld_error(L, SLUICE_ERR_BAD_VALUE, body->kind == LD_SCALAR ? body->loc : kind->loc,
                         "the %s stage takes a mapping of keys (e.g. `%s: {%s: …}`), not %s",
                         desc->name, desc->name, desc->keys[0], ld_shape(body));
                continue;
            }
            char where[64];
            snprintf(where, sizeof where, "the %s stage", desc->name);
            ld_check_keys(L, body, desc->keys, desc->nkeys, where);
        }
        desc->parse(L, body, kind->loc);
        ld_snapshot_live(L);
    }
}

static void default_outputs(sl_loader *L) {
    sluice_pipeline *p = L->p;
    int n = 0;
    for (int c = 0; c < p->ncolumns; c++) n += L->live[c] && !p->columns[c].hidden;
    p->outputs = sl_calloc(L->ctx, (size_t)(n ? n : 1), sizeof *p->outputs);
    if (!p->outputs) {
        ld_oom(L);
        return;
    }
    for (int c = 0; c < p->ncolumns; c++)
        if (L->live[c] && !p->columns[c].hidden) p->outputs[p->noutputs++] = c;
}

static void parse_output(sl_loader *L, const ld_node *output) {
    sluice_pipeline *p = L->p;
    if (output->kind != LD_SEQUENCE || output->count == 0) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, output->loc,
                 "output must be a non-empty list of column names (e.g. `[id, r2]`), not %s",
                 ld_shape(output));
        return;
    }
    p->outputs = sl_calloc(L->ctx, (size_t)output->count, sizeof *p->outputs);
    if (!p->outputs) {
        ld_oom(L);
        return;
    }
    for (int i = 0; i < output->count; i++) {
        const ld_node *n = output->items[i];
        const char *name = ld_scalar(L, n, "an output column");
        if (!name) continue;
        int c = ld_find_column(L, name);
        if (c >= 0 && L->poisoned[c]) continue;
        if (c < 0 || p->columns[c].hidden) {
            size_t count = ld_candidate_names(L, false);
            char hint[96];
            ld_did_you_mean(hint, sizeof hint, name, L->scope_names, count);
            ld_error(L, SLUICE_ERR_UNKNOWN_OUTPUT, n->loc, "unknown output column '%s'%s", name,
                     hint);
            continue;
        }
        if (!L->live[c]) {
            if (p->columns[c].role == SLUICE_ROLE_OFFSETS)
                ld_error(L, SLUICE_ERR_UNKNOWN_OUTPUT, n->loc,
                         "'%s' is an offsets input, not a column of rows; it cannot be an output",
                         name);
            else
                ld_error(L, SLUICE_ERR_UNKNOWN_OUTPUT, n->loc,
                         "output column '%s' is not live at the end: the stage at line %d "
                         "dropped it", name, L->dropped_at[c].line);
            continue;
        }
        bool repeated = false;
        for (int j = 0; j < p->noutputs; j++) repeated |= p->outputs[j] == c;
        if (repeated) {
            ld_error(L, SLUICE_ERR_BAD_VALUE, n->loc, "output column '%s' is listed twice", name);
            continue;
        }
        p->outputs[p->noutputs++] = c;
    }
}

static void parse_root(sl_loader *L, const ld_node *root) {
    static const char *const keys[] = {"sluice",    "name",   "params", "input",
                                       "operators", "stages", "output", "determinism"};
    if (root->kind != LD_MAPPING) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, root->loc,
                 "a pipeline file is a mapping that starts with `sluice: 1`, not %s",
                 ld_shape(root));
        return;
    }
    const ld_node *version = ld_get(root, "sluice");
    if (!version) {
        ld_error(L, SLUICE_ERR_SCHEMA_VERSION, root->loc,
                 "missing schema version: start the file with `sluice: 1`");
    } else if (version->kind != LD_SCALAR || strcmp(version->text, "1") != 0) {
        ld_error(L, SLUICE_ERR_SCHEMA_VERSION, version->loc,
                 "unsupported schema version '%s': this sluice reads `sluice: 1`",
                 version->kind == LD_SCALAR ? version->text : ld_shape(version));
        return; /* another version's keys mean other things: checking them would mislead */
    }
    ld_check_keys(L, root, keys, SL_ARRAY_LEN(keys), "the pipeline");

    const ld_node *name = ld_require(L, root, root->loc, "name", "a pipeline");
    if (name) {
        const char *text = ld_scalar(L, name, "name");
        if (text && !*text)
            ld_error(L, SLUICE_ERR_BAD_VALUE, name->loc, "name must not be empty");
        else if (text && !(L->p->name = sl_strdup(L->ctx, text)))
            ld_oom(L);
    }
    const ld_node *det = ld_get(root, "determinism");
    if (det) {
        static const char *const modes[] = {"run_to_run"};
        if (ld_enum(L, det, "determinism", modes, 1) == 0)
            L->p->determinism = SL_DETERMINISM_RUN_TO_RUN;
    }
    const ld_node *params = ld_get(root, "params");
    if (params && !L->stop) parse_params(L, params);
    const ld_node *input = ld_require(L, root, root->loc, "input", "a pipeline");
    bool have_input = input && !L->stop && parse_input(L, input);
    const ld_node *ops = ld_get(root, "operators");
    if (ops && !L->stop) ld_parse_operators(L, ops);
    const ld_node *stages = ld_require(L, root, root->loc, "stages", "a pipeline");
    /* without inputs every column reference would be reported: check stages only with them */
    if (stages && have_input && !L->stop) parse_stages(L, stages);
    if (L->stop || !have_input || !stages) return;
    const ld_node *output = ld_get(root, "output");
    if (output)
        parse_output(L, output);
    else
        default_outputs(L);
}

/* Trims every stage's live set to the final column count (columns defined after a stage
 * are not live after it: the snapshot's tail is already false). */
static void finish_live(sl_loader *L) {
    size_t n = (size_t)(L->p->ncolumns ? L->p->ncolumns : 1);
    for (int i = 0; i < L->p->nstages; i++) {
        sl_stage *s = &L->p->stages[i];
        if (!s->live_after) continue;
        bool *shrunk = sl_realloc(L->ctx, s->live_after, n);
        if (shrunk) s->live_after = shrunk; /* a failed shrink keeps the larger block */
    }
}

sluice_status ld_parse_pipeline(sluice_context *ctx, const char *text, size_t length,
                                const char *file, sluice_pipeline **out) {
    if (!ctx || !out) return SLUICE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    size_t mark = ctx->ndiags;
    sluice_pipeline *p = sl_calloc(ctx, 1, sizeof *p);
    if (!p) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory loading a pipeline");
    p->ctx = ctx;
    p->file = sl_strdup(ctx, file ? file : "<string>");
    sl_loader L = {.ctx = ctx, .p = p, .rows_changed_stage = -1, .oom = !p->file,
                   .stop = !p->file, .diag_mark = mark};
    if (L.oom) sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory loading a pipeline");

    ld_node *root = NULL;
    if (!L.oom && ld_yaml_read(ctx, text ? text : "", text ? length : 0, &root) == SLUICE_OK) {
        if (!root)
            ld_error(&L, SLUICE_ERR_SCHEMA_VERSION, (sl_srcloc){1, 1},
                     "the pipeline file is empty: start it with `sluice: 1`");
        else
            parse_root(&L, root);
    }
    ld_node_free(ctx, root);
    if (!L.oom) ld_snapshot_live(&L);
    finish_live(&L);
    sl_free(ctx, L.live);
    sl_free(ctx, L.poisoned);
    sl_free(ctx, L.dropped_at);
    sl_free(ctx, L.scope_names);

    if (ctx->ndiags > mark || L.oom || ctx->diag_oom) {
        sl_pipeline_destroy(p);
        if (ctx->ndiags > mark) return ctx->diags[mark].pub.status;
        return SLUICE_ERR_NO_MEMORY;
    }
    *out = p;
    return SLUICE_OK;
}
