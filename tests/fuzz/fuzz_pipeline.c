/* fuzz_pipeline.c — libFuzzer harness for the pipeline loader: the input is a pipeline file.
 * A rejected file must come with well-formed diagnostics whose status is the call's. An
 * accepted one is taken all the way: its inputs, outputs and params are listed, it is
 * explained for the CPU, a CPU session runs a tiny batch (edge values, an offsets input cut
 * into short segments) pushed in two pieces, is flushed and drained, and every result batch
 * must have the pipeline's output columns and types with sane lengths. One input in four
 * leaves the pipeline, the session and a pulled batch alive for sluice_context_destroy to
 * free (LeakSanitizer checks that it does). */
#include <inttypes.h>

#include "fuzz_util.h"

#define FZ_ROWS 7

/* Fills one column per pipeline input with `rows` rows derived from seed; an offsets input
 * gets segments of 0..3 rows. The data is malloc'd into bufs (the caller frees). */
static bool fz_make_batch(const sluice_pipeline *p, uint64_t seed, int64_t rows,
                          sluice_column *cols, void **bufs) {
    size_t n = sluice_pipeline_input_count(p);
    for (size_t i = 0; i < n; i++) {
        sluice_column_info info;
        sl_fuzz_check(sluice_pipeline_input(p, i, &info) == SLUICE_OK, "input %zu of %zu", i, n);
        sl_fuzz_check(info.name && sluice_type_size(info.type) > 0, "input %zu malformed", i);
        cols[i].name = info.name;
        cols[i].type = info.type;
        if (info.role == SLUICE_ROLE_OFFSETS) {
            sl_fuzz_check(info.type == SLUICE_I64, "offsets input '%s' is not i64", info.name);
            size_t cap = 2 * (size_t)rows + 2;
            int64_t *off = malloc(sizeof(int64_t) * cap);
            if (!off) return false;
            size_t k = 0;
            int64_t at = 0;
            uint64_t s = seed ^ 0x5eed;
            off[k++] = 0;
            while (at < rows && k < cap - 1) {
                at += (int64_t)(fz_mix(&s) % 4);
                if (at > rows) at = rows;
                off[k++] = at;
            }
            if (off[k - 1] != rows) off[k++] = rows;
            cols[i].data = bufs[i] = off;
            cols[i].length = (int64_t)k;
        } else {
            void *d = malloc(sluice_type_size(info.type) * (size_t)(rows ? rows : 1));
            if (!d) return false;
            fz_fill_column(info.type, d, rows, seed + i * 977);
            cols[i].data = bufs[i] = d;
            cols[i].length = rows;
        }
    }
    return true;
}

static void fz_check_result(const sluice_pipeline *p, const sluice_batch *b) {
    size_t nout = sluice_pipeline_output_count(p);
    sl_fuzz_check(sluice_batch_column_count(b) == nout, "result has %zu columns, pipeline %zu",
                  sluice_batch_column_count(b), nout);
    int64_t rows = sluice_batch_rows(b);
    sl_fuzz_check(rows >= 0, "negative result rows");
    for (size_t i = 0; i < nout; i++) {
        sluice_column c;
        sluice_column_info info;
        sl_fuzz_check(sluice_batch_column(b, i, &c) == SLUICE_OK, "result column %zu", i);
        sl_fuzz_check(sluice_pipeline_output(p, i, &info) == SLUICE_OK, "output %zu", i);
        sl_fuzz_check(c.type == info.type && c.name && strcmp(c.name, info.name) == 0,
                      "result column %zu is not output '%s'", i, info.name);
        sl_fuzz_check(c.length == rows, "result column '%s' has %" PRId64 " rows, batch %" PRId64,
                      c.name, c.length, rows);
        /* Read every byte so ASan checks the length against the allocation. */
        const uint8_t *bytes = c.data;
        unsigned sum = 0;
        for (size_t k = 0; k < (size_t)rows * sluice_type_size(c.type); k++) sum += bytes[k];
        (void)sum;
    }
    sluice_column none;
    sl_fuzz_check(sluice_batch_column(b, nout, &none) != SLUICE_OK, "column past the end");
}

static void fz_run_session(sluice_context *ctx, sluice_pipeline *p, uint64_t seed, bool leave) {
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    so.max_batch_rows = 4; /* bigger batches are cut internally: exercise that too */
    sluice_session *s = NULL;
    sluice_status st = sluice_session_open(p, &so, &s);
    if (st != SLUICE_OK) {
        fz_check_diagnostics(ctx, st);
        sl_fuzz_check(s == NULL, "failed open left a session");
        return;
    }
    size_t n = sluice_pipeline_input_count(p);
    sluice_column *cols = calloc(n ? n : 1, sizeof *cols);
    void **bufs = calloc(n ? n : 1, sizeof *bufs);
    if (!cols || !bufs) goto done;
    for (int piece = 0; piece < 2; piece++) {
        memset(bufs, 0, sizeof *bufs * (n ? n : 1));
        if (fz_make_batch(p, seed + (uint64_t)piece, piece ? FZ_ROWS : 3, cols, bufs)) {
            st = sluice_session_push(s, cols, n);
            if (st != SLUICE_OK) fz_check_diagnostics(ctx, st);
        }
        for (size_t i = 0; i < n; i++) free(bufs[i]);
    }
    st = sluice_session_flush(s);
    if (st != SLUICE_OK) fz_check_diagnostics(ctx, st);
    bool keep_batch = leave;
    for (;;) {
        sluice_batch *b = NULL;
        st = sluice_session_pull(s, &b);
        sl_fuzz_check(st == SLUICE_OK, "pull failed: %s", sluice_status_name(st));
        if (!b) break;
        fz_check_result(p, b);
        if (keep_batch) keep_batch = false; /* the first one stays for the context to free */
        else sluice_batch_free(b);
    }
done:
    free(cols);
    free(bufs);
    if (!leave) sluice_session_close(s);
}

static void fz_inspect(sluice_context *ctx, sluice_pipeline *p) {
    sl_fuzz_check(sluice_pipeline_name(p) != NULL, "accepted pipeline has no name");
    size_t ni = sluice_pipeline_input_count(p), no = sluice_pipeline_output_count(p);
    sluice_column_info info;
    for (size_t i = 0; i < no; i++) {
        sl_fuzz_check(sluice_pipeline_output(p, i, &info) == SLUICE_OK, "output %zu", i);
        sl_fuzz_check(info.name && sluice_type_size(info.type) > 0, "output %zu malformed", i);
    }
    sl_fuzz_check(sluice_pipeline_input(p, ni, &info) != SLUICE_OK, "input past the end");
    for (size_t i = 0; i < sluice_pipeline_param_count(p); i++) {
        sluice_param_info pi;
        sl_fuzz_check(sluice_pipeline_param(p, i, &pi) == SLUICE_OK, "param %zu", i);
        sl_fuzz_check(pi.name && pi.default_text && sluice_type_size(pi.type) > 0,
                      "param %zu malformed", i);
    }
    char *text = NULL;
    int passes = -1;
    sluice_status st = sluice_pipeline_explain(p, SLUICE_BACKEND_CPU, &text, &passes);
    if (st == SLUICE_OK) {
        sl_fuzz_check(text && text[0], "explain gave no text");
        sl_fuzz_check(passes >= 1, "explain predicts %d passes", passes);
        sluice_free_text(ctx, text);
    } else {
        fz_check_diagnostics(ctx, st);
    }
}

int sl_fuzz_pipeline(const uint8_t *data, size_t size);
int sl_fuzz_pipeline(const uint8_t *data, size_t size) {
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.cpu_threads = 1;
    co.kernel_cache_dir = "";
    sluice_context *ctx = NULL;
    if (sluice_context_create(&ctx, &co) != SLUICE_OK) return 0;
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_string(ctx, (const char *)data, size, "fuzz.yaml", &p);
    if (st != SLUICE_OK) {
        sl_fuzz_check(p == NULL, "failed load left a pipeline");
        fz_check_diagnostics(ctx, st);
    } else {
        sl_fuzz_check(p != NULL, "load succeeded without a pipeline");
        sl_fuzz_check(sluice_context_diagnostic_count(ctx) == 0, "success left diagnostics");
        fz_inspect(ctx, p);
        uint64_t seed = 0;
        for (size_t i = 0; i < size; i++) seed = seed * 131 + data[i];
        bool leave = (seed & 3) == 0;
        fz_run_session(ctx, p, seed, leave);
        if (!leave) sluice_pipeline_free(p);
    }
    sluice_context_destroy(ctx);
    return 0;
}

#ifndef SL_FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return sl_fuzz_pipeline(data, size);
}
#endif
