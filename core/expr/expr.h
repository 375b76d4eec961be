/* expr.h — the expression language of pipeline files: parse, type-check, evaluate on the CPU
 * a tile at a time, and emit as CUDA/C source for generated kernels.
 *
 * The language and its typing rules are written down in pipelines/EXPRESSIONS.md
 * and at the top of core/expr/expr_parse.c. Every operation has one defined result for every input, the
 * same on the CPU and the GPU: both sides call the same inline helpers in kernels/sl_ops.h. */
#ifndef SL_EXPR_H
#define SL_EXPR_H

#include "common/diag.h"
#include "common/types.h"

typedef enum sl_expr_kind {
    SL_EXPR_LITERAL, /* value */
    SL_EXPR_COLUMN,  /* index = pipeline column id */
    SL_EXPR_PARAM,   /* index = pipeline param id */
    SL_EXPR_FIELD,   /* index = state field; side 0 = l., 1 = r. (operator combine only) */
    SL_EXPR_UNARY,   /* op, a */
    SL_EXPR_BINARY,  /* op, a, b */
    SL_EXPR_COND,    /* a ? b : c */
    SL_EXPR_CALL,    /* op = sl_func, args a, b (, c) */
    SL_EXPR_CAST     /* type = target, a */
} sl_expr_kind;

typedef enum sl_expr_op {
    /* unary */
    SL_OP_NEG, SL_OP_NOT, SL_OP_BITNOT,
    /* binary */
    SL_OP_ADD, SL_OP_SUB, SL_OP_MUL, SL_OP_DIV, SL_OP_MOD,
    SL_OP_LT, SL_OP_LE, SL_OP_GT, SL_OP_GE, SL_OP_EQ, SL_OP_NE,
    SL_OP_LAND, SL_OP_LOR,
    SL_OP_BITAND, SL_OP_BITOR, SL_OP_BITXOR, SL_OP_SHL, SL_OP_SHR,
    /* calls */
    SL_FN_ABS, SL_FN_MIN, SL_FN_MAX, SL_FN_SQRT, SL_FN_EXP, SL_FN_LOG,
    SL_FN_FLOOR, SL_FN_CEIL, SL_FN_ISNAN, SL_FN_ISINF
} sl_expr_op;

typedef struct sl_expr {
    sl_expr_kind kind;
    sluice_type type; /* result type, set by the parser's type check */
    sl_expr_op op;
    int index, side;
    sl_value value;
    struct sl_expr *a, *b, *c;
    sl_srcloc loc;    /* where this node starts in the pipeline file */
} sl_expr;

/* How the parser resolves a name. Returns true and fills kind (COLUMN, PARAM or FIELD),
 * index, side and type when the name is known. Field names come as "l.a" / "r.a". */
typedef struct sl_expr_scope {
    bool (*lookup)(void *payload, const char *name, sl_expr_kind *kind, int *index, int *side,
                   sluice_type *type);
    /* Names offered for did-you-mean when lookup fails (may be NULL / 0). */
    const char *const *(*candidates)(void *payload, size_t *count);
    void *payload;
} sl_expr_scope;

/* Hostile-input limits (SLUICE_ERR_LIMIT): text length in bytes, and nesting depth of the
 * parsed tree (parentheses and operators alike). Deep trees would exhaust the C stack of the
 * recursive passes over them: at the limits, parsing and compiling need less than 128 KiB of
 * stack in an optimised build (gcc or clang -O2) and less than 256 KiB at -O0. */
#define SL_EXPR_MAX_LENGTH 65536
#define SL_EXPR_MAX_DEPTH 256

/* Parses and type-checks `text` (length bytes). `loc` is where the text starts in the file;
 * errors inside the expression point at the offending token (same line: loc.col + offset).
 * On error a diagnostic is recorded (SLUICE_ERR_EXPR_SYNTAX, SLUICE_ERR_UNKNOWN_COLUMN,
 * SLUICE_ERR_UNKNOWN_PARAM, SLUICE_ERR_TYPE) and *out is NULL. Nodes are allocated from ctx
 * and freed with sl_expr_free. */
sluice_status sl_expr_parse(sluice_context *ctx, const char *text, size_t length, sl_srcloc loc,
                            const sl_expr_scope *scope, sl_expr **out);
void sl_expr_free(sluice_context *ctx, sl_expr *e);
/* A literal node (for defaults the loader synthesises, e.g. count's `of: 1`). */
sl_expr *sl_expr_new_literal(sluice_context *ctx, sl_value v);
/* e as type t: a literal is converted in place, anything else gets a cast node above it.
 * NULL when that node cannot be allocated; e is then untouched and still the caller's. */
sl_expr *sl_expr_as_type(sluice_context *ctx, sl_expr *e, sluice_type t);
/* Wraps e in a cast to t unless it already has type t (NULL on allocation failure; e is
 * then freed). */
sl_expr *sl_expr_cast_to(sluice_context *ctx, sl_expr *e, sluice_type t);
/* True when the expression reads no column (only literals, params). */
bool sl_expr_is_constant(const sl_expr *e);
/* Calls fn for every column id the expression reads. */
void sl_expr_visit_columns(const sl_expr *e, void (*fn)(void *payload, int column), void *payload);

/* ---- CPU evaluation, a tile of rows at a time ----------------------------------------- */

/* Where an evaluation reads its leaves. columns[id] points at the tile's first row of column
 * id (typed as the column); params[id] is the param's value; fields[side][f] points at the
 * tile's first element of state field f on that side (typed as the field). */
typedef struct sl_eval_env {
    const void *const *columns;
    const sl_value *params;
    const void *const *fields[2];
} sl_eval_env;

/* A compiled form of an expression for repeated tile evaluation. Immutable after compile:
 * any number of threads may run one program at once, each with its own scratch. */
typedef struct sl_expr_program sl_expr_program;
sluice_status sl_expr_compile(sluice_context *ctx, const sl_expr *e, int64_t max_rows,
                              sl_expr_program **out);
void sl_expr_program_free(sluice_context *ctx, sl_expr_program *p);
/* Bytes of scratch one run needs for up to max_rows rows. */
size_t sl_expr_program_scratch_size(const sl_expr_program *p);
/* Evaluates rows (<= max_rows) rows into out, typed as the expression's type. scratch: at
 * least sl_expr_program_scratch_size bytes, 64-byte aligned. No allocation. */
void sl_expr_run(const sl_expr_program *p, const sl_eval_env *env, int64_t rows, void *scratch,
                 void *out);
/* Evaluates one row with no program (slow path: operator checks, constants). */
sl_value sl_expr_eval_scalar(const sl_expr *e, const sl_eval_env *env, int64_t row);

/* ---- typed elements, shared by core/common/types.c and the evaluator ------------------------- */

/* One element of any column type, as stored (bool: one byte; f16: its bits). */
typedef union sl_raw {
    uint8_t b;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    uint16_t f16;
    float f32;
    double f64;
} sl_raw;
/* Converts n elements of type `from` at src to type `to` at dst with the language's cast
 * rules (kernels/sl_ops.h). src and dst must not overlap. */
void sl_value_cast_rows(sluice_type from, const void *src, sluice_type to, void *dst, int64_t n);
/* A value as the raw element of its own type, and back. */
void sl_value_to_raw(sl_value v, sl_raw *out);
sl_value sl_value_from_raw(sluice_type t, const void *raw);

/* ---- source emission for generated kernels -------------------------------------------- */

/* C identifiers the emitter uses for leaves. Each returns a C expression of the leaf's type
 * (e.g. "c3", "p0", "l_a"). */
typedef struct sl_emit_names {
    void (*column)(void *payload, int column, sl_strbuf *sb);
    void (*param)(void *payload, int param, sl_strbuf *sb);
    void (*field)(void *payload, int side, int field, sl_strbuf *sb);
    void *payload;
} sl_emit_names;
/* Appends a C expression (valid CUDA C++ and C99 with kernels/sl_ops.h included) computing e
 * with exactly the CPU's semantics. */
void sl_expr_emit_c(const sl_expr *e, const sl_emit_names *names, sl_strbuf *sb);
/* The C type name used for a sluice type in emitted code ("float", "int64_t", "sl_half" …). */
const char *sl_expr_c_type_name(sluice_type t);

#endif
