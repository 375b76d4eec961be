/* loader.c — builds a checked sluice_pipeline from pipeline YAML (schema v1, DESIGN §2 and
 * pipelines/SCHEMA.md): the top-level keys, params, inputs, outputs, and the services the
 * stage parsers in stages/ share (key checks, columns and their liveness, expressions).
 *
 * The loader reports every problem it finds, not only the first: after a bad stage it goes
 * on with the next. A definition that fails still defines its column, marked poisoned, so
 * later stages that use it neither cascade into "unknown column" nor report type errors
 * computed from a guess; diagnostics of an expression that only failed because it read a
 * poisoned column are withdrawn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "loader.h"
#include "stages/registry.h"

/* ---- diagnostics ----------------------------------------------------------------------- */

bool ld_error(sl_loader *L, sluice_status status, sl_srcloc loc, const char *fmt, ...) {
    if (L->stop) return false;
    /* past the context's cap the diagnostic is not kept (diag.c notes that there were
     * more): checking further would only cost time */
    if (L->ctx->ndiags - L->diag_mark >= SL_MAX_LOAD_DIAGNOSTICS) L->stop = true;
    va_list ap;
    va_start(ap, fmt);
    if (sl_diag_v(L->ctx, status, loc, fmt, ap) == SLUICE_ERR_NO_MEMORY) L->oom = L->stop = true;
    va_end(ap);
    if (status == SLUICE_ERR_LIMIT) L->stop = true;
    return false;
}

bool ld_oom(sl_loader *L) {
    if (!L->oom) sl_error(L->ctx, SLUICE_ERR_NO_MEMORY, "out of memory while loading the pipeline");
    L->oom = L->stop = true;
    return false;
}

/* Withdraws the diagnostics recorded after the first `mark` ones. */
static void diag_truncate(sluice_context *ctx, size_t mark) {
    while (ctx->ndiags > mark) {
        sl_diag_entry *e = &ctx->diags[--ctx->ndiags];
        sl_free(ctx, e->message);
        sl_free(ctx, e->file);
        sl_free(ctx, e->source_line);
    }
}

/* ", did you mean 'x'?" or "" — written into buf. */
static const char *did_you_mean(char *buf, size_t cap, const char *word,
                                const char *const *names, size_t count) {
    const char *s = sl_suggest(word, names, count);
    if (s)
        snprintf(buf, cap, "; did you mean '%s'?", s);
    else
        buf[0] = 0;
    return buf;
}

/* ---- simple values --------------------------------------------------------------------- */

bool ld_check_keys(sl_loader *L, const ld_node *map, const char *const *allowed, size_t n,
                   const char *where) {
    bool ok = true;
    for (int i = 0; i < map->count; i++) {
        const ld_node *k = ld_key(map, i);
        bool known = false;
        for (size_t j = 0; j < n && !known; j++) known = strcmp(k->text, allowed[j]) == 0;
        if (known) continue;
        char hint[96];
        did_you_mean(hint, sizeof hint, k->text, allowed, n);
        if (hint[0]) {
            ld_error(L, SLUICE_ERR_UNKNOWN_KEY, k->loc, "unknown key '%s' in %s%s", k->text,
                     where, hint);
        } else {
            sl_strbuf sb;
            sl_strbuf_init(&sb, L->ctx);
            for (size_t j = 0; j < n; j++)
                sl_strbuf_printf(&sb, "%s%s", j ? ", " : "", allowed[j]);
            ld_error(L, SLUICE_ERR_UNKNOWN_KEY, k->loc, "unknown key '%s' in %s (its keys are: %s)",
                     k->text, where, sb.data ? sb.data : "?");
            sl_strbuf_free(&sb);
        }
        ok = false;
    }
    return ok;
}

const ld_node *ld_require(sl_loader *L, const ld_node *map, sl_srcloc at, const char *name,
                          const char *where) {
    const ld_node *v = ld_get(map, name);
    if (!v) ld_error(L, SLUICE_ERR_MISSING_KEY, at, "%s needs a '%s' key", where, name);
    return v;
}

const char *ld_scalar(sl_loader *L, const ld_node *n, const char *what) {
    if (n->kind == LD_SCALAR && !ld_is_null(n)) return n->text;
    ld_error(L, SLUICE_ERR_BAD_VALUE, n->loc, "%s must be a single value, not %s", what,
             ld_shape(n));
    return NULL;
}

int ld_enum(sl_loader *L, const ld_node *n, const char *what, const char *const *options,
            size_t count) {
    const char *text = ld_scalar(L, n, what);
    if (!text) return -1;
    for (size_t i = 0; i < count; i++)
        if (strcmp(text, options[i]) == 0) return (int)i;
    char hint[96];
    did_you_mean(hint, sizeof hint, text, options, count);
    sl_strbuf sb;
    sl_strbuf_init(&sb, L->ctx);
    for (size_t i = 0; i < count; i++)
        sl_strbuf_printf(&sb, "%s%s", i ? (i + 1 == count ? " or " : ", ") : "", options[i]);
    ld_error(L, SLUICE_ERR_BAD_VALUE, n->loc, "%s '%s' is not one of %s%s", what, text,
             sb.data ? sb.data : "the allowed values", hint);
    sl_strbuf_free(&sb);
    return -1;
}

static const char *const type_names[] = {"bool", "i8",  "i16", "i32", "i64", "u8",
                                          "u16",  "u32", "u64", "f16", "f32", "f64"};

bool ld_type(sl_loader *L, const ld_node *n, sluice_type *out) {
    const char *text = ld_scalar(L, n, "a type");
    if (!text) return false;
    for (size_t i = 0; i < SL_ARRAY_LEN(type_names); i++) {
        if (strcmp(text, type_names[i]) == 0) {
            *out = (sluice_type)i;
            return true;
        }
    }
    char hint[96];
    did_you_mean(hint, sizeof hint, text, type_names, SL_ARRAY_LEN(type_names));
    return ld_error(L, SLUICE_ERR_TYPE, n->loc,
                    "unknown type '%s'%s (types: bool, i8 i16 i32 i64, u8 u16 u32 u64, f16 f32 "
                    "f64)", text, hint);
}

bool ld_int(sl_loader *L, const ld_node *n, const char *what, int64_t lo, int64_t hi,
            int64_t *out) {
    const char *text = ld_scalar(L, n, what);
    if (!text) return false;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || v < lo || v > hi)
        return ld_error(L, SLUICE_ERR_BAD_VALUE, n->loc,
                        "%s must be an integer from %lld to %lld, not '%s'", what, (long long)lo,
                        (long long)hi, text);
    *out = v;
    return true;
}

bool ld_is_identifier(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* ---- columns ----------------------------------------------------------------------------- */

int ld_find_column(const sl_loader *L, const char *name) {
    for (int c = 0; c < L->p->ncolumns; c++)
        if (strcmp(L->p->columns[c].name, name) == 0) return c;
    return -1;
}

static int find_param(const sl_loader *L, const char *name) {
    for (int i = 0; i < L->p->nparams; i++)
        if (strcmp(L->p->params[i].name, name) == 0) return i;
    return -1;
}

/* Fills L->scope_names with the names a did-you-mean may offer: live visible columns, plus
 * params when `with_params`. Returns the count (0 on OOM). */
static size_t candidate_names(sl_loader *L, bool with_params) {
    size_t need = (size_t)L->p->ncolumns + (with_params ? (size_t)L->p->nparams : 0) + 1;
    if (need > L->scope_names_cap) {
        const char **names = sl_realloc(L->ctx, L->scope_names, need * sizeof *names);
        if (!names) return 0;
        L->scope_names = names;
        L->scope_names_cap = need;
    }
    size_t n = 0;
    for (int c = 0; c < L->p->ncolumns; c++)
        if (L->live[c] && !L->p->columns[c].hidden) L->scope_names[n++] = L->p->columns[c].name;
    if (with_params)
        for (int i = 0; i < L->p->nparams; i++) L->scope_names[n++] = L->p->params[i].name;
    return n;
}

int ld_live_column(sl_loader *L, const ld_node *n, const char *what) {
    const char *name = ld_scalar(L, n, what);
    if (!name) return -1;
    int c = ld_find_column(L, name);
    if (c >= 0 && L->poisoned[c]) return -2;
    if (c >= 0 && L->live[c] && !L->p->columns[c].hidden) return c;
    if (c >= 0 && L->p->columns[c].role == SLUICE_ROLE_OFFSETS) {
        ld_error(L, SLUICE_ERR_TYPE, n->loc,
                 "'%s' is an offsets input (segment bounds, not one value per row); it can only "
                 "be used as a segmented_scan's segments", name);
        return -1;
    }
    if (c >= 0 && !L->p->columns[c].hidden && L->dropped_at[c].line > 0) {
        ld_error(L, SLUICE_ERR_UNKNOWN_COLUMN, n->loc,
                 "column '%s' (%s) is no longer live here: the stage at line %d dropped it", name,
                 what, L->dropped_at[c].line);
        return -1;
    }
    size_t count = candidate_names(L, false);
    char hint[96];
    did_you_mean(hint, sizeof hint, name, L->scope_names, count);
    ld_error(L, SLUICE_ERR_UNKNOWN_COLUMN, n->loc, "unknown column '%s' (%s)%s", name, what, hint);
    return -1;
}

int ld_define_column(sl_loader *L, const ld_node *name_node, const char *name, sluice_type type,
                     bool hidden, bool poisoned) {
    sluice_pipeline *p = L->p;
    sl_srcloc loc = name_node->loc;
    if (!hidden && !ld_is_identifier(name)) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, loc,
                 "'%s' is not a valid column name: use letters, digits and '_', starting with "
                 "a letter or '_' (at most 64 characters)", name);
        return -1;
    }
    int prev = ld_find_column(L, name);
    if (prev >= 0) {
        ld_error(L, SLUICE_ERR_DUPLICATE_COLUMN, loc,
                 "column '%s' is already defined (line %d); choose another name", name,
                 p->columns[prev].loc.line);
        return -1;
    }
    int param = find_param(L, name);
    if (param >= 0) {
        ld_error(L, SLUICE_ERR_DUPLICATE_COLUMN, loc,
                 "'%s' is already a param (line %d); a column and a param cannot share a name",
                 name, p->params[param].loc.line);
        return -1;
    }
    if (p->ncolumns >= SL_MAX_COLUMNS) {
        ld_error(L, SLUICE_ERR_LIMIT, loc,
                 "column '%s' would be column %d; a pipeline has at most %d columns", name,
                 p->ncolumns + 1, SL_MAX_COLUMNS);
        return -1;
    }
    if (p->ncolumns == L->columns_cap) {
        int cap = L->columns_cap ? L->columns_cap * 2 : 16;
        sl_column *cols = sl_realloc(L->ctx, p->columns, (size_t)cap * sizeof *cols);
        if (!cols) return ld_oom(L), -1;
        p->columns = cols;
        bool *live = sl_realloc(L->ctx, L->live, (size_t)cap);
        if (!live) return ld_oom(L), -1;
        L->live = live;
        bool *pois = sl_realloc(L->ctx, L->poisoned, (size_t)cap);
        if (!pois) return ld_oom(L), -1;
        L->poisoned = pois;
        sl_srcloc *dropped = sl_realloc(L->ctx, L->dropped_at, (size_t)cap * sizeof *dropped);
        if (!dropped) return ld_oom(L), -1;
        L->dropped_at = dropped;
        L->columns_cap = cap;
    }
    char *copy = sl_strdup(L->ctx, name);
    if (!copy) return ld_oom(L), -1;
    int c = p->ncolumns++;
    p->columns[c] = (sl_column){.name = copy, .type = type, .role = SLUICE_ROLE_DATA,
                                .producer = p->nstages - 1, .hidden = hidden, .loc = loc};
    L->live[c] = true;
    L->poisoned[c] = poisoned;
    L->dropped_at[c] = (sl_srcloc){0, 0};
    return c;
}

void ld_drop_column(sl_loader *L, int c, sl_srcloc stage_loc) {
    if (!L->live[c]) return;
    L->live[c] = false;
    L->dropped_at[c] = stage_loc;
}

/* ---- stages -------------------------------------------------------------------------------- */

sl_stage *ld_add_stage(sl_loader *L, sl_stage_kind kind, const char *kind_name, sl_srcloc loc) {
    sluice_pipeline *p = L->p;
    if (p->nstages >= SL_MAX_STAGES) {
        ld_error(L, SLUICE_ERR_LIMIT, loc, "too many stages: a pipeline has at most %d",
                 SL_MAX_STAGES);
        return NULL;
    }
    if (p->nstages == L->stages_cap) {
        int cap = L->stages_cap ? L->stages_cap * 2 : 8;
        sl_stage *stages = sl_realloc(L->ctx, p->stages, (size_t)cap * sizeof *stages);
        if (!stages) return ld_oom(L), NULL;
        p->stages = stages;
        L->stages_cap = cap;
    }
    sl_stage *s = &p->stages[p->nstages++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->kind_name = kind_name;
    s->loc = loc;
    return s;
}

void ld_snapshot_live(sl_loader *L) {
    for (int i = 0; i < L->p->nstages; i++) {
        sl_stage *s = &L->p->stages[i];
        if (s->live_after) continue;
        /* sized for the final column count at the end of loading (see finish_live) */
        s->live_after = sl_calloc(L->ctx, (size_t)SL_MAX_COLUMNS, 1);
        if (!s->live_after) {
            ld_oom(L);
            return;
        }
        /* no columns yet: live may still be NULL, and memcpy from NULL is undefined */
        if (L->p->ncolumns) memcpy(s->live_after, L->live, (size_t)L->p->ncolumns);
    }
}

/* ---- expressions ----------------------------------------------------------------------- */

static bool scope_lookup(void *payload, const char *name, sl_expr_kind *kind, int *index,
                         int *side, sluice_type *type) {
    sl_loader *L = payload;
    const sl_operator *op = L->scope_operator;
    if (op) {
        if ((name[0] != 'l' && name[0] != 'r') || name[1] != '.') return false;
        for (int f = 0; f < op->nfields; f++) {
            if (strcmp(name + 2, op->field_names[f]) == 0) {
                *kind = SL_EXPR_FIELD;
                *index = f;
                *side = name[0] == 'r';
                *type = op->field_types[f];
                return true;
            }
        }
        return false;
    }
    int c = ld_find_column(L, name);
    if (c >= 0 && L->live[c] && !L->p->columns[c].hidden) {
        if (L->poisoned[c]) L->scope_hit_poison = true;
        *kind = SL_EXPR_COLUMN;
        *index = c;
        *side = 0;
        *type = L->p->columns[c].type;
        return true;
    }
    if (c >= 0 && !L->p->columns[c].hidden && L->scope_dropped < 0 &&
        (L->dropped_at[c].line > 0 || L->p->columns[c].role == SLUICE_ROLE_OFFSETS))
        L->scope_dropped = c;
    int prm = find_param(L, name);
    if (prm >= 0) {
        *kind = SL_EXPR_PARAM;
        *index = prm;
        *side = 0;
        *type = L->p->params[prm].type;
        return true;
    }
    return false;
}

static const char *const *scope_candidates(void *payload, size_t *count) {
    sl_loader *L = payload;
    if (L->scope_operator) {
        *count = (size_t)L->scope_operator->nfields * 2;
        return L->scope_field_names;
    }
    *count = candidate_names(L, true);
    return L->scope_names;
}

/* An expression named a column that exists but is not live (dropped by a stage, or an offsets
 * input): the expression parser only knows it is not in scope, so its unknown-name message
 * gets the reason appended. */
static void explain_dropped(sl_loader *L, size_t mark) {
    sluice_context *ctx = L->ctx;
    const sl_column *col = &L->p->columns[L->scope_dropped];
    for (size_t i = mark; i < ctx->ndiags; i++) {
        sl_diag_entry *d = &ctx->diags[i];
        if (d->pub.status != SLUICE_ERR_UNKNOWN_COLUMN || !strstr(d->message, col->name)) continue;
        sl_strbuf sb;
        sl_strbuf_init(&sb, ctx);
        if (col->role == SLUICE_ROLE_OFFSETS)
            sl_strbuf_printf(&sb, "%s; '%s' is an offsets input (segment bounds, not one value "
                                  "per row): only a segmented_scan's segments can read it",
                             d->message, col->name);
        else
            sl_strbuf_printf(&sb, "%s; column '%s' is no longer live here: the stage at line %d "
                                  "dropped it", d->message, col->name,
                             L->dropped_at[L->scope_dropped].line);
        char *text = sl_strbuf_take(&sb);
        if (!text) return; /* keep the shorter message */
        sl_free(ctx, d->message);
        d->message = text;
        d->pub.message = text;
        return;
    }
}

sl_expr *ld_expr(sl_loader *L, const ld_node *n, bool *poisoned) {
    if (poisoned) *poisoned = false;
    if (n->kind != LD_SCALAR) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, n->loc, "expected an expression, found %s",
                 ld_shape(n));
        return NULL;
    }
    if (ld_is_null(n)) {
        ld_error(L, SLUICE_ERR_EXPR_SYNTAX, n->loc, "empty expression: write one after the ':'");
        return NULL;
    }
    sl_srcloc loc = n->text_loc;
    sl_expr_scope scope = {scope_lookup, scope_candidates, L};
    size_t mark = L->ctx->ndiags;
    L->scope_hit_poison = false;
    L->scope_dropped = -1;
    sl_expr *e = NULL;
    /* a block scalar keeps its leading blank lines; text_loc is the first non-blank one */
    size_t skip = 0;
    while (skip < n->len && n->text[skip] == '\n') skip++;
    sluice_status st = sl_expr_parse(L->ctx, n->text + skip, n->len - skip, loc, &scope, &e);
    if (st == SLUICE_ERR_NO_MEMORY) {
        ld_oom(L);
        return NULL;
    }
    if (L->scope_hit_poison) {
        /* it read a column whose definition already failed: its own verdict is noise */
        if (e) sl_expr_free(L->ctx, e);
        diag_truncate(L->ctx, mark);
        if (poisoned) *poisoned = true;
        return NULL;
    }
    if (st != SLUICE_OK) {
        if (e) sl_expr_free(L->ctx, e);
        if (L->scope_dropped >= 0) explain_dropped(L, mark);
        return NULL;
    }
    return e;
}

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
            ld_error(L, SLUICE_ERR_BAD_VALUE, dn->loc, "default '%s' of param '%s' is not a valid %s",
                     text, k->text, sluice_type_name(t));
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
            did_you_mean(hint, sizeof hint, kind->text, kinds, nkinds);
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
            size_t count = candidate_names(L, false);
            char hint[96];
            did_you_mean(hint, sizeof hint, name, L->scope_names, count);
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

sluice_status sl_pipeline_parse(sluice_context *ctx, const char *text, size_t length,
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
