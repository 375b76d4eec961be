/* test_reduce.c — the `reduce` stage (pipelines/SCHEMA.md, "reduce") on the CPU backend:
 * the loader (good files, and every bad one naming what to fix), explain, the plan (a reduce
 * ends its fused group; what it reads, writes and holds until flush; the rows it gives; a
 * backend without it refuses it at open), and results against a sequential oracle written
 * here from the contract alone. The oracle runs one row at a time over the whole stream; the
 * sessions get the stream cut into random batches (empty ones included) at the edge sizes of
 * the CPU tile (0, 1, T-1, T, T+1 rows and many tiles), on 1 and 3 threads and with a small
 * max_batch_rows, for every segment kind, per stream and per batch, every operator (declared
 * and linrec included) and several accumulator types; with a filter or a scan before the
 * reduce in its group and stages after it; through pushes and flushes that fail part-way,
 * which must leave everything as it was. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "cpu/fused.h"
#include "plan/plan.h"

#define T SL_CPU_TILE_ROWS
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- loader, explain and plan ------------------------------------------------------------ */

#define HEAD                                                                              \
    "sluice: 1\nname: r\n"                                                                \
    "input: {k: i32, h: bool, x: i32, y: f32, u: u8, off: {type: i64, role: offsets}}\n"

static int column_id(const sluice_pipeline *p, const char *name) {
    for (int c = 0; c < p->ncolumns; c++)
        if (strcmp(p->columns[c].name, name) == 0) return c;
    ck_abort_msg("no column %s", name);
    return -1;
}

START_TEST(loads_and_explains) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        HEAD "operators:\n  pair:\n    state: {s: i64, q: f64}\n    identity: {s: 0, q: 0.0}\n"
        "    combine: {s: l.s + r.s, q: l.q + r.q}\n"
        "stages:\n  - map: {z: y * 2.0}\n"
        "  - reduce:\n      segments: {key: k}\n      index: seg\n      values:\n"
        "        - {op: sum, of: x, into: total}\n        - {op: count, into: n}\n"
        "        - {op: max, of: y * x, into: big, acc: f64}\n"
        "        - {op: linrec, a: y, b: z, into: last}\n"
        "        - {op: pair, of: {s: x, q: z}, into: {q: pq, s: ps}}\n"
        "  - map: {mean: total / n}\n");
    /* after the stage: the key, the index, the values' columns in the order written */
    static const char *const outputs[] = {"k",    "seg", "total", "n",   "big",
                                          "last", "pq",  "ps",    "mean"};
    ck_assert_int_eq(p->noutputs, (int)NELEM(outputs));
    for (size_t i = 0; i < NELEM(outputs); i++)
        ck_assert_str_eq(p->columns[p->outputs[i]].name, outputs[i]);
    const sl_stage *st = &p->stages[1];
    ck_assert_int_eq(st->kind, SL_STAGE_REDUCE);
    const sl_reduce *r = &st->reduce;
    ck_assert_int_eq(r->nvalues, 5);
    ck_assert_int_eq(r->segments, SL_SEGMENTS_KEY);
    ck_assert_int_eq(r->key_column, column_id(p, "k"));
    ck_assert_int_eq(r->index_column, column_id(p, "seg"));
    ck_assert(!r->per_batch);
    ck_assert_int_eq(p->columns[r->index_column].type, SLUICE_I64);
    /* the values are typed as scans: accumulators and into columns */
    ck_assert_int_eq(p->columns[column_id(p, "total")].type, SLUICE_I64);
    ck_assert_int_eq(p->columns[column_id(p, "n")].type, SLUICE_I64);
    ck_assert_int_eq(p->columns[column_id(p, "big")].type, SLUICE_F64);
    ck_assert_int_eq(p->columns[column_id(p, "last")].type, SLUICE_F32);
    ck_assert_int_eq(p->columns[column_id(p, "pq")].type, SLUICE_F64);
    ck_assert_int_eq(r->values[3].op, SL_SCAN_LINREC);
    ck_assert_int_eq(r->values[3].into[1], column_id(p, "last"));
    ck_assert_int_eq(r->values[4].op, SL_SCAN_CUSTOM);
    for (int i = 0; i < r->nvalues; i++) {
        ck_assert(!r->values[i].exclusive);
        ck_assert_int_eq(r->values[i].segments, SL_SEGMENTS_KEY);
        ck_assert_int_eq(r->values[i].segment_column, r->key_column);
    }
    /* every other column is gone after it */
    ck_assert(!st->live_after[column_id(p, "x")] && !st->live_after[column_id(p, "z")]);
    ck_assert(!st->live_after[column_id(p, "h")] && st->live_after[column_id(p, "k")]);

    char *text = NULL;
    ck_assert_int_eq(sluice_pipeline_explain(p, SLUICE_BACKEND_CPU, &text, NULL), SLUICE_OK);
    ck_assert_msg(strstr(text, "segments by key k, one row each; "
                               "index -> seg: i64; sum -> total: i64; count -> n: i64; max -> "
                               "big: f64; linrec -> last: f32; pair -> ps: i64 -> pq: f64") &&
                  strstr(text, "group 2: fused, 1 stage"), "%s", text);
    sluice_free_text(ctx, text);

    /* the plan: the reduce ends group 1; the map after it is group 2 */
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CPU, &plan), SLUICE_OK);
    ck_assert_int_eq(plan.ngroups, 2);
    const sl_group *g = &plan.groups[0];
    ck_assert(g->reduces && g->emits_at_flush && !plan.groups[1].reduces);
    ck_assert_int_eq(g->first, 0);
    ck_assert_int_eq(g->last, 2);
    ck_assert_int_eq(g->npass, 0);
    bool in_k = false, out_k = false;
    for (int i = 0; i < g->nin; i++) in_k |= g->in[i] == column_id(p, "k");
    for (int i = 0; i < g->nout; i++) out_k |= g->out[i] == column_id(p, "k");
    ck_assert(in_k && out_k);
    ck_assert_int_eq(g->nout, 8); /* k seg total n big last pq ps */
    ck_assert_int_eq(g->phases, 1); /* the values read level-0 columns: one carry phase */
    ck_assert_int_eq(sl_plan_rows_out(p, &plan, 0, 100, -1, false), 100);
    ck_assert_int_eq(sl_plan_rows_out(p, &plan, 0, 0, -1, true), 1);
    ck_assert_int_eq(sl_plan_rows_out(p, &plan, 1, 100, -1, false), 100);
    /* a backend without reduce refuses it at open, naming the stage */
    sl_backend_caps caps = {0};
    ck_assert_int_eq(sl_plan_check(ctx, p, &plan, &caps), SLUICE_ERR_BACKEND_UNAVAILABLE);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_ptr_nonnull(d);
    char where[64];
    snprintf(where, sizeof where, "the reduce stage (line %d)", st->loc.line);
    ck_assert_msg(strstr(d->message, where) != NULL, "%s", d->message);
    caps.reduce = true;
    ck_assert_int_eq(sl_plan_check(ctx, p, &plan, &caps), SLUICE_OK);
    sl_plan_free(ctx, &plan);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* What each kind of segments holds back and gives: the plan's bounds. */
START_TEST(plan_rows_out) {
    static const struct {
        const char *seg, *per;
        int64_t rows100, segs7, at_flush;
        bool batch_bound;
    } cases[] = {
        {"", "", 0, 0, 1, false},          {"", "      per: batch\n", 1, 1, 0, true},
        {"      segments: off\n", "", 7, 7, 0, false},
        {"      segments: h\n", "", 100, 100, 1, false},
        {"      segments: h\n", "      per: batch\n", 100, 100, 0, true},
        {"      segments: {key: k}\n", "", 100, 100, 1, false},
    };
    for (size_t i = 0; i < NELEM(cases); i++) {
        sluice_context *ctx;
        ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
        char yaml[1024];
        snprintf(yaml, sizeof yaml,
                 HEAD "stages:\n  - filter: x > 0\n  - reduce:\n%s%s"
                      "      values: [{op: count, into: n}]\n",
                 cases[i].seg, cases[i].per);
        if (strstr(cases[i].seg, "off")) /* offsets segments only before rows change */
            snprintf(yaml, sizeof yaml,
                     HEAD "stages:\n  - reduce:\n%s%s      values: [{op: count, into: n}]\n",
                     cases[i].seg, cases[i].per);
        sluice_pipeline *p = tu_load(ctx, yaml);
        sl_plan plan;
        ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CPU, &plan), SLUICE_OK);
        ck_assert_int_eq(plan.ngroups, 1);
        ck_assert_int_eq(sl_plan_rows_out(p, &plan, 0, 100, 7, false),
                         strstr(cases[i].seg, "off") ? cases[i].segs7 : cases[i].rows100);
        ck_assert_int_eq(sl_plan_rows_out(p, &plan, 0, 0, -1, true), cases[i].at_flush);
        ck_assert(plan.groups[0].emits_at_flush == (cases[i].at_flush > 0));
        ck_assert_int_eq(plan.groups[0].cut == SL_CUT_NEVER, cases[i].batch_bound);
        sl_plan_free(ctx, &plan);
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
    }
}
END_TEST

/* Every mistake is an error that names what to fix. */
START_TEST(bad_files) {
    static const struct {
        const char *stages;
        sluice_status status;
        const char *says;
    } cases[] = {
        {"  - reduce: {segments: h}\n", SLUICE_ERR_MISSING_KEY, "needs a 'values' key"},
        {"  - reduce: {values: []}\n", SLUICE_ERR_BAD_VALUE, "list of 1 to 32 reductions"},
        {"  - reduce: {values: {op: sum}}\n", SLUICE_ERR_BAD_VALUE, "list of 1 to 32"},
        {"  - reduce: {values: [sum]}\n", SLUICE_ERR_BAD_VALUE, "each reduction is a mapping"},
        {"  - reduce: {values: [{op: sum, of: x}]}\n", SLUICE_ERR_MISSING_KEY,
         "a reduction needs a 'into' key"},
        {"  - reduce: {values: [{of: x, into: s}]}\n", SLUICE_ERR_MISSING_KEY,
         "a reduction needs a 'op' key"},
        {"  - reduce: {values: [{op: sum, of: x, into: s, kind: exclusive}]}\n",
         SLUICE_ERR_UNKNOWN_KEY, "'kind' does not apply to a reduction"},
        {"  - reduce: {values: [{op: sum, of: x, into: s, reset: batch}]}\n",
         SLUICE_ERR_UNKNOWN_KEY, "per: batch"},
        {"  - reduce: {values: [{op: sum, of: x, into: s, segments: h}]}\n",
         SLUICE_ERR_UNKNOWN_KEY, "segments"},
        {"  - reduce: {values: [{op: summ, of: x, into: s}]}\n", SLUICE_ERR_UNKNOWN_OPERATOR,
         "did you mean 'sum'"},
        {"  - reduce: {values: [{op: count, of: x, into: n}]}\n", SLUICE_ERR_UNKNOWN_KEY,
         "count counts rows"},
        {"  - reduce: {values: [{op: sum, of: y, into: s, acc: i32}]}\n", SLUICE_ERR_TYPE,
         "acc i32 is unsafe"},
        {"  - reduce: {values: [{op: and, of: y, into: s}]}\n", SLUICE_ERR_TYPE, "and"},
        {"  - reduce: {segments: x, values: [{op: count, into: n}]}\n", SLUICE_ERR_TYPE,
         "head-flag column must be bool"},
        {"  - reduce: {segments: nope, values: [{op: count, into: n}]}\n",
         SLUICE_ERR_UNKNOWN_COLUMN, "unknown column 'nope'"},
        {"  - filter: x > 0\n  - reduce: {segments: off, values: [{op: count, into: n}]}\n",
         SLUICE_ERR_BAD_VALUE, "changed the rows"},
        {"  - reduce: {segments: h, values: [{op: count, into: n}]}\n"
         "  - segmented_scan: {segments: off, op: count, into: m}\n",
         SLUICE_ERR_BAD_VALUE, "the reduce at line 5 changed the rows"},
        {"  - reduce: {per: sideways, values: [{op: count, into: n}]}\n", SLUICE_ERR_BAD_VALUE,
         "sideways"},
        {"  - reduce: {index: x, values: [{op: count, into: n}]}\n",
         SLUICE_ERR_DUPLICATE_COLUMN, "'x' is already defined"},
        {"  - reduce: {index: [a], values: [{op: count, into: n}]}\n", SLUICE_ERR_BAD_VALUE,
         "index"},
        {"  - reduce: {values: [{op: count, into: n}, {op: sum, of: x, into: n}]}\n",
         SLUICE_ERR_DUPLICATE_COLUMN, "'n' is already defined"},
        {"  - reduce: {values: [{op: count, into: n}, {op: sum, of: n, into: s}]}\n",
         SLUICE_ERR_UNKNOWN_COLUMN, "unknown name 'n'"},
        {"  - reduce: {index: i, values: [{op: sum, of: i, into: s}]}\n",
         SLUICE_ERR_UNKNOWN_COLUMN, "unknown name 'i'"},
        {"  - reduce: {segment: h, values: [{op: count, into: n}]}\n", SLUICE_ERR_UNKNOWN_KEY,
         "did you mean 'segments'"},
        {"  - reduce: {values: [{op: count, into: n}]}\n  - map: {z: x + 1}\n",
         SLUICE_ERR_UNKNOWN_COLUMN, "no longer live here: the stage at line 5 dropped it"},
        {"  - reduce: {values: [{op: count, into: n}]}\noutput: [n, y]\n",
         SLUICE_ERR_UNKNOWN_OUTPUT, "y"},
        {"  - reduce: {segments: {key: k, by: h}, values: [{op: count, into: n}]}\n",
         SLUICE_ERR_UNKNOWN_KEY, "by"},
    };
    for (size_t i = 0; i < NELEM(cases); i++) {
        sluice_context *ctx;
        ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
        char yaml[1024], msg[512];
        snprintf(yaml, sizeof yaml, HEAD "stages:\n%s", cases[i].stages);
        sluice_status st = tu_load_fail(ctx, yaml, msg, sizeof msg);
        ck_assert_msg(st == cases[i].status && strstr(msg, cases[i].says),
                      "case %zu: %s\ngot %s: %s\nwant %s: ...%s...", i, cases[i].stages,
                      sluice_status_name(st), msg, sluice_status_name(cases[i].status),
                      cases[i].says);
        sluice_context_destroy(ctx);
    }
}
END_TEST

/* ---- the input stream -------------------------------------------------------------------- */

typedef struct stream {
    int64_t n;
    int32_t *k, *x;
    uint8_t *h, *u;
    float *y;
    int64_t *a, *b;
    int nbatches;
    int64_t *rows;     /* per batch */
    int64_t **seglen;  /* per batch: its segments' lengths (for an offsets input) */
    int64_t *nseg;
} stream;

/* n rows: keys in runs (a new key with probability 1/run, possibly equal to the old one),
 * head flags with probability 1/run, small values whose sums and products are exact. */
static void make_rows(stream *st, int64_t n, uint64_t seed, int run) {
    memset(st, 0, sizeof *st);
    tu_rng r;
    tu_rng_seed(&r, seed);
    st->n = n;
    size_t m = (size_t)(n ? n : 1);
    st->k = malloc(m * 4);
    st->x = malloc(m * 4);
    st->h = malloc(m);
    st->u = malloc(m);
    st->y = malloc(m * 4);
    st->a = malloc(m * 8);
    st->b = malloc(m * 8);
    int32_t key = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tu_rng_range(&r, 1, run) == 1) key = (int32_t)tu_rng_range(&r, -3, 3);
        st->k[i] = key;
        st->h[i] = tu_rng_range(&r, 1, run) == 1 ? (uint8_t)tu_rng_range(&r, 1, 255) : 0;
        st->x[i] = (int32_t)tu_rng_range(&r, -6, 6);
        st->u[i] = (uint8_t)tu_rng_range(&r, 0, 255);
        st->y[i] = (float)tu_rng_range(&r, -50, 50);
        st->a[i] = tu_rng_range(&r, -1, 2);
        st->b[i] = tu_rng_range(&r, -1000, 1000);
    }
}

/* Random batch sizes (some empty), and per batch random segments (some empty). */
static void make_cuts(stream *st, uint64_t seed, int64_t max_batch) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    int cap = 8;
    st->rows = malloc((size_t)cap * sizeof *st->rows);
    st->nbatches = 0;
    int64_t left = st->n;
    do {
        int64_t b = tu_rng_range(&r, 0, 5) == 0 ? 0 : tu_rng_range(&r, 1, max_batch);
        if (b > left) b = left;
        if (st->nbatches == cap)
            st->rows = realloc(st->rows, (size_t)(cap *= 2) * sizeof *st->rows);
        st->rows[st->nbatches++] = b;
        left -= b;
    } while (left > 0);
    st->seglen = calloc((size_t)st->nbatches, sizeof *st->seglen);
    st->nseg = calloc((size_t)st->nbatches, sizeof *st->nseg);
    for (int i = 0; i < st->nbatches; i++) {
        int64_t rows = st->rows[i], scap = 16, k = 0;
        int64_t *len = malloc((size_t)scap * sizeof *len);
        int64_t longest = tu_rng_range(&r, 1, 3 * T);
        while (rows > 0 || (k == 0 ? tu_rng_range(&r, 0, 1) : tu_rng_range(&r, 0, 3)) == 0) {
            if (k == scap) len = realloc(len, (size_t)(scap *= 2) * sizeof *len);
            int64_t l = tu_rng_range(&r, 0, 3) == 0 ? 0 : tu_rng_range(&r, 1, longest);
            if (l > rows) l = rows;
            len[k++] = l;
            rows -= l;
        }
        st->seglen[i] = len;
        st->nseg[i] = k;
    }
}

static void stream_free(stream *st) {
    free(st->k), free(st->x), free(st->h), free(st->u), free(st->y), free(st->a), free(st->b);
    for (int i = 0; i < st->nbatches; i++) free(st->seglen[i]);
    free(st->seglen), free(st->nseg), free(st->rows);
}

/* ---- the oracle -------------------------------------------------------------------------- */

/* Every reduction of VALUES below, one row at a time, in the contract's words: the inclusive
 * scan's state at a segment's last row, the identity for an empty segment. */
typedef struct acc {
    int64_t sx, n;
    uint64_t px, lh_a, lh_b, fa, fb;
    int32_t mn;
    float mx;
    double sy;
    uint8_t an, orr, xr, anyh;
} acc;

static void acc_init(acc *s) {
    memset(s, 0, sizeof *s);
    s->px = s->lh_a = s->fa = 1;
    s->mn = INT32_MAX;
    s->mx = -INFINITY;
    s->an = 0xff;
}

static void acc_add(acc *s, const stream *st, int64_t i) {
    uint64_t a = (uint64_t)st->a[i], b = (uint64_t)st->b[i];
    s->sx += st->x[i];
    s->px *= (uint64_t)(int64_t)st->x[i];
    if (st->x[i] < s->mn) s->mn = st->x[i];
    if (st->y[i] > s->mx) s->mx = st->y[i];
    s->sy += st->y[i];
    s->an &= st->u[i];
    s->orr |= st->u[i];
    s->xr ^= st->u[i];
    s->n++;
    s->lh_b = a * s->lh_b + b; /* (a1, b1)·(a2, b2) = (a1*a2, a2*b1 + b2) */
    s->lh_a *= a;
    s->fb = a * s->fb + b;     /* the declared `affine`: the same, written as an operator */
    s->fa *= a;
    s->anyh |= st->h[i] != 0;
}

#define VALUES                                                                        \
    "        - {op: sum, of: x, into: sx}\n"                                          \
    "        - {op: prod, of: x, into: px}\n"                                         \
    "        - {op: min, of: x, into: mn}\n"                                          \
    "        - {op: max, of: y, into: mx}\n"                                          \
    "        - {op: sum, of: y, into: sy, acc: f64}\n"                                \
    "        - {op: and, of: u, into: an}\n"                                          \
    "        - {op: or, of: u, into: orr}\n"                                          \
    "        - {op: xor, of: u, into: xr}\n"                                          \
    "        - {op: count, into: n}\n"                                                \
    "        - {op: linrec, a: a, b: b, into: lh}\n"                                  \
    "        - {op: affine, of: {a: a, b: b}, into: {b: fb, a: fa}}\n"               \
    "        - {op: max, of: h, into: anyh}\n"

typedef enum seg_kind { SEG_NONE, SEG_OFFSETS, SEG_HEADS, SEG_KEY } seg_kind;

typedef struct expected {
    int64_t n, cap;
    int32_t *key;
    int64_t *index;
    acc *v;
} expected;

static void put(expected *e, int32_t key, const acc *v) {
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        e->key = realloc(e->key, (size_t)e->cap * sizeof *e->key);
        e->index = realloc(e->index, (size_t)e->cap * sizeof *e->index);
        e->v = realloc(e->v, (size_t)e->cap * sizeof *e->v);
    }
    e->key[e->n] = key;
    e->index[e->n] = e->n;
    e->v[e->n++] = *v;
}

static void expected_free(expected *e) { free(e->key), free(e->index), free(e->v); }

/* The rows a reduce gives over the stream's kept rows (keep NULL: all). */
static void oracle(const stream *st, seg_kind kind, bool per_batch, const uint8_t *keep,
                   expected *e) {
    memset(e, 0, sizeof *e);
    acc s;
    acc_init(&s);
    bool open = false;
    int32_t key = 0;
    int64_t row = 0;
    for (int bi = 0; bi < st->nbatches; bi++) {
        if (kind == SEG_OFFSETS) {
            for (int64_t k = 0; k < st->nseg[bi]; k++) {
                acc_init(&s);
                for (int64_t j = 0; j < st->seglen[bi][k]; j++, row++) acc_add(&s, st, row);
                put(e, 0, &s);
            }
            continue;
        }
        for (int64_t j = 0; j < st->rows[bi]; j++, row++) {
            if (keep && !keep[row]) continue;
            bool head = kind == SEG_HEADS ? st->h[row] != 0
                      : kind == SEG_KEY   ? st->k[row] != key
                                          : false;
            if (open && head) put(e, key, &s);
            if (!open || head) acc_init(&s);
            open = true;
            key = st->k[row];
            acc_add(&s, st, row);
        }
        if (per_batch && (open || kind == SEG_NONE)) {
            if (!open) acc_init(&s);
            put(e, key, &s);
            open = false;
        }
    }
    if (!per_batch && (open || kind == SEG_NONE)) {
        if (!open) acc_init(&s);
        put(e, key, &s);
    }
}

/* ---- running a session ------------------------------------------------------------------- */

typedef struct table {
    int ncols;
    char *name[32];
    sluice_type type[32];
    unsigned char *data[32];
    int64_t rows;
} table;

static void table_free(table *t) {
    for (int c = 0; c < t->ncols; c++) free(t->name[c]), free(t->data[c]);
    memset(t, 0, sizeof *t);
}

static void drain(sluice_session *s, table *t) {
    for (;;) {
        sluice_batch *b;
        ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
        if (!b) return;
        int64_t n = sluice_batch_rows(b);
        size_t nc = sluice_batch_column_count(b);
        if (t->ncols == 0) {
            t->ncols = (int)nc;
            for (size_t c = 0; c < nc; c++) {
                sluice_column col;
                ck_assert_int_eq(sluice_batch_column(b, c, &col), SLUICE_OK);
                t->name[c] = strdup(col.name);
                t->type[c] = col.type;
            }
        }
        ck_assert_int_eq((int)nc, t->ncols);
        for (size_t c = 0; c < nc; c++) {
            sluice_column col;
            ck_assert_int_eq(sluice_batch_column(b, c, &col), SLUICE_OK);
            ck_assert_int_eq(col.length, n);
            size_t w = sluice_type_size(col.type);
            t->data[c] = realloc(t->data[c], (size_t)(t->rows + n) * w + 1);
            if (n) memcpy(t->data[c] + (size_t)t->rows * w, col.data, (size_t)n * w);
        }
        t->rows += n;
        sluice_batch_free(b);
    }
}

/* Pushes batch bi of the stream (rows from `first`), with its offsets when `offsets`. */
static sluice_status push_batch(sluice_session *s, const stream *st, int bi, int64_t first,
                                bool offsets) {
    int64_t n = st->rows[bi];
    int64_t *off = malloc((size_t)(st->nseg[bi] + 1) * sizeof *off);
    off[0] = 0;
    for (int64_t k = 0; k < st->nseg[bi]; k++) off[k + 1] = off[k] + st->seglen[bi][k];
    sluice_column cols[] = {
        {"k", SLUICE_I32, st->k + first, n}, {"h", SLUICE_BOOL, st->h + first, n},
        {"x", SLUICE_I32, st->x + first, n}, {"y", SLUICE_F32, st->y + first, n},
        {"u", SLUICE_U8, st->u + first, n},  {"a", SLUICE_I64, st->a + first, n},
        {"b", SLUICE_I64, st->b + first, n}, {"off", SLUICE_I64, off, st->nseg[bi] + 1},
    };
    sluice_status status = sluice_session_push(s, cols, offsets ? 8 : 7);
    free(off);
    return status;
}

/* Runs the stream through p on `threads` threads, batch by batch, and flushes; a stream-wide
 * sort spills past sort_memory bytes (0: never). */
static void run_spilling(const char *yaml, const stream *st, bool offsets, int threads,
                         int64_t max_batch_rows, int64_t sort_memory, table *out) {
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.cpu_threads = threads;
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, &co), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, yaml);
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    o.max_batch_rows = max_batch_rows;
    o.sort_memory_bytes = sort_memory;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
    memset(out, 0, sizeof *out);
    int64_t first = 0;
    for (int bi = 0; bi < st->nbatches; bi++) {
        sluice_status status = push_batch(s, st, bi, first, offsets);
        if (status != SLUICE_OK) tu_print_diags(ctx);
        ck_assert_int_eq(status, SLUICE_OK);
        first += st->rows[bi];
        drain(s, out);
    }
    ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    drain(s, out);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

static void run(const char *yaml, const stream *st, bool offsets, int threads,
                int64_t max_batch_rows, table *out) {
    run_spilling(yaml, st, offsets, threads, max_batch_rows, 0, out);
}

static const unsigned char *column(const table *t, const char *name, sluice_type type) {
    for (int c = 0; c < t->ncols; c++) {
        if (strcmp(t->name[c], name) != 0) continue;
        ck_assert_msg(t->type[c] == type, "column %s is %s, want %s", name,
                      sluice_type_name(t->type[c]), sluice_type_name(type));
        return t->data[c];
    }
    ck_abort_msg("no output column %s", name);
    return NULL;
}

/* Every value column of `got` equals the oracle's, row by row, bit for bit. */
#define CHECK_FIELD(NAME, TYPE, CT, EXPR)                                                 \
    do {                                                                                  \
        const unsigned char *col_ = column(got, NAME, TYPE);                              \
        for (int64_t i_ = 0; i_ < want->n; i_++) {                                        \
            CT w_ = (CT)(EXPR), g_;                                                       \
            memcpy(&g_, col_ + (size_t)i_ * sizeof(CT), sizeof(CT));                      \
            ck_assert_msg(memcmp(&w_, &g_, sizeof(CT)) == 0,                              \
                          "%s: row %lld of %lld: column %s is %.17g, want %.17g", what,   \
                          (long long)i_, (long long)want->n, NAME, (double)g_, (double)w_); \
        }                                                                                 \
    } while (0)

static void check(const char *what, const table *got, const expected *want, bool key,
                  bool index) {
    ck_assert_msg(got->rows == want->n, "%s: %lld rows, want %lld", what, (long long)got->rows,
                  (long long)want->n);
    if (want->n == 0) return; /* no batch came out: no columns to look at */
    if (key) CHECK_FIELD("k", SLUICE_I32, int32_t, want->key[i_]);
    if (index) CHECK_FIELD("seg", SLUICE_I64, int64_t, want->index[i_]);
    CHECK_FIELD("sx", SLUICE_I64, int64_t, want->v[i_].sx);
    CHECK_FIELD("px", SLUICE_I64, uint64_t, want->v[i_].px);
    CHECK_FIELD("mn", SLUICE_I32, int32_t, want->v[i_].mn);
    CHECK_FIELD("mx", SLUICE_F32, float, want->v[i_].mx);
    CHECK_FIELD("sy", SLUICE_F64, double, want->v[i_].sy);
    CHECK_FIELD("an", SLUICE_U8, uint8_t, want->v[i_].an);
    CHECK_FIELD("orr", SLUICE_U8, uint8_t, want->v[i_].orr);
    CHECK_FIELD("xr", SLUICE_U8, uint8_t, want->v[i_].xr);
    CHECK_FIELD("n", SLUICE_I64, int64_t, want->v[i_].n);
    CHECK_FIELD("lh", SLUICE_I64, uint64_t, want->v[i_].lh_b);
    CHECK_FIELD("fa", SLUICE_I64, uint64_t, want->v[i_].fa);
    CHECK_FIELD("fb", SLUICE_I64, uint64_t, want->v[i_].fb);
    CHECK_FIELD("anyh", SLUICE_BOOL, uint8_t, want->v[i_].anyh);
}

static const char *const segments_yaml[] = {"", "      segments: off\n", "      segments: h\n",
                                            "      segments: {key: k}\n"};

/* A pipeline: `before` stages, the reduce with every value, `after` stages. */
static char *pipeline(seg_kind kind, bool per_batch, bool index, const char *before,
                      const char *after) {
    char *text = malloc(8192);
    snprintf(text, 8192,
             "sluice: 1\nname: reduce-test\n"
             "input: {k: i32, h: bool, x: i32, y: f32, u: u8, a: i64, b: i64%s}\n"
             "operators:\n  affine:\n    state: {a: i64, b: i64}\n    identity: {a: 1, b: 0}\n"
             "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\n"
             "stages:\n%s  - reduce:\n%s%s%s      values:\n" VALUES "%s",
             kind == SEG_OFFSETS ? ", off: {type: i64, role: offsets}" : "", before,
             segments_yaml[kind], per_batch ? "      per: batch\n" : "",
             index ? "      index: seg\n" : "", after);
    return text;
}

/* ---- results against the oracle ---------------------------------------------------------- */

static const char *const kind_names[] = {"whole stream", "offsets", "head flags", "key"};

/* Every segment kind, per stream and per batch, at each size, on 1 and 3 threads, batches
 * cut at random (two cuttings), and once more with a small max_batch_rows. */
static void sizes_for(seg_kind kind, bool per_batch) {
    static const int64_t sizes[] = {0, 1, T - 1, T, T + 1, 5 * T + 77};
    for (size_t si = 0; si < NELEM(sizes); si++) {
        for (int cut = 0; cut < 2; cut++) {
            stream st;
            make_rows(&st, sizes[si], 100 + si, cut ? 40 : 3);
            make_cuts(&st, 7 * si + (uint64_t)cut, cut ? 3 * T : T / 3);
            expected want;
            oracle(&st, kind, per_batch, NULL, &want);
            char *yaml = pipeline(kind, per_batch, true, "", "");
            for (int threads = 1; threads <= 3; threads += 2) {
                for (int small = 0; small < 2; small++) {
                    if (small && threads == 1) continue;
                    char what[160];
                    snprintf(what, sizeof what, "%s%s, %lld rows, cut %d, %d threads%s",
                             kind_names[kind], per_batch ? " per batch" : "",
                             (long long)sizes[si], cut, threads, small ? ", max 1000" : "");
                    table got;
                    run(yaml, &st, kind == SEG_OFFSETS, threads, small ? 1000 : 0, &got);
                    check(what, &got, &want, kind == SEG_KEY, true);
                    table_free(&got);
                }
            }
            free(yaml);
            expected_free(&want);
            stream_free(&st);
        }
    }
}

START_TEST(whole_stream) { sizes_for(SEG_NONE, false); }
END_TEST
START_TEST(whole_batches) { sizes_for(SEG_NONE, true); }
END_TEST
START_TEST(offsets_segments) { sizes_for(SEG_OFFSETS, false); }
END_TEST
START_TEST(head_flags) { sizes_for(SEG_HEADS, false); }
END_TEST
START_TEST(head_flags_per_batch) { sizes_for(SEG_HEADS, true); }
END_TEST
START_TEST(key_runs) { sizes_for(SEG_KEY, false); }
END_TEST
START_TEST(key_runs_per_batch) { sizes_for(SEG_KEY, true); }
END_TEST

/* Stages before the reduce in its group: a filter (the reduce sees the kept rows only, its
 * head flags and keys among them). */
START_TEST(after_a_filter) {
    static const seg_kind kinds[] = {SEG_NONE, SEG_HEADS, SEG_KEY};
    for (size_t ki = 0; ki < NELEM(kinds); ki++) {
        for (int per = 0; per < 2; per++) {
            stream st;
            make_rows(&st, 3 * T + 5, 41 + ki, 6);
            make_cuts(&st, 43 + ki, T);
            uint8_t *keep = malloc((size_t)st.n);
            for (int64_t i = 0; i < st.n; i++) keep[i] = st.x[i] != 0;
            expected want;
            oracle(&st, kinds[ki], per, keep, &want);
            char *yaml = pipeline(kinds[ki], per, true, "  - filter: x != 0\n", "");
            for (int threads = 1; threads <= 3; threads += 2) {
                char what[96];
                snprintf(what, sizeof what, "filter then %s%s, %d threads", kind_names[kinds[ki]],
                         per ? " per batch" : "", threads);
                table got;
                run(yaml, &st, false, threads, 0, &got);
                check(what, &got, &want, kinds[ki] == SEG_KEY, true);
                table_free(&got);
            }
            free(yaml);
            free(keep);
            expected_free(&want);
            stream_free(&st);
        }
    }
}
END_TEST

/* A value reading a scan of the same group (carried state: the tiles wait for the carry
 * before the reduce). */
START_TEST(reads_a_scan) {
    stream st;
    make_rows(&st, 4 * T + 3, 51, 300);
    make_cuts(&st, 52, 2 * T);
    int64_t *cx = malloc((size_t)st.n * sizeof *cx), run_sum = 0;
    for (int64_t i = 0; i < st.n; i++) cx[i] = run_sum += st.x[i];
    /* oracle: per run of k, the largest running sum and the sum of running sums */
    int64_t cap = st.n + 1, nrows = 0;
    int64_t *top = malloc((size_t)cap * 8), *tot = malloc((size_t)cap * 8);
    for (int64_t i = 0; i < st.n; i++) {
        if (i == 0 || st.k[i] != st.k[i - 1]) {
            top[nrows] = INT64_MIN;
            tot[nrows++] = 0;
        }
        if (cx[i] > top[nrows - 1]) top[nrows - 1] = cx[i];
        tot[nrows - 1] += cx[i];
    }
    const char *yaml =
        "sluice: 1\nname: reads-a-scan\n"
        "input: {k: i32, h: bool, x: i32, y: f32, u: u8, a: i64, b: i64}\n"
        "stages:\n  - scan: {op: sum, of: x, into: cx}\n"
        "  - reduce:\n      segments: {key: k}\n      values:\n"
        "        - {op: max, of: cx, into: top}\n        - {op: sum, of: cx, into: tot}\n";
    for (int threads = 1; threads <= 3; threads += 2) {
        table got;
        run(yaml, &st, false, threads, 0, &got);
        ck_assert_int_eq(got.rows, nrows);
        ck_assert_int_eq(memcmp(column(&got, "top", SLUICE_I64), top, (size_t)nrows * 8), 0);
        ck_assert_int_eq(memcmp(column(&got, "tot", SLUICE_I64), tot, (size_t)nrows * 8), 0);
        table_free(&got);
    }
    free(cx), free(top), free(tot);
    stream_free(&st);
}
END_TEST

/* Stages after the reduce run over its rows: map, filter, scan; a stream-wide sort; another
 * reduce. */
START_TEST(stages_after) {
    stream st;
    make_rows(&st, 3 * T + 11, 61, 5);
    make_cuts(&st, 62, T / 2);
    expected e;
    oracle(&st, SEG_KEY, false, NULL, &e);
    /* map, filter, scan */
    {
        char *yaml = pipeline(SEG_KEY, false, true, "",
                              "  - map: {m: sx * 2}\n  - filter: n > 1\n"
                              "  - scan: {op: sum, of: n, into: cn}\n"
                              "output: [k, seg, m, n, cn]\n");
        table got;
        run(yaml, &st, false, 3, 0, &got);
        const unsigned char *k = column(&got, "k", SLUICE_I32);
        const unsigned char *seg = column(&got, "seg", SLUICE_I64);
        const unsigned char *m = column(&got, "m", SLUICE_I64);
        const unsigned char *cn = column(&got, "cn", SLUICE_I64);
        int64_t j = 0, sum = 0;
        for (int64_t i = 0; i < e.n; i++) {
            if (e.v[i].n <= 1) continue;
            sum += e.v[i].n;
            int32_t gk;
            int64_t gseg, gm, gcn;
            ck_assert_int_lt(j, got.rows);
            memcpy(&gk, k + 4 * j, 4), memcpy(&gseg, seg + 8 * j, 8);
            memcpy(&gm, m + 8 * j, 8), memcpy(&gcn, cn + 8 * j, 8);
            ck_assert_int_eq(gk, e.key[i]);
            ck_assert_int_eq(gseg, i);
            ck_assert_int_eq(gm, 2 * e.v[i].sx);
            ck_assert_int_eq(gcn, sum);
            j++;
        }
        ck_assert_int_eq(j, got.rows);
        table_free(&got);
        free(yaml);
    }
    /* a stream-wide sort by each segment's sum: stable, so equal sums keep segment order */
    {
        char *yaml = pipeline(SEG_KEY, false, true, "", "  - sort: {key: sx}\noutput: [seg, sx]\n");
        table got;
        run(yaml, &st, false, 1, 1000, &got);
        ck_assert_int_eq(got.rows, e.n);
        const unsigned char *seg = column(&got, "seg", SLUICE_I64);
        const unsigned char *sx = column(&got, "sx", SLUICE_I64);
        for (int64_t j = 0; j < got.rows; j++) {
            int64_t gseg, gsx, pseg, psx;
            memcpy(&gseg, seg + 8 * j, 8), memcpy(&gsx, sx + 8 * j, 8);
            ck_assert(gseg >= 0 && gseg < e.n);
            ck_assert_int_eq(gsx, e.v[gseg].sx);
            if (j == 0) continue;
            memcpy(&pseg, seg + 8 * (j - 1), 8), memcpy(&psx, sx + 8 * (j - 1), 8);
            ck_assert(psx < gsx || (psx == gsx && pseg < gseg));
        }
        table_free(&got);
        free(yaml);
    }
    /* another reduce: the whole stream of segments, one row at flush */
    {
        char *yaml = pipeline(SEG_KEY, false, false, "",
                              "  - reduce:\n      values:\n        - {op: sum, of: n, into: rows}\n"
                              "        - {op: count, into: segs}\n"
                              "        - {op: max, of: sx, into: top}\n");
        int64_t top = INT64_MIN;
        for (int64_t i = 0; i < e.n; i++)
            if (e.v[i].sx > top) top = e.v[i].sx;
        for (int threads = 1; threads <= 3; threads += 2) {
            table got;
            run(yaml, &st, false, threads, 0, &got);
            ck_assert_int_eq(got.rows, 1);
            int64_t rows, segs, gtop;
            memcpy(&rows, column(&got, "rows", SLUICE_I64), 8);
            memcpy(&segs, column(&got, "segs", SLUICE_I64), 8);
            memcpy(&gtop, column(&got, "top", SLUICE_I64), 8);
            ck_assert_int_eq(rows, st.n);
            ck_assert_int_eq(segs, e.n);
            ck_assert_int_eq(gtop, top);
            table_free(&got);
        }
        free(yaml);
    }
    expected_free(&e);
    stream_free(&st);
}
END_TEST

/* A reduce after a stream-wide sort: the sorted rows reach it at flush (merged from spilled
 * runs too), and its open segment follows them. */
START_TEST(after_a_stream_sort) {
    stream st, sorted;
    make_rows(&st, 2 * T + 999, 81, 1);
    make_cuts(&st, 82, T / 2);
    /* the oracle's stream: stably sorted by k, one batch */
    make_rows(&sorted, st.n, 81, 1);
    int64_t j = 0;
    for (int32_t key = -3; key <= 3; key++)
        for (int64_t i = 0; i < st.n; i++) {
            if (st.k[i] != key) continue;
            sorted.k[j] = st.k[i], sorted.x[j] = st.x[i], sorted.h[j] = st.h[i];
            sorted.u[j] = st.u[i], sorted.y[j] = st.y[i], sorted.a[j] = st.a[i];
            sorted.b[j++] = st.b[i];
        }
    ck_assert_int_eq(j, st.n);
    sorted.nbatches = 1;
    sorted.rows = malloc(sizeof *sorted.rows);
    sorted.rows[0] = st.n;
    sorted.seglen = calloc(1, sizeof *sorted.seglen);
    sorted.nseg = calloc(1, sizeof *sorted.nseg);
    expected want;
    oracle(&sorted, SEG_KEY, false, NULL, &want);
    ck_assert_int_eq(want.n, 7);
    char *yaml = pipeline(SEG_KEY, false, true, "  - sort: {key: k}\n", "");
    static const int64_t budgets[] = {0, 20000};
    for (size_t b = 0; b < NELEM(budgets); b++)
        for (int threads = 1; threads <= 3; threads += 2) {
            char what[96];
            snprintf(what, sizeof what, "sort then key, sort memory %lld, %d threads",
                     (long long)budgets[b], threads);
            table got;
            run_spilling(yaml, &st, false, threads, threads == 3 ? 1000 : 0, budgets[b], &got);
            check(what, &got, &want, true, true);
            table_free(&got);
        }
    free(yaml);
    expected_free(&want);
    stream_free(&sorted);
    stream_free(&st);
}
END_TEST

/* Keys compared as segmented_scan compares them: bools by truth (written as 0/1), floats by
 * their bits (-0.0 is not 0.0; a NaN equals a NaN of the same bits). */
START_TEST(key_bits) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx,
        "sluice: 1\nname: keys\ninput: {b: bool, f: f32}\nstages:\n"
        "  - reduce:\n      segments: {key: b}\n      values: [{op: count, into: n}]\n");
    sluice_pipeline *q = tu_load(ctx,
        "sluice: 1\nname: keys\ninput: {b: bool, f: f32}\nstages:\n"
        "  - reduce:\n      segments: {key: f}\n      values: [{op: count, into: n}]\n");
    uint8_t b[7] = {1, 2, 2, 0, 0, 3, 3};
    uint32_t fb[7] = {0x00000000u, 0x80000000u, 0x80000000u, 0x7fc00001u, 0x7fc00001u,
                      0x7fc00002u, 0x3f800000u};
    float f[7];
    memcpy(f, fb, sizeof f);
    sluice_column cols[2] = {{"b", SLUICE_BOOL, b, 7}, {"f", SLUICE_F32, f, 7}};
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    sluice_batch *out;
    ck_assert_int_eq(sluice_run(p, &o, cols, 2, &out), SLUICE_OK);
    ck_assert_int_eq(sluice_batch_rows(out), 3);
    sluice_column k, n;
    ck_assert_int_eq(sluice_batch_column_by_name(out, "b", &k), SLUICE_OK);
    ck_assert_int_eq(sluice_batch_column_by_name(out, "n", &n), SLUICE_OK);
    ck_assert_int_eq(k.type, SLUICE_BOOL);
    const uint8_t *kb = k.data;
    const int64_t *nn = n.data;
    ck_assert(kb[0] == 1 && kb[1] == 0 && kb[2] == 1);
    ck_assert(nn[0] == 3 && nn[1] == 2 && nn[2] == 2);
    sluice_batch_free(out);
    ck_assert_int_eq(sluice_run(q, &o, cols, 2, &out), SLUICE_OK);
    ck_assert_int_eq(sluice_batch_rows(out), 5);
    ck_assert_int_eq(sluice_batch_column_by_name(out, "f", &k), SLUICE_OK);
    ck_assert_int_eq(sluice_batch_column_by_name(out, "n", &n), SLUICE_OK);
    static const uint32_t want_keys[5] = {0x00000000u, 0x80000000u, 0x7fc00001u, 0x7fc00002u,
                                          0x3f800000u};
    static const int64_t want_n[5] = {1, 2, 2, 1, 1};
    ck_assert_int_eq(memcmp(k.data, want_keys, sizeof want_keys), 0);
    ck_assert_int_eq(memcmp(n.data, want_n, sizeof want_n), 0);
    sluice_batch_free(out);
    sluice_pipeline_free(p);
    sluice_pipeline_free(q);
    sluice_context_destroy(ctx);
}
END_TEST

/* A push or flush that fails part-way (an allocation, in any of its pieces) changes nothing:
 * the open segment, the index and the values carried are as they were, so repeating the
 * call once allocations work gives the stream's results. */
START_TEST(failed_calls_change_nothing) {
    static const seg_kind kinds[] = {SEG_NONE, SEG_HEADS, SEG_KEY};
    for (size_t ki = 0; ki < NELEM(kinds); ki++) {
        stream st;
        make_rows(&st, 2 * T + 300, 71 + ki, 200);
        make_cuts(&st, 72 + ki, T);
        expected want;
        oracle(&st, kinds[ki], false, NULL, &want);
        char *yaml = pipeline(kinds[ki], false, true, "", "  - map: {m: sx + 1}\n");
        tu_failing f = {-1};
        sluice_allocator a = tu_failing_allocator(&f);
        sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
        co.allocator = &a;
        co.cpu_threads = 2;
        sluice_context *ctx;
        ck_assert_int_eq(sluice_context_create(&ctx, &co), SLUICE_OK);
        sluice_pipeline *p = tu_load(ctx, yaml);
        int failures = 0;
        for (long budget = 0; budget < 12; budget++) {
            sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
            o.backend = SLUICE_BACKEND_CPU;
            o.max_batch_rows = 5000;
            sluice_session *s;
            ck_assert_int_eq(sluice_session_open(p, &o, &s), SLUICE_OK);
            table got;
            memset(&got, 0, sizeof got);
            int64_t first = 0;
            for (int bi = 0; bi <= st.nbatches; bi++) {
                bool flush = bi == st.nbatches;
                f.budget = budget;
                sluice_status status = flush ? sluice_session_flush(s)
                                             : push_batch(s, &st, bi, first, false);
                f.budget = -1;
                if (status != SLUICE_OK) {
                    ck_assert_int_eq(status, SLUICE_ERR_NO_MEMORY);
                    failures++;
                    sluice_batch *b;
                    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
                    ck_assert_ptr_null(b); /* nothing of the failed call was queued */
                    status = flush ? sluice_session_flush(s) : push_batch(s, &st, bi, first, false);
                    ck_assert_int_eq(status, SLUICE_OK);
                }
                drain(s, &got);
                if (!flush) first += st.rows[bi];
            }
            char what[64];
            snprintf(what, sizeof what, "%s, allocation %ld fails", kind_names[kinds[ki]], budget);
            check(what, &got, &want, kinds[ki] == SEG_KEY, true);
            table_free(&got);
            sluice_session_close(s);
        }
        ck_assert_int_gt(failures, 0);
        sluice_pipeline_free(p);
        sluice_context_destroy(ctx);
        free(yaml);
        expected_free(&want);
        stream_free(&st);
    }
}
END_TEST

static Suite *reduce_suite(void) {
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, loads_and_explains);
    tcase_add_test(tc, plan_rows_out);
    tcase_add_test(tc, bad_files);
    suite_add_tcase(s, tc);
    tc = tcase_create("results");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, whole_stream);
    tcase_add_test(tc, whole_batches);
    tcase_add_test(tc, offsets_segments);
    tcase_add_test(tc, head_flags);
    tcase_add_test(tc, head_flags_per_batch);
    tcase_add_test(tc, key_runs);
    tcase_add_test(tc, key_runs_per_batch);
    tcase_add_test(tc, after_a_filter);
    tcase_add_test(tc, reads_a_scan);
    tcase_add_test(tc, stages_after);
    tcase_add_test(tc, after_a_stream_sort);
    tcase_add_test(tc, key_bits);
    tcase_add_test(tc, failed_calls_change_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(reduce_suite()); }
