/* expr_emit.c — writes a typed expression as a C expression (valid C99 and CUDA C++) over the
 * helpers of kernels/sl_ops.h, for generated kernels. Every operator becomes a helper call, so
 * the emitted code has exactly the CPU evaluator's semantics: no C operator with undefined or
 * implementation-chosen behaviour is ever emitted on its own. */
#include <stdio.h>
#include <string.h>

#include "expr/expr.h"
#include "sl_ops.h"

/* C type names and sl_ops.h helper suffixes (the type's name) come from the type list. */
const char *sl_expr_c_type_name(sluice_type t) {
    const sl_type_info *info = sl_type_info_of(t);
    return info ? info->ctype : "void";
}

static const char *suffix(sluice_type t) {
    const sl_type_info *info = sl_type_info_of(t);
    return info ? info->name : "void";
}

static const char *helper_name(sl_expr_op op) {
    static const char *const names[] = {
        [SL_OP_NEG] = "neg",       [SL_OP_NOT] = "not",       [SL_OP_BITNOT] = "bitnot",
        [SL_OP_ADD] = "add",       [SL_OP_SUB] = "sub",       [SL_OP_MUL] = "mul",
        [SL_OP_DIV] = "div",       [SL_OP_MOD] = "mod",       [SL_OP_LT] = "lt",
        [SL_OP_LE] = "le",         [SL_OP_GT] = "gt",         [SL_OP_GE] = "ge",
        [SL_OP_EQ] = "eq",         [SL_OP_NE] = "ne",         [SL_OP_LAND] = "land",
        [SL_OP_LOR] = "lor",       [SL_OP_BITAND] = "bitand", [SL_OP_BITOR] = "bitor",
        [SL_OP_BITXOR] = "bitxor", [SL_OP_SHL] = "shl",       [SL_OP_SHR] = "shr",
        [SL_FN_ABS] = "abs",       [SL_FN_MIN] = "min",       [SL_FN_MAX] = "max",
        [SL_FN_SQRT] = "sqrt",     [SL_FN_EXP] = "exp",       [SL_FN_LOG] = "log",
        [SL_FN_FLOOR] = "floor",   [SL_FN_CEIL] = "ceil",     [SL_FN_ISNAN] = "isnan",
        [SL_FN_ISINF] = "isinf",
    };
    return (unsigned)op < SL_ARRAY_LEN(names) && names[op] ? names[op] : "invalid";
}

/* A float constant as the shortest decimal that reads back exactly; inf/NaN by their bits. */
static void emit_float(double f, sluice_type t, sl_strbuf *sb) {
    if (f != f || f - f != 0) {
        if (t == SLUICE_F32)
            sl_strbuf_printf(sb, "sl_f32_from_bits(0x%08xu)", sl_f32_bits((float)f));
        else
            sl_strbuf_printf(sb, "sl_f64_from_bits(0x%016llxull)",
                             (unsigned long long)sl_f64_bits(f));
        return;
    }
    char text[48];
    sl_value v = {.type = t, .f = f};
    sl_value_format(v, text, sizeof text);
    bool needs_point = !strpbrk(text, ".eE");
    sl_strbuf_printf(sb, "(%s%s%s)", text, needs_point ? ".0" : "", t == SLUICE_F32 ? "f" : "");
}

static void emit_literal(sl_value v, sluice_type t, sl_strbuf *sb) {
    sl_value c = sl_value_cast(v, t);
    const char *ct = sl_expr_c_type_name(t);
    if (t == SLUICE_BOOL) {
        sl_strbuf_printf(sb, "((sl_bool)%d)", c.u ? 1 : 0);
    } else if (sl_type_is_signed(t)) {
        if (c.i == INT64_MIN)
            sl_strbuf_printf(sb, "((%s)(-9223372036854775807LL - 1))", ct);
        else
            sl_strbuf_printf(sb, "((%s)(%lldLL))", ct, (long long)c.i);
    } else if (sl_type_is_unsigned(t)) {
        sl_strbuf_printf(sb, "((%s)%lluULL)", ct, (unsigned long long)c.u);
    } else if (t == SLUICE_F16) {
        sl_raw r;
        sl_value_to_raw(c, &r);
        sl_strbuf_printf(sb, "((sl_half)0x%04xu)", (unsigned)r.f16);
    } else {
        if (t == SLUICE_F32) c.f = (double)(float)c.f;
        emit_float(c.f, t, sb);
    }
}

void sl_expr_emit_c(const sl_expr *e, const sl_emit_names *names, sl_strbuf *sb) {
    if (!e) return;
    switch (e->kind) {
    case SL_EXPR_LITERAL: emit_literal(e->value, e->type, sb); return;
    case SL_EXPR_COLUMN:
        /* A bool column reads as 0 or 1 whatever non-zero byte it holds (the CPU evaluator
         * normalises where it would move the bytes; here every read goes through the helper,
         * which costs nothing where the consumer only tests for zero). */
        if (e->type == SLUICE_BOOL) sl_strbuf_append(sb, "sl_cvt_bool_bool(");
        names->column(names->payload, e->index, sb);
        if (e->type == SLUICE_BOOL) sl_strbuf_append(sb, ")");
        return;
    case SL_EXPR_PARAM: names->param(names->payload, e->index, sb); return;
    case SL_EXPR_FIELD: names->field(names->payload, e->side, e->index, sb); return;
    case SL_EXPR_UNARY:
    case SL_EXPR_BINARY:
    case SL_EXPR_CALL:
        sl_strbuf_printf(sb, "sl_%s_%s(", helper_name(e->op), suffix(e->a->type));
        sl_expr_emit_c(e->a, names, sb);
        if (e->b) {
            sl_strbuf_append(sb, ", ");
            sl_expr_emit_c(e->b, names, sb);
        }
        sl_strbuf_append(sb, ")");
        return;
    case SL_EXPR_COND:
        /* both branches are side-effect free, so the C conditional is exact; the cast undoes
         * C's promotion of narrow types */
        sl_strbuf_printf(sb, "((%s)(", sl_expr_c_type_name(e->type));
        sl_expr_emit_c(e->a, names, sb);
        sl_strbuf_append(sb, " ? ");
        sl_expr_emit_c(e->b, names, sb);
        sl_strbuf_append(sb, " : ");
        sl_expr_emit_c(e->c, names, sb);
        sl_strbuf_append(sb, "))");
        return;
    case SL_EXPR_CAST:
        if (e->a->type == e->type) {
            sl_expr_emit_c(e->a, names, sb);
            return;
        }
        sl_strbuf_printf(sb, "sl_cvt_%s_%s(", suffix(e->a->type), suffix(e->type));
        sl_expr_emit_c(e->a, names, sb);
        sl_strbuf_append(sb, ")");
        return;
    }
}
