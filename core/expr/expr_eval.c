/* expr_eval.c — CPU evaluation of typed expressions: a compiled program of column-at-a-time
 * steps over registers of a tile's rows, and the one-row evaluator used for constants and
 * operator checks. Both run the same kernels below, which call the helpers of
 * kernels/sl_ops.h, so the CPU, the scalar path and generated GPU code agree bit for bit.
 *
 * A program is a list of steps in post order. Each step reads operands that are a register
 * (scratch), a column or state field of the tile (read in place, never copied), or a slot (one
 * value per run: a literal, a param, or a constant sub-expression such as radius*radius,
 * computed once per run by "scalar" steps over slots). Registers hold max_rows elements of up
 * to 8 bytes; a step never writes a register it reads, so loops see no aliasing and the
 * compiler vectorises them. The last step writes straight into the caller's output.
 *
 * The per-run scalar steps run first; then the vector steps run over the tile in strips of
 * STRIP rows, so the registers of a strip stay in L1 however many intermediate values an
 * expression has (x*x + y*y < r*r over 4096 rows was 2.2x slower without strips). */
#include <string.h>

#include "expr/expr.h"
#include "sl_ops.h"

#define STRIP 512

/* On x86-64 the kernels are built twice, for the baseline (SSE2) and for AVX2, and the loader
 * picks one per machine (GNU ifunc). AVX2 does not include FMA, so no a*b+c is ever fused:
 * the results are the same bits either way. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define SL_SANITIZED_ 1 /* ifunc resolvers run before the sanitizer runtime is up */
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SL_SANITIZED_ 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(SL_SANITIZED_)
#define SL_KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SL_KERNEL_CLONES
#endif

/* ---- kernels: one loop per (operation, type), operands vector or scalar ------------------- */

/* as / bs: the operand is a single value to broadcast. T, BT: the operands' types (BT is i64
 * for the count of a shift, T otherwise); OT: the result's. */
#define SL_BIN_(T, BT, OT, FN)                                                                  \
    do {                                                                                        \
        const T *restrict x_ = a;                                                               \
        const BT *restrict y_ = b;                                                              \
        OT *restrict o_ = out;                                                                  \
        if (!as && !bs) {                                                                       \
            for (int64_t i = 0; i < n; i++) o_[i] = FN(x_[i], y_[i]);                           \
        } else if (!as) {                                                                       \
            const BT yv_ = *y_;                                                                 \
            for (int64_t i = 0; i < n; i++) o_[i] = FN(x_[i], yv_);                             \
        } else if (!bs) {                                                                       \
            const T xv_ = *x_;                                                                  \
            for (int64_t i = 0; i < n; i++) o_[i] = FN(xv_, y_[i]);                             \
        } else {                                                                                \
            const OT r_ = FN(*x_, *y_);                                                         \
            for (int64_t i = 0; i < n; i++) o_[i] = r_;                                         \
        }                                                                                       \
    } while (0)

#define SL_BCASE_(OP, T, OT, FN) case OP: SL_BIN_(T, T, OT, FN); return;

#define SL_NUMERIC_BINARY_CASES_(s, T)                                                          \
    SL_BCASE_(SL_OP_ADD, T, T, sl_add_##s)                                                      \
    SL_BCASE_(SL_OP_SUB, T, T, sl_sub_##s)                                                      \
    SL_BCASE_(SL_OP_MUL, T, T, sl_mul_##s)                                                      \
    SL_BCASE_(SL_OP_DIV, T, T, sl_div_##s)                                                      \
    SL_BCASE_(SL_OP_MOD, T, T, sl_mod_##s)                                                      \
    SL_BCASE_(SL_OP_LT, T, sl_bool, sl_lt_##s)                                                  \
    SL_BCASE_(SL_OP_LE, T, sl_bool, sl_le_##s)                                                  \
    SL_BCASE_(SL_OP_GT, T, sl_bool, sl_gt_##s)                                                  \
    SL_BCASE_(SL_OP_GE, T, sl_bool, sl_ge_##s)                                                  \
    SL_BCASE_(SL_OP_EQ, T, sl_bool, sl_eq_##s)                                                  \
    SL_BCASE_(SL_OP_NE, T, sl_bool, sl_ne_##s)                                                  \
    SL_BCASE_(SL_FN_MIN, T, T, sl_min_##s)                                                      \
    SL_BCASE_(SL_FN_MAX, T, T, sl_max_##s)

#define SL_INT_BINARY_CASES_(s, T)                                                              \
    SL_NUMERIC_BINARY_CASES_(s, T)                                                              \
    SL_BCASE_(SL_OP_BITAND, T, T, sl_bitand_##s)                                                \
    SL_BCASE_(SL_OP_BITOR, T, T, sl_bitor_##s)                                                  \
    SL_BCASE_(SL_OP_BITXOR, T, T, sl_bitxor_##s)                                                \
    case SL_OP_SHL: SL_BIN_(T, int64_t, T, sl_shl_##s); return;                                 \
    case SL_OP_SHR: SL_BIN_(T, int64_t, T, sl_shr_##s); return;

/* Binary operators and min/max. t is the operands' type (the count of a shift is i64). */
SL_KERNEL_CLONES static void k_binary(sl_expr_op op, sluice_type t, const void *a, bool as, const void *b, bool bs,
                     void *out, int64_t n) {
    switch (t) {
    case SLUICE_BOOL:
        switch (op) {
            SL_BCASE_(SL_OP_LAND, sl_bool, sl_bool, sl_land_bool)
            SL_BCASE_(SL_OP_LOR, sl_bool, sl_bool, sl_lor_bool)
            SL_BCASE_(SL_OP_BITAND, sl_bool, sl_bool, sl_bitand_bool)
            SL_BCASE_(SL_OP_BITOR, sl_bool, sl_bool, sl_bitor_bool)
            SL_BCASE_(SL_OP_BITXOR, sl_bool, sl_bool, sl_bitxor_bool)
            SL_BCASE_(SL_OP_EQ, sl_bool, sl_bool, sl_eq_bool)
            SL_BCASE_(SL_OP_NE, sl_bool, sl_bool, sl_ne_bool)
        default: return;
        }
    case SLUICE_I32: switch (op) { SL_INT_BINARY_CASES_(i32, int32_t) default: return; }
    case SLUICE_I64: switch (op) { SL_INT_BINARY_CASES_(i64, int64_t) default: return; }
    case SLUICE_U32: switch (op) { SL_INT_BINARY_CASES_(u32, uint32_t) default: return; }
    case SLUICE_U64: switch (op) { SL_INT_BINARY_CASES_(u64, uint64_t) default: return; }
    case SLUICE_F32: switch (op) { SL_NUMERIC_BINARY_CASES_(f32, float) default: return; }
    case SLUICE_F64: switch (op) { SL_NUMERIC_BINARY_CASES_(f64, double) default: return; }
    default: return;
    }
}

#define SL_UN_(T, OT, FN)                                                                       \
    do {                                                                                        \
        const T *restrict x_ = a;                                                               \
        OT *restrict o_ = out;                                                                  \
        for (int64_t i = 0; i < n; i++) o_[i] = FN(x_[i]);                                      \
    } while (0)
#define SL_UCASE_(OP, T, OT, FN) case OP: SL_UN_(T, OT, FN); return;
#define SL_INT_UNARY_CASES_(s, T)                                                               \
    SL_UCASE_(SL_OP_NEG, T, T, sl_neg_##s)                                                      \
    SL_UCASE_(SL_OP_BITNOT, T, T, sl_bitnot_##s)                                                \
    SL_UCASE_(SL_FN_ABS, T, T, sl_abs_##s)
#define SL_FLOAT_UNARY_CASES_(s, T)                                                             \
    SL_UCASE_(SL_OP_NEG, T, T, sl_neg_##s)                                                      \
    SL_UCASE_(SL_FN_ABS, T, T, sl_abs_##s)                                                      \
    SL_UCASE_(SL_FN_SQRT, T, T, sl_sqrt_##s)                                                    \
    SL_UCASE_(SL_FN_EXP, T, T, sl_exp_##s)                                                      \
    SL_UCASE_(SL_FN_LOG, T, T, sl_log_##s)                                                      \
    SL_UCASE_(SL_FN_FLOOR, T, T, sl_floor_##s)                                                  \
    SL_UCASE_(SL_FN_CEIL, T, T, sl_ceil_##s)                                                    \
    SL_UCASE_(SL_FN_ISNAN, T, sl_bool, sl_isnan_##s)                                            \
    SL_UCASE_(SL_FN_ISINF, T, sl_bool, sl_isinf_##s)

/* Unary operators and one-argument calls; t is the operand's type. */
SL_KERNEL_CLONES static void k_unary(sl_expr_op op, sluice_type t, const void *a, void *out, int64_t n) {
    switch (t) {
    case SLUICE_BOOL: switch (op) { SL_UCASE_(SL_OP_NOT, sl_bool, sl_bool, sl_not_bool) default: return; }
    case SLUICE_I32: switch (op) { SL_INT_UNARY_CASES_(i32, int32_t) default: return; }
    case SLUICE_I64: switch (op) { SL_INT_UNARY_CASES_(i64, int64_t) default: return; }
    case SLUICE_U32: switch (op) { SL_INT_UNARY_CASES_(u32, uint32_t) default: return; }
    case SLUICE_U64: switch (op) { SL_INT_UNARY_CASES_(u64, uint64_t) default: return; }
    case SLUICE_F32: switch (op) { SL_FLOAT_UNARY_CASES_(f32, float) default: return; }
    case SLUICE_F64: switch (op) { SL_FLOAT_UNARY_CASES_(f64, double) default: return; }
    default: return;
    }
}

/* c ? a : b over elements of `size` bytes (the choice moves bits; no conversion). */
#define SL_SEL_(T)                                                                              \
    do {                                                                                        \
        const T *restrict x_ = a;                                                               \
        const T *restrict y_ = b;                                                               \
        T *restrict o_ = out;                                                                   \
        if (!as && !bs) {                                                                       \
            for (int64_t i = 0; i < n; i++) o_[i] = c[i] ? x_[i] : y_[i];                       \
        } else if (!as) {                                                                       \
            const T yv_ = *y_;                                                                  \
            for (int64_t i = 0; i < n; i++) o_[i] = c[i] ? x_[i] : yv_;                         \
        } else if (!bs) {                                                                       \
            const T xv_ = *x_;                                                                  \
            for (int64_t i = 0; i < n; i++) o_[i] = c[i] ? xv_ : y_[i];                         \
        } else {                                                                                \
            const T xv_ = *x_, yv_ = *y_;                                                       \
            for (int64_t i = 0; i < n; i++) o_[i] = c[i] ? xv_ : yv_;                           \
        }                                                                                       \
    } while (0)

SL_KERNEL_CLONES static void k_select(size_t size, const sl_bool *restrict c, const void *a, bool as,
                     const void *b, bool bs, void *out, int64_t n) {
    switch (size) {
    case 1: SL_SEL_(uint8_t); return;
    case 2: SL_SEL_(uint16_t); return;
    case 4: SL_SEL_(uint32_t); return;
    case 8: SL_SEL_(uint64_t); return;
    default: return;
    }
}

static void k_broadcast(size_t size, const void *value, void *out, int64_t n) {
    switch (size) {
    case 1: { uint8_t v = *(const uint8_t *)value, *o = out; for (int64_t i = 0; i < n; i++) o[i] = v; return; }
    case 2: { uint16_t v = *(const uint16_t *)value, *o = out; for (int64_t i = 0; i < n; i++) o[i] = v; return; }
    case 4: { uint32_t v = *(const uint32_t *)value, *o = out; for (int64_t i = 0; i < n; i++) o[i] = v; return; }
    case 8: { uint64_t v = *(const uint64_t *)value, *o = out; for (int64_t i = 0; i < n; i++) o[i] = v; return; }
    default: return;
    }
}

/* ---- one row ----------------------------------------------------------------------------- */

static void eval_raw(const sl_expr *e, const sl_eval_env *env, int64_t row, sl_raw *out) {
    memset(out, 0, sizeof *out);
    sl_raw ra, rb;
    size_t size = sluice_type_size(e->type);
    switch (e->kind) {
    case SL_EXPR_LITERAL:
        sl_value_to_raw(sl_value_cast(e->value, e->type), out);
        return;
    case SL_EXPR_COLUMN:
        if (env && env->columns && env->columns[e->index])
            memcpy(out, (const char *)env->columns[e->index] + (size_t)row * size, size);
        if (e->type == SLUICE_BOOL) out->b = out->b != 0; /* a bool column reads as 0 or 1 */
        return;
    case SL_EXPR_FIELD:
        if (env && env->fields[e->side & 1] && env->fields[e->side & 1][e->index])
            memcpy(out, (const char *)env->fields[e->side & 1][e->index] + (size_t)row * size,
                   size);
        return;
    case SL_EXPR_PARAM:
        if (env && env->params) sl_value_to_raw(sl_value_cast(env->params[e->index], e->type), out);
        return;
    case SL_EXPR_UNARY:
        eval_raw(e->a, env, row, &ra);
        k_unary(e->op, e->a->type, &ra, out, 1);
        return;
    case SL_EXPR_BINARY:
        eval_raw(e->a, env, row, &ra);
        eval_raw(e->b, env, row, &rb);
        k_binary(e->op, e->a->type, &ra, false, &rb, false, out, 1);
        return;
    case SL_EXPR_CALL:
        eval_raw(e->a, env, row, &ra);
        if (e->b) {
            eval_raw(e->b, env, row, &rb);
            k_binary(e->op, e->a->type, &ra, false, &rb, false, out, 1);
        } else {
            k_unary(e->op, e->a->type, &ra, out, 1);
        }
        return;
    case SL_EXPR_COND:
        eval_raw(e->a, env, row, &ra);
        eval_raw(ra.b ? e->b : e->c, env, row, out);
        return;
    case SL_EXPR_CAST:
        eval_raw(e->a, env, row, &ra);
        sl_value_cast_rows(e->a->type, &ra, e->type, out, 1);
        return;
    }
}

sl_value sl_expr_eval_scalar(const sl_expr *e, const sl_eval_env *env, int64_t row) {
    sl_raw r;
    if (!e) {
        memset(&r, 0, sizeof r);
        return sl_value_from_raw(SLUICE_I64, &r);
    }
    eval_raw(e, env, row, &r);
    return sl_value_from_raw(e->type, &r);
}

/* ---- programs ---------------------------------------------------------------------------- */

typedef enum operand_kind {
    OPND_NONE,   /* no operand: the zero value, so an unset operand is never a register */
    OPND_REG,    /* a register in scratch */
    OPND_SLOT,   /* one value in scratch: literal, param or per-run constant */
    OPND_COLUMN, /* a column of the tile, read in place */
    OPND_FIELD,  /* a state field of the tile */
    OPND_OUT     /* the caller's output */
} operand_kind;

typedef struct operand {
    uint8_t kind, side;
    uint8_t size; /* element bytes, for stepping through a tile by strips */
    int32_t index;
} operand;

typedef enum step_kind { STEP_UNARY, STEP_BINARY, STEP_CAST, STEP_SELECT, STEP_COPY, STEP_BROADCAST } step_kind;

typedef struct step {
    uint8_t kind;
    uint8_t op;       /* sl_expr_op */
    uint8_t type;     /* operands' type (select/copy/broadcast: element type) */
    uint8_t out_type; /* cast target */
    bool scalar;      /* one value per run, over slots */
    operand dst, a, b, c;
} step;

typedef struct param_use {
    int slot, param;
    sluice_type type;
} param_use;

struct sl_expr_program {
    sluice_type type;
    int64_t max_rows;
    step *steps;
    int nsteps, steps_cap;
    operand *inputs; /* the distinct columns and fields the vector steps read */
    int ninputs, inputs_cap;
    sl_raw *slots; /* initial slot values (literals; params are written at each run) */
    int nslots, slots_cap;
    param_use *params;
    int nparams, params_cap;
    int nregs;
    size_t reg_bytes, slot_bytes;
};

typedef struct compiler {
    sluice_context *ctx;
    sl_expr_program *p;
    int *free_regs; /* stack of free register ids */
    int nfree, free_cap;
    bool failed;
} compiler;

static bool grow(compiler *c, void **array, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *n = sl_realloc(c->ctx, *array, (size_t)ncap * elem);
    if (!n) {
        c->failed = true;
        return false;
    }
    *array = n;
    *cap = ncap;
    return true;
}

static operand new_slot(compiler *c, const sl_raw *value) {
    operand o = {OPND_SLOT, 0, 8, -1};
    sl_expr_program *p = c->p;
    if (!grow(c, (void **)&p->slots, &p->slots_cap, p->nslots + 1, sizeof *p->slots)) return o;
    if (value) p->slots[p->nslots] = *value;
    else memset(&p->slots[p->nslots], 0, sizeof p->slots[0]);
    o.index = p->nslots++;
    return o;
}

static operand new_reg(compiler *c) {
    operand o = {OPND_REG, 0, 8, -1};
    if (c->nfree > 0) {
        o.index = c->free_regs[--c->nfree];
    } else {
        o.index = c->p->nregs++;
    }
    return o;
}

static void release(compiler *c, operand o) {
    if (o.kind != OPND_REG) return;
    if (!grow(c, (void **)&c->free_regs, &c->free_cap, c->nfree + 1, sizeof(int))) return;
    c->free_regs[c->nfree++] = o.index;
}

static step *add_step(compiler *c, step_kind kind, bool scalar) {
    sl_expr_program *p = c->p;
    if (!grow(c, (void **)&p->steps, &p->steps_cap, p->nsteps + 1, sizeof *p->steps)) return NULL;
    step *s = &p->steps[p->nsteps++];
    memset(s, 0, sizeof *s);
    s->kind = (uint8_t)kind;
    s->scalar = scalar;
    return s;
}

static bool is_scalar_operand(operand o) { return o.kind == OPND_SLOT; }

/* A bool column reads as 0 or 1, whatever byte other than 0 it holds for true (the language's
 * one rule for bools, EXPRESSIONS.md). Operators on bools and casts from bool look only at
 * "zero or not", so a column is read in place for them; only a step that moves bytes as they
 * are would pass another byte on: the copy of a root that is the column itself (`m: k`) and
 * a conditional's branch. There the column goes through a cast bool -> bool first, which is
 * the normalisation (written to `dst` when given, else to a new register). */
static operand normalize_bool_column(compiler *c, operand o, const operand *dst) {
    if (o.kind != OPND_COLUMN) return o;
    operand r = dst ? *dst : new_reg(c);
    step *s = add_step(c, STEP_CAST, false);
    if (!s) return o;
    s->type = s->out_type = SLUICE_BOOL;
    s->dst = r;
    s->a = o;
    return r;
}

/* Compiles e; *out names where its value is. In scalar mode every result is a slot. The root's
 * step (root: true) writes the caller's output directly. */
static void compile_node(compiler *c, const sl_expr *e, bool scalar, bool root, operand *out) {
    if (c->failed) return;
    if (!scalar && sl_expr_is_constant(e)) scalar = true;
    switch (e->kind) {
    case SL_EXPR_LITERAL: {
        sl_raw r;
        sl_value_to_raw(sl_value_cast(e->value, e->type), &r);
        *out = new_slot(c, &r);
        return;
    }
    case SL_EXPR_PARAM: {
        sl_expr_program *p = c->p;
        for (int i = 0; i < p->nparams; i++) {
            if (p->params[i].param == e->index && p->params[i].type == e->type) {
                *out = (operand){OPND_SLOT, 0, 8, p->params[i].slot};
                return;
            }
        }
        *out = new_slot(c, NULL);
        if (c->failed) return;
        if (!grow(c, (void **)&p->params, &p->params_cap, p->nparams + 1, sizeof *p->params)) return;
        p->params[p->nparams++] = (param_use){out->index, e->index, e->type};
        return;
    }
    case SL_EXPR_COLUMN:
    case SL_EXPR_FIELD: {
        *out = (operand){e->kind == SL_EXPR_COLUMN ? OPND_COLUMN : OPND_FIELD,
                         (uint8_t)(e->kind == SL_EXPR_FIELD ? e->side & 1 : 0),
                         (uint8_t)sluice_type_size(e->type), e->index};
        sl_expr_program *p = c->p;
        for (int i = 0; i < p->ninputs; i++)
            if (p->inputs[i].kind == out->kind && p->inputs[i].side == out->side &&
                p->inputs[i].index == out->index)
                return;
        if (grow(c, (void **)&p->inputs, &p->inputs_cap, p->ninputs + 1, sizeof *p->inputs))
            p->inputs[p->ninputs++] = *out;
        return;
    }
    case SL_EXPR_CAST:
        if (e->a->type == e->type) { /* no conversion: read the operand itself */
            compile_node(c, e->a, scalar, root, out);
            return;
        }
        break;
    default: break;
    }
    operand a = {0, 0, 0, 0}, b = {0, 0, 0, 0}, k = {0, 0, 0, 0};
    step_kind kind;
    if (e->kind == SL_EXPR_COND) {
        compile_node(c, e->a, scalar, false, &k);
        compile_node(c, e->b, scalar, false, &a);
        compile_node(c, e->c, scalar, false, &b);
        if (c->failed) return;
        if (e->type == SLUICE_BOOL) {
            a = normalize_bool_column(c, a, NULL);
            b = normalize_bool_column(c, b, NULL);
            if (c->failed) return;
        }
        if (!scalar && is_scalar_operand(k)) { /* a per-run condition: spread it over the rows */
            operand r = new_reg(c);
            step *s = add_step(c, STEP_BROADCAST, false);
            if (!s) return;
            s->type = SLUICE_BOOL;
            s->dst = r;
            s->a = k;
            k = r;
        }
        kind = STEP_SELECT;
    } else {
        compile_node(c, e->a, scalar, false, &a);
        if (e->b) compile_node(c, e->b, scalar, false, &b);
        if (c->failed) return;
        kind = e->kind == SL_EXPR_CAST ? STEP_CAST : e->b ? STEP_BINARY : STEP_UNARY;
    }
    operand dst = scalar ? new_slot(c, NULL)
                  : root ? (operand){OPND_OUT, 0, (uint8_t)sluice_type_size(e->type), 0}
                         : new_reg(c);
    step *s = add_step(c, kind, scalar);
    if (!s) return;
    s->op = (uint8_t)e->op;
    s->type = (uint8_t)(kind == STEP_SELECT ? e->type : e->a->type);
    s->out_type = (uint8_t)e->type;
    s->dst = dst;
    s->a = a;
    s->b = b;
    s->c = k;
    /* Only the operands this node has: an unused operand is {0, 0, 0}, which reads as
     * register 0 and would free it while it still holds a live value. */
    release(c, a);
    if (e->b || e->kind == SL_EXPR_COND) release(c, b);
    if (e->kind == SL_EXPR_COND) release(c, k);
    *out = dst;
}

sluice_status sl_expr_compile(sluice_context *ctx, const sl_expr *e, int64_t max_rows,
                              sl_expr_program **out) {
    if (out) *out = NULL;
    if (!ctx || !e || !out || max_rows < 0) return SLUICE_ERR_INVALID_ARGUMENT;
    size_t reg_bytes;
    if (sl_mul_overflows((size_t)max_rows, 8, &reg_bytes) || reg_bytes > SIZE_MAX / 4)
        return sl_error(ctx, SLUICE_ERR_LIMIT, "tile of %lld rows is too large to evaluate",
                        (long long)max_rows);
    sl_expr_program *p = sl_calloc(ctx, 1, sizeof *p);
    if (!p) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory compiling an expression");
    p->type = e->type;
    p->max_rows = max_rows;
    p->reg_bytes = ((size_t)(max_rows < STRIP ? max_rows : STRIP) * 8 + 63) & ~(size_t)63;
    compiler c = {ctx, p, NULL, 0, 0, false};
    operand root;
    compile_node(&c, e, false, true, &root);
    if (!c.failed) {
        operand dst = {OPND_OUT, 0, (uint8_t)sluice_type_size(e->type), 0};
        if (root.kind == OPND_COLUMN && e->type == SLUICE_BOOL) {
            normalize_bool_column(&c, root, &dst);
        } else if (root.kind != OPND_OUT) { /* a leaf or a per-run value: copy or spread it */
            step *s = add_step(&c, root.kind == OPND_SLOT ? STEP_BROADCAST : STEP_COPY, false);
            if (s) {
                s->type = (uint8_t)e->type;
                s->a = root;
                s->dst = dst;
            }
        }
    }
    sl_free(ctx, c.free_regs);
    if (c.failed) {
        sl_expr_program_free(ctx, p);
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory compiling an expression");
    }
    p->slot_bytes = ((size_t)p->nslots * sizeof(sl_raw) + 63) & ~(size_t)63;
    *out = p;
    return SLUICE_OK;
}

void sl_expr_program_free(sluice_context *ctx, sl_expr_program *p) {
    if (!p) return;
    sl_free(ctx, p->steps);
    sl_free(ctx, p->inputs);
    sl_free(ctx, p->slots);
    sl_free(ctx, p->params);
    sl_free(ctx, p);
}

size_t sl_expr_program_scratch_size(const sl_expr_program *p) {
    if (!p) return 0;
    return p->slot_bytes + (size_t)p->nregs * p->reg_bytes;
}

/* Where operand o is for the strip starting at row `start` (registers hold one strip). */
static void *resolve(const sl_expr_program *p, const sl_eval_env *env, char *scratch, void *out,
                     operand o, int64_t start) {
    size_t offset = (size_t)start * o.size;
    switch (o.kind) {
    case OPND_REG: return scratch + p->slot_bytes + (size_t)o.index * p->reg_bytes;
    case OPND_SLOT: return scratch + (size_t)o.index * sizeof(sl_raw);
    case OPND_COLUMN: return (char *)env->columns[o.index] + offset;
    case OPND_FIELD: return (char *)env->fields[o.side][o.index] + offset;
    default: return (char *)out + offset;
    }
}

static void run_step(const sl_expr_program *p, const step *st, const sl_eval_env *env, char *s,
                     void *out, int64_t start, int64_t n) {
    void *dst = resolve(p, env, s, out, st->dst, start);
    const void *a = resolve(p, env, s, out, st->a, start);
    bool as = !st->scalar && is_scalar_operand(st->a);
    switch ((step_kind)st->kind) {
    case STEP_UNARY: k_unary((sl_expr_op)st->op, (sluice_type)st->type, a, dst, n); break;
    case STEP_BINARY:
        k_binary((sl_expr_op)st->op, (sluice_type)st->type, a, as,
                 resolve(p, env, s, out, st->b, start), !st->scalar && is_scalar_operand(st->b),
                 dst, n);
        break;
    case STEP_CAST:
        sl_value_cast_rows((sluice_type)st->type, a, (sluice_type)st->out_type, dst, n);
        break;
    case STEP_SELECT:
        k_select(sluice_type_size((sluice_type)st->type), resolve(p, env, s, out, st->c, start), a,
                 as, resolve(p, env, s, out, st->b, start), !st->scalar && is_scalar_operand(st->b),
                 dst, n);
        break;
    case STEP_COPY:
        if (n) memcpy(dst, a, (size_t)n * sluice_type_size((sluice_type)st->type));
        break;
    case STEP_BROADCAST: k_broadcast(sluice_type_size((sluice_type)st->type), a, dst, n); break;
    }
}

void sl_expr_run(const sl_expr_program *p, const sl_eval_env *env, int64_t rows, void *scratch,
                 void *out) {
    char *s = scratch;
    if (p->nslots) memcpy(s, p->slots, (size_t)p->nslots * sizeof(sl_raw));
    for (int i = 0; i < p->nparams; i++) {
        sl_raw r;
        sl_value_to_raw(sl_value_cast(env->params[p->params[i].param], p->params[i].type), &r);
        memcpy(s + (size_t)p->params[i].slot * sizeof(sl_raw), &r, sizeof r);
    }
    for (int i = 0; i < p->nsteps; i++) /* per-run values: they read only slots */
        if (p->steps[i].scalar) run_step(p, &p->steps[i], env, s, out, 0, 1);
    for (int64_t start = 0; start < rows; start += STRIP) {
        int64_t n = rows - start < STRIP ? rows - start : STRIP;
        /* Each step's loop is too short for the hardware prefetcher to follow a stream, so
         * ask for the next strip of every input while this one computes. */
        if (start + STRIP < rows) {
            for (int i = 0; i < p->ninputs; i++) {
                const char *next = resolve(p, env, s, out, p->inputs[i], start + STRIP);
                int64_t left = rows - start - STRIP;
                size_t bytes = (size_t)(left < STRIP ? left : STRIP) * p->inputs[i].size;
                for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(next + b);
            }
        }
        for (int i = 0; i < p->nsteps; i++)
            if (!p->steps[i].scalar) run_step(p, &p->steps[i], env, s, out, start, n);
    }
}
