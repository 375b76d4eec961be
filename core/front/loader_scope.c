/* loader_scope.c — the services the pipeline loader (loader.c) and the stage parsers in
 * stages/ share: diagnostics with did-you-mean, key checks and scalar values, the columns in
 * scope and their liveness, adding stages, and parsing an expression against the columns and
 * params in scope. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/context.h"
#include "front/loader_scope.h"
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
const char *ld_did_you_mean(char *buf, size_t cap, const char *word, const char *const *names,
                            size_t count) {
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
        ld_did_you_mean(hint, sizeof hint, k->text, allowed, n);
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
    ld_did_you_mean(hint, sizeof hint, text, options, count);
    sl_strbuf sb;
    sl_strbuf_init(&sb, L->ctx);
    for (size_t i = 0; i < count; i++)
        sl_strbuf_printf(&sb, "%s%s", i ? (i + 1 == count ? " or " : ", ") : "", options[i]);
    ld_error(L, SLUICE_ERR_BAD_VALUE, n->loc, "%s '%s' is not one of %s%s", what, text,
             sb.data ? sb.data : "the allowed values", hint);
    sl_strbuf_free(&sb);
    return -1;
}

/* Indexed by sluice_type: the type list's names. */
static const char *const type_names[] = {
#define LD_TYPE_NAME_(E, N, CT, BT, SIZE, CLS, NPY) [E] = #N,
    SL_TYPE_LIST(LD_TYPE_NAME_)
#undef LD_TYPE_NAME_
};

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
    ld_did_you_mean(hint, sizeof hint, text, type_names, SL_ARRAY_LEN(type_names));
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
size_t ld_candidate_names(sl_loader *L, bool with_params) {
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
    size_t count = ld_candidate_names(L, false);
    char hint[96];
    ld_did_you_mean(hint, sizeof hint, name, L->scope_names, count);
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
    *count = ld_candidate_names(L, true);
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
