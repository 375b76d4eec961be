/* test_expr.c — the expression language: parsing and precedence, typing rules, the defined
 * results of every operation (division by zero, INT_MIN / -1, shifts past the width,
 * overflow, NaN casts), diagnostics with positions, hostile-input limits, f16 and sort keys,
 * literal parsing and formatting, the vectorised evaluator against the one-row evaluator on
 * random expressions and tile sizes, and emitted C compiled and run against the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/context.h"
#include "expr/expr.h"
#include "sl_ops.h"
#include "testutil.h"

/* ---- a hand-built scope: the columns and params the tests use ---------------------------- */

typedef struct test_name {
    const char *name;
    sl_expr_kind kind;
    sluice_type type;
    int side;
} test_name;

/* column ids are indexes into this table (params and fields too, by kind) */
static const test_name scope_names[] = {
    {"x", SL_EXPR_COLUMN, SLUICE_F32, 0},   {"y", SL_EXPR_COLUMN, SLUICE_F32, 0},
    {"d", SL_EXPR_COLUMN, SLUICE_F64, 0},   {"h", SL_EXPR_COLUMN, SLUICE_F16, 0},
    {"a", SL_EXPR_COLUMN, SLUICE_I32, 0},   {"c", SL_EXPR_COLUMN, SLUICE_I64, 0},
    {"u", SL_EXPR_COLUMN, SLUICE_U32, 0},   {"id", SL_EXPR_COLUMN, SLUICE_U64, 0},
    {"s8", SL_EXPR_COLUMN, SLUICE_I8, 0},   {"s16", SL_EXPR_COLUMN, SLUICE_I16, 0},
    {"b8", SL_EXPR_COLUMN, SLUICE_U8, 0},   {"w16", SL_EXPR_COLUMN, SLUICE_U16, 0},
    {"f", SL_EXPR_COLUMN, SLUICE_BOOL, 0},  {"g", SL_EXPR_COLUMN, SLUICE_BOOL, 0},
    {"radius", SL_EXPR_PARAM, SLUICE_F32, 0}, {"k", SL_EXPR_PARAM, SLUICE_I32, 0},
    {"l.v", SL_EXPR_FIELD, SLUICE_F32, 0},  {"r.v", SL_EXPR_FIELD, SLUICE_F32, 1},
};
#define NSCOPE ((int)(sizeof scope_names / sizeof scope_names[0]))
#define NCOLUMNS 14 /* the first 14 entries are columns */

static bool scope_lookup(void *payload, const char *name, sl_expr_kind *kind, int *index,
                         int *side, sluice_type *type) {
    (void)payload;
    for (int i = 0; i < NSCOPE; i++) {
        if (strcmp(name, scope_names[i].name)) continue;
        *kind = scope_names[i].kind;
        *index = scope_names[i].kind == SL_EXPR_COLUMN ? i
                 : scope_names[i].kind == SL_EXPR_PARAM ? i - NCOLUMNS
                                                        : 0;
        *side = scope_names[i].side;
        *type = scope_names[i].type;
        return true;
    }
    return false;
}

static const char *const *scope_candidates(void *payload, size_t *count) {
    static const char *names[NSCOPE];
    (void)payload;
    for (int i = 0; i < NSCOPE; i++) names[i] = scope_names[i].name;
    *count = NSCOPE;
    return names;
}

static const sl_expr_scope test_scope = {scope_lookup, scope_candidates, NULL};

static sluice_context *ctx;

/* 64-byte aligned memory, as the evaluator's scratch requires (size rounded up as C11 asks). */
static void *aalloc(size_t size) {
    void *p = aligned_alloc(64, (size + 63) & ~(size_t)63);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void setup(void) { ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK); }
static void teardown(void) { sluice_context_destroy(ctx); }

static sl_expr *parse(const char *text) {
    sl_expr *e = NULL;
    sluice_status st = sl_expr_parse(ctx, text, strlen(text), (sl_srcloc){1, 1}, &test_scope, &e);
    if (st != SLUICE_OK) {
        tu_print_diags(ctx);
        ck_abort_msg("'%s' did not parse: %s", text, sluice_status_name(st));
    }
    return e;
}

static sluice_type type_of(const char *text) {
    sl_expr *e = parse(text);
    sluice_type t = e->type;
    sl_expr_free(ctx, e);
    return t;
}

/* Parses a constant expression and returns its value. */
static sl_value const_value(const char *text) {
    sl_expr *e = parse(text);
    ck_assert_msg(sl_expr_is_constant(e), "'%s' should be constant", text);
    sl_value v = sl_expr_eval_scalar(e, NULL, 0);
    sl_expr_free(ctx, e);
    return v;
}

static void count_column(void *payload, int column) { ((int *)payload)[column]++; }

/* ---- parsing, precedence, folding -------------------------------------------------------- */

START_TEST(test_precedence) {
    static const struct {
        const char *text;
        int64_t value;
    } cases[] = {
        {"1 + 2 * 3", 7},          {"(1 + 2) * 3", 9},         {"10 - 4 - 3", 3},
        {"100 / 10 / 5", 2},       {"2 * 3 % 4", 2},           {"1 << 2 + 1", 8},
        {"1 | 2 ^ 3 & 4", 3},      {"-2 * 3", -6},             {"- -3", 3},
        {"~0", -1},                {"7 % -3", 1},              {"-7 / 2", -3},
        {"0x10 + 0XfF", 271},      {"1 + +2", 3},              {"(((5)))", 5},
        {"16 >> 2 >> 1", 2},       {"i64(3.9)", 3},            {"i64(-3.9)", -3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_value v = const_value(cases[i].text);
        ck_assert_msg(v.type == SLUICE_I64, "%s: type %s", cases[i].text, sluice_type_name(v.type));
        ck_assert_msg(v.i == cases[i].value, "%s = %lld, want %lld", cases[i].text,
                      (long long)v.i, (long long)cases[i].value);
    }
    static const struct {
        const char *text;
        bool value;
    } bools[] = {
        {"!true || true", true},     {"true || false && false", true},
        {"1 < 2 == true", true},     {"2 > 1 && 3 >= 3", true},
        {"!(1 != 1)", true},         {"false ? true : false", false},
        {"true ^ true", false},      {"true & false | true", true},
        {"1.5 > 1", true},           {"nan == nan", false},
        {"nan != nan", true},        {"-inf < inf", true},
    };
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        sl_value v = const_value(bools[i].text);
        ck_assert_msg(v.type == SLUICE_BOOL, "%s: type %s", bools[i].text, sluice_type_name(v.type));
        ck_assert_msg((v.u != 0) == bools[i].value, "%s", bools[i].text);
    }
    /* right-associative conditional */
    ck_assert_int_eq(const_value("false ? 1 : true ? 2 : 3").i, 2);
    /* exact folding of constants past i64 */
    sl_value big = const_value("0xffffffffffffffff");
    ck_assert_int_eq(big.type, SLUICE_U64);
    ck_assert(big.u == UINT64_MAX);
    ck_assert(const_value("(1 << 63) - 1").i == INT64_MAX);
    ck_assert_int_eq(const_value("1.5 * 2").type, SLUICE_F64);
    ck_assert(const_value("1.5 * 2").f == 3.0);
    ck_assert(const_value("1 / 2 + 0.5").f == 0.5); /* integer division first, as in C */
    ck_assert(const_value("2.5e-3 * 4e3").f == 10.0);
    ck_assert(const_value(".5 + 1.").f == 1.5);
}
END_TEST

START_TEST(test_tree_shape) {
    sl_expr *e = parse("x*x + y*y < radius*radius");
    ck_assert_int_eq(e->kind, SL_EXPR_BINARY);
    ck_assert_int_eq(e->op, SL_OP_LT);
    ck_assert_int_eq(e->a->op, SL_OP_ADD);
    ck_assert_int_eq(e->a->a->op, SL_OP_MUL);
    ck_assert_int_eq(e->a->a->a->kind, SL_EXPR_COLUMN);
    ck_assert_int_eq(e->a->a->a->index, 0);
    ck_assert_int_eq(e->b->a->kind, SL_EXPR_PARAM);
    ck_assert(!sl_expr_is_constant(e));
    ck_assert(sl_expr_is_constant(e->b));
    sl_expr_free(ctx, e);

    /* a cast to the operand's own type adds no node */
    e = parse("f32(x)");
    ck_assert_int_eq(e->kind, SL_EXPR_COLUMN);
    sl_expr_free(ctx, e);

    /* every column read is visited, in order */
    e = parse("x + f32(a) * f32(id) + x");
    int seen[NCOLUMNS] = {0};
    sl_expr_visit_columns(e, count_column, seen);
    ck_assert_int_eq(seen[0], 2);
    ck_assert_int_eq(seen[4], 1);
    ck_assert_int_eq(seen[7], 1);
    ck_assert_int_eq(seen[1], 0);
    sl_expr_free(ctx, e);

    /* the loader's helpers: literal nodes and casts */
    sl_value one = {.type = SLUICE_I64, .i = 1};
    sl_expr *lit = sl_expr_new_literal(ctx, one);
    ck_assert_ptr_nonnull(lit);
    lit = sl_expr_cast_to(ctx, lit, SLUICE_F32);
    ck_assert_int_eq(lit->kind, SL_EXPR_LITERAL); /* folded, not wrapped */
    ck_assert_int_eq(lit->type, SLUICE_F32);
    ck_assert(sl_expr_eval_scalar(lit, NULL, 0).f == 1.0);
    sl_expr_free(ctx, lit);
    e = parse("a");
    ck_assert_ptr_eq(sl_expr_cast_to(ctx, e, SLUICE_I32), e);
    e = sl_expr_cast_to(ctx, e, SLUICE_I64);
    ck_assert_int_eq(e->kind, SL_EXPR_CAST);
    ck_assert_int_eq(e->type, SLUICE_I64);
    sl_expr_free(ctx, e);
}
END_TEST

/* ---- typing ------------------------------------------------------------------------------ */

START_TEST(test_typing_rules) {
    static const struct {
        const char *text;
        sluice_type type;
    } cases[] = {
        {"x > 0", SLUICE_BOOL},        {"x + 1", SLUICE_F32},       {"x * 0.5", SLUICE_F32},
        {"id & 0xff", SLUICE_U64},     {"s8 + s8", SLUICE_I32},     {"b8 * w16", SLUICE_I32},
        {"h * h", SLUICE_F32},         {"h", SLUICE_F16},           {"-b8", SLUICE_I32},
        {"c + u", SLUICE_I64},         {"u + id", SLUICE_U64},      {"a + c", SLUICE_I64},
        {"x + d", SLUICE_F64},         {"a + x", SLUICE_F32},       {"a * 0.5", SLUICE_F64},
        {"id + x", SLUICE_F32},        {"1", SLUICE_I64},           {"1.5", SLUICE_F64},
        {"f ? b8 : 0", SLUICE_U8},     {"f ? b8 : s8", SLUICE_I32}, {"f ? h : h", SLUICE_F16},
        {"f ? x : 1.5", SLUICE_F32},   {"f ? a : 1.5", SLUICE_F64}, {"f & g", SLUICE_BOOL},
        {"b8 << 3", SLUICE_I32},       {"id >> a", SLUICE_U64},     {"1 << a", SLUICE_I64},
        {"abs(s8)", SLUICE_I32},       {"abs(x)", SLUICE_F32},      {"min(x, d)", SLUICE_F64},
        {"max(a, 0)", SLUICE_I32},     {"sqrt(a)", SLUICE_F64},     {"sqrt(h)", SLUICE_F32},
        {"exp(x)", SLUICE_F32},        {"log(d)", SLUICE_F64},      {"floor(a)", SLUICE_I32},
        {"ceil(h)", SLUICE_F32},       {"isnan(h)", SLUICE_BOOL},   {"isinf(d)", SLUICE_BOOL},
        {"u8(x)", SLUICE_U8},          {"bool(a)", SLUICE_BOOL},    {"f16(d)", SLUICE_F16},
        {"b8 == 300", SLUICE_BOOL},    {"f == true", SLUICE_BOOL},  {"~u", SLUICE_U32},
        {"l.v * r.v", SLUICE_F32},     {"radius * radius", SLUICE_F32}, {"k + 1", SLUICE_I32},
        {"0xffffffffffffffff", SLUICE_U64}, {"id == 0xffffffffffffffff", SLUICE_BOOL},
        /* unary + promotes exactly as unary - does (C's integer promotions; f16 computes as
           f32); on a constant it leaves the constant untyped */
        {"+s8", SLUICE_I32},           {"-s8", SLUICE_I32},         {"+b8", SLUICE_I32},
        {"+w16", SLUICE_I32},          {"+s16", SLUICE_I32},        {"+h", SLUICE_F32},
        {"-h", SLUICE_F32},            {"+a", SLUICE_I32},          {"+u", SLUICE_U32},
        {"+id", SLUICE_U64},           {"+x", SLUICE_F32},          {"+d", SLUICE_F64},
        {"+1", SLUICE_I64},            {"b8 + +1", SLUICE_I32},     {"f ? +b8 : 0", SLUICE_I32},
        /* a constant shift count is typed as a lone constant: i64, u64 from 2^63 on */
        {"a << 18446744073709551615", SLUICE_I32}, {"id >> 9223372036854775808", SLUICE_U64},
        {"b8 << 9223372036854775807", SLUICE_I32}, {"1 << 18446744073709551615", SLUICE_I64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sluice_type t = type_of(cases[i].text);
        ck_assert_msg(t == cases[i].type, "%s: got %s, want %s", cases[i].text,
                      sluice_type_name(t), sluice_type_name(cases[i].type));
    }
}
END_TEST

/* Parses text placed at line 2, column 9 of a pipeline file, expects failure with `status`
 * at column 9 + `offset`, and a message containing `fragment`. */
static void expect_error(const char *text, sluice_status status, int offset, const char *fragment) {
    static const char file_text[] = "stages:\n  - map: {v: <expression here>}\n";
    sl_diag_clear(ctx);
    sl_diag_set_source(ctx, "p.yaml", file_text, sizeof file_text - 1);
    sl_expr *e = (sl_expr *)1;
    sluice_status st = sl_expr_parse(ctx, text, strlen(text), (sl_srcloc){2, 9}, &test_scope, &e);
    sl_diag_clear_source(ctx);
    ck_assert_ptr_null(e);
    ck_assert_msg(st == status, "'%s': got %s, want %s", text, sluice_status_name(st),
                  sluice_status_name(status));
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->status, status);
    ck_assert_int_eq(d->line, 2);
    ck_assert_msg(d->column == 9 + offset, "'%s': column %d, want %d (%s)", text, d->column,
                  9 + offset, d->message);
    ck_assert_msg(strstr(d->message, fragment), "'%s': message '%s' lacks '%s'", text, d->message,
                  fragment);
    sl_diag_clear(ctx);
}

START_TEST(test_syntax_errors) {
    expect_error("x + * y", SLUICE_ERR_EXPR_SYNTAX, 4, "expected an operand");
    expect_error("x +", SLUICE_ERR_EXPR_SYNTAX, 3, "after '+'");
    expect_error("(x + y", SLUICE_ERR_EXPR_SYNTAX, 6, "expected ')'");
    expect_error("x + y)", SLUICE_ERR_EXPR_SYNTAX, 5, "unbalanced ')'");
    expect_error("x y", SLUICE_ERR_EXPR_SYNTAX, 2, "missing operator");
    expect_error("x = 1", SLUICE_ERR_EXPR_SYNTAX, 2, "'=='");
    expect_error("x @ 1", SLUICE_ERR_EXPR_SYNTAX, 2, "unexpected character '@'");
    expect_error("", SLUICE_ERR_EXPR_SYNTAX, 0, "empty");
    expect_error("   ", SLUICE_ERR_EXPR_SYNTAX, 0, "empty");
    expect_error("f ? x", SLUICE_ERR_EXPR_SYNTAX, 5, "expected ':'");
    expect_error("1.5f", SLUICE_ERR_EXPR_SYNTAX, 3, "no suffix");
    expect_error("0x", SLUICE_ERR_EXPR_SYNTAX, 0, "hex digits");
    expect_error("1e+", SLUICE_ERR_EXPR_SYNTAX, 0, "exponent");
    expect_error("99999999999999999999", SLUICE_ERR_EXPR_SYNTAX, 0, "64 bits");
    expect_error("min(x)", SLUICE_ERR_EXPR_SYNTAX, 0, "takes 2 arguments, got 1");
    expect_error("abs(x, y)", SLUICE_ERR_EXPR_SYNTAX, 0, "takes 1 argument, got 2");
    expect_error("sqr(x)", SLUICE_ERR_EXPR_SYNTAX, 0, "did you mean 'sqrt'");
    expect_error("x + sqrt", SLUICE_ERR_EXPR_SYNTAX, 4, "is a function");
    expect_error("min(x, y", SLUICE_ERR_EXPR_SYNTAX, 8, "to close the call");
    expect_error("x \xc3\xa9", SLUICE_ERR_EXPR_SYNTAX, 2, "plain ASCII");
}
END_TEST

START_TEST(test_name_errors) {
    expect_error("xx > 1", SLUICE_ERR_UNKNOWN_COLUMN, 0, "did you mean 'x'");
    expect_error("x + raduis", SLUICE_ERR_UNKNOWN_COLUMN, 4, "did you mean 'radius'");
    expect_error("l.w + 1", SLUICE_ERR_UNKNOWN_COLUMN, 0, "unknown name 'l.w'");
    expect_error("zzzzzz", SLUICE_ERR_UNKNOWN_COLUMN, 0, "not a column or param");
}
END_TEST

START_TEST(test_type_errors) {
    expect_error("a + u", SLUICE_ERR_TYPE, 2, "mixes signed i32 and unsigned u32");
    expect_error("c < id", SLUICE_ERR_TYPE, 2, "mixes signed i64 and unsigned u64");
    expect_error("f + 1", SLUICE_ERR_TYPE, 2, "bool");
    expect_error("f + a", SLUICE_ERR_TYPE, 2, "needs numbers, not bool and i32");
    expect_error("x && f", SLUICE_ERR_TYPE, 2, "the left operand is f32");
    expect_error("!x", SLUICE_ERR_TYPE, 0, "'!' needs a bool");
    expect_error("~x", SLUICE_ERR_TYPE, 0, "'~' needs an integer, not f32");
    expect_error("-f", SLUICE_ERR_TYPE, 0, "use ! for bool");
    expect_error("+f", SLUICE_ERR_TYPE, 0, "unary '+' needs a number, not bool");
    expect_error("x & 1", SLUICE_ERR_TYPE, 2, "two integers or two bools");
    expect_error("x << 1", SLUICE_ERR_TYPE, 2, "needs integers");
    expect_error("f < g", SLUICE_ERR_TYPE, 2, "does not order bools");
    expect_error("f == 1", SLUICE_ERR_TYPE, 2, "compare a bool with true or false");
    expect_error("f == a", SLUICE_ERR_TYPE, 2, "a bool compares only with a bool");
    expect_error("x ? 1 : 2", SLUICE_ERR_TYPE, 2, "condition before '?' must be bool");
    expect_error("f ? g : 1", SLUICE_ERR_TYPE, 2, "both be bool or both numbers");
    expect_error("isnan(a)", SLUICE_ERR_TYPE, 0, "needs a float, not i32");
    expect_error("sqrt(f)", SLUICE_ERR_TYPE, 0, "needs a number, not bool");
    expect_error("id == -1", SLUICE_ERR_TYPE, 6, "constant -1 does not fit in u64");
    expect_error("u & ~0xff", SLUICE_ERR_TYPE, 4, "does not fit in u32");
    expect_error("x > 1e39", SLUICE_ERR_TYPE, 4, "overflows f32");
    expect_error("a + 3000000000", SLUICE_ERR_TYPE, 4, "does not fit in i32");
    expect_error("0xffffffffffffffff * 2", SLUICE_ERR_TYPE, 19, "overflows 64 bits");
    expect_error("1.5 & 1", SLUICE_ERR_TYPE, 4, "needs integers");
}
END_TEST

/* Parses `open` `depth` times, then `operand`, then `close` `depth` times; returns the status
 * and leaves no tree and no diagnostics behind. */
static sluice_status parse_repeated(const char *open, const char *operand, const char *close,
                                    int depth) {
    size_t cap = (size_t)depth * (strlen(open) + strlen(close)) + strlen(operand) + 1;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    size_t pos = 0;
    for (int i = 0; i < depth; i++) pos += (size_t)sprintf(text + pos, "%s", open);
    pos += (size_t)sprintf(text + pos, "%s", operand);
    for (int i = 0; i < depth; i++) pos += (size_t)sprintf(text + pos, "%s", close);
    sl_expr *e = NULL;
    sluice_status st = sl_expr_parse(ctx, text, pos, (sl_srcloc){1, 1}, &test_scope, &e);
    ck_assert(st == SLUICE_OK ? e != NULL : e == NULL);
    sl_expr_free(ctx, e);
    free(text);
    sl_diag_clear(ctx);
    return st;
}

START_TEST(test_limits) {
    /* length: "x" and spaces, one byte past the limit */
    ck_assert_int_eq(parse_repeated("", "x", " ", SL_EXPR_MAX_LENGTH), SLUICE_ERR_LIMIT);
    /* nesting through parentheses, unary operators, operator chains and calls: refused with
     * LIMIT, never a stack overflow, at depths far past the limit */
    static const struct {
        const char *open, *operand, *close;
    } shapes[] = {{"(", "x", ")"}, {"-", "x", ""}, {"!", "f", ""}, {"abs(", "x", ")"}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        ck_assert_int_eq(parse_repeated(shapes[s].open, shapes[s].operand, shapes[s].close, 20000),
                         SLUICE_ERR_LIMIT);
    /* a long flat chain builds a deep tree: limited too, and below the limit it is fine */
    ck_assert_int_eq(parse_repeated("x + ", "x", "", 1000), SLUICE_ERR_LIMIT);
    ck_assert_int_eq(parse_repeated("x + ", "x", "", 200), SLUICE_OK);
    /* an expression that is not NUL-terminated is read only up to its length */
    const char buf[] = {'x', ' ', '>', ' ', '0', '0', '@'};
    sl_expr *e = NULL;
    ck_assert_int_eq(sl_expr_parse(ctx, buf, 5, (sl_srcloc){1, 1}, &test_scope, &e), SLUICE_OK);
    sl_expr_free(ctx, e);
    /* bad arguments */
    ck_assert_int_eq(sl_expr_parse(ctx, "x", 1, (sl_srcloc){1, 1}, &test_scope, NULL),
                     SLUICE_ERR_INVALID_ARGUMENT);
}
END_TEST

/* ---- a table of column data shared by the evaluation tests ------------------------------- */

#define MAXROWS 4097

typedef struct table {
    void *columns[NCOLUMNS];
    float *fields[2];
    const void *column_ptrs[NCOLUMNS];
    const void *field_ptrs[2][1];
    sl_value params[2];
    sl_eval_env env;
} table;

static void table_init(table *t) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < NCOLUMNS; i++) {
        t->columns[i] = aalloc(MAXROWS * 8);
        memset(t->columns[i], 0, MAXROWS * 8);
        t->column_ptrs[i] = t->columns[i];
    }
    for (int s = 0; s < 2; s++) {
        t->fields[s] = aalloc(MAXROWS * sizeof(float));
        memset(t->fields[s], 0, MAXROWS * sizeof(float));
        t->field_ptrs[s][0] = t->fields[s];
    }
    t->params[0] = (sl_value){.type = SLUICE_F32, .f = 2.5};
    t->params[1] = (sl_value){.type = SLUICE_I32, .i = -3};
    t->env.columns = t->column_ptrs;
    t->env.params = t->params;
    t->env.fields[0] = t->field_ptrs[0];
    t->env.fields[1] = t->field_ptrs[1];
}

static void table_free(table *t) {
    for (int i = 0; i < NCOLUMNS; i++) free(t->columns[i]);
    free(t->fields[0]);
    free(t->fields[1]);
}

/* Same value: same type and bits, any NaN equal to any NaN. The sign and payload of a NaN
 * that arithmetic produces are not specified (x86 propagates an operand's NaN and a vectorised
 * loop may swap operands; CUDA produces one canonical NaN), so they are not compared. */
static bool same_value(sl_value a, sl_value b) {
    if (a.type != b.type) return false;
    if (sl_type_is_float(a.type)) {
        if (isnan(a.f) || isnan(b.f)) return isnan(a.f) && isnan(b.f);
        return sl_f64_bits(a.f) == sl_f64_bits(b.f);
    }
    return a.u == b.u;
}

/* Evaluates text over the first `rows` rows with the compiled program and checks every row
 * against the one-row evaluator; returns the program's value at row `row`. */
static sl_value eval_at(table *t, const char *text, int64_t rows, int64_t row) {
    sl_expr *e = parse(text);
    sl_expr_program *p = NULL;
    ck_assert_int_eq(sl_expr_compile(ctx, e, rows, &p), SLUICE_OK);
    void *scratch = aalloc(sl_expr_program_scratch_size(p) + 64);
    double *out = aalloc((size_t)rows * 8 + 64);
    sl_expr_run(p, &t->env, rows, scratch, out);
    sl_value want = sl_value_load(e->type, out, row);
    for (int64_t r = 0; r < rows; r++) {
        sl_value v = sl_value_load(e->type, out, r), s = sl_expr_eval_scalar(e, &t->env, r);
        char b1[64], b2[64];
        ck_assert_msg(same_value(v, s), "%s row %lld: program %s, scalar %s", text, (long long)r,
                      sl_value_format(v, b1, 64), sl_value_format(s, b2, 64));
    }
    free(scratch);
    free(out);
    sl_expr_program_free(ctx, p);
    sl_expr_free(ctx, e);
    return want;
}

#define SET_ROWS(t, col, T, ...)                                                              \
    do {                                                                                      \
        const T v_[] = {__VA_ARGS__};                                                         \
        memcpy((t)->columns[col], v_, sizeof v_);                                             \
    } while (0)

static void edge_table(table *t) {
    table_init(t);
    SET_ROWS(t, 0, float, NAN, INFINITY, -INFINITY, 3e9f, -0.5f);
    SET_ROWS(t, 1, float, 1.0f, 0.0f, -0.0f, 2.0f, 1e-45f);
    SET_ROWS(t, 2, double, NAN, 1e300, -1e300, 9223372036854775808.0, 4294967296.5);
    SET_ROWS(t, 3, uint16_t, 0x7e00, 0x7c00, 0xfc00, 0x3c00, 0x0001);
    SET_ROWS(t, 4, int32_t, INT32_MIN, INT32_MAX, -7, 7, 0);
    SET_ROWS(t, 5, int64_t, INT64_MIN, INT64_MAX, -7, 7, 0);
    SET_ROWS(t, 6, uint32_t, 0, UINT32_MAX, 7, 1, 5);
    SET_ROWS(t, 7, uint64_t, 0, UINT64_MAX, 1ull << 63, 1, 12345);
    SET_ROWS(t, 8, int8_t, -128, 127, -1, 1, 0);
    SET_ROWS(t, 9, int16_t, -32768, 32767, -1, 1, 0);
    SET_ROWS(t, 10, uint8_t, 0, 255, 1, 2, 3);
    SET_ROWS(t, 11, uint16_t, 0, 65535, 1, 2, 3);
    SET_ROWS(t, 12, uint8_t, 0, 1, 2, 1, 0); /* a byte of 2 reads as true */
    SET_ROWS(t, 13, uint8_t, 1, 1, 1, 0, 0);
}

#define CHECK_I(text, row, want) ck_assert_msg(eval_at(&t, text, 5, row).i == (int64_t)(want), "%s row %d", text, row)
#define CHECK_U(text, row, want) ck_assert_msg(eval_at(&t, text, 5, row).u == (uint64_t)(want), "%s row %d", text, row)
/* a NaN result is checked as NaN only: its sign is the platform's (x86 makes 0/0 negative) */
#define CHECK_F(text, row, want)                                                              \
    do {                                                                                      \
        sl_value got_ = eval_at(&t, text, 5, row);                                            \
        double want_ = (want);                                                                \
        if (isnan(want_)) ck_assert_msg(isnan(got_.f), "%s row %d: not NaN", text, row);      \
        else ck_assert_msg(same_value(got_, (sl_value){.type = type_of(text), .f = want_}),    \
                           "%s row %d: %g, want %g", text, row, got_.f, want_);               \
    } while (0)

START_TEST(test_defined_integer_results) {
    table t;
    edge_table(&t);
    /* division and remainder */
    CHECK_I("a / -1", 0, INT32_MIN);
    CHECK_I("a % -1", 0, 0);
    CHECK_I("c / -1", 0, INT64_MIN);
    CHECK_I("c % -1", 0, 0);
    for (int r = 0; r < 5; r++) {
        CHECK_I("a / 0", r, 0);
        CHECK_I("c / (c - c)", r, 0);
        CHECK_U("u / 0", r, 0);
    }
    CHECK_I("a % 0", 2, -7); /* x % 0 == x keeps a == (a/b)*b + a%b */
    CHECK_U("id % 0", 4, 12345);
    CHECK_I("a % 3", 2, -1); /* truncating, sign of the dividend */
    CHECK_I("a / 2", 2, -3);
    /* overflow wraps */
    CHECK_I("a + 1", 1, INT32_MIN);
    CHECK_I("a * 2", 1, -2);
    CHECK_I("-a", 0, INT32_MIN);
    CHECK_I("abs(a)", 0, INT32_MIN);
    CHECK_I("abs(c)", 2, 7);
    CHECK_I("c - 1", 0, INT64_MAX);
    CHECK_U("u - 1", 0, UINT32_MAX);
    CHECK_U("id + 1", 1, 0);
    CHECK_U("-u", 3, UINT32_MAX);
    CHECK_I("s8 + s8", 0, -256); /* promoted to i32: no wrap at 8 bits */
    CHECK_I("b8 << 8", 1, 65280);
    /* shifts past the width */
    CHECK_I("a << 32", 3, 0);
    CHECK_I("a << 31", 3, INT32_MIN);
    CHECK_I("a >> 40", 2, -1);
    CHECK_I("a >> 40", 3, 0);
    CHECK_I("a >> -1", 2, -1);
    CHECK_I("a << -1", 3, 0);
    CHECK_I("a >> 1", 2, -4); /* arithmetic */
    CHECK_U("u >> 32", 1, 0);
    CHECK_U("id << 64", 1, 0);
    CHECK_U("id >> 63", 2, 1);
    CHECK_I("c >> 63", 0, -1);
    CHECK_U("id << id", 3, 2);       /* count from a column */
    CHECK_U("u << id", 1, 0);        /* count 2^64-1 */
    CHECK_I("1 << a", 3, 128);
    CHECK_I("a << k", 3, 0);         /* negative count from a param */
    /* constant counts of 2^63 and more (typed u64) are counts past the width */
    CHECK_I("a << 18446744073709551615", 3, 0);
    CHECK_I("a >> 18446744073709551615", 2, -1);
    CHECK_I("a >> 18446744073709551615", 3, 0);
    CHECK_U("id << 9223372036854775808", 1, 0);
    CHECK_U("id >> 18446744073709551615", 1, 0);
    CHECK_I("c >> 9223372036854775808", 0, -1);
    CHECK_I("c << 9223372036854775807", 1, 0);
    CHECK_I("1 << 18446744073709551615", 0, 0); /* folded at load time, same rule */
    /* unary + promotes: +s8 is the i32 value, and arithmetic on it does not wrap at 8 bits */
    CHECK_I("+s8", 0, -128);
    CHECK_I("+s8 * 2", 1, 254);
    CHECK_I("+b8", 1, 255);
    table_free(&t);
}
END_TEST

START_TEST(test_defined_cast_and_float_results) {
    table t;
    edge_table(&t);
    /* float -> integer saturates, NaN -> 0 */
    CHECK_I("i32(x)", 0, 0);
    CHECK_I("i32(x)", 1, INT32_MAX);
    CHECK_I("i32(x)", 2, INT32_MIN);
    CHECK_I("i32(x)", 3, INT32_MAX);
    CHECK_I("i32(x)", 4, 0);
    CHECK_U("u32(x)", 3, 3000000000u);
    CHECK_U("u32(x)", 2, 0);
    CHECK_U("u8(x)", 4, 0);
    CHECK_I("i64(d)", 3, INT64_MAX);
    CHECK_I("i64(d)", 2, INT64_MIN);
    CHECK_U("u32(d)", 4, UINT32_MAX);
    CHECK_U("u64(d)", 3, 1ull << 63);
    CHECK_U("u64(d)", 0, 0);
    CHECK_I("i16(h)", 1, 32767);
    CHECK_I("i32(h)", 4, 0);
    /* integer -> integer wraps */
    CHECK_I("i8(a)", 1, -1);
    CHECK_U("u8(a)", 0, 0);
    CHECK_U("u16(s8)", 0, 65408);
    CHECK_I("i32(id)", 1, -1);
    /* integer -> float rounds to nearest */
    CHECK_F("f32(id)", 1, 18446744073709551616.0);
    CHECK_F("f32(c)", 1, 9223372036854775808.0);
    CHECK_F("f32(a)", 1, 2147483648.0);
    CHECK_F("f64(c)", 0, -9223372036854775808.0);
    /* narrowing floats */
    CHECK_F("f32(d)", 1, INFINITY);
    CHECK_F("f32(d)", 4, 4294967296.0);
    CHECK_F("f32(h)", 4, ldexp(1.0, -24));
    CHECK_F("h * 2", 4, ldexp(1.0, -23));
    ck_assert_int_eq(sl_f32_to_f16((float)eval_at(&t, "f32(f16(x))", 5, 3).f), 0x7c00);
    /* bool casts: non-zero is true, NaN is true, -0 is false */
    CHECK_U("bool(x)", 0, 1);
    CHECK_U("bool(y)", 2, 0);
    CHECK_U("bool(h)", 0, 1);
    CHECK_U("bool(a)", 4, 0);
    CHECK_I("i32(f)", 2, 1);
    CHECK_F("f32(f)", 2, 1.0);
    /* bool bytes other than 0/1 */
    CHECK_U("f && g", 2, 1);
    CHECK_U("!f", 2, 0);
    CHECK_U("f == g", 2, 1);
    CHECK_U("f ^ g", 2, 0);
    CHECK_U("f ? true : false", 2, 1);
    /* IEEE float results */
    CHECK_F("x / y", 1, INFINITY);
    CHECK_F("y / y", 1, NAN);
    CHECK_F("min(x, y)", 0, 1.0);
    CHECK_F("max(x, y)", 0, 1.0);
    CHECK_F("min(y, x)", 0, 1.0);
    CHECK_F("sqrt(x)", 4, NAN);
    CHECK_F("abs(y)", 2, 0.0);
    CHECK_F("-y", 1, -0.0);
    CHECK_F("x % y", 3, fmodf(3e9f, 2.0f));
    CHECK_F("floor(x)", 4, -1.0);
    CHECK_F("ceil(x)", 4, -0.0);
    CHECK_U("isnan(x)", 0, 1);
    CHECK_U("isnan(x)", 1, 0);
    CHECK_U("isinf(x)", 2, 1);
    CHECK_U("isnan(h)", 0, 1);
    CHECK_U("isinf(h)", 1, 1);
    CHECK_U("x > 0", 0, 0);
    CHECK_U("x != x", 0, 1);
    CHECK_U("x * 0 == 0", 1, 0);
    table_free(&t);
}
END_TEST

START_TEST(test_fields_and_params) {
    table t;
    table_init(&t);
    for (int i = 0; i < 8; i++) {
        t.fields[0][i] = (float)i;
        t.fields[1][i] = 0.5f;
        ((float *)t.columns[0])[i] = (float)i;
    }
    ck_assert(eval_at(&t, "l.v * r.v + l.v", 8, 6).f == 9.0);
    ck_assert(eval_at(&t, "x < radius", 8, 2).u == 1);
    ck_assert(eval_at(&t, "x < radius", 8, 3).u == 0);
    ck_assert(eval_at(&t, "k * 2 + a", 8, 0).i == -6);
    ck_assert(eval_at(&t, "x > 1 ? x : radius", 8, 0).f == 2.5);
    ck_assert(eval_at(&t, "radius > 2 ? x : 0", 8, 5).f == 5.0); /* per-run condition */
    ck_assert(eval_at(&t, "radius * 2", 8, 7).f == 5.0);          /* constant over rows */
    ck_assert(eval_at(&t, "x", 8, 4).f == 4.0);                   /* a bare column */
    ck_assert(eval_at(&t, "7", 8, 4).i == 7);                     /* a bare literal */
    table_free(&t);
}
END_TEST

/* A bool column byte other than 0 reads as true, and every bool an expression computes is the
 * byte 0 or 1: also a bare column (`m: k` copies nothing raw) and a conditional's branches.
 * Column f holds 0 1 2 1 0 (a byte of 2 at row 2), g holds 1 1 1 0 0. */
START_TEST(test_bool_reads) {
    static const struct {
        const char *text;
        uint8_t want[5];
    } cases[] = {
        {"f", {0, 1, 1, 1, 0}},          {"bool(f)", {0, 1, 1, 1, 0}},
        {"g ? f : g", {0, 1, 1, 0, 0}},  {"f ? f : false", {0, 1, 1, 1, 0}},
        {"f ? g : f", {0, 1, 1, 0, 0}},  {"f == g", {0, 1, 1, 0, 1}},
        {"f ^ g", {1, 0, 0, 1, 0}},      {"f & g", {0, 1, 1, 0, 0}},
        {"!f", {1, 0, 0, 0, 1}},         {"f && g", {0, 1, 1, 0, 0}},
        {"u8(f)", {0, 1, 1, 1, 0}},      {"f ? b8 : 9", {9, 255, 1, 2, 9}},
    };
    table t;
    edge_table(&t);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_expr *e = parse(cases[i].text);
        sl_expr_program *p = NULL;
        ck_assert_int_eq(sl_expr_compile(ctx, e, 5, &p), SLUICE_OK);
        void *scratch = aalloc(sl_expr_program_scratch_size(p) + 64);
        uint8_t *out = aalloc(64);
        memset(out, 0xa5, 64);
        sl_expr_run(p, &t.env, 5, scratch, out);
        for (int r = 0; r < 5; r++) {
            ck_assert_msg(out[r] == cases[i].want[r], "'%s' row %d: byte %u, want %u",
                          cases[i].text, r, out[r], cases[i].want[r]);
            ck_assert_msg(sl_expr_eval_scalar(e, &t.env, r).u == cases[i].want[r],
                          "'%s' row %d: one-row evaluator", cases[i].text, r);
        }
        free(out);
        free(scratch);
        sl_expr_program_free(ctx, p);
        sl_expr_free(ctx, e);
    }
    table_free(&t);
}
END_TEST

/* ---- sort keys, literals (the f16 conversion is tested in test_api.c) ------------------ */

START_TEST(test_sort_keys) {
    const float ordered[] = {-NAN, -INFINITY, -1e30f, -1.0f, -1e-45f, -0.0f, 0.0f, 1e-45f,
                             1.0f, 1e30f, INFINITY, NAN};
    for (size_t i = 0; i + 1 < sizeof ordered / sizeof ordered[0]; i++) {
        ck_assert_msg(sl_sortkey_f32(ordered[i]) < sl_sortkey_f32(ordered[i + 1]), "f32 %zu", i);
        ck_assert_msg(sl_sortkey_f64(ordered[i]) < sl_sortkey_f64(ordered[i + 1]), "f64 %zu", i);
        ck_assert_msg(sl_sortkey_f16(sl_f32_to_f16(ordered[i])) <
                              sl_sortkey_f16(sl_f32_to_f16(ordered[i + 1])) ||
                          sl_f32_to_f16(ordered[i]) == sl_f32_to_f16(ordered[i + 1]),
                      "f16 %zu", i);
    }
    for (size_t i = 0; i < sizeof ordered / sizeof ordered[0]; i++) {
        ck_assert(sl_f32_bits(sl_sortkey_f32_inverse(sl_sortkey_f32(ordered[i]))) ==
                  sl_f32_bits(ordered[i]));
        ck_assert(sl_f64_bits(sl_sortkey_f64_inverse(sl_sortkey_f64(ordered[i]))) ==
                  sl_f64_bits(ordered[i]));
        uint16_t h = sl_f32_to_f16(ordered[i]);
        ck_assert(sl_sortkey_f16_inverse(sl_sortkey_f16(h)) == h);
    }
    const int32_t ints[] = {INT32_MIN, -1, 0, 1, INT32_MAX};
    for (int i = 0; i < 4; i++) ck_assert(sl_sortkey_i32(ints[i]) < sl_sortkey_i32(ints[i + 1]));
    ck_assert(sl_sortkey_i64(INT64_MIN) < sl_sortkey_i64(-1));
    ck_assert(sl_sortkey_i8(-128) < sl_sortkey_i8(127));
    ck_assert(sl_sortkey_i16(-1) < sl_sortkey_i16(0));
}
END_TEST

START_TEST(test_value_parse_format) {
    sl_value v;
    ck_assert(sl_value_parse("0x10", SLUICE_I32, &v) && v.i == 16);
    ck_assert(sl_value_parse("-128", SLUICE_I8, &v) && v.i == -128);
    ck_assert(!sl_value_parse("-129", SLUICE_I8, &v));
    ck_assert(sl_value_parse("255", SLUICE_U8, &v) && v.u == 255);
    ck_assert(!sl_value_parse("256", SLUICE_U8, &v));
    ck_assert(!sl_value_parse("-1", SLUICE_U32, &v));
    ck_assert(sl_value_parse("18446744073709551615", SLUICE_U64, &v) && v.u == UINT64_MAX);
    ck_assert(!sl_value_parse("18446744073709551616", SLUICE_U64, &v));
    ck_assert(sl_value_parse("-9223372036854775808", SLUICE_I64, &v) && v.i == INT64_MIN);
    ck_assert(!sl_value_parse("9223372036854775808", SLUICE_I64, &v));
    ck_assert(!sl_value_parse("1.5", SLUICE_I32, &v));
    ck_assert(!sl_value_parse("12abc", SLUICE_I32, &v));
    ck_assert(!sl_value_parse("", SLUICE_I32, &v));
    ck_assert(sl_value_parse("1.5e3", SLUICE_F32, &v) && v.f == 1500.0);
    ck_assert(sl_value_parse("10", SLUICE_F64, &v) && v.f == 10.0);
    ck_assert(sl_value_parse("0.1", SLUICE_F32, &v) && v.f == (double)0.1f);
    ck_assert(sl_value_parse("-inf", SLUICE_F32, &v) && isinf(v.f) && v.f < 0);
    ck_assert(sl_value_parse("nan", SLUICE_F64, &v) && isnan(v.f));
    ck_assert(!sl_value_parse("1e39", SLUICE_F32, &v));
    ck_assert(!sl_value_parse("70000", SLUICE_F16, &v));
    ck_assert(!sl_value_parse("1e999", SLUICE_F64, &v));
    ck_assert(!sl_value_parse("1.5.2", SLUICE_F64, &v));
    ck_assert(!sl_value_parse(" 1", SLUICE_F64, &v));
    ck_assert(sl_value_parse("true", SLUICE_BOOL, &v) && v.u == 1);
    ck_assert(sl_value_parse("false", SLUICE_BOOL, &v) && v.u == 0);
    ck_assert(!sl_value_parse("1", SLUICE_BOOL, &v));
    char buf[64];
    ck_assert_str_eq(sl_value_format((sl_value){.type = SLUICE_F32, .f = (double)0.1f}, buf, 64), "0.1");
    ck_assert_str_eq(sl_value_format((sl_value){.type = SLUICE_F64, .f = 0.1}, buf, 64), "0.1");
    ck_assert_str_eq(sl_value_format((sl_value){.type = SLUICE_I64, .i = INT64_MIN}, buf, 64),
                     "-9223372036854775808");
    ck_assert_str_eq(sl_value_format((sl_value){.type = SLUICE_BOOL, .u = 1}, buf, 64), "true");
    ck_assert_str_eq(sl_value_format((sl_value){.type = SLUICE_F64, .f = -INFINITY}, buf, 64), "-inf");
    /* shortest text reads back exactly */
    tu_rng rng;
    tu_rng_seed(&rng, 7);
    for (int i = 0; i < 20000; i++) {
        double d = sl_f64_from_bits(tu_rng_next(&rng));
        if (isnan(d)) continue;
        sl_value x = {.type = SLUICE_F64, .f = d};
        ck_assert(sl_value_parse(sl_value_format(x, buf, 64), SLUICE_F64, &v) && v.f == d);
        float f = (float)tu_rng_normal(&rng) * 1000.0f;
        x = (sl_value){.type = SLUICE_F32, .f = f};
        ck_assert(sl_value_parse(sl_value_format(x, buf, 64), SLUICE_F32, &v) && v.f == (double)f);
    }
    /* casts through sl_value */
    ck_assert(sl_value_cast((sl_value){.type = SLUICE_F64, .f = -1.5}, SLUICE_U8).u == 0);
    ck_assert(sl_value_cast((sl_value){.type = SLUICE_I64, .i = -1}, SLUICE_U16).u == 65535);
    ck_assert(sl_value_cast((sl_value){.type = SLUICE_F64, .f = 1e10}, SLUICE_I32).i == INT32_MAX);
    uint16_t store[2] = {0, 0};
    sl_value_store(SLUICE_F16, store, 1, (sl_value){.type = SLUICE_F64, .f = 1.0});
    ck_assert_int_eq(store[1], 0x3c00);
    ck_assert(sl_value_load(SLUICE_F16, store, 1).f == 1.0);
}
END_TEST

/* ---- random expressions: program vs one-row evaluator vs emitted C ----------------------- */

static const char *const leaves[] = {
    "x", "y", "d", "h", "a", "c", "u", "id", "s8", "s16", "b8", "w16", "f", "g", "radius", "k",
    "0", "1", "-1", "3", "7", "0x7f", "255", "300", "65536", "4294967296", "1.5", "-2.25", "1e3",
    "0.1", "true", "false", "nan", "inf", "31", "63", "64", "18446744073709551615",
};
static const char *const binops[] = {"+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=",
                                     "&&", "||", "&", "|", "^", "<<", ">>"};
static const char *const calls1[] = {"abs", "sqrt", "exp", "log", "floor", "ceil", "isnan", "isinf",
                                     "-", "+", "!", "~"};
static const char *const casts[] = {"bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                                    "f16", "f32", "f64"};

#define PICK(r, arr) arr[tu_rng_next(r) % (sizeof arr / sizeof arr[0])]

static void gen(tu_rng *r, int depth, sl_strbuf *sb) {
    uint64_t form = depth <= 0 ? 0 : tu_rng_next(r) % 10;
    switch (form) {
    case 0: case 1: sl_strbuf_append(sb, PICK(r, leaves)); return;
    case 2: case 3: case 4: case 5:
        sl_strbuf_append(sb, "(");
        gen(r, depth - 1, sb);
        sl_strbuf_printf(sb, " %s ", PICK(r, binops));
        gen(r, depth - 1, sb);
        sl_strbuf_append(sb, ")");
        return;
    case 6: {
        const char *f = PICK(r, calls1);
        sl_strbuf_printf(sb, "%s(", f);
        gen(r, depth - 1, sb);
        sl_strbuf_append(sb, ")");
        return;
    }
    case 7:
        sl_strbuf_printf(sb, "%s(", tu_rng_next(r) & 1 ? "min" : "max");
        gen(r, depth - 1, sb);
        sl_strbuf_append(sb, ", ");
        gen(r, depth - 1, sb);
        sl_strbuf_append(sb, ")");
        return;
    case 8:
        sl_strbuf_printf(sb, "%s(", PICK(r, casts));
        gen(r, depth - 1, sb);
        sl_strbuf_append(sb, ")");
        return;
    default:
        sl_strbuf_append(sb, "(");
        gen(r, depth - 1, sb);
        sl_strbuf_append(sb, " ? ");
        gen(r, depth - 1, sb);
        sl_strbuf_append(sb, " : ");
        gen(r, depth - 1, sb);
        sl_strbuf_append(sb, ")");
        return;
    }
}

/* Random column data: a fifth special values (zero, -1, extremes, NaN, inf, -0), the rest
 * random bits or small numbers. */
static void random_table(table *t, uint64_t seed) {
    table_init(t);
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (int col = 0; col < NCOLUMNS; col++) {
        sluice_type type = scope_names[col].type;
        for (int64_t i = 0; i < MAXROWS; i++) {
            uint64_t pick = tu_rng_next(&r) % 10, bits = tu_rng_next(&r);
            sl_value v = {.type = SLUICE_I64, .i = 0};
            if (type == SLUICE_BOOL) {
                v = (sl_value){.type = SLUICE_I64, .i = pick == 0 ? 2 : (int64_t)(bits & 1)};
                ((uint8_t *)t->columns[col])[i] = (uint8_t)v.i; /* keep the odd byte 2 */
                continue;
            }
            if (sl_type_is_float(type)) {
                static const double specials[] = {0.0, -0.0, 1.0, -1.0, 1e300, -1e-300, 65504.0,
                                                   3e9, 0.5, 2.5};
                if (pick == 0) v = (sl_value){.type = SLUICE_F64, .f = NAN};
                else if (pick == 1) v = (sl_value){.type = SLUICE_F64, .f = bits & 1 ? INFINITY : -INFINITY};
                else if (pick == 2) v = (sl_value){.type = SLUICE_F64, .f = specials[bits % 10]};
                else if (pick < 6) v = (sl_value){.type = SLUICE_F64, .f = tu_rng_normal(&r) * 100.0};
                else v = (sl_value){.type = SLUICE_F64, .f = (double)(int64_t)(bits % 200) - 100.0};
            } else {
                static const int64_t specials[] = {0, -1, 1, INT64_MIN, INT64_MAX, 63, 64, 31, 32, -64};
                if (pick < 2) v.i = specials[bits % 10];
                else if (pick < 5) v.i = (int64_t)bits;
                else v.i = (int64_t)(bits % 64) - 16;
            }
            sl_value_store(type, t->columns[col], i, v);
        }
    }
    for (int s = 0; s < 2; s++)
        for (int64_t i = 0; i < MAXROWS; i++) t->fields[s][i] = (float)tu_rng_normal(&r);
}

/* Up to `want` random expressions that type-check, as texts (malloc'd). */
static int random_expressions(char **texts, int want, uint64_t seed) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    int n = 0;
    for (int attempt = 0; attempt < 200000 && n < want; attempt++) {
        sl_strbuf sb;
        sl_strbuf_init(&sb, ctx);
        gen(&r, 1 + (int)(tu_rng_next(&r) % 4), &sb);
        sl_expr *e = NULL;
        sluice_status st = sl_expr_parse(ctx, sb.data, sb.len, (sl_srcloc){1, 1}, &test_scope, &e);
        sl_diag_clear(ctx);
        if (st == SLUICE_OK && !sl_expr_is_constant(e)) texts[n++] = strdup(sb.data);
        ck_assert_msg(st == SLUICE_OK || st == SLUICE_ERR_TYPE, "'%s': unexpected %s", sb.data,
                      sluice_status_name(st));
        sl_expr_free(ctx, e);
        sl_strbuf_free(&sb);
    }
    return n;
}

/* Every binary operator over every pair of typed leaves (the 14 columns and a param), every
 * unary operator, call and cast over every column: the ones that type-check. */
/* Forms the loops of systematic_expressions do not make: bool columns whose bytes would be
 * moved as they are (a bare column, a conditional's branch), shift counts of 2^63 and more. */
static const char *const extra_expressions[] = {
    "f", "bool(f)", "g ? f : g", "f ? f : false", "g ? true : f", "a << 18446744073709551615",
    "c >> 9223372036854775808", "id << 18446744073709551615", "+s8", "+h", "+w16",
};

static int systematic_expressions(char ***out) {
    const char *cols[] = {"x", "y", "d", "h", "a", "c", "u", "id", "s8", "s16", "b8", "w16",
                          "f", "g", "k"};
    const int ncols = (int)(sizeof cols / sizeof cols[0]);
    int cap = ncols * ncols * (int)(sizeof binops / sizeof binops[0]) +
              ncols * (int)(sizeof calls1 / sizeof calls1[0] + sizeof casts / sizeof casts[0] + 2) +
              (int)(sizeof extra_expressions / sizeof extra_expressions[0]);
    char **texts = malloc((size_t)cap * sizeof *texts);
    int n = 0;
    char buf[64];
    for (int i = 0; i < ncols; i++) {
        for (int j = 0; j < ncols; j++) {
            for (size_t o = 0; o < sizeof binops / sizeof binops[0]; o++) {
                snprintf(buf, sizeof buf, "%s %s %s", cols[i], binops[o], cols[j]);
                texts[n++] = strdup(buf);
            }
        }
        for (size_t o = 0; o < sizeof calls1 / sizeof calls1[0]; o++) {
            snprintf(buf, sizeof buf, "%s(%s)", calls1[o], cols[i]);
            texts[n++] = strdup(buf);
        }
        for (size_t o = 0; o < sizeof casts / sizeof casts[0]; o++) {
            snprintf(buf, sizeof buf, "%s(%s)", casts[o], cols[i]);
            texts[n++] = strdup(buf);
        }
        snprintf(buf, sizeof buf, "min(%s, %s)", cols[i], cols[(i + 1) % ncols]);
        texts[n++] = strdup(buf);
        snprintf(buf, sizeof buf, "f ? %s : %s", cols[i], cols[(i + 3) % ncols]);
        texts[n++] = strdup(buf);
    }
    for (size_t k = 0; k < sizeof extra_expressions / sizeof extra_expressions[0]; k++)
        texts[n++] = strdup(extra_expressions[k]);
    /* keep those that type-check */
    int kept = 0;
    for (int t = 0; t < n; t++) {
        sl_expr *e = NULL;
        sluice_status st = sl_expr_parse(ctx, texts[t], strlen(texts[t]), (sl_srcloc){1, 1},
                                         &test_scope, &e);
        sl_diag_clear(ctx);
        ck_assert_msg(st == SLUICE_OK || st == SLUICE_ERR_TYPE, "'%s': %s", texts[t],
                      sluice_status_name(st));
        sl_expr_free(ctx, e);
        if (st == SLUICE_OK) texts[kept++] = texts[t];
        else free(texts[t]);
    }
    *out = texts;
    return kept;
}

START_TEST(test_every_operator_every_type) {
    char **texts;
    int n = systematic_expressions(&texts);
    ck_assert_int_ge(n, 1500);
    table t;
    random_table(&t, 555);
    double *out = aalloc(MAXROWS * 8);
    for (int k = 0; k < n; k++) {
        sl_expr *e = parse(texts[k]);
        sl_expr_program *p = NULL;
        ck_assert_int_eq(sl_expr_compile(ctx, e, 600, &p), SLUICE_OK);
        void *scratch = aalloc(sl_expr_program_scratch_size(p));
        sl_expr_run(p, &t.env, 600, scratch, out); /* crosses a 512-row strip */
        for (int64_t r = 0; r < 600; r++) {
            sl_value v = sl_value_load(e->type, out, r), s = sl_expr_eval_scalar(e, &t.env, r);
            char b1[64], b2[64];
            ck_assert_msg(same_value(v, s), "'%s' row %lld: program %s, scalar %s", texts[k],
                          (long long)r, sl_value_format(v, b1, 64), sl_value_format(s, b2, 64));
        }
        free(scratch);
        sl_expr_program_free(ctx, p);
        sl_expr_free(ctx, e);
        free(texts[k]);
    }
    free(texts);
    free(out);
    table_free(&t);
}
END_TEST

#define NRANDOM 400

START_TEST(test_vector_matches_scalar) {
    table t;
    random_table(&t, 1234);
    char *texts[NRANDOM];
    int n = random_expressions(texts, NRANDOM, 99);
    ck_assert_int_ge(n, NRANDOM / 2);
    static const int64_t sizes[] = {0, 1, 31, 32, 33, 4095, 4096, 4097};
    double *out = aalloc(MAXROWS * 8);
    for (int k = 0; k < n; k++) {
        sl_expr *e = parse(texts[k]);
        sl_expr_program *p = NULL;
        ck_assert_int_eq(sl_expr_compile(ctx, e, MAXROWS, &p), SLUICE_OK);
        void *scratch = aalloc(sl_expr_program_scratch_size(p) + 64);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t rows = sizes[si];
            memset(out, 0xa5, MAXROWS * 8);
            sl_expr_run(p, &t.env, rows, scratch, out);
            for (int64_t r = 0; r < rows; r++) {
                sl_value v = sl_value_load(e->type, out, r), s = sl_expr_eval_scalar(e, &t.env, r);
                char b1[64], b2[64];
                ck_assert_msg(same_value(v, s), "'%s' rows %lld row %lld: program %s, scalar %s",
                              texts[k], (long long)rows, (long long)r, sl_value_format(v, b1, 64),
                              sl_value_format(s, b2, 64));
                if (e->type == SLUICE_BOOL)
                    ck_assert_msg(((uint8_t *)out)[r] <= 1, "'%s' row %lld: bool byte %u",
                                  texts[k], (long long)r, ((uint8_t *)out)[r]);
            }
            /* nothing written past the rows asked for */
            size_t size = sluice_type_size(e->type);
            for (size_t b = (size_t)rows * size; b < (size_t)rows * size + 8 && b < MAXROWS * 8; b++)
                ck_assert_int_eq(((unsigned char *)out)[b], 0xa5);
        }
        free(scratch);
        sl_expr_program_free(ctx, p);
        sl_expr_free(ctx, e);
        free(texts[k]);
    }
    free(out);
    table_free(&t);
}
END_TEST

static void emit_column(void *payload, int column, sl_strbuf *sb) {
    (void)payload;
    sl_strbuf_printf(sb, "c%d[i]", column);
}
static void emit_param(void *payload, int param, sl_strbuf *sb) {
    (void)payload;
    sl_strbuf_printf(sb, "p%d", param);
}
static void emit_field(void *payload, int side, int field, sl_strbuf *sb) {
    (void)payload;
    sl_strbuf_printf(sb, "%s_%d[i]", side ? "r" : "l", field);
}

#define NEMIT 150

/* The emitted C of random expressions, compiled with the system compiler against
 * kernels/sl_ops.h and run, gives exactly what the CPU evaluator gives. The GPU compiles the
 * same text with NVRTC, so this pins CPU/GPU agreement down to sl_ops.h itself. */
START_TEST(test_emitted_c_matches_cpu) {
    if (system("command -v cc > /dev/null 2>&1") != 0) {
        printf("test_emitted_c_matches_cpu: skipped, no C compiler 'cc' on PATH\n");
        return;
    }
    char dir[] = "/tmp/sl_expr_emit_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path_c[128], path_exe[128], path_in[128], path_out[128], cmd[1024];
    snprintf(path_c, sizeof path_c, "%s/exprs.c", dir);
    snprintf(path_exe, sizeof path_exe, "%s/exprs", dir);
    snprintf(path_in, sizeof path_in, "%s/in.bin", dir);
    snprintf(path_out, sizeof path_out, "%s/out.bin", dir);

    table t;
    random_table(&t, 4321);
    /* random expressions, then every operator on every type */
    char **sys;
    int nsys = systematic_expressions(&sys);
    char **texts = malloc((size_t)(NEMIT + nsys) * sizeof *texts);
    int n = random_expressions(texts, NEMIT, 7);
    ck_assert_int_ge(n, NEMIT / 2);
    for (int k = 0; k < nsys; k++) texts[n++] = sys[k];
    free(sys);
    sl_expr **exprs = malloc((size_t)n * sizeof *exprs);
    for (int k = 0; k < n; k++) exprs[k] = parse(texts[k]);

    /* input: every column, then the two fields, MAXROWS rows each */
    FILE *in = fopen(path_in, "wb");
    ck_assert_ptr_nonnull(in);
    for (int col = 0; col < NCOLUMNS; col++)
        fwrite(t.columns[col], sluice_type_size(scope_names[col].type), MAXROWS, in);
    fwrite(t.fields[0], sizeof(float), MAXROWS, in);
    fwrite(t.fields[1], sizeof(float), MAXROWS, in);
    fclose(in);

    sl_strbuf src;
    sl_strbuf_init(&src, ctx);
    sl_strbuf_printf(&src, "#include <stdio.h>\n#include <stdlib.h>\n#include \"sl_ops.h\"\n"
                           "#define N %d\n", MAXROWS);
    for (int col = 0; col < NCOLUMNS; col++)
        sl_strbuf_printf(&src, "%s c%d[N];\n", sl_expr_c_type_name(scope_names[col].type), col);
    sl_strbuf_printf(&src, "float l_0[N], r_0[N];\nconst float p0 = 2.5f;\nconst int32_t p1 = -3;\n");
    sl_strbuf_printf(&src, "int main(int argc, char **argv) {\n  (void)argc;\n"
                           "  FILE *in = fopen(argv[1], \"rb\"), *out = fopen(argv[2], \"wb\");\n"
                           "  if (!in || !out) return 2;\n  size_t got = 0;\n");
    for (int col = 0; col < NCOLUMNS; col++)
        sl_strbuf_printf(&src, "  got += fread(c%d, sizeof c%d[0], N, in);\n", col, col);
    sl_strbuf_printf(&src, "  got += fread(l_0, 4, N, in);\n  got += fread(r_0, 4, N, in);\n"
                           "  if (got != (size_t)N * %d) return 3;\n", NCOLUMNS + 2);
    sl_emit_names names = {emit_column, emit_param, emit_field, NULL};
    for (int k = 0; k < n; k++) {
        const char *ct = sl_expr_c_type_name(exprs[k]->type);
        sl_strbuf_printf(&src, "  { /* %d */\n    %s *o = malloc(N * sizeof *o);\n"
                               "    for (int64_t i = 0; i < N; i++) o[i] = ", k, ct);
        sl_expr_emit_c(exprs[k], &names, &src);
        sl_strbuf_printf(&src, ";\n    fwrite(o, sizeof *o, N, out);\n    free(o);\n  }\n");
    }
    sl_strbuf_printf(&src, "  fclose(in);\n  return fclose(out) != 0;\n}\n");
    ck_assert(!src.failed);
    FILE *f = fopen(path_c, "w");
    ck_assert_ptr_nonnull(f);
    fputs(src.data, f);
    fclose(f);
    sl_strbuf_free(&src);

    /* -ffp-contract=off: the C side must not fuse a*b+c (CUDA uses explicit _rn intrinsics) */
    snprintf(cmd, sizeof cmd,
             "cc -std=c99 -O1 -ffp-contract=off -Wall -Wextra -Werror -I'%s/kernels' -o '%s' '%s' -lm",
             SLUICE_SOURCE_DIR, path_exe, path_c);
    ck_assert_msg(system(cmd) == 0, "emitted C did not compile: %s", cmd);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", path_exe, path_in, path_out);
    ck_assert_msg(system(cmd) == 0, "emitted program failed: %s", cmd);

    FILE *res = fopen(path_out, "rb");
    ck_assert_ptr_nonnull(res);
    double *cpu = aalloc(MAXROWS * 8), *emitted = aalloc(MAXROWS * 8);
    for (int k = 0; k < n; k++) {
        size_t size = sluice_type_size(exprs[k]->type);
        ck_assert_int_eq(fread(emitted, size, MAXROWS, res), MAXROWS);
        sl_expr_program *p = NULL;
        ck_assert_int_eq(sl_expr_compile(ctx, exprs[k], MAXROWS, &p), SLUICE_OK);
        void *scratch = aalloc(sl_expr_program_scratch_size(p) + 64);
        sl_expr_run(p, &t.env, MAXROWS, scratch, cpu);
        for (int64_t r = 0; r < MAXROWS; r++) {
            sl_value a = sl_value_load(exprs[k]->type, cpu, r),
                     b = sl_value_load(exprs[k]->type, emitted, r);
            char b1[64], b2[64];
            ck_assert_msg(same_value(a, b), "'%s' row %lld: cpu %s, emitted C %s", texts[k],
                          (long long)r, sl_value_format(a, b1, 64), sl_value_format(b, b2, 64));
            /* a computed bool is the byte 0 or 1 on both sides, whatever bytes it read */
            if (exprs[k]->type == SLUICE_BOOL)
                ck_assert_msg(((uint8_t *)cpu)[r] <= 1 && ((uint8_t *)emitted)[r] <= 1,
                              "'%s' row %lld: bool bytes %u (cpu), %u (emitted C)", texts[k],
                              (long long)r, ((uint8_t *)cpu)[r], ((uint8_t *)emitted)[r]);
        }
        free(scratch);
        sl_expr_program_free(ctx, p);
        sl_expr_free(ctx, exprs[k]);
        free(texts[k]);
    }
    fclose(res);
    free(cpu);
    free(emitted);
    free(exprs);
    free(texts);
    table_free(&t);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- the hot path: leaves are read in place, results written in place -------------------- */

START_TEST(test_program_reads_in_place) {
    static const struct {
        const char *text;
        int registers; /* scratch registers the program may use */
    } cases[] = {
        {"x > 0", 0},                       /* one step: compare the column to a slot */
        {"f32(x) > 0", 0},                  /* a same-type cast is no step */
        {"x*x + y*y < radius*radius", 3},   /* radius*radius is computed once per run */
        {"x", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_expr *e = parse(cases[i].text);
        sl_expr_program *p = NULL;
        ck_assert_int_eq(sl_expr_compile(ctx, e, 4096, &p), SLUICE_OK);
        size_t scratch = sl_expr_program_scratch_size(p);
        ck_assert_msg(scratch <= 64 + (size_t)cases[i].registers * 4096 * 8, "%s: %zu bytes",
                      cases[i].text, scratch);
        sl_expr_program_free(ctx, p);
        sl_expr_free(ctx, e);
    }
    /* informational throughput of the two hot expressions (a benchmark, not a pass/fail bar) */
    table t;
    table_init(&t);
    for (int i = 0; i < 4096; i++) {
        ((float *)t.columns[0])[i] = (float)(i % 7) - 3.0f;
        ((float *)t.columns[1])[i] = (float)(i % 5) - 2.0f;
    }
    const char *hot[] = {"x > 0", "x*x + y*y < radius*radius"};
    for (int h = 0; h < 2; h++) {
        sl_expr *e = parse(hot[h]);
        sl_expr_program *p = NULL;
        ck_assert_int_eq(sl_expr_compile(ctx, e, 4096, &p), SLUICE_OK);
        void *scratch = aalloc(sl_expr_program_scratch_size(p) + 64);
        uint8_t *out = aalloc(4096);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int reps = 20000;
        for (int r = 0; r < reps; r++) sl_expr_run(p, &t.env, 4096, scratch, out);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        double bytes_in = (h == 0 ? 4.0 : 8.0) * 4096.0 * reps;
        printf("%-28s %7.2f Grows/s, %6.1f GB/s of f32 input (4096-row tiles, in cache)\n",
               hot[h], 4096.0 * reps / s * 1e-9, bytes_in / s * 1e-9);
        ck_assert_int_eq(out[3], h == 0 ? 0 : 1); /* x = 0 at row 3; (0, 1) inside radius 2.5 */
        free(out);
        free(scratch);
        sl_expr_program_free(ctx, p);
        sl_expr_free(ctx, e);
    }
    table_free(&t);
}
END_TEST

static Suite *expr_suite(void) {
    Suite *s = suite_create("expr");
    TCase *tc = tcase_create("expr");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_precedence);
    tcase_add_test(tc, test_tree_shape);
    tcase_add_test(tc, test_typing_rules);
    tcase_add_test(tc, test_syntax_errors);
    tcase_add_test(tc, test_name_errors);
    tcase_add_test(tc, test_type_errors);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_defined_integer_results);
    tcase_add_test(tc, test_defined_cast_and_float_results);
    tcase_add_test(tc, test_fields_and_params);
    tcase_add_test(tc, test_bool_reads);
    tcase_add_test(tc, test_sort_keys);
    tcase_add_test(tc, test_value_parse_format);
    tcase_add_test(tc, test_vector_matches_scalar);
    tcase_add_test(tc, test_every_operator_every_type);
    tcase_add_test(tc, test_emitted_c_matches_cpu);
    tcase_add_test(tc, test_program_reads_in_place);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(expr_suite()); }
