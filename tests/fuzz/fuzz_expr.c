/* fuzz_expr.c — libFuzzer harness for the expression language (core/expr/expr.h). The input's
 * first byte picks the scope and the length of the tile, the rest is an expression over a
 * fixed set of columns of every type, three params, and (scope 1) the l./r. fields of an
 * operator's combine. An expression that parses is compiled and run over a tile of edge
 * values (NaN, infinities, minimum integers, zero divisors, huge shift counts), and every row
 * must equal the one-row slow path (sl_expr_eval_scalar): the tile evaluator and the scalar
 * evaluator are two implementations of one defined semantics. It is also emitted as C. A
 * rejected expression must leave a well-formed diagnostic. */
#include <inttypes.h>
#include <math.h>

#include "fuzz_util.h"
#include "common/context.h"
#include "expr/expr.h"
#include "common/types.h"

#define FZ_TILE_MAX 67

typedef struct fz_name {
    const char *name;
    sl_expr_kind kind;
    int index, side;
    sluice_type type;
} fz_name;

static const fz_name fz_columns[] = {
    {"a", SL_EXPR_COLUMN, 0, 0, SLUICE_I32},  {"b", SL_EXPR_COLUMN, 1, 0, SLUICE_I64},
    {"c", SL_EXPR_COLUMN, 2, 0, SLUICE_U8},   {"d", SL_EXPR_COLUMN, 3, 0, SLUICE_U32},
    {"e", SL_EXPR_COLUMN, 4, 0, SLUICE_U64},  {"f", SL_EXPR_COLUMN, 5, 0, SLUICE_F16},
    {"g", SL_EXPR_COLUMN, 6, 0, SLUICE_F32},  {"h", SL_EXPR_COLUMN, 7, 0, SLUICE_F64},
    {"k", SL_EXPR_COLUMN, 8, 0, SLUICE_BOOL}, {"s", SL_EXPR_COLUMN, 9, 0, SLUICE_I8},
    {"t", SL_EXPR_COLUMN, 10, 0, SLUICE_I16}, {"w", SL_EXPR_COLUMN, 11, 0, SLUICE_U16},
    {"p", SL_EXPR_PARAM, 0, 0, SLUICE_F32},   {"q", SL_EXPR_PARAM, 1, 0, SLUICE_I32},
    {"n", SL_EXPR_PARAM, 2, 0, SLUICE_U64},
};
/* An operator's combine sees only its state fields: here (x: f32, y: i64). */
static const fz_name fz_fields[] = {
    {"l.x", SL_EXPR_FIELD, 0, 0, SLUICE_F32}, {"l.y", SL_EXPR_FIELD, 1, 0, SLUICE_I64},
    {"r.x", SL_EXPR_FIELD, 0, 1, SLUICE_F32}, {"r.y", SL_EXPR_FIELD, 1, 1, SLUICE_I64},
};
#define FZ_NCOLUMNS 12
#define FZ_NPARAMS 3
#define FZ_NFIELDS 2

typedef struct fz_scope {
    const fz_name *names;
    size_t count;
    const char *texts[16];
} fz_scope;

static bool fz_lookup(void *payload, const char *name, sl_expr_kind *kind, int *index, int *side,
                      sluice_type *type) {
    const fz_scope *sc = payload;
    for (size_t i = 0; i < sc->count; i++) {
        if (strcmp(sc->names[i].name, name) == 0) {
            *kind = sc->names[i].kind;
            *index = sc->names[i].index;
            *side = sc->names[i].side;
            *type = sc->names[i].type;
            return true;
        }
    }
    return false;
}

static const char *const *fz_candidates(void *payload, size_t *count) {
    fz_scope *sc = payload;
    *count = sc->count;
    return sc->texts;
}

static void fz_emit_column(void *payload, int column, sl_strbuf *sb) {
    (void)payload;
    sl_fuzz_check(column >= 0 && column < FZ_NCOLUMNS, "emitted column %d", column);
    sl_strbuf_printf(sb, "c%d", column);
}
static void fz_emit_param(void *payload, int param, sl_strbuf *sb) {
    (void)payload;
    sl_fuzz_check(param >= 0 && param < FZ_NPARAMS, "emitted param %d", param);
    sl_strbuf_printf(sb, "p%d", param);
}
static void fz_emit_field(void *payload, int side, int field, sl_strbuf *sb) {
    (void)payload;
    sl_fuzz_check((side == 0 || side == 1) && field >= 0 && field < FZ_NFIELDS,
                  "emitted field %d of side %d", field, side);
    sl_strbuf_printf(sb, "%s_%d", side ? "r" : "l", field);
}

static void fz_visit(void *payload, int column) {
    sl_fuzz_check(column >= 0 && column < FZ_NCOLUMNS, "visited column %d", column);
    (*(int *)payload)++;
}

/* Equal bits, or both NaN (NaN payloads are not part of the semantics). */
static bool fz_same(sluice_type t, const void *x, const void *y) {
    size_t w = sluice_type_size(t);
    if (memcmp(x, y, w) == 0) return true;
    if (!sl_type_is_float(t)) return false;
    sl_value a = sl_value_load(t, x, 0), b = sl_value_load(t, y, 0);
    return isnan(a.f) && isnan(b.f);
}

static void fz_evaluate(sluice_context *ctx, const sl_expr *e, int64_t rows, uint64_t seed,
                        bool fields) {
    sl_expr_program *prog = NULL;
    sluice_status st = sl_expr_compile(ctx, e, FZ_TILE_MAX, &prog);
    if (st != SLUICE_OK) {
        fz_check_diagnostics(ctx, st);
        return;
    }
    /* Column, field and output data, 8 bytes per row whatever the type. */
    static uint64_t colbuf[FZ_NCOLUMNS][FZ_TILE_MAX], fieldbuf[2][FZ_NFIELDS][FZ_TILE_MAX];
    static uint64_t out[FZ_TILE_MAX], one[1];
    const void *colptr[FZ_NCOLUMNS], *fieldptr[2][FZ_NFIELDS];
    for (int i = 0; i < FZ_NCOLUMNS; i++) {
        fz_fill_column(fz_columns[i].type, colbuf[i], rows, seed + (uint64_t)i);
        colptr[i] = colbuf[i];
    }
    for (int s = 0; s < 2; s++) {
        for (int f = 0; f < FZ_NFIELDS; f++) {
            fz_fill_column(fz_fields[f].type, fieldbuf[s][f], rows, seed ^ (uint64_t)(s * 8 + f + 99));
            fieldptr[s][f] = fieldbuf[s][f];
        }
    }
    sl_value params[FZ_NPARAMS];
    for (int i = 0; i < FZ_NPARAMS; i++) {
        uint64_t raw;
        fz_fill_column(fz_columns[FZ_NCOLUMNS + i].type, &raw, 1, seed * 31 + (uint64_t)i);
        params[i] = sl_value_load(fz_columns[FZ_NCOLUMNS + i].type, &raw, 0);
    }
    sl_eval_env env = {colptr, params, {fieldptr[0], fieldptr[1]}};
    if (!fields) env.fields[0] = env.fields[1] = NULL;

    size_t scratch_size = sl_expr_program_scratch_size(prog);
    void *scratch = aligned_alloc(64, (scratch_size + 63) / 64 * 64 + 64);
    if (scratch) {
        memset(out, 0xA5, sizeof out);
        sl_expr_run(prog, &env, rows, scratch, out);
        size_t w = sluice_type_size(e->type);
        for (int64_t r = 0; r < rows; r++) {
            sl_value v = sl_expr_eval_scalar(e, &env, r);
            sl_value_store(e->type, one, 0, v);
            if (!fz_same(e->type, (const uint8_t *)out + (size_t)r * w, one)) {
                char x[64], y[64];
                for (int i = 0; i < FZ_NCOLUMNS; i++) {
                    sl_value_format(sl_value_load(fz_columns[i].type, colbuf[i], r), x, sizeof x);
                    fprintf(stderr, "  %s = %s\n", fz_columns[i].name, x);
                }
                for (int i = 0; i < FZ_NPARAMS; i++)
                    fprintf(stderr, "  %s = %s\n", fz_columns[FZ_NCOLUMNS + i].name,
                            sl_value_format(params[i], x, sizeof x));
                sl_fuzz_fail("row %" PRId64 ": tile gives %s, scalar gives %s (%s)", r,
                             sl_value_format(sl_value_load(e->type, out, r), x, sizeof x),
                             sl_value_format(v, y, sizeof y), sluice_type_name(e->type));
            }
        }
        free(scratch);
    }
    sl_expr_program_free(ctx, prog);
}

int sl_fuzz_expr(const uint8_t *data, size_t size);
int sl_fuzz_expr(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool fields = data[0] & 1;
    int64_t rows = (data[0] >> 1) % FZ_TILE_MAX + 1;
    uint64_t seed = 0;
    for (size_t i = 0; i < size; i++) seed = seed * 131 + data[i];
    data++;
    size--;

    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.cpu_threads = 1;
    co.kernel_cache_dir = "";
    sluice_context *ctx = NULL;
    if (sluice_context_create(&ctx, &co) != SLUICE_OK) return 0;
    fz_scope sc = {fields ? fz_fields : fz_columns,
                   fields ? SL_ARRAY_LEN(fz_fields) : SL_ARRAY_LEN(fz_columns), {0}};
    for (size_t i = 0; i < sc.count; i++) sc.texts[i] = sc.names[i].name;
    sl_expr_scope scope = {fz_lookup, fz_candidates, &sc};

    /* The loader hands the parser a NUL-terminated copy; keep the length exact so reads past
     * it are caught. */
    char *text = malloc(size + 1);
    if (!text) goto done;
    memcpy(text, data, size);
    text[size] = '\0';
    sl_expr *e = NULL;
    sl_srcloc loc = {3, 9};
    sluice_status st = sl_expr_parse(ctx, text, size, loc, &scope, &e);
    if (st != SLUICE_OK) {
        sl_fuzz_check(e == NULL, "failed parse left a tree");
        fz_check_diagnostics(ctx, st);
    } else {
        sl_fuzz_check(e != NULL, "parse succeeded without a tree");
        sl_fuzz_check(sluice_type_size(e->type) > 0, "result type %d", (int)e->type);
        int visited = 0;
        sl_expr_visit_columns(e, fz_visit, &visited);
        sl_fuzz_check(!sl_expr_is_constant(e) || visited == 0,
                      "a constant expression reads %d columns", visited);
        sl_emit_names names = {fz_emit_column, fz_emit_param, fz_emit_field, NULL};
        sl_strbuf sb;
        sl_strbuf_init(&sb, ctx);
        sl_expr_emit_c(e, &names, &sb);
        sl_fuzz_check(sb.failed || (sb.len > 0 && strlen(sb.data) == sb.len),
                      "emitted C is empty or has a NUL inside");
        sl_strbuf_free(&sb);
        fz_evaluate(ctx, e, rows, seed, fields);
        sl_expr_free(ctx, e);
    }
    free(text);
done:
    sluice_context_destroy(ctx);
    return 0;
}

#ifndef SL_FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return sl_fuzz_expr(data, size); }
#endif
