/* test_cuda_random_host.c — random pipelines that plan to one fused GPU group, their
 * generated kernels run on the host (tests/cuda_host: host threads play each block, under the
 * address and undefined-behaviour sanitizers) and their rows checked against the CPU
 * backend's, bit for bit, whole and with the batch cut in three.
 *
 * test_cuda_codegen's host cases check the loops their authors listed; these draw what
 * nobody listed: mixes of maps, flags, compactions, filters, plain and segmented scans,
 * recurrences and a closing reduce; every integer type, bool and raw float bits (NaNs of
 * both signs, negative zeros) as inputs; keys of every type, runs from one row to thousands;
 * head flags and offsets segments; the fast and the run_to_run modes; launch shapes other than
 * the table's. Results must be exact, so the generator keeps to operators whose every
 * association gives the same bits: integer arithmetic (which wraps), bitwise
 * operators, min and max of anything, counts, and float sums only of small whole numbers
 * (f32(x & 127): every partial sum stays below 2^24) and recurrences h = a h + b with a in
 * {0, 1}.
 *
 * Cases come from fixed seeds, so CI repeats them; SLUICE_RANDOM_HOST_SEED moves the seeds
 * and SLUICE_RANDOM_HOST_CASES sets how many cases a run draws, for a longer search by hand.
 * A failing case prints its YAML. Skips (77) in builds without CUDA. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#if __has_include(<nvrtc.h>)
#include "common/context.h"
#include "cuda/codegen.h"
#include "plan/plan.h"
#include "cuda_host/emulator.h"

/* What a column may take part in, so that every result stays exact. */
typedef enum {
    COL_INT,    /* any integer type: arithmetic, bitwise, comparisons, sums, keys */
    COL_BOOL,   /* flags, head flags, keys, && || ! */
    COL_SMALLF, /* a float holding a whole number in [0, 127] (or [-999, 999] in f64): sums */
    COL_FLOAT,  /* any other float (raw input bits, sums of small ones): min, max, comparisons, keys */
} col_kind;

typedef struct {
    char name[16];
    col_kind kind;
    bool scanned; /* a scan's output, or made from one: not computable at a row alone */
} gen_col;

typedef struct {
    tu_rng *r;
    char *yaml;
    size_t cap;
    size_t n;
    gen_col cols[64];
    int ncols;
    int fresh;          /* the next new column's number */
    bool offsets;       /* the pipeline has an offsets input */
    bool compacted;     /* a stage before this one drops rows: offsets segments no longer apply */
    bool per_batch;     /* results depend on how the stream is cut (reset: batch, per: batch) */
} gen;

static void put(gen *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(g->yaml + g->n, g->cap - g->n, fmt, ap);
    va_end(ap);
    ck_assert(k >= 0 && (size_t)k < g->cap - g->n);
    g->n += (size_t)k;
}

static int64_t roll(gen *g, int64_t lo, int64_t hi) { return tu_rng_range(g->r, lo, hi); }

/* A random column of `kind`, or NULL if there is none. */
static const gen_col *pick(gen *g, col_kind kind) {
    int n = 0;
    for (int c = 0; c < g->ncols; c++) n += g->cols[c].kind == kind;
    if (n == 0) return NULL;
    int at = (int)roll(g, 0, n - 1);
    for (int c = 0; c < g->ncols; c++)
        if (g->cols[c].kind == kind && at-- == 0) return &g->cols[c];
    return NULL;
}

/* A random column of any kind. */
static const gen_col *pick_any(gen *g) { return &g->cols[roll(g, 0, g->ncols - 1)]; }

/* A random column that no scan made, or NULL: a reduce's key from one runs in the loops
 * without look-back where nothing is compacted before it (codegen.c runs_countable). */
static const gen_col *pick_unscanned(gen *g) {
    int n = 0;
    for (int c = 0; c < g->ncols; c++) n += !g->cols[c].scanned;
    if (n == 0) return NULL;
    int at = (int)roll(g, 0, n - 1);
    for (int c = 0; c < g->ncols; c++)
        if (!g->cols[c].scanned && at-- == 0) return &g->cols[c];
    return NULL;
}

/* A new column, added with `kind`: its name. `scanned` is set by the scans that add one, and
 * by maps that read one (any column a map reads might be). */
static const char *add_col(gen *g, col_kind kind) {
    ck_assert_int_lt(g->ncols, (int)SL_ARRAY_LEN(g->cols));
    gen_col *c = &g->cols[g->ncols++];
    snprintf(c->name, sizeof c->name, "c%d", g->fresh++);
    c->kind = kind;
    c->scanned = false;
    return c->name;
}

/* Marks the last column added as a scan's. */
static void last_scanned(gen *g) { g->cols[g->ncols - 1].scanned = true; }

/* Whether any column so far is a scan's (a map after one may read it). */
static bool any_scanned(const gen *g) {
    for (int c = 0; c < g->ncols; c++)
        if (g->cols[c].scanned) return true;
    return false;
}

/* An integer operand: a column or, now and then, a constant (shift counts past the width and
 * negative ones included: their result is defined on both backends). */
static void int_operand(gen *g, char *out, size_t cap) {
    if (roll(g, 0, 3) == 0) {
        static const int consts[] = {0, 1, 2, 3, 7, 31, 63, 64, 65, 127, 255, 1000, -1, -3, -64};
        snprintf(out, cap, "%d", consts[roll(g, 0, (int64_t)SL_ARRAY_LEN(consts) - 1)]);
    } else {
        snprintf(out, cap, "%s", pick(g, COL_INT)->name);
    }
}

/* An integer expression over integer columns. */
static void int_expr(gen *g, char *out, size_t cap) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%s", pick(g, COL_INT)->name);
    int_operand(g, b, sizeof b);
    static const char *const ops[] = {"+", "-", "*", "&", "|", "^", "/", "%", "<<", ">>"};
    switch (roll(g, 0, 6)) {
    case 0: snprintf(out, cap, "min(%s, %s)", a, b); break;
    case 1: snprintf(out, cap, "max(%s, %s)", a, b); break;
    case 2: snprintf(out, cap, "abs(%s)", a); break;
    case 3: {
        static const char *const casts[] = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"};
        snprintf(out, cap, "%s(%s)", casts[roll(g, 0, 7)], a);
        break;
    }
    case 4: {
        const gen_col *c = pick(g, COL_BOOL);
        if (c) {
            snprintf(out, cap, "%s ? %s : %s", c->name, a, b);
            break;
        }
    } /* fall through */
    default: snprintf(out, cap, "%s %s %s", a, ops[roll(g, 0, 9)], b); break;
    }
}

/* A predicate: comparisons of integers or of floats (raw bits: NaNs compare false), low
 * bits of an integer, flags and their combinations. */
static void bool_expr(gen *g, char *out, size_t cap) {
    static const char *const cmps[] = {"<", "<=", ">", ">=", "==", "!="};
    const char *cmp = cmps[roll(g, 0, 5)];
    const gen_col *f = pick(g, roll(g, 0, 1) ? COL_FLOAT : COL_SMALLF);
    const gen_col *flag = pick(g, COL_BOOL);
    switch (roll(g, 0, 4)) {
    case 0:
        if (f) {
            const gen_col *h = pick(g, f->kind);
            if (roll(g, 0, 1)) snprintf(out, cap, "%s %s %s", f->name, cmp, h->name);
            else snprintf(out, cap, "%s %s %s", f->name, cmp, roll(g, 0, 1) ? "0.0" : "64.5");
            return;
        }
        break;
    case 1:
        if (flag) {
            const gen_col *o = pick(g, COL_BOOL);
            switch (roll(g, 0, 2)) {
            case 0: snprintf(out, cap, "!%s", flag->name); return;
            case 1: snprintf(out, cap, "%s && !%s", flag->name, o->name); return;
            default: snprintf(out, cap, "%s || %s", flag->name, o->name); return;
            }
        }
        break;
    case 2: {
        static const int masks[] = {1, 3, 7, 63, 1023};
        snprintf(out, cap, "(%s & %d) != 0", pick(g, COL_INT)->name, masks[roll(g, 0, 4)]);
        return;
    }
    default: break;
    }
    char b[32];
    int_operand(g, b, sizeof b);
    snprintf(out, cap, "%s %s %s", pick(g, COL_INT)->name, cmp, b);
}

/* map: one to three entries (a later entry may read an earlier one). */
static void stage_map(gen *g) {
    put(g, "  - map: {");
    int entries = (int)roll(g, 1, 3);
    for (int e = 0; e < entries; e++) {
        char expr[160];
        col_kind kind;
        switch (roll(g, 0, 5)) {
        case 0:
            bool_expr(g, expr, sizeof expr);
            kind = COL_BOOL;
            break;
        case 1: /* a small whole float, summable exactly */
            if (roll(g, 0, 1)) snprintf(expr, sizeof expr, "f32(%s & 127)", pick(g, COL_INT)->name);
            else snprintf(expr, sizeof expr, "f64(%s %% 1000)", pick(g, COL_INT)->name);
            kind = COL_SMALLF;
            break;
        case 2: { /* head flags every 2^m rows or so: long runs of keys made by a scan later */
            static const int masks[] = {3, 63, 1023, 8191};
            snprintf(expr, sizeof expr, "(%s & %d) == 0", pick(g, COL_INT)->name, masks[roll(g, 0, 3)]);
            kind = COL_BOOL;
            break;
        }
        default:
            int_expr(g, expr, sizeof expr);
            kind = COL_INT;
            break;
        }
        const bool from_scan = any_scanned(g);
        put(g, "%s%s: %s", e ? ", " : "", add_col(g, kind), expr);
        if (from_scan) last_scanned(g);
    }
    put(g, "}\n");
}

/* A scan's operator and operand over a column the operator keeps exact; the result's kind. */
static col_kind scan_operand(gen *g, char *body, size_t cap) {
    const gen_col *sf = pick(g, COL_SMALLF);
    const gen_col *fl = pick(g, COL_FLOAT);
    switch (roll(g, 0, 7)) {
    case 0: snprintf(body, cap, "op: count"); return COL_INT;
    case 1:
        if (sf) {
            snprintf(body, cap, "of: %s, op: sum", sf->name);
            return COL_FLOAT; /* no longer small */
        }
        break;
    case 2:
        if (fl) {
            snprintf(body, cap, "of: %s, op: %s", fl->name, roll(g, 0, 1) ? "min" : "max");
            return COL_FLOAT;
        }
        break;
    case 3: { /* a bool's operators: any nonzero byte of a bool input is true */
        const gen_col *bl = pick(g, COL_BOOL);
        static const char *const bool_ops[] = {"and", "or", "xor", "min", "max"};
        if (bl) {
            snprintf(body, cap, "of: %s, op: %s", bl->name, bool_ops[roll(g, 0, 4)]);
            return COL_BOOL;
        }
        break;
    }
    default: break;
    }
    static const char *const ops[] = {"sum", "prod", "min", "max", "and", "or", "xor"};
    const int op = (int)roll(g, 0, 6);
    int at = snprintf(body, cap, "of: %s, op: %s", pick(g, COL_INT)->name, ops[op]);
    if (op <= 1 && roll(g, 0, 4) == 0) { /* an accumulator of another width (it wraps there) */
        static const char *const accs[] = {"i16", "i32", "i64", "u64"};
        snprintf(body + at, cap - (size_t)at, ", acc: %s", accs[roll(g, 0, 3)]);
    }
    return COL_INT;
}

/* scan, or segmented_scan by a key (any column), by head flags or by the offsets input. */
static void stage_scan(gen *g, bool segmented) {
    char body[160], segs[64] = "";
    col_kind kind = scan_operand(g, body, sizeof body);
    if (segmented) {
        const gen_col *flag = pick(g, COL_BOOL);
        int how = (int)roll(g, 0, 2);
        if (how == 0 && g->offsets && !g->compacted) snprintf(segs, sizeof segs, ", segments: rows");
        else if (how == 1 && flag) snprintf(segs, sizeof segs, ", segments: %s", flag->name);
        else snprintf(segs, sizeof segs, ", segments: {key: %s}", pick_any(g)->name);
    }
    const bool reset = !segmented && roll(g, 0, 6) == 0;
    g->per_batch = g->per_batch || reset;
    put(g, "  - %s: {%s%s, kind: %s%s, into: ", segmented ? "segmented_scan" : "scan", body, segs,
        roll(g, 0, 1) ? "inclusive" : "exclusive", reset ? ", reset: batch" : "");
    put(g, "%s}\n", add_col(g, kind));
    last_scanned(g);
}

/* A key that runs for many rows: a running count of sparse head flags. */
static void stage_run_key(gen *g) {
    static const int masks[] = {7, 255, 4095};
    const char *h = add_col(g, COL_BOOL);
    put(g, "  - map: {%s: (%s & %d) == 0}\n", h, pick(g, COL_INT)->name, masks[roll(g, 0, 2)]);
    put(g, "  - scan: {of: i64(%s), op: sum, into: ", h);
    put(g, "%s}\n", add_col(g, COL_INT));
    last_scanned(g);
}

/* h = a h + b: over integers (an i64 recurrence, exact as it wraps), or over floats with a in
 * {0, 1} and b in [0, 7] (sums of small whole numbers, exact). */
static void stage_linrec(gen *g) {
    if (roll(g, 0, 1)) {
        char a[16];
        snprintf(a, sizeof a, "%s", pick(g, COL_INT)->name);
        put(g, "  - scan: {op: linrec, a: %s, b: %s, into: ", a, pick(g, COL_INT)->name);
        put(g, "%s}\n", add_col(g, COL_INT));
        last_scanned(g);
        return;
    }
    char a[16], b[16];
    snprintf(a, sizeof a, "%s", add_col(g, COL_SMALLF));
    snprintf(b, sizeof b, "%s", add_col(g, COL_SMALLF));
    put(g, "  - map: {%s: f32(%s & 1), %s: f32(%s & 7)}\n", a, pick(g, COL_INT)->name, b,
        pick(g, COL_INT)->name);
    put(g, "  - scan: {op: linrec, a: %s, b: %s, into: %s}\n", a, b, add_col(g, COL_FLOAT));
    last_scanned(g);
}

static void stage_filter(gen *g) {
    char e[160];
    bool_expr(g, e, sizeof e);
    if (roll(g, 0, 1)) {
        put(g, "  - filter: %s\n", e);
    } else {
        const char *f = add_col(g, COL_BOOL);
        put(g, "  - flag: {%s: %s}\n  - compact: {by: %s", f, e, f);
        if (roll(g, 0, 2) == 0) { /* only some columns stay live: every integer, others at random */
            put(g, ", columns: [");
            int kept = 0;
            for (int c = 0; c < g->ncols; c++) {
                if (g->cols[c].kind != COL_INT && roll(g, 0, 1)) continue;
                put(g, "%s%s", kept ? ", " : "", g->cols[c].name);
                g->cols[kept++] = g->cols[c];
            }
            g->ncols = kept;
            put(g, "]");
        }
        put(g, "}\n");
    }
    g->compacted = true;
}

/* The closing reduce: segments none, by key, by head flags or by the offsets (by_key: by a
 * key no scan made); one to three values of exact operators. */
static void stage_reduce(gen *g, bool by_key) {
    put(g, "  - reduce:\n");
    const gen_col *flag = pick(g, COL_BOOL);
    bool segments = true;
    switch (by_key ? 3 : roll(g, 0, 3)) {
    case 0: segments = false; break;
    case 1:
        if (g->offsets && !g->compacted) {
            put(g, "      segments: rows\n");
            break;
        }
    /* fall through */
    case 2:
        if (flag) {
            put(g, "      segments: %s\n", flag->name);
            break;
        }
    /* fall through */
    default: { /* half the keys computable at a row: with nothing compacted, the runs' loop */
        const gen_col *key = by_key || roll(g, 0, 1) ? pick_unscanned(g) : NULL;
        put(g, "      segments: {key: %s}\n", (key ? key : pick_any(g))->name);
        break;
    }
    }
    /* the reduce's outputs are new names, never its operands */
    if (segments && roll(g, 0, 1)) put(g, "      index: c%d\n", g->fresh++);
    if (roll(g, 0, 4) == 0) {
        put(g, "      per: batch\n");
        g->per_batch = true;
    }
    put(g, "      values:\n");
    int values = (int)roll(g, 1, 3);
    for (int v = 0; v < values; v++) {
        char body[160];
        if (roll(g, 0, 6) == 0) /* an integer recurrence's h at the segment's last row */
            snprintf(body, sizeof body, "op: linrec, a: %s, b: %s", pick(g, COL_INT)->name,
                     pick(g, COL_INT)->name);
        else
            scan_operand(g, body, sizeof body);
        put(g, "        - {%s, into: c%d}\n", body, g->fresh++);
    }
}

/* One random pipeline into yaml. */
static void random_group_yaml(gen *g, uint64_t seed) {
    static const char *const types[] = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                                        "bool", "f32", "f64", "f16"};
    put(g, "sluice: 1\nname: random-host-%llu\n", (unsigned long long)seed);
    if (roll(g, 0, 3) == 0) put(g, "determinism: run_to_run\n");
    /* a quarter of the cases: maps, then a reduce over runs of a key computable at a row (the
       runs' loop without look-back) */
    const bool runs = roll(g, 0, 3) == 0;
    put(g, "input:\n");
    g->offsets = !runs && roll(g, 0, 3) == 0;
    if (g->offsets) put(g, "  rows: {type: i64, role: offsets}\n");
    int inputs = (int)roll(g, 1, 3);
    for (int k = 0; k < inputs; k++) {
        const char *t = types[k == 0 ? roll(g, 0, 7) : roll(g, 0, 11)];
        col_kind kind = t[0] == 'f' ? COL_FLOAT : t[0] == 'b' ? COL_BOOL : COL_INT;
        put(g, "  %s: %s\n", add_col(g, kind), t);
    }
    put(g, "stages:\n");
    if (runs) {
        for (int s = (int)roll(g, 0, 2); s > 0; s--) stage_map(g);
        stage_reduce(g, true);
        return;
    }
    int stages = (int)roll(g, 1, 5);
    for (int s = 0; s < stages; s++) {
        switch (roll(g, 0, 9)) {
        case 0:
        case 1: stage_map(g); break;
        case 2: stage_filter(g); break;
        case 3: stage_scan(g, false); break;
        case 4:
        case 5: stage_scan(g, true); break;
        case 6: stage_run_key(g); break;
        case 7: stage_linrec(g); break;
        default: stage_map(g); break;
        }
    }
    if (roll(g, 0, 2) != 0) {
        stage_reduce(g, false);
        return;
    }
    /* a random part of the columns out (an input only where rows are dropped: a group that
       keeps every row leaves its inputs to the host, not to the kernel) */
    put(g, "output: [");
    int out = 0;
    for (int c = 0; c < g->ncols; c++) {
        if ((c < inputs && !g->compacted) || (roll(g, 0, 2) == 0 && c + 1 < g->ncols)) continue;
        put(g, "%s%s", out++ ? ", " : "", g->cols[c].name);
    }
    put(g, "]\n");
}

/* The seeds' base and the number of cases a run draws. */
static uint64_t seed_base(void) {
    const char *s = getenv("SLUICE_RANDOM_HOST_SEED");
    return s ? strtoull(s, NULL, 0) : 0x5eedb0057ull;
}

/* Case `i`: pipelines drawn from its seed until one loads and plans to one fused group (most
 * do; a sort or a stage the loader rejects moves on), its kernels built for the host, and
 * batches of several sizes (with an offsets input: segments) matched against the CPU. */
START_TEST(random_group_on_host) {
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    char yaml[8192];
    gen g;
    tu_rng r;
    uint64_t seed = seed_base() + (uint64_t)_i * 1000003u;
    sluice_pipeline *p = NULL;
    sl_plan plan;
    sl_codegen cg;
    char tuning[32] = "", rounds[8] = "";
    /* every fourth case takes tiles of 2 or 4 rounds, its group drawn again until it may
       (codegen.c rounds_of; one plain scan over 1- or 2-byte columns takes 2 or 4 unasked) */
    if (_i % 4 == 3) snprintf(rounds, sizeof rounds, "%d", _i % 8 == 3 ? 2 : 4);
    for (int attempt = 0;; attempt++) {
        ck_assert_msg(attempt < 100, "seed %llu: no pipeline of one fused group in 100 draws",
                      (unsigned long long)seed);
        tu_rng_seed(&r, seed + (uint64_t)attempt);
        memset(&g, 0, sizeof g);
        g.r = &r;
        g.yaml = yaml;
        g.cap = sizeof yaml;
        random_group_yaml(&g, seed + (uint64_t)attempt);
        if (sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "random", &p) != SLUICE_OK) continue;
        if (sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan) != SLUICE_OK) {
            sluice_pipeline_free(p);
            continue;
        }
        if (plan.ngroups != 1 || plan.groups[0].kind != SL_GROUP_FUSED || p->nparams > 0) {
            sl_plan_free(ctx, &plan);
            sluice_pipeline_free(p);
            continue;
        }
        /* a third of the cases at another launch shape: 64 to 512 threads of 1 to 32 items
           (the most a thread takes: kernels/sl_tile.cuh), tiles of 64 to 16384 rows */
        tuning[0] = '\0';
        if (roll(&g, 0, 2) == 0) {
            snprintf(tuning, sizeof tuning, "%d:%d", 64 << roll(&g, 0, 3), 1 << roll(&g, 0, 5));
            setenv("SLUICE_CUDA_TUNING", tuning, 1);
        }
        if (rounds[0]) setenv("SLUICE_CUDA_ROUNDS", rounds, 1);
        sluice_status st = sl_cuda_codegen(ctx, p, &plan, 0, 90, &cg);
        unsetenv("SLUICE_CUDA_TUNING");
        unsetenv("SLUICE_CUDA_ROUNDS");
        if (st != SLUICE_OK) tu_print_diags(ctx);
        ck_assert_msg(st == SLUICE_OK, "codegen failed for\n%s", yaml);
        /* offsets no stage reads (the CPU still checks them against the rows), or rounds
           asked of a group that may not take them (most draws have a compaction, a reduce
           or several phases; after 60 draws any group will do): redraw */
        if ((g.offsets && cg.offsets_input < 0) || (rounds[0] && cg.rounds == 1 && attempt < 60)) {
            sl_cuda_codegen_free(ctx, &cg);
            sl_plan_free(ctx, &plan);
            sluice_pipeline_free(p);
            continue;
        }
        break;
    }
    fprintf(stderr, "random_group_on_host %d (%s%s, %d rounds%s%s):\n%s", _i,
            tuning[0] ? "SLUICE_CUDA_TUNING=" : "the table's launch shape", tuning, cg.rounds,
            rounds[0] ? ", SLUICE_CUDA_ROUNDS=" : "", rounds, yaml);
    char dir[] = "/tmp/sluice-random-host-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    emu_build(p, &cg, dir);
    const bool offsets = cg.offsets_input >= 0;
    /* rows, or with an offsets input segments (of about 130 rows: up to 15 tiles); the loops
       without look-back, quick on the host, also over 40000 rows (many tiles a block and
       warp, the grid's records joined) */
    static const int64_t sizes[] = {0, 1, 33, 2600, 9000, 40000}, segments[] = {0, 1, 2, 33, 150, 300};
    for (size_t z = 0; z < SL_ARRAY_LEN(sizes); z++) {
        if (z + 1 == SL_ARRAY_LEN(sizes) && !cg.aggregate_loop) continue;
        host_batch_matches_cpu(p, &cg, dir, offsets, g.per_batch, seed + 77 * z,
                               offsets ? segments[z] : sizes[z]);
    }
    /* a tile of rounds holds up to 32768 rows: past two of them, a look-back between tiles
       taken in rounds */
    if (cg.rounds > 1 && !offsets)
        host_batch_matches_cpu(p, &cg, dir, false, g.per_batch, seed + 999, 2 * cg.tile_rows + 5);
    emu_finish(ctx, p, &plan, &cg, dir);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("cuda_random_host");
    TCase *tc = tcase_create("random");
    tcase_set_timeout(tc, 900);
    const char *n = getenv("SLUICE_RANDOM_HOST_CASES");
    tcase_add_loop_test(tc, random_group_on_host, 0, n ? atoi(n) : 12);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(make_suite()); }

#else /* no CUDA in this build */
int main(void) {
    printf("test_cuda_random_host: built without CUDA, skipped\n");
    return 77;
}
#endif
