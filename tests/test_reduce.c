/* test_reduce.c — the `reduce` stage (pipelines/SCHEMA.md, "reduce"): the loader (good files
 * and every bad one naming what to fix), explain, and the plan (a reduce ends its fused
 * group; what it reads, writes and holds until flush; the rows it gives; a backend without
 * it refuses it at open). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "plan/plan.h"

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
    static const char *const outputs[] = {"k", "seg", "total", "n", "big", "last", "pq", "ps", "mean"};
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
                 HEAD "stages:\n  - filter: x > 0\n  - reduce:\n%s%s      values: [{op: count, into: n}]\n",
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

static Suite *reduce_suite(void) {
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, loads_and_explains);
    tcase_add_test(tc, plan_rows_out);
    tcase_add_test(tc, bad_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(reduce_suite()); }
