/* expr_parse.c — the expression language's front end: lexer, precedence-climbing parser and
 * type checker (one pass: each node is typed as it is built), and constant folding. The tree
 * utilities it shares with the evaluator are core/expr/expr_tree.c.
 *
 * Typing rules (the full text with examples is pipelines/EXPRESSIONS.md):
 *   - Literals are untyped constants, as in Go: `x > 0` with x: f32 compares in f32 and
 *     `id & 0xff` with id: u64 stays u64. An integer constant must fit the type it meets
 *     (`u8col == 300` fits after promotion; `u32col == -1` is an error: write 0xffffffff or
 *     u32(-1)). A float constant meeting an integer operand makes both f64. Expressions made
 *     only of constants are folded exactly (integers within [-2^63, 2^64)); a constant left
 *     without context becomes i64 (u64 when above i64's range) or f64. true/false are bool.
 *   - Promotion: i8 i16 u8 u16 compute as i32; f16 computes as f32. Unary - + ~ give the
 *     promoted type of their operand (as C: +i8 is i32, and +f16 is f32 like -f16).
 *   - Arithmetic and comparisons on two typed operands (after promotion): two floats -> the
 *     wider; float with integer -> the float; two integers of one signedness -> the wider;
 *     a signed and an unsigned integer -> the signed one when it is wider (i64 with u32),
 *     otherwise a type error asking for a cast (i32 with u32, i64 with u64), because C's
 *     silent conversion there makes -1 > 0u.
 *   - Comparisons give bool; bool compares only with bool and only by == and !=.
 *   - && || ! take bool only. & | ^ take two integers or two bools; ~ << >> integers only.
 *     A shift's result has the (promoted) type of its left operand; the count may be any
 *     integer type (a constant count is typed as a lone constant: i64, u64 from 2^63 on).
 *   - c ? a : b: c is bool; branches of one type keep it (no promotion), others are unified
 *     as in arithmetic.
 *   - abs min max: numeric, as arithmetic. sqrt exp log: floats; integers become f64.
 *     floor ceil: floats; on an integer they return it. isnan isinf: floats only.
 *   - Casts T(e) for every type name convert explicitly with the rules of kernels/sl_ops.h.
 * Every implicit conversion becomes an explicit SL_EXPR_CAST node, so the evaluator and the
 * emitter only see operators whose operands already share a type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr/expr.h"
#include "sl_ops.h"

/* Types of constants that have not met a typed operand yet. Only literal nodes carry them,
 * and only while parsing. */
#define UNTYPED_INT ((sluice_type)(SLUICE_TYPE_COUNT_ + 1))
#define UNTYPED_FLOAT ((sluice_type)(SLUICE_TYPE_COUNT_ + 2))

/* ---- lexer ------------------------------------------------------------------------------- */

typedef enum tok_kind { TK_END, TK_INT, TK_FLOAT, TK_NAME, TK_PUNCT } tok_kind;

typedef enum punct {
    P_PLUS, P_MINUS, P_STAR, P_SLASH, P_PERCENT,
    P_LT, P_LE, P_GT, P_GE, P_EQ, P_NE,
    P_ANDAND, P_OROR, P_BANG,
    P_AMP, P_PIPE, P_CARET, P_TILDE, P_SHL, P_SHR,
    P_QUESTION, P_COLON, P_LPAREN, P_RPAREN, P_COMMA
} punct;

static const struct {
    const char *text;
    punct p;
} punct_table[] = { /* two-character ones first */
    {"<=", P_LE}, {">=", P_GE}, {"==", P_EQ}, {"!=", P_NE}, {"&&", P_ANDAND}, {"||", P_OROR},
    {"<<", P_SHL}, {">>", P_SHR}, {"+", P_PLUS}, {"-", P_MINUS}, {"*", P_STAR}, {"/", P_SLASH},
    {"%", P_PERCENT}, {"<", P_LT}, {">", P_GT}, {"!", P_BANG}, {"&", P_AMP}, {"|", P_PIPE},
    {"^", P_CARET}, {"~", P_TILDE}, {"?", P_QUESTION}, {":", P_COLON}, {"(", P_LPAREN},
    {")", P_RPAREN}, {",", P_COMMA},
};

typedef struct token {
    tok_kind kind;
    size_t pos, len; /* byte offset in the text */
    punct p;
    uint64_t ival;   /* TK_INT */
    double fval;     /* TK_FLOAT */
} token;

typedef struct parser {
    sluice_context *ctx;
    const char *text;
    size_t len;
    sl_srcloc loc;
    const sl_expr_scope *scope;
    token tok;
    int nesting; /* recursion depth of the parser itself */
    sluice_status status;
    char name[128]; /* the name being resolved (not kept across recursion) */
} parser;

static sl_srcloc loc_at(const parser *p, size_t pos) {
    sl_srcloc l = p->loc; /* col keeps the offset even without a line, for positions below */
    l.col += (int)pos;
    return l;
}

/* Records the first error only: later ones are consequences. */
static void fail_at(parser *p, size_t pos, sluice_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_at(parser *p, size_t pos, sluice_status status, const char *fmt, ...) {
    if (p->status != SLUICE_OK) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->loc.line > 0)
        p->status = sl_diag(p->ctx, status, loc_at(p, pos), "%s", msg);
    else /* no file position: say where inside the expression */
        p->status = sl_diag(p->ctx, status, loc_at(p, pos), "%s (at character %zu of '%.*s')",
                            msg, pos + 1, (int)(p->len > 80 ? 80 : p->len), p->text);
    if (p->status == SLUICE_OK) p->status = status;
}

static bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Scans a number at pos: 0x hex integers, decimal integers, decimals with fraction and/or
 * exponent. A letter straight after a number is an error (no suffixes). */
static bool lex_number(parser *p, size_t pos, token *t) {
    const char *s = p->text;
    size_t i = pos, n = p->len;
    t->pos = pos;
    if (s[i] == '0' && i + 1 < n && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
        i += 2;
        size_t start = i;
        uint64_t v = 0;
        bool overflow = false;
        for (; i < n && is_hex(s[i]); i++) {
            int d = is_digit(s[i]) ? s[i] - '0' : (s[i] | 0x20) - 'a' + 10;
            if (v >> 60) overflow = true;
            v = v * 16 + (uint64_t)d;
        }
        if (i == start) {
            fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX, "'0x' must be followed by hex digits");
            return false;
        }
        if (i < n && is_name_char(s[i])) {
            fail_at(p, i, SLUICE_ERR_EXPR_SYNTAX,
                    "unexpected '%c' in a hex number (numbers take no suffix; use a cast such "
                    "as u32(0xff))", s[i]);
            return false;
        }
        if (overflow) {
            fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX,
                    "integer constant '%.*s' does not fit in 64 bits", (int)(i - pos), s + pos);
            return false;
        }
        t->kind = TK_INT;
        t->ival = v;
        t->len = i - pos;
        return true;
    }
    bool is_float = false;
    while (i < n && is_digit(s[i])) i++;
    if (i < n && s[i] == '.') {
        is_float = true;
        i++;
        while (i < n && is_digit(s[i])) i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        is_float = true;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || !is_digit(s[i])) {
            fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX,
                    "the exponent of '%.*s' needs digits (e.g. 1e-3)", (int)(i - pos), s + pos);
            return false;
        }
        while (i < n && is_digit(s[i])) i++;
    }
    if (i < n && (is_name_char(s[i]) || s[i] == '.')) {
        fail_at(p, i, SLUICE_ERR_EXPR_SYNTAX,
                "unexpected '%c' after the number '%.*s' (numbers take no suffix; use a cast "
                "such as f32(1.5))", s[i], (int)(i - pos), s + pos);
        return false;
    }
    char buf[128];
    if (i - pos >= sizeof buf) {
        fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX, "number '%.20s...' is too long", s + pos);
        return false;
    }
    memcpy(buf, s + pos, i - pos);
    buf[i - pos] = 0;
    t->len = i - pos;
    if (is_float) {
        t->kind = TK_FLOAT;
        t->fval = strtod(buf, NULL);
        if (t->fval == HUGE_VAL) {
            fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX, "float constant '%s' is out of range", buf);
            return false;
        }
        return true;
    }
    uint64_t v = 0;
    for (size_t k = 0; buf[k]; k++) {
        uint64_t d = (uint64_t)(buf[k] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX,
                    "integer constant '%s' does not fit in 64 bits", buf);
            return false;
        }
        v = v * 10 + d;
    }
    t->kind = TK_INT;
    t->ival = v;
    return true;
}

/* Reads the token at or after pos into p->tok. */
static bool lex(parser *p, size_t pos) {
    const char *s = p->text;
    while (pos < p->len && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r'))
        pos++;
    token t;
    memset(&t, 0, sizeof t);
    t.pos = pos;
    if (pos >= p->len) {
        t.kind = TK_END;
        p->tok = t;
        return true;
    }
    char c = s[pos];
    if (is_digit(c) || (c == '.' && pos + 1 < p->len && is_digit(s[pos + 1]))) {
        if (!lex_number(p, pos, &t)) return false;
        p->tok = t;
        return true;
    }
    if (is_name_start(c)) {
        size_t i = pos;
        while (i < p->len && is_name_char(s[i])) i++;
        /* a field of a declared operator's state: l.a, r.a */
        if (i + 1 < p->len && s[i] == '.' && is_name_start(s[i + 1])) {
            i++;
            while (i < p->len && is_name_char(s[i])) i++;
        }
        t.kind = TK_NAME;
        t.len = i - pos;
        p->tok = t;
        return true;
    }
    for (size_t k = 0; k < SL_ARRAY_LEN(punct_table); k++) {
        size_t l = strlen(punct_table[k].text);
        if (pos + l <= p->len && !memcmp(s + pos, punct_table[k].text, l)) {
            t.kind = TK_PUNCT;
            t.p = punct_table[k].p;
            t.len = l;
            p->tok = t;
            return true;
        }
    }
    if (c == '=')
        fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX, "'=' is not an operator: write '==' to compare");
    else if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
        fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX,
                "unexpected byte 0x%02x: expressions are plain ASCII", (unsigned char)c);
    else
        fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX, "unexpected character '%c'", c);
    return false;
}

static bool advance(parser *p) { return lex(p, p->tok.pos + p->tok.len); }
static bool at_punct(const parser *p, punct x) {
    return p->tok.kind == TK_PUNCT && p->tok.p == x;
}

/* A short description of the current token for "expected X, found Y" messages. */
static void describe_token(const parser *p, char *buf, size_t cap) {
    if (p->tok.kind == TK_END) snprintf(buf, cap, "the end of the expression");
    else snprintf(buf, cap, "'%.*s'", (int)(p->tok.len > 40 ? 40 : p->tok.len),
                  p->text + p->tok.pos);
}

/* Reports "MESSAGE, found TOKEN" about the current token. Out of line (variadic functions are
 * never inlined) so that the recursive parse functions keep small stack frames. */
static void fail_found(parser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_found(parser *p, size_t pos, const char *fmt, ...) {
    char msg[256], found[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    describe_token(p, found, sizeof found);
    fail_at(p, pos, SLUICE_ERR_EXPR_SYNTAX, "%s, found %s", msg, found);
}

/* ---- nodes ------------------------------------------------------------------------------- */

static const char *type_text(sluice_type t) {
    if (t == UNTYPED_INT) return "an integer constant";
    if (t == UNTYPED_FLOAT) return "a float constant";
    const char *n = sluice_type_name(t);
    return n ? n : "an unknown type";
}

static bool untyped(const sl_expr *e) { return e->type == UNTYPED_INT || e->type == UNTYPED_FLOAT; }

static sl_expr *new_node(parser *p, sl_expr_kind kind, size_t pos) {
    sl_expr *e = sl_calloc(p->ctx, 1, sizeof *e);
    if (!e) {
        fail_at(p, pos, SLUICE_ERR_NO_MEMORY, "out of memory while parsing an expression");
        return NULL;
    }
    e->kind = kind;
    e->loc = loc_at(p, pos);
    e->index = -1;
    return e;
}

/* ---- untyped constants ------------------------------------------------------------------- */

/* Integer constants are exact in [-2^63, 2^64): held as __int128 while folding, stored in a
 * literal as value.i (type I64 in value.type) or, above i64's range, value.u (type U64). */
typedef __int128 wide;
#define WIDE_MIN (-((wide)1 << 63))
#define WIDE_MAX ((((wide)1) << 64) - 1)

static wide const_int(const sl_expr *e) {
    return e->value.type == SLUICE_U64 ? (wide)e->value.u : (wide)e->value.i;
}
static void set_const_int(sl_expr *e, wide v) {
    e->type = UNTYPED_INT;
    memset(&e->value, 0, sizeof e->value);
    if (v > (wide)INT64_MAX) {
        e->value.type = SLUICE_U64;
        e->value.u = (uint64_t)v;
    } else {
        e->value.type = SLUICE_I64;
        e->value.i = (int64_t)v;
    }
}
static double const_float(const sl_expr *e) {
    return e->type == UNTYPED_FLOAT ? e->value.f : (double)const_int(e);
}
static void set_const_float(sl_expr *e, double v) {
    e->type = UNTYPED_FLOAT;
    memset(&e->value, 0, sizeof e->value);
    e->value.type = SLUICE_F64;
    e->value.f = v;
}

/* The type a constant takes when nothing gives it one. */
static sluice_type default_type(const sl_expr *e) {
    if (e->type == UNTYPED_FLOAT) return SLUICE_F64;
    return const_int(e) > (wide)INT64_MAX ? SLUICE_U64 : SLUICE_I64;
}

/* Gives an untyped constant the type t: integers must fit (after the caller's promotion),
 * floats must not overflow to inf. */
static bool settle_constant(parser *p, sl_expr *e, sluice_type t, const char *context) {
    if (t == SLUICE_BOOL) {
        fail_at(p, (size_t)(e->loc.col - p->loc.col), SLUICE_ERR_TYPE,
                "%s cannot be used as bool%s%s (write true or false, or compare: x != 0)",
                type_text(e->type), context ? " " : "", context ? context : "");
        return false;
    }
    size_t pos = (size_t)(e->loc.col - p->loc.col);
    if (e->type == UNTYPED_INT) {
        wide v = const_int(e);
        if (sl_type_is_integer(t)) {
            int bits = sl_type_bits(t);
            wide lo = sl_type_is_signed(t) ? -((wide)1 << (bits - 1)) : 0;
            wide hi = sl_type_is_signed(t) ? ((wide)1 << (bits - 1)) - 1 : ((wide)1 << bits) - 1;
            if (v < lo || v > hi) {
                char num[48];
                sl_value shown = e->value;
                sl_value_format(shown, num, sizeof num);
                fail_at(p, pos, SLUICE_ERR_TYPE,
                        "constant %s does not fit in %s%s%s (%s)", num, sluice_type_name(t),
                        context ? " " : "", context ? context : "",
                        v < 0 && sl_type_is_unsigned(t)
                            ? "write the bits in full, e.g. 0xffffffff, or cast: ~u64(0xff)"
                            : "write it in range, or convert explicitly with a cast");
                return false;
            }
        }
        e->value = sl_value_cast(e->value, t);
    } else {
        sl_value f = e->value;
        sl_value c = sl_value_cast(f, t);
        if (sl_type_is_float(t) && !(f.f != f.f) && (c.f - c.f != 0) && (f.f - f.f == 0)) {
            char num[48];
            sl_value_format(f, num, sizeof num);
            fail_at(p, pos, SLUICE_ERR_TYPE, "constant %s overflows %s%s%s", num,
                    sluice_type_name(t), context ? " " : "", context ? context : "");
            return false;
        }
        e->value = c;
    }
    e->type = t;
    e->value.type = t;
    return true;
}

/* ---- typing helpers ---------------------------------------------------------------------- */

static sluice_type promote(sluice_type t) {
    switch (t) {
    case SLUICE_I8: case SLUICE_I16: case SLUICE_U8: case SLUICE_U16: return SLUICE_I32;
    case SLUICE_F16: return SLUICE_F32;
    default: return t;
    }
}

/* The common type of two typed, non-bool operands after promotion, or COUNT_ when mixing
 * signedness needs an explicit cast. */
static sluice_type arith_common(sluice_type a, sluice_type b) {
    a = promote(a);
    b = promote(b);
    if (a == b) return a;
    if (sl_type_is_float(a) || sl_type_is_float(b)) {
        if (sl_type_is_float(a) && sl_type_is_float(b)) return a == SLUICE_F64 || b == SLUICE_F64 ? SLUICE_F64 : SLUICE_F32;
        return sl_type_is_float(a) ? a : b;
    }
    if (sl_type_is_signed(a) == sl_type_is_signed(b))
        return sl_type_bits(a) >= sl_type_bits(b) ? a : b;
    sluice_type s = sl_type_is_signed(a) ? a : b, u = sl_type_is_signed(a) ? b : a;
    if (sl_type_bits(s) > sl_type_bits(u)) return s;
    return SLUICE_TYPE_COUNT_;
}

/* Wraps e (typed) in an implicit cast to t; *depth grows when a node is added. */
static sl_expr *convert(parser *p, sl_expr *e, sluice_type t, int *depth) {
    /* Not sl_expr_cast_to, which frees e when it runs out of memory: every caller still
     * owns e after a failure and frees it itself. */
    sl_expr *c = sl_expr_as_type(p->ctx, e, t);
    if (!c) {
        fail_at(p, 0, SLUICE_ERR_NO_MEMORY, "out of memory while parsing an expression");
        return NULL;
    }
    if (c != e) (*depth)++;
    return c;
}

static const char *op_text(sl_expr_op op) {
    static const char *const names[] = {
        [SL_OP_NEG] = "-", [SL_OP_NOT] = "!", [SL_OP_BITNOT] = "~", [SL_OP_ADD] = "+",
        [SL_OP_SUB] = "-", [SL_OP_MUL] = "*", [SL_OP_DIV] = "/", [SL_OP_MOD] = "%",
        [SL_OP_LT] = "<", [SL_OP_LE] = "<=", [SL_OP_GT] = ">", [SL_OP_GE] = ">=",
        [SL_OP_EQ] = "==", [SL_OP_NE] = "!=", [SL_OP_LAND] = "&&", [SL_OP_LOR] = "||",
        [SL_OP_BITAND] = "&", [SL_OP_BITOR] = "|", [SL_OP_BITXOR] = "^", [SL_OP_SHL] = "<<",
        [SL_OP_SHR] = ">>", [SL_FN_ABS] = "abs", [SL_FN_MIN] = "min", [SL_FN_MAX] = "max",
        [SL_FN_SQRT] = "sqrt", [SL_FN_EXP] = "exp", [SL_FN_LOG] = "log", [SL_FN_FLOOR] = "floor",
        [SL_FN_CEIL] = "ceil", [SL_FN_ISNAN] = "isnan", [SL_FN_ISINF] = "isinf",
    };
    return (unsigned)op < SL_ARRAY_LEN(names) && names[op] ? names[op] : "?";
}

static bool check_depth(parser *p, int depth, size_t pos) {
    if (depth <= SL_EXPR_MAX_DEPTH) return true;
    fail_at(p, pos, SLUICE_ERR_LIMIT,
            "expression nested deeper than %d levels: split it into several map columns",
            SL_EXPR_MAX_DEPTH);
    return false;
}

static int max_int(int a, int b) { return a > b ? a : b; }

/* Conditionals and casts carry no operator: their op stays 0, as the allocator leaves it. */
#define NO_OP ((sl_expr_op)0)

/* The tail every builder shares: a node of `kind` over the children a, b, c (NULL where
 * absent), one level deeper than its deepest child (child_depth). The node takes the
 * children: when it cannot be allocated, or nests deeper than SL_EXPR_MAX_DEPTH, they are
 * freed, the error is recorded at pos and the result is NULL. *depth is set either way. */
static sl_expr *finish_node(parser *p, sl_expr_kind kind, sl_expr_op op, sluice_type type,
                            sl_expr *a, sl_expr *b, sl_expr *c, int child_depth, size_t pos,
                            int *depth) {
    *depth = 1 + child_depth;
    sl_expr *e = new_node(p, kind, pos);
    if (!e) {
        sl_expr_free(p->ctx, a);
        sl_expr_free(p->ctx, b);
        sl_expr_free(p->ctx, c);
        return NULL;
    }
    e->op = op;
    e->type = type;
    e->a = a;
    e->b = b;
    e->c = c;
    if (!check_depth(p, *depth, pos)) {
        sl_expr_free(p->ctx, e);
        return NULL;
    }
    return e;
}

/* Folds an operation on two untyped integer constants, exactly. False when the result
 * leaves [-2^63, 2^64). */
static bool fold_int(sl_expr_op op, wide a, wide b, wide *out) {
    wide r;
    switch (op) {
    case SL_OP_ADD: r = a + b; break; /* operands are within +-2^64: no 128-bit overflow */
    case SL_OP_SUB: r = a - b; break;
    case SL_OP_MUL:
        if (__builtin_mul_overflow(a, b, &r)) return false;
        break;
    case SL_OP_DIV: r = b == 0 ? 0 : a / b; break;
    case SL_OP_MOD: r = b == 0 ? a : a % b; break;
    case SL_OP_BITAND: r = a & b; break;
    case SL_OP_BITOR: r = a | b; break;
    case SL_OP_BITXOR: r = a ^ b; break;
    case SL_OP_SHL:
        if (b < 0 || b >= 64) r = 0;
        else if (__builtin_mul_overflow(a, (wide)1 << b, &r)) return false;
        break;
    case SL_OP_SHR: r = (b < 0 || b >= 64) ? (a < 0 ? -1 : 0) : a >> b; break;
    default: return false;
    }
    if (r < WIDE_MIN || r > WIDE_MAX) return false;
    *out = r;
    return true;
}

static double fold_float(sl_expr_op op, double a, double b) {
    switch (op) {
    case SL_OP_ADD: return sl_add_f64(a, b);
    case SL_OP_SUB: return sl_sub_f64(a, b);
    case SL_OP_MUL: return sl_mul_f64(a, b);
    case SL_OP_DIV: return sl_div_f64(a, b);
    case SL_OP_MOD: return sl_mod_f64(a, b);
    default: return 0;
    }
}

/* ---- building typed nodes ----------------------------------------------------------------
 * The builders and parse_name are kept out of line (noinline): their locals would otherwise
 * sit in every frame of the recursive descent and multiply its stack use. */

static bool is_arith(sl_expr_op op) {
    return op == SL_OP_ADD || op == SL_OP_SUB || op == SL_OP_MUL || op == SL_OP_DIV ||
           op == SL_OP_MOD;
}
static bool is_compare(sl_expr_op op) { return op >= SL_OP_LT && op <= SL_OP_NE; }
static bool is_bitwise(sl_expr_op op) {
    return op == SL_OP_BITAND || op == SL_OP_BITOR || op == SL_OP_BITXOR;
}

/* Unifies the operands of an arithmetic, comparison or min/max: settles constants, converts
 * typed operands to the common type. Returns the common type, COUNT_ on error. */
static sluice_type unify_numeric(parser *p, sl_expr **a, sl_expr **b, const char *what,
                                 size_t pos, int *da, int *db) {
    sl_expr *x = *a, *y = *b;
    if (untyped(x) && untyped(y)) { /* only comparisons and calls get here: default both */
        sluice_type t = (x->type == UNTYPED_FLOAT || y->type == UNTYPED_FLOAT)
                            ? SLUICE_F64
                            : (default_type(x) == SLUICE_U64 || default_type(y) == SLUICE_U64
                                   ? SLUICE_U64 : SLUICE_I64);
        if (!settle_constant(p, x, t, NULL) || !settle_constant(p, y, t, NULL))
            return SLUICE_TYPE_COUNT_;
        return t;
    }
    if (untyped(x) || untyped(y)) {
        bool constant_left = untyped(x);
        sl_expr *c = constant_left ? x : y, *typed = constant_left ? y : x;
        int *dt = constant_left ? db : da;
        if (typed->type == SLUICE_BOOL) {
            fail_at(p, pos, SLUICE_ERR_TYPE,
                    "'%s' needs numbers, but one operand is bool and the other %s", what,
                    type_text(c->type));
            return SLUICE_TYPE_COUNT_;
        }
        sluice_type t = promote(typed->type);
        if (c->type == UNTYPED_FLOAT && sl_type_is_integer(t)) t = SLUICE_F64;
        char ctx_text[64];
        snprintf(ctx_text, sizeof ctx_text, "(the type of the other operand of '%s')", what);
        if (!settle_constant(p, c, t, ctx_text)) return SLUICE_TYPE_COUNT_;
        sl_expr *conv = convert(p, typed, t, dt);
        if (!conv) return SLUICE_TYPE_COUNT_;
        if (constant_left) *b = conv; else *a = conv;
        return t;
    }
    if (x->type == SLUICE_BOOL || y->type == SLUICE_BOOL) {
        fail_at(p, pos, SLUICE_ERR_TYPE,
                "'%s' needs numbers, not %s and %s (convert a bool with i32(b), or use && || "
                "for logic)", what, type_text(x->type), type_text(y->type));
        return SLUICE_TYPE_COUNT_;
    }
    sluice_type t = arith_common(x->type, y->type);
    if (t == SLUICE_TYPE_COUNT_) {
        fail_at(p, pos, SLUICE_ERR_TYPE,
                "'%s' mixes signed %s and unsigned %s: cast one side, e.g. %s(...) or %s(...)",
                what, type_text(sl_type_is_signed(x->type) ? x->type : y->type),
                type_text(sl_type_is_signed(x->type) ? y->type : x->type),
                sluice_type_name(promote(x->type)), sluice_type_name(promote(y->type)));
        return t;
    }
    *a = convert(p, x, t, da);
    if (!*a) { *a = x; return SLUICE_TYPE_COUNT_; }
    *b = convert(p, y, t, db);
    if (!*b) { *b = y; return SLUICE_TYPE_COUNT_; }
    return t;
}

__attribute__((noinline)) static sl_expr *make_binary(parser *p, sl_expr_op op, sl_expr *a, int da, sl_expr *b, int db,
                            size_t pos, int *depth) {
    const char *what = op_text(op);
    sluice_type result = SLUICE_TYPE_COUNT_;
    /* constants fold exactly and stay untyped */
    if (untyped(a) && untyped(b) && (is_arith(op) || is_bitwise(op) || op == SL_OP_SHL ||
                                     op == SL_OP_SHR)) {
        if (a->type == UNTYPED_INT && b->type == UNTYPED_INT) {
            wide r;
            if (!fold_int(op, const_int(a), const_int(b), &r)) {
                fail_at(p, pos, SLUICE_ERR_TYPE,
                        "constant expression overflows 64 bits at '%s' (cast a constant to "
                        "give it a type, e.g. u64(1) << 63)", what);
                goto fail;
            }
            set_const_int(a, r);
        } else if (is_arith(op)) {
            set_const_float(a, fold_float(op, const_float(a), const_float(b)));
        } else {
            fail_at(p, pos, SLUICE_ERR_TYPE, "'%s' needs integers, not a float constant", what);
            goto fail;
        }
        sl_expr_free(p->ctx, b);
        *depth = max_int(da, db);
        return a;
    }
    if (is_arith(op)) {
        result = unify_numeric(p, &a, &b, what, pos, &da, &db);
        if (result == SLUICE_TYPE_COUNT_) goto fail;
    } else if (is_compare(op)) {
        if (a->type == SLUICE_BOOL && b->type == SLUICE_BOOL) {
            if (op != SL_OP_EQ && op != SL_OP_NE) {
                fail_at(p, pos, SLUICE_ERR_TYPE,
                        "'%s' does not order bools: compare them with == or !=", what);
                goto fail;
            }
        } else if ((a->type == SLUICE_BOOL && untyped(b)) || (b->type == SLUICE_BOOL && untyped(a))) {
            fail_at(p, pos, SLUICE_ERR_TYPE,
                    "'%s' compares a bool with %s: compare a bool with true or false", what,
                    type_text(untyped(a) ? a->type : b->type));
            goto fail;
        } else if ((a->type == SLUICE_BOOL) != (b->type == SLUICE_BOOL)) {
            fail_at(p, pos, SLUICE_ERR_TYPE,
                    "'%s' compares %s with %s: a bool compares only with a bool", what,
                    type_text(a->type), type_text(b->type));
            goto fail;
        } else if (unify_numeric(p, &a, &b, what, pos, &da, &db) == SLUICE_TYPE_COUNT_) {
            goto fail;
        }
        result = SLUICE_BOOL;
    } else if (op == SL_OP_LAND || op == SL_OP_LOR) {
        if (a->type != SLUICE_BOOL || b->type != SLUICE_BOOL) {
            const sl_expr *bad = a->type != SLUICE_BOOL ? a : b;
            fail_at(p, pos, SLUICE_ERR_TYPE,
                    "'%s' needs bool operands, but %s operand is %s (compare it, e.g. x != 0)",
                    what, bad == a ? "the left" : "the right", type_text(bad->type));
            goto fail;
        }
        result = SLUICE_BOOL;
    } else if (is_bitwise(op)) {
        if (a->type == SLUICE_BOOL && b->type == SLUICE_BOOL) {
            result = SLUICE_BOOL;
        } else {
            bool a_int = sl_type_is_integer(a->type) || a->type == UNTYPED_INT;
            bool b_int = sl_type_is_integer(b->type) || b->type == UNTYPED_INT;
            if (!a_int || !b_int) {
                fail_at(p, pos, SLUICE_ERR_TYPE,
                        "'%s' needs two integers or two bools, not %s and %s", what,
                        type_text(a->type), type_text(b->type));
                goto fail;
            }
            result = unify_numeric(p, &a, &b, what, pos, &da, &db);
            if (result == SLUICE_TYPE_COUNT_) goto fail;
        }
    } else { /* shifts */
        if (untyped(a) && a->type == UNTYPED_INT && !settle_constant(p, a, default_type(a), NULL))
            goto fail;
        /* A constant count is typed as a constant left alone is: i64, or u64 from 2^63 on
           (so x << 18446744073709551615 is a shift past the width, not an error). The
           count then goes to the helpers as i64; a u64 count of 2^63 or more wraps to a
           negative one, and a negative count gives what a count >= width gives. */
        if (untyped(b) && b->type == UNTYPED_INT && !settle_constant(p, b, default_type(b), NULL))
            goto fail;
        if (!sl_type_is_integer(a->type) || !sl_type_is_integer(b->type)) {
            fail_at(p, pos, SLUICE_ERR_TYPE, "'%s' needs integers, not %s and %s", what,
                    type_text(a->type), type_text(b->type));
            goto fail;
        }
        result = promote(a->type);
        sl_expr *na = convert(p, a, result, &da);
        if (!na) goto fail;
        a = na;
        sl_expr *nb = convert(p, b, SLUICE_I64, &db);
        if (!nb) goto fail;
        b = nb;
    }
    sl_expr *e = finish_node(p, SL_EXPR_BINARY, op, result, a, b, NULL, max_int(da, db), pos,
                             depth);
    if (e) e->loc = a->loc; /* a binary node starts where its left operand does */
    return e;
fail:
    sl_expr_free(p->ctx, a);
    sl_expr_free(p->ctx, b);
    return NULL;
}

__attribute__((noinline)) static sl_expr *make_unary(parser *p, sl_expr_op op, sl_expr *a, int da, size_t pos,
                           int *depth) {
    const char *what = op_text(op);
    if (op == SL_OP_NOT) {
        if (a->type != SLUICE_BOOL) {
            fail_at(p, pos, SLUICE_ERR_TYPE,
                    "'!' needs a bool, not %s (compare instead, e.g. x == 0)", type_text(a->type));
            goto fail;
        }
    } else if (a->type == UNTYPED_INT || a->type == UNTYPED_FLOAT) {
        if (a->type == UNTYPED_FLOAT && op == SL_OP_BITNOT) {
            fail_at(p, pos, SLUICE_ERR_TYPE, "'~' needs an integer, not a float constant");
            goto fail;
        }
        if (a->type == UNTYPED_FLOAT) {
            set_const_float(a, -a->value.f);
        } else {
            wide v = const_int(a), r = op == SL_OP_NEG ? -v : -v - 1;
            if (r < WIDE_MIN || r > WIDE_MAX) {
                fail_at(p, pos, SLUICE_ERR_TYPE, "constant expression overflows 64 bits at '%s'",
                        what);
                goto fail;
            }
            set_const_int(a, r);
        }
        a->loc = loc_at(p, pos); /* the constant now starts at the operator */
        *depth = da;
        return a;
    } else if (op == SL_OP_BITNOT) {
        if (!sl_type_is_integer(a->type)) {
            fail_at(p, pos, SLUICE_ERR_TYPE, "'~' needs an integer, not %s%s", type_text(a->type),
                    a->type == SLUICE_BOOL ? " (use ! for bool)" : "");
            goto fail;
        }
    } else if (a->type == SLUICE_BOOL) {
        fail_at(p, pos, SLUICE_ERR_TYPE, "'-' needs a number, not bool (use ! for bool)");
        goto fail;
    }
    sluice_type t = op == SL_OP_NOT ? SLUICE_BOOL : promote(a->type);
    sl_expr *na = convert(p, a, t, &da);
    if (!na) goto fail;
    a = na;
    return finish_node(p, SL_EXPR_UNARY, op, t, a, NULL, NULL, da, pos, depth);
fail:
    sl_expr_free(p->ctx, a);
    return NULL;
}

__attribute__((noinline)) static sl_expr *make_cond(parser *p, sl_expr *c, int dc, sl_expr *a, int da, sl_expr *b, int db,
                          size_t pos, size_t qpos, int *depth) {
    if (c->type != SLUICE_BOOL) {
        fail_at(p, qpos, SLUICE_ERR_TYPE,
                "the condition before '?' must be bool, not %s (compare it, e.g. x != 0)",
                type_text(c->type));
        goto fail;
    }
    sluice_type t;
    if (!untyped(a) && !untyped(b) && a->type == b->type) {
        t = a->type;
    } else if (a->type == SLUICE_BOOL && b->type == SLUICE_BOOL) {
        t = SLUICE_BOOL;
    } else if (a->type == SLUICE_BOOL || b->type == SLUICE_BOOL) {
        fail_at(p, qpos, SLUICE_ERR_TYPE,
                "the branches of '? :' must both be bool or both numbers, not %s and %s",
                type_text(a->type), type_text(b->type));
        goto fail;
    } else if (untyped(a) != untyped(b)) { /* a constant takes the other branch's type */
        sl_expr *k = untyped(a) ? a : b, *typed = untyped(a) ? b : a;
        t = typed->type;
        if (k->type == UNTYPED_FLOAT && sl_type_is_integer(t)) {
            t = SLUICE_F64;
            sl_expr *conv = convert(p, typed, t, untyped(a) ? &db : &da);
            if (!conv) goto fail;
            if (untyped(a)) b = conv; else a = conv;
        }
        if (!settle_constant(p, k, t, "(the type of the other branch of '? :')")) goto fail;
    } else {
        t = unify_numeric(p, &a, &b, "? :", qpos, &da, &db);
        if (t == SLUICE_TYPE_COUNT_) goto fail;
    }
    sl_expr *na = convert(p, a, t, &da);
    if (!na) goto fail;
    a = na;
    sl_expr *nb = convert(p, b, t, &db);
    if (!nb) goto fail;
    b = nb;
    return finish_node(p, SL_EXPR_COND, NO_OP, t, c, a, b, max_int(dc, max_int(da, db)), pos,
                       depth);
fail:
    sl_expr_free(p->ctx, c);
    sl_expr_free(p->ctx, a);
    sl_expr_free(p->ctx, b);
    return NULL;
}

/* ---- calls and casts --------------------------------------------------------------------- */

static const struct {
    const char *name;
    sl_expr_op op;
    int nargs;
} functions[] = {
    {"abs", SL_FN_ABS, 1},     {"min", SL_FN_MIN, 2},     {"max", SL_FN_MAX, 2},
    {"sqrt", SL_FN_SQRT, 1},   {"exp", SL_FN_EXP, 1},     {"log", SL_FN_LOG, 1},
    {"floor", SL_FN_FLOOR, 1}, {"ceil", SL_FN_CEIL, 1},   {"isnan", SL_FN_ISNAN, 1},
    {"isinf", SL_FN_ISINF, 1},
};

static const char *const callable_names[] = {
    "abs", "min", "max", "sqrt", "exp", "log", "floor", "ceil", "isnan", "isinf",
#define SL_CAST_NAME_(E, N, CT, BT, SIZE, CLS, NPY) #N,
    SL_TYPE_LIST(SL_CAST_NAME_) /* every type's name is its cast */
#undef SL_CAST_NAME_
};

__attribute__((noinline)) static sl_expr *make_call(parser *p, sl_expr_op op, sl_expr **args, int *dargs, size_t pos,
                          int *depth) {
    const char *what = op_text(op);
    sl_expr *a = args[0], *b = args[1];
    int da = dargs[0], db = dargs[1];
    sluice_type t;
    if (op == SL_FN_MIN || op == SL_FN_MAX) {
        t = unify_numeric(p, &a, &b, what, pos, &da, &db);
        if (t == SLUICE_TYPE_COUNT_) goto fail;
    } else {
        if (untyped(a) && !settle_constant(p, a, default_type(a), NULL)) goto fail;
        if (a->type == SLUICE_BOOL) {
            fail_at(p, pos, SLUICE_ERR_TYPE, "%s() needs a number, not bool", what);
            goto fail;
        }
        switch (op) {
        case SL_FN_ABS: t = promote(a->type); break;
        case SL_FN_SQRT: case SL_FN_EXP: case SL_FN_LOG:
            t = sl_type_is_float(a->type) ? promote(a->type) : SLUICE_F64;
            break;
        case SL_FN_FLOOR: case SL_FN_CEIL:
            if (sl_type_is_integer(a->type)) { /* already whole: the call is the identity */
                *depth = da;
                return a;
            }
            t = promote(a->type);
            break;
        default: /* isnan, isinf */
            if (!sl_type_is_float(a->type)) {
                fail_at(p, pos, SLUICE_ERR_TYPE,
                        "%s() needs a float, not %s (an integer is never NaN or infinite)", what,
                        type_text(a->type));
                goto fail;
            }
            t = promote(a->type);
            break;
        }
        sl_expr *na = convert(p, a, t, &da);
        if (!na) goto fail;
        a = na;
        if (op == SL_FN_ISNAN || op == SL_FN_ISINF) t = SLUICE_BOOL;
    }
    return finish_node(p, SL_EXPR_CALL, op, t, a, b, NULL, max_int(da, b ? db : 0), pos, depth);
fail:
    sl_expr_free(p->ctx, a);
    sl_expr_free(p->ctx, b);
    return NULL;
}

__attribute__((noinline)) static sl_expr *make_cast(parser *p, sluice_type t, sl_expr *a, int da, size_t pos, int *depth) {
    if (untyped(a)) { /* an explicit cast converts a constant with the cast rules (wrapping) */
        sl_value v = a->value;
        if (a->type == UNTYPED_FLOAT) v.type = SLUICE_F64;
        a->value = sl_value_cast(v, t);
        a->type = t;
        *depth = da;
        return a;
    }
    if (a->type == t) { /* a cast to the same type is no node at all */
        *depth = da;
        return a;
    }
    return finish_node(p, SL_EXPR_CAST, NO_OP, t, a, NULL, NULL, da, pos, depth);
}

/* ---- grammar ----------------------------------------------------------------------------- */

static sl_expr *parse_ternary(parser *p, int *depth);

/* Binary operators by C precedence (higher binds tighter). */
static int binary_precedence(const parser *p, sl_expr_op *op) {
    if (p->tok.kind != TK_PUNCT) return 0;
    switch (p->tok.p) {
    case P_OROR: *op = SL_OP_LOR; return 1;
    case P_ANDAND: *op = SL_OP_LAND; return 2;
    case P_PIPE: *op = SL_OP_BITOR; return 3;
    case P_CARET: *op = SL_OP_BITXOR; return 4;
    case P_AMP: *op = SL_OP_BITAND; return 5;
    case P_EQ: *op = SL_OP_EQ; return 6;
    case P_NE: *op = SL_OP_NE; return 6;
    case P_LT: *op = SL_OP_LT; return 7;
    case P_LE: *op = SL_OP_LE; return 7;
    case P_GT: *op = SL_OP_GT; return 7;
    case P_GE: *op = SL_OP_GE; return 7;
    case P_SHL: *op = SL_OP_SHL; return 8;
    case P_SHR: *op = SL_OP_SHR; return 8;
    case P_PLUS: *op = SL_OP_ADD; return 9;
    case P_MINUS: *op = SL_OP_SUB; return 9;
    case P_STAR: *op = SL_OP_MUL; return 10;
    case P_SLASH: *op = SL_OP_DIV; return 10;
    case P_PERCENT: *op = SL_OP_MOD; return 10;
    default: return 0;
    }
}

/* The parser's own recursion, bounded before the tree's depth is known so that the C stack
 * stays small (under 256 KiB even at -O0, with ten operators pending inside every
 * parenthesis). A parenthesis costs two frames, so 256 levels of them fit; an operator
 * pending inside one costs another frame, so such shapes are refused sooner. */
#define PARSER_FRAME_BUDGET (2 * SL_EXPR_MAX_DEPTH + 8)

static bool enter(parser *p) {
    if (++p->nesting <= PARSER_FRAME_BUDGET) return true;
    fail_at(p, p->tok.pos, SLUICE_ERR_LIMIT,
            "expression nested deeper than %d levels: split it into several map columns",
            SL_EXPR_MAX_DEPTH);
    return false;
}

static void expected_operand(parser *p, const char *after) {
    if (after) fail_found(p, p->tok.pos, "expected an operand after '%s'", after);
    else fail_found(p, p->tok.pos, "expected an operand");
}

__attribute__((noinline)) static sl_expr *parse_name(parser *p, int *depth) {
    token name = p->tok;
    char *word = p->name; /* valid until the arguments of a call are parsed */
    if (name.len >= sizeof p->name) {
        fail_at(p, name.pos, SLUICE_ERR_EXPR_SYNTAX, "name '%.32s...' is too long (127 bytes at "
                "most)", p->text + name.pos);
        return NULL;
    }
    memcpy(word, p->text + name.pos, name.len);
    word[name.len] = 0;
    if (!advance(p)) return NULL;
    *depth = 1;
    if (at_punct(p, P_LPAREN)) { /* a call or a cast */
        size_t lparen = p->tok.pos;
        sluice_type cast_type;
        int fn = -1;
        for (size_t i = 0; i < SL_ARRAY_LEN(functions); i++)
            if (!strcmp(word, functions[i].name)) fn = (int)i;
        bool is_cast = sluice_type_from_name(word, &cast_type) == SLUICE_OK;
        if (fn < 0 && !is_cast) {
            const char *s = sl_suggest(word, callable_names, SL_ARRAY_LEN(callable_names));
            fail_at(p, name.pos, SLUICE_ERR_EXPR_SYNTAX,
                    "unknown function '%s'%s%s%s (functions: abs min max sqrt exp log floor ceil "
                    "isnan isinf; casts: bool i8 i16 i32 i64 u8 u16 u32 u64 f16 f32 f64)",
                    word, s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
            return NULL;
        }
        int want = is_cast ? 1 : functions[fn].nargs;
        sl_expr *args[2] = {NULL, NULL};
        int dargs[2] = {0, 0};
        int got = 0;
        if (!advance(p)) return NULL;
        if (!at_punct(p, P_RPAREN)) {
            for (;;) {
                int d = 0;
                sl_expr *arg = parse_ternary(p, &d);
                if (!arg) goto call_fail;
                if (got < 2) {
                    args[got] = arg;
                    dargs[got] = d;
                } else {
                    sl_expr_free(p->ctx, arg);
                }
                got++;
                if (!at_punct(p, P_COMMA)) break;
                if (!advance(p)) goto call_fail;
            }
        }
        if (!at_punct(p, P_RPAREN)) {
            fail_found(p, p->tok.pos,
                       "expected ',' or ')' to close the call of %.*s( at character %zu",
                       (int)name.len, p->text + name.pos, lparen + 1);
            goto call_fail;
        }
        if (got != want) {
            fail_at(p, name.pos, SLUICE_ERR_EXPR_SYNTAX, "%.*s() takes %d argument%s, got %d",
                    (int)name.len, p->text + name.pos, want, want == 1 ? "" : "s", got);
            goto call_fail;
        }
        if (!advance(p)) goto call_fail;
        if (is_cast) return make_cast(p, cast_type, args[0], dargs[0], name.pos, depth);
        return make_call(p, functions[fn].op, args, dargs, name.pos, depth);
    call_fail:
        sl_expr_free(p->ctx, args[0]);
        sl_expr_free(p->ctx, args[1]);
        return NULL;
    }
    if (!strcmp(word, "true") || !strcmp(word, "false")) {
        sl_expr *e = new_node(p, SL_EXPR_LITERAL, name.pos);
        if (!e) return NULL;
        e->type = SLUICE_BOOL;
        e->value.type = SLUICE_BOOL;
        e->value.u = word[0] == 't';
        return e;
    }
    if (!strcmp(word, "inf") || !strcmp(word, "nan")) {
        sl_expr *e = new_node(p, SL_EXPR_LITERAL, name.pos);
        if (!e) return NULL;
        set_const_float(e, word[0] == 'i' ? sl_f64_from_bits(0x7ff0000000000000ull)
                                          : sl_f64_from_bits(0x7ff8000000000000ull));
        return e;
    }
    sl_expr_kind kind;
    int index = -1, side = 0;
    sluice_type type;
    if (p->scope && p->scope->lookup &&
        p->scope->lookup(p->scope->payload, word, &kind, &index, &side, &type)) {
        sl_expr *e = new_node(p, kind, name.pos);
        if (!e) return NULL;
        e->index = index;
        e->side = side;
        e->type = type;
        return e;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(callable_names); i++) {
        if (!strcmp(word, callable_names[i])) {
            fail_at(p, name.pos, SLUICE_ERR_EXPR_SYNTAX,
                    "'%s' is a function: call it as %s(...)", word, word);
            return NULL;
        }
    }
    const char *suggestion = NULL;
    if (p->scope && p->scope->candidates) {
        size_t count = 0;
        const char *const *names = p->scope->candidates(p->scope->payload, &count);
        if (names) suggestion = sl_suggest(word, names, count);
    }
    fail_at(p, name.pos, SLUICE_ERR_UNKNOWN_COLUMN,
            "unknown name '%s'%s%s%s: not a column%s or param of this pipeline", word,
            suggestion ? " (did you mean '" : "", suggestion ? suggestion : "",
            suggestion ? "'?)" : "", strchr(word, '.') ? ", operator state field" : "");
    return NULL;
}

static sl_expr *parse_unary(parser *p, int *depth) {
    if (!enter(p)) return NULL;
    sl_expr *result = NULL;
    if (p->tok.kind == TK_PUNCT &&
        (p->tok.p == P_MINUS || p->tok.p == P_PLUS || p->tok.p == P_BANG || p->tok.p == P_TILDE)) {
        token t = p->tok;
        if (!advance(p)) goto out;
        int d = 0;
        sl_expr *a = parse_unary(p, &d);
        if (!a) goto out;
        if (t.p == P_PLUS) {
            if (a->type == SLUICE_BOOL) {
                fail_at(p, t.pos, SLUICE_ERR_TYPE, "unary '+' needs a number, not bool");
                sl_expr_free(p->ctx, a);
                goto out;
            }
            if (untyped(a)) { /* +5 is the constant 5, still untyped (as -5 is -5) */
                a->loc = loc_at(p, t.pos);
                *depth = d;
                result = a;
                goto out;
            }
            /* As in C, unary '+' promotes exactly as unary '-' does: +i8 is i32, +f16 f32. */
            result = convert(p, a, promote(a->type), &d);
            if (!result) {
                sl_expr_free(p->ctx, a);
                goto out;
            }
            *depth = d;
            if (!check_depth(p, d, t.pos)) {
                sl_expr_free(p->ctx, result);
                result = NULL;
            }
            goto out;
        }
        sl_expr_op op = t.p == P_MINUS ? SL_OP_NEG : t.p == P_BANG ? SL_OP_NOT : SL_OP_BITNOT;
        result = make_unary(p, op, a, d, t.pos, depth);
        goto out;
    }
    switch (p->tok.kind) {
    case TK_INT: case TK_FLOAT: {
        sl_expr *e = new_node(p, SL_EXPR_LITERAL, p->tok.pos);
        if (!e) goto out;
        if (p->tok.kind == TK_INT) set_const_int(e, (wide)p->tok.ival);
        else set_const_float(e, p->tok.fval);
        *depth = 1;
        if (!advance(p)) {
            sl_expr_free(p->ctx, e);
            goto out;
        }
        result = e;
        break;
    }
    case TK_NAME: result = parse_name(p, depth); break;
    case TK_PUNCT:
        if (p->tok.p == P_LPAREN) {
            size_t open = p->tok.pos;
            if (!advance(p)) goto out;
            sl_expr *e = parse_ternary(p, depth);
            if (!e) goto out;
            if (!at_punct(p, P_RPAREN)) {
                fail_found(p, p->tok.pos, "expected ')' to close the '(' at character %zu",
                           open + 1);
                sl_expr_free(p->ctx, e);
                goto out;
            }
            if (!advance(p)) {
                sl_expr_free(p->ctx, e);
                goto out;
            }
            result = e;
            break;
        }
        expected_operand(p, NULL);
        break;
    default: expected_operand(p, NULL); break;
    }
out:
    p->nesting--;
    return result;
}

/* Precedence climbing: operators of precedence >= min_prec, left-associative. */
static sl_expr *parse_binary(parser *p, int min_prec, int *depth) {
    int dl = 0;
    sl_expr *lhs = parse_unary(p, &dl);
    if (!lhs) return NULL;
    for (;;) {
        sl_expr_op op;
        int prec = binary_precedence(p, &op);
        if (prec == 0 || prec < min_prec) break;
        size_t pos = p->tok.pos;
        char optext[4];
        snprintf(optext, sizeof optext, "%s", op_text(op));
        if (!advance(p)) goto fail;
        if (p->tok.kind == TK_END || (p->tok.kind == TK_PUNCT && p->tok.p == P_RPAREN)) {
            expected_operand(p, optext);
            goto fail;
        }
        int dr = 0;
        if (!enter(p)) goto fail;
        sl_expr *rhs = parse_binary(p, prec + 1, &dr);
        p->nesting--;
        if (!rhs) goto fail;
        lhs = make_binary(p, op, lhs, dl, rhs, dr, pos, &dl);
        if (!lhs) return NULL;
    }
    *depth = dl;
    return lhs;
fail:
    sl_expr_free(p->ctx, lhs);
    return NULL;
}

static sl_expr *parse_ternary(parser *p, int *depth) {
    if (!enter(p)) return NULL;
    sl_expr *result = NULL;
    size_t start = p->tok.pos;
    int dc = 0;
    sl_expr *c = parse_binary(p, 1, &dc);
    if (!c) goto out;
    if (!at_punct(p, P_QUESTION)) {
        *depth = dc;
        result = c;
        goto out;
    }
    size_t qpos = p->tok.pos;
    if (!advance(p)) {
        sl_expr_free(p->ctx, c);
        goto out;
    }
    int da = 0, db = 0;
    sl_expr *a = parse_ternary(p, &da);
    if (!a) {
        sl_expr_free(p->ctx, c);
        goto out;
    }
    if (!at_punct(p, P_COLON)) {
        fail_found(p, p->tok.pos, "expected ':' for the '?' at character %zu", qpos + 1);
        sl_expr_free(p->ctx, c);
        sl_expr_free(p->ctx, a);
        goto out;
    }
    if (!advance(p)) {
        sl_expr_free(p->ctx, c);
        sl_expr_free(p->ctx, a);
        goto out;
    }
    sl_expr *b = parse_ternary(p, &db);
    if (!b) {
        sl_expr_free(p->ctx, c);
        sl_expr_free(p->ctx, a);
        goto out;
    }
    result = make_cond(p, c, dc, a, da, b, db, start, qpos, depth);
out:
    p->nesting--;
    return result;
}

/* ---- constant folding -------------------------------------------------------------------- */

/* Replaces every operator whose operands are all literals by its value, computed by the same
 * code the evaluator runs (so folding never changes a result). */
static void fold_constants(sl_expr *e, sluice_context *ctx) {
    if (!e) return;
    fold_constants(e->a, ctx);
    fold_constants(e->b, ctx);
    fold_constants(e->c, ctx);
    if (e->kind == SL_EXPR_LITERAL || e->kind == SL_EXPR_COLUMN || e->kind == SL_EXPR_PARAM ||
        e->kind == SL_EXPR_FIELD)
        return;
    if ((e->a && e->a->kind != SL_EXPR_LITERAL) || (e->b && e->b->kind != SL_EXPR_LITERAL) ||
        (e->c && e->c->kind != SL_EXPR_LITERAL))
        return;
    sl_value v = sl_expr_eval_scalar(e, NULL, 0);
    sl_expr_free(ctx, e->a);
    sl_expr_free(ctx, e->b);
    sl_expr_free(ctx, e->c);
    e->a = e->b = e->c = NULL;
    e->kind = SL_EXPR_LITERAL;
    e->value = v;
}

sluice_status sl_expr_parse(sluice_context *ctx, const char *text, size_t length, sl_srcloc loc,
                            const sl_expr_scope *scope, sl_expr **out) {
    if (out) *out = NULL;
    if (!ctx || !out || (!text && length)) return SLUICE_ERR_INVALID_ARGUMENT;
    parser p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.text = text ? text : "";
    p.len = length;
    p.loc = loc;
    p.scope = scope;
    if (length > SL_EXPR_MAX_LENGTH) {
        fail_at(&p, 0, SLUICE_ERR_LIMIT,
                "expression is %zu bytes long; the limit is %d: split it into several map "
                "columns", length, SL_EXPR_MAX_LENGTH);
        return p.status;
    }
    if (!lex(&p, 0)) return p.status;
    if (p.tok.kind == TK_END) {
        fail_at(&p, 0, SLUICE_ERR_EXPR_SYNTAX, "the expression is empty");
        return p.status;
    }
    int depth = 0;
    sl_expr *e = parse_ternary(&p, &depth);
    if (!e) return p.status != SLUICE_OK ? p.status : SLUICE_ERR_EXPR_SYNTAX;
    if (p.tok.kind != TK_END) {
        char found[64];
        describe_token(&p, found, sizeof found);
        if (at_punct(&p, P_RPAREN))
            fail_at(&p, p.tok.pos, SLUICE_ERR_EXPR_SYNTAX, "unbalanced ')': no '(' is open here");
        else
            fail_at(&p, p.tok.pos, SLUICE_ERR_EXPR_SYNTAX,
                    "unexpected %s after a complete expression (missing operator?)", found);
        sl_expr_free(ctx, e);
        return p.status;
    }
    if (untyped(e) && !settle_constant(&p, e, default_type(e), NULL)) {
        sl_expr_free(ctx, e);
        return p.status;
    }
    fold_constants(e, ctx);
    *out = e;
    return SLUICE_OK;
}
