/* test_cuda_carry_host.c — the CUDA backend's carried records (core/cuda/carry_bytes.c: what
 * a distributed session reads and seeds, core/runtime/carry.h) against the CPU backend's,
 * through the generated kernels of a group ending in a reduce run on the host
 * (tests/cuda_host/reduce_emulate.cc's `part` mode, built with the sanitizers as
 * test_cuda_codegen's reduce_on_host builds it). No GPU: the kernels are the generated ones,
 * the bytes their carry; what runs them is the emulation.
 *
 * For a stream of N rows cut at A, as a distributed session over two ranks uses them:
 *  1. a part's aggregate: [A, N) from the fresh carry a session starts with (its reduce held
 *     at flush when carried, as before the reduce's exchange) — the records decoded from the
 *     emulated carry must be the CPU session's (each field the session reads), and the rows
 *     the same;
 *  2. a seeded part: the CPU's records after [0, A) (one process's state at the cut: an open
 *     segment, its key, the next index) encoded into the carry, then [A, N) and the flush —
 *     the rows must be one CPU process's rows of the whole stream from the first one [A, N)
 *     gives, and the records after it (index, open segment) the CPU's seeded the same way;
 *  3. the same seeded part as a middle rank's (`continues`: its open segment held at flush):
 *     rows and records as the CPU's seeded the same way.
 * Skipped where no host C++ compiler is found. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#if __has_include(<nvrtc.h>)
#include "common/context.h"
#include "cuda/carry_bytes.h"
#include "cuda/codegen.h"
#include "plan/plan.h"
#include "runtime/carry.h"
#include "cuda_host/emulator.h"

#define ARCH 90
#define MAXCOLS 8
#define MAXSCANS 16

/* Reduce pipelines over every carried segment kind and `per: batch` (offsets segments carry
 * no record a rank reads but the index, and the emulation's `part` mode has no offsets):
 * a filter before (so rows entering the group are not rows reaching the reduce), with a scan
 * (two look-back phases, the scan's record before the reduce's) or without (the loop with a
 * look-back warp; without segments the aggregate loop); and without the filter over runs of
 * the input k (the runs' aggregate loop). Exact operators only. */
#define SCAN_X "{of: x, op: max, into: run}"
static const struct carry_case {
    const char *segments;
    const char *scan; /* a scan stage before the reduce (its `into` is run), or NULL */
    bool plain; /* no filter: over runs of k (or of g, made from k by the map), the runs'
                   aggregate loop */
} cases[] = {
    {"      segments: {key: g}\n", SCAN_X, false},
    {"      segments: {key: big}\n", SCAN_X, false},
    {"      segments: hd\n", SCAN_X, false},
    {"", SCAN_X, false},
    /* narrow scan values held widened (codegen.c, widen_narrow_fields): the seeded carry
       must hold their extension (an i16 min's upper bytes are not the identity's) */
    {"      segments: {key: g}\n", "{of: k, op: min, into: run}", false},
    {"      segments: hd\n", "{of: hd, op: xor, into: run}", false},
    {"      segments: {key: g}\n", NULL, false},
    {"      segments: hd\n", NULL, false},
    {"", NULL, false},
    {"      segments: {key: g}\n      per: batch\n", SCAN_X, false},
    {"      segments: hd\n      per: batch\n", NULL, false},
    {"      per: batch\n", NULL, false},
    {"      segments: {key: k}\n", NULL, true},
    {"      segments: {key: k}\n      per: batch\n", NULL, true},
    {"      segments: {key: g}\n", NULL, true}, /* the key made by a map: RunKeys::at */
};

/* Rows out, each output's value as the emulation prints them (kernel output order). */
typedef struct rows {
    long long n;
    unsigned long long *v;
} rows;

/* One emulated part: rows [from, to) of the stream of `total` rows from `seed`, from the
 * carry `in` (NULL: the identity), flushed or not; the carry after it into `out`. */
static rows emulate(const char *dir, const sl_codegen *cg, uint64_t seed, long long total,
                    long long from, long long to, const unsigned char *in, bool flush,
                    unsigned char *out) {
    char cin[300], cout[300], cmd[1024];
    snprintf(cin, sizeof cin, "%s/carry-in", dir);
    snprintf(cout, sizeof cout, "%s/carry-out", dir);
    if (in) {
        FILE *f = fopen(cin, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(in, 1, cg->carry_bytes, f), cg->carry_bytes);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "'%s/emulate' %llu %lld part %lld %lld '%s' '%s' %d", dir,
             (unsigned long long)seed, total, from, to, in ? cin : "-", cout, flush ? 1 : 0);
    FILE *run = popen(cmd, "r");
    ck_assert_ptr_nonnull(run);
    rows r = {-1, NULL};
    ck_assert_int_eq(fscanf(run, "rows %lld", &r.n), 1);
    r.v = calloc((size_t)(r.n > 0 ? r.n : 1) * (size_t)cg->noutputs, sizeof *r.v);
    ck_assert_ptr_nonnull(r.v);
    for (long long i = 0; i < r.n * cg->noutputs; i++) ck_assert_int_eq(fscanf(run, "%llx", &r.v[i]), 1);
    ck_assert_msg(pclose(run) == 0, "the emulation failed: %s", cmd);
    FILE *f = fopen(cout, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(out, 1, cg->carry_bytes, f), cg->carry_bytes);
    fclose(f);
    return r;
}

/* The stream's inputs (the kernel's, in its order, as the emulation draws them). */
typedef struct stream {
    int n;
    uint8_t *data[MAXCOLS];
    size_t width[MAXCOLS];
    const char *name[MAXCOLS];
    sluice_type type[MAXCOLS];
} stream;

static stream make_stream(const sluice_pipeline *p, const sl_codegen *cg, uint64_t seed, long long total) {
    stream s = {.n = cg->ninputs};
    ck_assert_int_le(cg->ninputs, MAXCOLS);
    uint64_t state = seed;
    for (int k = 0; k < cg->ninputs; k++) {
        const sl_column *c = &p->columns[cg->inputs[k]];
        s.width[k] = sluice_type_size(c->type);
        s.name[k] = c->name;
        s.type[k] = c->type;
        s.data[k] = malloc((size_t)(total + 1) * s.width[k]);
        ck_assert_ptr_nonnull(s.data[k]);
        emu_inputs(s.data[k], (size_t)(total + 1) * s.width[k], &state);
    }
    ck_assert_int_eq(p->ninputs, cg->ninputs); /* every input is the kernel's */
    return s;
}

/* A fresh CPU session's records: what a distributed session starts from. */
static void fresh_records(const sluice_pipeline *p, sl_scan_carry *rec) {
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open((sluice_pipeline *)p, &o, &s), SLUICE_OK);
    ck_assert_int_eq(sl_carry_get(s, 0, rec), SLUICE_OK);
    sluice_session_close(s);
}

/* A CPU session over rows [from, to) pushed as one batch, from the records `seed` (NULL:
 * fresh), flushed or not: its rows appended to *out (kernel output order), its records after
 * into rec. */
static void cpu_part(const sluice_pipeline *p, const sl_codegen *cg, const stream *st,
                     long long from, long long to, const sl_scan_carry *seed, bool flush,
                     rows *out, sl_scan_carry *rec) {
    sluice_session_options o = SLUICE_SESSION_OPTIONS_INIT;
    o.backend = SLUICE_BACKEND_CPU;
    sluice_session *s;
    ck_assert_int_eq(sluice_session_open((sluice_pipeline *)p, &o, &s), SLUICE_OK);
    ck_assert_int_eq(s->plan.ngroups, 1);
    ck_assert_int_eq(sl_carry_group_scans(s, 0), cg->nscans);
    if (seed) ck_assert_int_eq(sl_carry_set(s, 0, seed), SLUICE_OK);
    sluice_column cols[MAXCOLS];
    for (int k = 0; k < st->n; k++)
        cols[k] = (sluice_column){.name = st->name[k], .type = st->type[k],
                                  .data = st->data[k] + (size_t)from * st->width[k],
                                  .length = to - from};
    ck_assert_int_eq(sluice_session_push(s, cols, (size_t)st->n), SLUICE_OK);
    if (flush) ck_assert_int_eq(sluice_session_flush(s), SLUICE_OK);
    ck_assert_int_eq(sl_carry_get(s, 0, rec), SLUICE_OK);
    sluice_batch *b;
    while (sluice_session_pull(s, &b) == SLUICE_OK && b) {
        int64_t n = sluice_batch_rows(b);
        out->v = realloc(out->v, (size_t)(out->n + n + 1) * (size_t)cg->noutputs * sizeof *out->v);
        ck_assert_ptr_nonnull(out->v);
        memset(out->v + out->n * cg->noutputs, 0, (size_t)n * (size_t)cg->noutputs * sizeof *out->v);
        for (size_t j = 0; j < sluice_batch_column_count(b); j++) {
            sluice_column c;
            ck_assert_int_eq(sluice_batch_column(b, j, &c), SLUICE_OK);
            const int k = emu_output_index(p, cg, c.name);
            size_t w = sluice_type_size(c.type);
            for (int64_t r = 0; r < n; r++)
                memcpy(&out->v[(out->n + r) * cg->noutputs + k], (const uint8_t *)c.data + (size_t)r * w, w);
        }
        out->n += n;
        sluice_batch_free(b);
    }
    sluice_session_close(s);
}

static void same_rows(const rows *want, long long skip, const rows *got, int nout, const char *what) {
    ck_assert_msg(want->n - skip == got->n, "%s: %lld rows, the CPU %lld", what, got->n, want->n - skip);
    for (long long i = 0; i < got->n * nout; i++)
        ck_assert_msg(want->v[skip * nout + i] == got->v[i],
                      "%s: row %lld output %lld: emulated %llx, CPU %llx", what, i / nout, i % nout,
                      got->v[i], want->v[skip * nout + i]);
}

/* Record k's scan, and its reduce when it is a reduce's value. */
static const sl_scan *record_scan(const sluice_pipeline *p, int k, const sl_reduce **rd) {
    *rd = NULL;
    for (int st = 0; st < p->nstages; st++) {
        const sl_stage *s = &p->stages[st];
        if (s->kind == SL_STAGE_SCAN && k-- == 0) return &s->scan;
        if (s->kind != SL_STAGE_REDUCE) continue;
        if (k < s->reduce.nvalues) {
            *rd = &s->reduce;
            return &s->reduce.values[k];
        }
        k -= s->reduce.nvalues;
    }
    return NULL;
}

/* The fields a distributed session reads (dist/session.c): every record's values; from a
 * part's aggregate (`aggregate`) the fold's has_first, headed and keys, and of a reduce the
 * open segment and index; after a seeded part, a reduce's index and open segment. */
static void same_records(const sluice_pipeline *p, const sl_scan_carry *cpu, const sl_scan_carry *gpu,
                         int n, bool aggregate, const char *what) {
    for (int k = 0; k < n; k++) {
        const sl_reduce *rd = NULL;
        const sl_scan *sc = record_scan(p, k, &rd);
        ck_assert_ptr_nonnull(sc);
        for (int f = 0; f < sc->nfields; f++) {
            uint64_t a = 0, b = 0;
            sl_value_store(sc->acc[f], &a, 0, sl_value_cast(cpu[k].v[f], sc->acc[f]));
            sl_value_store(sc->acc[f], &b, 0, sl_value_cast(gpu[k].v[f], sc->acc[f]));
            ck_assert_msg(a == b, "%s: record %d field %d: emulated %llx, CPU %llx", what, k, f,
                          (unsigned long long)b, (unsigned long long)a);
        }
        bool first_value = rd && rd->values == sc;
        if (first_value) {
            ck_assert_msg(cpu[k].segments == gpu[k].segments, "%s: record %d: index %lld, CPU %lld",
                          what, k, (long long)gpu[k].segments, (long long)cpu[k].segments);
            ck_assert_msg(cpu[k].open == gpu[k].open, "%s: record %d: open %d, CPU %d", what, k,
                          gpu[k].open, cpu[k].open);
        }
        if (!aggregate || (rd && (rd->per_batch || rd->segments == SL_SEGMENTS_OFFSETS))) continue;
        ck_assert_msg(cpu[k].has_first == gpu[k].has_first, "%s: record %d: has_first %d, CPU %d",
                      what, k, gpu[k].has_first, cpu[k].has_first);
        if (sc->segments == SL_SEGMENTS_NONE) continue;
        ck_assert_msg(cpu[k].headed == gpu[k].headed, "%s: record %d: headed %d, CPU %d", what, k,
                      gpu[k].headed, cpu[k].headed);
        if (sc->segments != SL_SEGMENTS_KEY) continue;
        ck_assert_msg(cpu[k].has_key == gpu[k].has_key, "%s: record %d: has_key %d, CPU %d", what,
                      k, gpu[k].has_key, cpu[k].has_key);
        if (cpu[k].has_key)
            ck_assert_msg(cpu[k].last_key == gpu[k].last_key, "%s: record %d: last key %llx, CPU %llx",
                          what, k, (unsigned long long)gpu[k].last_key,
                          (unsigned long long)cpu[k].last_key);
        if (cpu[k].has_first && !cpu[k].headed)
            ck_assert_msg(cpu[k].first_key == gpu[k].first_key,
                          "%s: record %d: first key %llx, CPU %llx", what, k,
                          (unsigned long long)gpu[k].first_key, (unsigned long long)cpu[k].first_key);
    }
}

START_TEST(reduce_carries_on_host) {
    if (system("c++ --version > /dev/null 2>&1") != 0) return;
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    const struct carry_case *cc = &cases[_i];
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: carry-%d\ninput:\n  x: i32\n  k: i16\nstages:\n"
             "  - map: {g: k & 3, hd: (k & 15) == 0, big: (k & 4) != 0}\n"
             "%s"
             "%s%s%s"
             "  - reduce:\n%s      index: seg\n      values:\n"
             "        - {op: sum, of: x, into: s}\n"
             "        - {op: min, of: x, into: lo}\n"
             "        - {op: max, of: %s, into: top}\n"
             "        - {op: xor, of: k, into: bx}\n"
             "        - {op: count, into: n}\n"
             "output: [seg, s, lo, top, bx, n]\n",
             _i, cc->plain ? "" : "  - filter: x % 5 != 0\n", cc->scan ? "  - scan: " : "",
             cc->scan ? cc->scan : "", cc->scan ? "\n" : "", cc->segments, cc->scan ? "run" : "x");
    sluice_pipeline *p = tu_load(ctx, yaml);
    ck_assert_ptr_nonnull(p);
    sl_plan plan;
    ck_assert_int_eq(sl_plan_build(ctx, p, SLUICE_BACKEND_CUDA, &plan), SLUICE_OK);
    ck_assert_int_eq(plan.ngroups, 1);
    sl_codegen cg;
    ck_assert_int_eq(sl_cuda_codegen(ctx, p, &plan, 0, ARCH, &cg), SLUICE_OK);
    ck_assert(cg.reduces);
    /* the narrow scans' cases test what they name: a value held widened */
    if (cc->scan && strcmp(cc->scan, SCAN_X) != 0 && !getenv("SLUICE_CUDA_WIDEN"))
        ck_assert_msg(cg.scan_carry[0].held[0] == (strstr(cc->scan, "of: hd") ? SLUICE_U32 : SLUICE_I32),
                      "%s: the scan's value is held as type %d", cc->scan, (int)cg.scan_carry[0].held[0]);
    ck_assert(cg.block_records == cc->plain);
    const int n = cg.nscans;
    ck_assert_int_le(n, MAXSCANS);
    ck_assert_int_eq(sl_cuda_carry_check(ctx, p, &plan, 0, cg.scan_carry, n), SLUICE_OK);
    const sl_reduce *rd = &p->stages[p->nstages - 1].reduce;
    const bool carried = !rd->per_batch;
    int first = 0; /* the reduce's first value's record */
    while (first < n && cg.scan_carry[first].reduce_value != 0) first++;
    ck_assert_int_lt(first, n);

    char dir[] = "/tmp/sluice-carry-host-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    emu_build(p, &cg, dir);

    /* (rows, cut): an empty part on either side, cuts inside the first tile and past it, and
     * three tiles only for the aggregate loop (its blocks' partials joined) */
    static const long long plan_rows[][2] = {{0, 0}, {1500, 0}, {1500, 1500}, {2600, 1300},
                                             {2600, 37}, {9000, 4100}};
    unsigned char *bytes = malloc(cg.carry_bytes), *after = malloc(cg.carry_bytes);
    ck_assert_ptr_nonnull(bytes);
    ck_assert_ptr_nonnull(after);
    for (size_t z = 0; z < SL_ARRAY_LEN(plan_rows); z++) {
        const long long total = plan_rows[z][0], cut = plan_rows[z][1];
        if (total > 2600 && !cg.aggregate_loop) continue;
        const uint64_t seed = 7919 + (uint64_t)_i * 131 + z;
        char what[160];
        stream st = make_stream(p, &cg, seed, total);
        rows whole = {0, NULL};
        sl_scan_carry rec[MAXSCANS], fresh[MAXSCANS], cpu[MAXSCANS], gpu[MAXSCANS];
        cpu_part(p, &cg, &st, 0, total, NULL, true, &whole, rec);

        /* 1. the aggregate of [cut, total) from a fresh carry, held at flush when carried */
        fresh_records(p, fresh);
        fresh[first].continues = carried;
        memcpy(bytes, cg.carry_identity, cg.carry_bytes);
        sl_cuda_carry_encode(p, &plan, 0, cg.scan_carry, n, fresh, bytes);
        const bool held = sl_cuda_carry_held(cg.scan_carry, n, fresh);
        ck_assert(held == carried);
        rows cpu_rows = {0, NULL};
        cpu_part(p, &cg, &st, cut, total, fresh, true, &cpu_rows, cpu);
        rows got = emulate(dir, &cg, seed, total, cut, total, bytes, !held, after);
        snprintf(what, sizeof what, "%s, rows [%lld, %lld) from a fresh carry", p->name, cut, total);
        same_rows(&cpu_rows, 0, &got, cg.noutputs, what);
        sl_cuda_carry_decode(p, &plan, 0, cg.scan_carry, n, after, fresh, total > cut, gpu);
        same_records(p, cpu, gpu, n, true, what);
        free(cpu_rows.v);
        free(got.v);

        /* 2. [cut, total) seeded with one process's state after [0, cut), the last part */
        rows head = {0, NULL};
        sl_scan_carry at_cut[MAXSCANS];
        cpu_part(p, &cg, &st, 0, cut, NULL, false, &head, at_cut);
        for (int k = 0; k < n; k++) at_cut[k].has_first = at_cut[k].headed = false;
        at_cut[first].continues = false;
        memcpy(bytes, cg.carry_identity, cg.carry_bytes);
        sl_cuda_carry_encode(p, &plan, 0, cg.scan_carry, n, at_cut, bytes);
        ck_assert(!sl_cuda_carry_held(cg.scan_carry, n, at_cut));
        got = emulate(dir, &cg, seed, total, cut, total, bytes, true, after);
        snprintf(what, sizeof what, "%s, rows [%lld, %lld) seeded with [0, %lld)", p->name, cut,
                 total, cut);
        cpu_rows = (rows){0, NULL};
        cpu_part(p, &cg, &st, cut, total, at_cut, true, &cpu_rows, cpu);
        same_rows(&cpu_rows, 0, &got, cg.noutputs, what);
        /* per stream, the rows one process gives after [0, cut)'s (per batch they depend on
           the batches) */
        if (carried) same_rows(&whole, head.n, &got, cg.noutputs, what);
        sl_cuda_carry_decode(p, &plan, 0, cg.scan_carry, n, after, at_cut, total > cut, gpu);
        same_records(p, cpu, gpu, n, false, what);
        free(cpu_rows.v);
        free(got.v);

        /* 3. the same part seeded as a middle rank's: its open segment held at flush */
        at_cut[first].continues = true;
        memcpy(bytes, cg.carry_identity, cg.carry_bytes);
        sl_cuda_carry_encode(p, &plan, 0, cg.scan_carry, n, at_cut, bytes);
        ck_assert(sl_cuda_carry_held(cg.scan_carry, n, at_cut));
        got = emulate(dir, &cg, seed, total, cut, total, bytes, false, after);
        snprintf(what, sizeof what, "%s, rows [%lld, %lld) seeded with [0, %lld), held", p->name,
                 cut, total, cut);
        cpu_rows = (rows){0, NULL};
        cpu_part(p, &cg, &st, cut, total, at_cut, true, &cpu_rows, cpu);
        same_rows(&cpu_rows, 0, &got, cg.noutputs, what);
        sl_cuda_carry_decode(p, &plan, 0, cg.scan_carry, n, after, at_cut, total > cut, gpu);
        same_records(p, cpu, gpu, n, false, what);
        free(cpu_rows.v);
        free(got.v);
        free(head.v);
        free(whole.v);
        for (int k = 0; k < st.n; k++) free(st.data[k]);
    }
    free(bytes);
    free(after);
    emu_finish(ctx, p, &plan, &cg, dir);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("cuda_carry_host");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, reduce_carries_on_host, 0, (int)SL_ARRAY_LEN(cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(make_suite()); }

#else /* no CUDA in this build */
int main(void) {
    printf("test_cuda_carry_host: built without CUDA, skipped\n");
    return 77;
}
#endif
