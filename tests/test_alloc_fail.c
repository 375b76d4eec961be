/* test_alloc_fail.c — allocation-failure injection. For every shipped pipeline
 * (pipelines/ *.yaml), the whole life of a job — load the file, explain it, open a CPU
 * session, push two batches, flush, pull everything, close, free — is run once per host
 * allocation it makes, failing exactly that one (the 1st, then the 2nd, … through the
 * context's allocator hook), until a run makes no allocation past the failed one. Each time:
 *   - the step that hit the failure returns SLUICE_ERR_NO_MEMORY with a diagnostic saying so,
 *     or, where the library can do without that allocation, the job completes and its output
 *     is exactly the reference output;
 *   - the same context then runs the whole job again successfully (it stays usable);
 *   - after everything is freed and the context destroyed, no allocation made through the
 *     hook is still live (LeakSanitizer, in the sanitizer build, catches anything else). */
#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- the failing allocator ------------------------------------------------------------- */

typedef struct failing_allocator {
    long calls;   /* allocations (alloc, and realloc of NULL or to a new size) so far */
    long fail_at; /* fail the call with this number; 0: never */
    bool hit;     /* the failure was injected */
    long live;    /* blocks handed out and not freed */
} failing_allocator;

static bool should_fail(failing_allocator *a) {
    a->calls++;
    if (a->fail_at && a->calls == a->fail_at) {
        a->hit = true;
        return true;
    }
    return false;
}

static void *fa_alloc(size_t size, void *opaque) {
    failing_allocator *a = opaque;
    if (should_fail(a)) return NULL;
    void *p = malloc(size);
    if (p) a->live++;
    return p;
}

static void *fa_realloc(void *ptr, size_t size, void *opaque) {
    failing_allocator *a = opaque;
    if (!ptr) return fa_alloc(size, opaque);
    if (should_fail(a)) return NULL; /* the old block stays valid, as with C's realloc */
    return realloc(ptr, size);
}

static void fa_free(void *ptr, void *opaque) {
    failing_allocator *a = opaque;
    ck_assert_ptr_nonnull(ptr); /* the hook's contract: the library never frees NULL */
    a->live--;
    free(ptr);
}

/* ---- a job's input and output ---------------------------------------------------------- */

#define MAX_COLUMNS 32

/* The output of a job: each output column's bytes, concatenated over result batches. */
typedef struct job_output {
    size_t ncols;
    uint8_t *data[MAX_COLUMNS];
    size_t bytes[MAX_COLUMNS];
    int64_t rows;
} job_output;

static void output_free(job_output *o) {
    for (size_t i = 0; i < o->ncols; i++) free(o->data[i]);
    memset(o, 0, sizeof *o);
}

static void output_append(job_output *o, const sluice_batch *b) {
    o->ncols = sluice_batch_column_count(b);
    ck_assert_uint_le(o->ncols, MAX_COLUMNS);
    for (size_t i = 0; i < o->ncols; i++) {
        sluice_column c;
        ck_assert_int_eq(sluice_batch_column(b, i, &c), SLUICE_OK);
        size_t n = (size_t)c.length * sluice_type_size(c.type);
        o->data[i] = realloc(o->data[i], o->bytes[i] + n + 1);
        ck_assert_ptr_nonnull(o->data[i]);
        if (n) memcpy(o->data[i] + o->bytes[i], c.data, n);
        o->bytes[i] += n;
    }
    o->rows += sluice_batch_rows(b);
}

static bool output_equal(const job_output *x, const job_output *y) {
    if (x->ncols != y->ncols || x->rows != y->rows) return false;
    for (size_t i = 0; i < x->ncols; i++)
        if (x->bytes[i] != y->bytes[i] || memcmp(x->data[i], y->data[i], x->bytes[i]) != 0)
            return false;
    return true;
}

/* One batch for the pipeline's inputs: `rows` rows of deterministic data, an offsets input
 * cut into segments of 0..9 rows. Buffers are the test's own (malloc), not the library's. */
typedef struct test_batch {
    size_t count;
    sluice_column cols[MAX_COLUMNS];
    void *bufs[MAX_COLUMNS];
} test_batch;

static void batch_make(test_batch *b, const sluice_pipeline *p, int64_t rows, uint64_t seed) {
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    b->count = sluice_pipeline_input_count(p);
    ck_assert_uint_le(b->count, MAX_COLUMNS);
    for (size_t i = 0; i < b->count; i++) {
        sluice_column_info info;
        ck_assert_int_eq(sluice_pipeline_input(p, i, &info), SLUICE_OK);
        b->cols[i].name = info.name;
        b->cols[i].type = info.type;
        if (info.role == SLUICE_ROLE_OFFSETS) {
            int64_t *off = malloc(sizeof *off * (size_t)(rows + 2));
            ck_assert_ptr_nonnull(off);
            int64_t k = 0, at = 0;
            off[k++] = 0;
            while (at < rows) {
                at += tu_rng_range(&rng, 1, 9);
                if (at > rows) at = rows;
                off[k++] = at;
            }
            b->cols[i].data = b->bufs[i] = off;
            b->cols[i].length = k;
            continue;
        }
        size_t w = sluice_type_size(info.type);
        uint8_t *d = malloc(w * (size_t)rows + 1);
        ck_assert_ptr_nonnull(d);
        for (int64_t r = 0; r < rows; r++) {
            uint64_t v = tu_rng_next(&rng);
            switch (info.type) {
            case SLUICE_BOOL: d[r] = v & 1; break;
            case SLUICE_F16: { uint16_t h = (uint16_t)(0x3C00 + (v % 0x800)); memcpy(d + 2 * r, &h, 2); break; }
            case SLUICE_F32: { float f = (float)tu_rng_normal(&rng) * 10; memcpy(d + 4 * r, &f, 4); break; }
            case SLUICE_F64: { double f = tu_rng_normal(&rng) * 10; memcpy(d + 8 * r, &f, 8); break; }
            default: memcpy(d + w * (size_t)r, &v, w); break;
            }
        }
        b->cols[i].data = b->bufs[i] = d;
        b->cols[i].length = rows;
    }
}

static void batch_free(test_batch *b) {
    for (size_t i = 0; i < b->count; i++) free(b->bufs[i]);
}

/* ---- the job --------------------------------------------------------------------------- */

/* A step failed: it must say out of memory, and only because one allocation was refused. */
static void expect_oom(sluice_context *ctx, const failing_allocator *a, sluice_status st,
                       const char *path, const char *step) {
    ck_assert_msg(st == SLUICE_ERR_NO_MEMORY,
                  "%s: %s with allocation %ld failed returned %s, not SLUICE_ERR_NO_MEMORY",
                  path, step, a->fail_at, sluice_status_name(st));
    ck_assert_msg(a->hit, "%s: %s failed with no allocation refused", path, step);
    ck_assert_uint_ge(sluice_context_diagnostic_count(ctx), 1);
    ck_assert_int_eq(sluice_context_diagnostic(ctx, 0)->status, SLUICE_ERR_NO_MEMORY);
}

/* Runs the whole job; returns SLUICE_OK and fills out, or the first failing status (then
 * checked by expect_oom). Everything the job made is freed before it returns.
 * retry: a push or flush refused for memory is checked by expect_oom, then called again on the
 * same session with nothing refused, and the job goes on: a refused call changes nothing
 * (sluice.h), so the output must be the reference's. A stream-wide sort then also spills
 * (a 4 KiB sort budget), so refusals land in its runs and their merges too. */
static sluice_status run_job(sluice_context *ctx, failing_allocator *a, const char *path,
                             job_output *out, bool retry) {
    sluice_pipeline *p = NULL;
    sluice_session *s = NULL;
    char *text = NULL;
    sluice_status st = sluice_pipeline_load_file(ctx, path, &p);
    if (st != SLUICE_OK) {
        ck_assert_ptr_null(p);
        expect_oom(ctx, a, st, path, "load");
        return st;
    }
    st = sluice_pipeline_explain(p, SLUICE_BACKEND_CPU, &text, NULL);
    if (st != SLUICE_OK) {
        ck_assert_ptr_null(text);
        expect_oom(ctx, a, st, path, "explain");
        goto done;
    }
    sluice_free_text(ctx, text);
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    so.max_batch_rows = 1000; /* the 3000-row batch is cut internally */
    if (retry) so.sort_memory_bytes = 4096;
    st = sluice_session_open(p, &so, &s);
    if (st != SLUICE_OK) {
        ck_assert_ptr_null(s);
        expect_oom(ctx, a, st, path, "session_open");
        goto done;
    }
    for (int piece = 0; piece < 2; piece++) {
        test_batch b;
        batch_make(&b, p, piece ? 3000 : 700, 42 + (uint64_t)piece);
        st = sluice_session_push(s, b.cols, b.count);
        if (st != SLUICE_OK && retry) {
            expect_oom(ctx, a, st, path, "push");
            a->fail_at = 0;
            st = sluice_session_push(s, b.cols, b.count);
            ck_assert_msg(st == SLUICE_OK, "%s: a push refused for memory fails again when retried",
                          path);
        }
        batch_free(&b);
        if (st != SLUICE_OK) {
            expect_oom(ctx, a, st, path, "push");
            goto done;
        }
    }
    st = sluice_session_flush(s);
    if (st != SLUICE_OK && retry) {
        expect_oom(ctx, a, st, path, "flush");
        a->fail_at = 0;
        st = sluice_session_flush(s);
        ck_assert_msg(st == SLUICE_OK, "%s: a flush refused for memory fails again when retried",
                      path);
    }
    if (st != SLUICE_OK) {
        expect_oom(ctx, a, st, path, "flush");
        goto done;
    }
    for (;;) {
        sluice_batch *b = NULL;
        st = sluice_session_pull(s, &b);
        ck_assert_int_eq(st, SLUICE_OK); /* pull hands over a batch; it allocates nothing */
        if (!b) break;
        output_append(out, b);
        sluice_batch_free(b);
    }
done:
    sluice_session_close(s);
    sluice_pipeline_free(p);
    return st;
}

static sluice_context *context_with(failing_allocator *a, sluice_allocator *hooks) {
    *hooks = (sluice_allocator){fa_alloc, fa_realloc, fa_free, a};
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.allocator = hooks;
    co.cpu_threads = 1;
    co.kernel_cache_dir = "";
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, &co), SLUICE_OK);
    return ctx;
}

static void check_pipeline(const char *path, bool retry) {
    /* The reference: no failure (and no spill: results are the same with any budget). */
    failing_allocator a = {0};
    sluice_allocator hooks;
    sluice_context *ctx = context_with(&a, &hooks);
    job_output reference = {0};
    long before = a.calls;
    ck_assert_int_eq(run_job(ctx, &a, path, &reference, false), SLUICE_OK);
    long per_job = a.calls - before;
    sluice_context_destroy(ctx);
    ck_assert_int_eq(a.live, 0);

    long failures = 0, survived = 0;
    for (long n = 1;; n++) {
        a = (failing_allocator){0};
        ctx = context_with(&a, &hooks);
        a.fail_at = a.calls + n;
        job_output out = {0};
        sluice_status st = run_job(ctx, &a, path, &out, retry);
        bool hit = a.hit;
        if (st == SLUICE_OK) {
            ck_assert_msg(output_equal(&out, &reference),
                          "%s: allocation %ld refused, the job succeeded with a wrong output",
                          path, n);
            if (hit) survived++;
        } else {
            failures++;
        }
        output_free(&out);
        /* The context is usable afterwards: the whole job again, nothing refused. */
        a.fail_at = 0;
        job_output again = {0};
        ck_assert_msg(run_job(ctx, &a, path, &again, retry) == SLUICE_OK,
                      "%s: the context does not recover after allocation %ld failed", path, n);
        ck_assert_msg(output_equal(&again, &reference), "%s: wrong output after recovery", path);
        output_free(&again);
        sluice_context_destroy(ctx);
        ck_assert_msg(a.live == 0, "%s: %ld blocks leaked after allocation %ld failed", path,
                      a.live, n);
        if (!hit) break; /* n is past the job's last allocation */
        ck_assert_msg(n < 10 * per_job + 1000, "%s: the job never finishes", path);
    }
    output_free(&reference);
    fprintf(stderr, "%s%s: %ld allocations per job; %ld refusals reported out of memory, %ld "
                    "were done without\n", path, retry ? " (calls retried)" : "", per_job,
            failures, survived);
    if (!retry) ck_assert_int_gt(failures, 0);
}

static int by_name(const struct dirent **x, const struct dirent **y) {
    return strcmp((*x)->d_name, (*y)->d_name);
}

START_TEST(every_shipped_pipeline) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/pipelines", SLUICE_SOURCE_DIR);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, by_name);
    ck_assert_msg(n >= 0, "cannot list %s", dir);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]->d_name);
        if (len > 5 && strcmp(names[i]->d_name + len - 5, ".yaml") == 0) {
            char path[4096 + 256];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            check_pipeline(path, false);
            check_pipeline(path, true);
            checked++;
        }
        free(names[i]);
    }
    free(names);
    ck_assert_int_gt(checked, 0);
}
END_TEST

/* Creating a context is itself an allocation: refusing it is reported, not a crash. */
START_TEST(context_create_out_of_memory) {
    failing_allocator a = {0};
    a.fail_at = 1;
    sluice_allocator hooks = {fa_alloc, fa_realloc, fa_free, &a};
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.allocator = &hooks;
    co.kernel_cache_dir = "/tmp/sluice-cache"; /* a second allocation, the copied path */
    sluice_context *ctx = (sluice_context *)&a;
    ck_assert_int_eq(sluice_context_create(&ctx, &co), SLUICE_ERR_NO_MEMORY);
    ck_assert_ptr_null(ctx);
    a = (failing_allocator){.fail_at = 2};
    ck_assert_int_eq(sluice_context_create(&ctx, &co), SLUICE_ERR_NO_MEMORY);
    ck_assert_ptr_null(ctx);
    ck_assert_int_eq(a.live, 0);
}
END_TEST

/* sluice.h: destroying a context frees the pipelines, sessions and batches made from it that
 * the caller did not free. A session still holding queued results, a pulled batch and the
 * pipeline are left alive here; nothing may be live afterwards (and no worker thread may
 * still touch the freed context: ASan). */
START_TEST(context_destroy_frees_what_is_left) {
    failing_allocator a = {0};
    sluice_allocator hooks;
    sluice_context *ctx = context_with(&a, &hooks);
    const char *yaml = "sluice: 1\nname: left\ninput:\n  x: i32\nstages:\n"
                       "  - scan: {of: x, op: sum, into: s}\n  - sort: {key: s, per: batch}\n";
    sluice_pipeline *p = NULL;
    ck_assert_int_eq(sluice_pipeline_load_string(ctx, yaml, strlen(yaml), NULL, &p), SLUICE_OK);
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    so.max_batch_rows = 100;
    sluice_session *s = NULL, *idle = NULL;
    ck_assert_int_eq(sluice_session_open(p, &so, &s), SLUICE_OK);
    ck_assert_int_eq(sluice_session_open(p, &so, &idle), SLUICE_OK);
    int32_t x[1000];
    for (int i = 0; i < 1000; i++) x[i] = i * 7 - 300;
    sluice_column col = {"x", SLUICE_I32, x, 1000};
    ck_assert_int_eq(sluice_session_push(s, &col, 1), SLUICE_OK);
    ck_assert_int_eq(sluice_session_push(s, &col, 1), SLUICE_OK);
    sluice_batch *b = NULL;
    ck_assert_int_eq(sluice_session_pull(s, &b), SLUICE_OK);
    ck_assert_ptr_nonnull(b); /* one pulled, the rest still queued */
    sluice_batch *whole = NULL;
    ck_assert_int_eq(sluice_run(p, &so, &col, 1, &whole), SLUICE_OK);
    ck_assert_ptr_nonnull(whole);
    sluice_context_destroy(ctx);
    ck_assert_int_eq(a.live, 0);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("alloc_fail");
    TCase *tc = tcase_create("alloc_fail");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, context_create_out_of_memory);
    tcase_add_test(tc, context_destroy_frees_what_is_left);
    tcase_add_test(tc, every_shipped_pipeline);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(make_suite()); }
