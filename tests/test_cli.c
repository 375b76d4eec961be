/* test_cli.c — the `sluice` program end to end: every subcommand, exit statuses 0/1/2, the
 * diagnostics format, the three input formats giving the same results, bad files, --param,
 * outputs that do not depend on --batch-rows, outputs that are all or nothing whichever way
 * a run fails (bad data, an unwritable directory, a full disk, a signal), reading and writing
 * overlapped with the pipeline (--io-threads) giving the outputs of the sequential path and
 * failing the same ways, and the command line's manners: did-you-mean, --threads, the
 * summary and progress lines, messages. */
#define _GNU_SOURCE /* posix_openpt and friends */
#include <dirent.h>
#include <errno.h>
#include <time.h>

#include "cli_testutil.h"

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void write_npy(const char *path, sluice_type type, const void *data, int64_t n) {
    char err[256];
    ck_assert_msg(sl_npy_write_file(path, type, data, n, err, sizeof err) == 0, "%s", err);
}

static void expect_contains(const char *haystack, const char *needle) {
    ck_assert_msg(strstr(haystack, needle) != NULL, "expected '%s' in:\n%s", needle, haystack);
}

static void expect_same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = cli_slurp(a, &la), *y = cli_slurp(b, &lb);
    ck_assert_msg(x && y, "cannot read %s or %s", a, b);
    ck_assert_msg(la == lb && memcmp(x, y, la) == 0, "%s and %s differ", a, b);
    free(x);
    free(y);
}

/* A pipeline that keeps rows with x above a threshold param and sums y over the stream. */
static const char *threshold_yaml =
    "sluice: 1\n"
    "name: threshold\n"
    "params:\n"
    "  t: {type: f32, default: 0.0}\n"
    "input:\n"
    "  x: f32\n"
    "  y: i32\n"
    "stages:\n"
    "  - filter: x > t\n"
    "  - scan: {of: y, op: sum, into: total}\n";

static const char *ragged_yaml =
    "sluice: 1\n"
    "name: ragged\n"
    "input:\n"
    "  v: i32\n"
    "  rows: {type: i64, role: offsets}\n"
    "stages:\n"
    "  - segmented_scan: {of: v, op: sum, segments: rows, into: c}\n"
    "output: [v, c]\n";

/* ---- help, version, usage ---------------------------------------------------------------- */

START_TEST(version_and_help) {
    cli_tmp_make();
    cli_result r = cli_run("--version");
    CLI_EXPECT(r, 0);
    expect_contains(r.out, SLUICE_VERSION_STRING);
    cli_result_free(&r);
    r = cli_run("help");
    CLI_EXPECT(r, 0);
    const char *commands[] = {"run", "check", "explain", "gen", "bench"};
    for (size_t i = 0; i < 5; i++) expect_contains(r.out, commands[i]);
    cli_result_free(&r);
    for (size_t i = 0; i < 5; i++) {
        r = cli_run("%s --help", commands[i]);
        CLI_EXPECT(r, 0);
        expect_contains(r.out, "usage: sluice ");
        expect_contains(r.out, commands[i]);
        cli_result_free(&r);
    }
    r = cli_run("help run");
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "--batch-rows");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

START_TEST(usage_errors_exit_2) {
    cli_tmp_make();
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    const char *cases[] = {
        "",
        "frobnicate",
        "help frobnicate",
        "check",
        "check --strict x.yaml",
        "explain",
        "explain %s/t.yaml --backend gpu",
        "run",
        "run %s/t.yaml --out x",
        "run %s/t.yaml --in x",
        "run %s/t.yaml --in x --out y --batch-rows 0",
        "run %s/t.yaml --in x --out y --batch-rows many",
        "run %s/t.yaml --in x --out y --param t",
        "run %s/t.yaml --in x --out y --frob",
        "run %s/t.yaml --in x --out",
        "gen %s/t.yaml --out x",
        "gen %s/t.yaml --rows -5 --out x",
        "gen %s/t.yaml --rows 10",
        "bench %s/t.yaml",
        "bench %s/t.yaml --rows 10 --repeat 0",
        "run %s/t.yaml --in /tmp --out /tmp/",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, cases[i], cli_tmp_root);
        cli_result r = cli_run("%s", args);
        ck_assert_msg(r.status == 2, "`sluice %s` exited %d, expected 2\n%s", args, r.status, r.err);
        ck_assert_msg(strstr(r.err, "usage") || strstr(r.err, "commands:"),
                      "`sluice %s` gave no usage:\n%s", args, r.err);
        cli_result_free(&r);
    }
    cli_tmp_remove();
}
END_TEST

/* ---- check and explain ------------------------------------------------------------------- */

START_TEST(check_reports_every_error_with_location) {
    cli_tmp_make();
    write_text(cli_tmp("good.yaml"), threshold_yaml);
    cli_result r = cli_run("check '%s'", cli_tmp("good.yaml"));
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "ok");
    cli_result_free(&r);

    write_text(cli_tmp("bad.yaml"),
               "sluice: 1\n"
               "name: bad\n"
               "input:\n"
               "  x: f32\n"
               "stages:\n"
               "  - mapp: {y: x}\n"
               "  - filter: zz > 0\n");
    r = cli_run("check '%s'", cli_tmp("bad.yaml"));
    CLI_EXPECT(r, 1);
    char where[600];
    snprintf(where, sizeof where, "%s:6:", cli_tmp("bad.yaml"));
    expect_contains(r.err, where);
    expect_contains(r.err, ": error: ");
    expect_contains(r.err, "  - mapp: {y: x}");
    expect_contains(r.err, "^");
    /* Not only the first error. */
    snprintf(where, sizeof where, "%s:7:", cli_tmp("bad.yaml"));
    expect_contains(r.err, where);
    cli_result_free(&r);

    r = cli_run("check '%s'", cli_tmp("missing.yaml"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "missing.yaml");
    cli_result_free(&r);

    /* run with a broken pipeline is an error in the pipeline: 1, with the diagnostics. */
    r = cli_run("run '%s' --in x --out '%s'", cli_tmp("bad.yaml"), cli_tmp("o"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, ": error: ");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

START_TEST(explain_prints_the_plan) {
    cli_tmp_make();
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    cli_result r = cli_run("explain '%s' --backend cpu", cli_tmp("t.yaml"));
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "threshold");
    expect_contains(r.out, "pass");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

/* ---- run: formats, params, bad files ----------------------------------------------------- */

/* Writes the threshold pipeline's input as .npy, .bin and CSV in three directories. */
static void write_threshold_inputs(int n, float *x, int32_t *y) {
    tu_rng rng;
    tu_rng_seed(&rng, 99);
    for (int i = 0; i < n; i++) {
        x[i] = (float)((double)tu_rng_range(&rng, -1000, 1000) / 256.0); /* exact in CSV */
        y[i] = (int32_t)tu_rng_range(&rng, -50000, 50000);
    }
    mkdir(cli_tmp("npy"), 0777);
    mkdir(cli_tmp("raw"), 0777);
    write_npy(cli_tmp("npy/x.npy"), SLUICE_F32, x, n);
    write_npy(cli_tmp("npy/y.npy"), SLUICE_I32, y, n);
    FILE *f = fopen(cli_tmp("raw/x.bin"), "wb");
    fwrite(x, sizeof *x, (size_t)n, f);
    fclose(f);
    f = fopen(cli_tmp("raw/y.bin"), "wb");
    fwrite(y, sizeof *y, (size_t)n, f);
    fclose(f);
    f = fopen(cli_tmp("in.csv"), "w");
    fprintf(f, "y,note,x\n");
    for (int i = 0; i < n; i++) fprintf(f, "%d,\"row, %d\",%.9g\n", y[i], i, (double)x[i]);
    fclose(f);
}

START_TEST(run_npy_raw_and_csv_agree_with_an_oracle) {
    cli_tmp_make();
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    enum { N = 5000 };
    static float x[N];
    static int32_t y[N];
    write_threshold_inputs(N, x, y);
    const char *inputs[] = {"npy", "raw", "in.csv"};
    for (int k = 0; k < 3; k++) {
        cli_result r = cli_run("run '%s' --in '%s' --out '%s' --param t=0.5 --backend cpu",
                               cli_tmp("t.yaml"), cli_tmp("%s", inputs[k]), cli_tmp("out%d", k));
        CLI_EXPECT(r, 0);
        cli_result_free(&r);
    }
    /* The oracle: rows with x > 0.5, and the running sum of their y in i64. */
    cli_column xs, tot;
    char err[256];
    ck_assert_msg(cli_read_npy(cli_tmp("out0/x.npy"), &xs, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(cli_read_npy(cli_tmp("out0/total.npy"), &tot, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(tot.type, SLUICE_I64);
    int64_t kept = 0, sum = 0;
    for (int i = 0; i < N; i++) {
        if (!(x[i] > 0.5f)) continue;
        sum += y[i];
        ck_assert_int_lt(kept, xs.length);
        ck_assert_float_eq(((float *)xs.data)[kept], x[i]);
        ck_assert_int_eq(((int64_t *)tot.data)[kept], sum);
        kept++;
    }
    ck_assert_int_eq(kept, xs.length);
    ck_assert_int_gt(kept, N / 10);
    free(xs.data);
    free(tot.data);
    for (int k = 1; k < 3; k++) {
        expect_same_file(cli_tmp("out0/x.npy"), cli_tmp("out%d/x.npy", k));
        expect_same_file(cli_tmp("out0/y.npy"), cli_tmp("out%d/y.npy", k));
        expect_same_file(cli_tmp("out0/total.npy"), cli_tmp("out%d/total.npy", k));
    }
    /* The default param keeps more rows; an unknown or malformed param is a usage error. */
    cli_result r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("t.yaml"), cli_tmp("npy"),
                           cli_tmp("def"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    cli_column d;
    ck_assert(cli_read_npy(cli_tmp("def/x.npy"), &d, err, sizeof err) == 0);
    ck_assert_int_gt(d.length, kept);
    free(d.data);
    r = cli_run("run '%s' --in '%s' --out '%s' --param nosuch=1", cli_tmp("t.yaml"),
                cli_tmp("npy"), cli_tmp("bad"));
    CLI_EXPECT(r, 2);
    cli_result_free(&r);
    r = cli_run("run '%s' --in '%s' --out '%s' --param t=abc", cli_tmp("t.yaml"),
                cli_tmp("npy"), cli_tmp("bad"));
    CLI_EXPECT(r, 2);
    cli_result_free(&r);
    /* A backend that cannot run here is an error (1) with the library's reason. */
    if (!sluice_backend_available(SLUICE_BACKEND_CUDA)) {
        r = cli_run("run '%s' --in '%s' --out '%s' --backend cuda", cli_tmp("t.yaml"),
                    cli_tmp("npy"), cli_tmp("cuda"));
        CLI_EXPECT(r, 1);
        expect_contains(r.err, "CUDA");
        cli_result_free(&r);
    }
    cli_tmp_remove();
}
END_TEST

/* Every column type survives input → pipeline → output unchanged. */
START_TEST(run_round_trips_every_type) {
    cli_tmp_make();
    write_text(cli_tmp("all.yaml"),
               "sluice: 1\n"
               "name: all-types\n"
               "input:\n"
               "  b: bool\n  i8: i8\n  i16: i16\n  i32: i32\n  i64: i64\n"
               "  u8: u8\n  u16: u16\n  u32: u32\n  u64: u64\n  f16: f16\n  f32: f32\n  f64: f64\n"
               "stages:\n"
               "  - map: {n: i64(u8) + 1}\n"
               "output: [b, i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64]\n");
    cli_result r = cli_run("gen '%s' --rows 3000 --seed 4 --out '%s'", cli_tmp("all.yaml"),
                           cli_tmp("in"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    r = cli_run("run '%s' --in '%s' --out '%s' --batch-rows 1000", cli_tmp("all.yaml"),
                cli_tmp("in"), cli_tmp("out"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    const char *cols[] = {"b", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64"};
    for (size_t i = 0; i < 12; i++) {
        cli_column a, b;
        char err[256];
        ck_assert(cli_read_npy(cli_tmp("in/%s.npy", cols[i]), &a, err, sizeof err) == 0);
        ck_assert(cli_read_npy(cli_tmp("out/%s.npy", cols[i]), &b, err, sizeof err) == 0);
        ck_assert_int_eq(a.type, b.type);
        ck_assert_int_eq(a.length, 3000);
        ck_assert_int_eq(b.length, 3000);
        ck_assert_msg(memcmp(a.data, b.data, 3000 * sluice_type_size(a.type)) == 0, "%s", cols[i]);
        free(a.data);
        free(b.data);
    }
    cli_tmp_remove();
}
END_TEST

START_TEST(run_rejects_bad_files_with_exit_1) {
    cli_tmp_make();
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    enum { N = 100 };
    float x[N];
    int32_t y[N];
    write_threshold_inputs(N, x, y);
    struct {
        const char *setup; /* shell command run in the scratch dir before */
        const char *input;
        const char *needles[2];
    } cases[] = {
        {"rm npy/y.npy", "npy", {"y.npy", "'y'"}},
        {"printf 'garbage' > npy/y.npy", "npy", {"y.npy", "not a .npy"}},
        {"head -c 200 npy/y.npy > npy/y2 && mv npy/y2 npy/y.npy", "npy", {"y.npy", "truncated"}},
        {"truncate -s -1 raw/y.bin", "raw", {"y.bin", "399 bytes"}},
        {"head -c 396 raw/y.bin > raw/y2 && mv raw/y2 raw/y.bin", "raw", {"mismatched", "y.bin"}},
        {"sed -i '3s/.*/1,oops,not-a-number/' in.csv", "in.csv", {"in.csv:3:3", "not-a-number"}},
        {"sed -i '4s/.*/1,2/' in.csv", "in.csv", {"in.csv:4", "fields"}},
        {"true", "nonexistent-dir", {"nonexistent-dir", ""}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_threshold_inputs(N, x, y);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "cd '%s' && %s", cli_tmp_root, cases[i].setup);
        ck_assert_int_eq(system(cmd), 0);
        cli_result r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("t.yaml"),
                               cli_tmp("%s", cases[i].input), cli_tmp("out"));
        ck_assert_msg(r.status == 1, "case %zu (%s): exit %d\n%s", i, cases[i].setup, r.status, r.err);
        for (int k = 0; k < 2; k++) expect_contains(r.err, cases[i].needles[k]);
        cli_result_free(&r);
    }
    /* A big-endian .npy: the message says how to convert. */
    write_threshold_inputs(N, x, y);
    unsigned char img[256];
    memset(img, ' ', sizeof img);
    memcpy(img, "\x93NUMPY\x01\x00\x76\x00", 10);
    const char *dict = "{'descr': '>i4', 'fortran_order': False, 'shape': (100,), }";
    memcpy(img + 10, dict, strlen(dict));
    img[127] = '\n';
    FILE *f = fopen(cli_tmp("npy/y.npy"), "wb");
    fwrite(img, 1, 128, f);
    fwrite(y, sizeof *y, N, f);
    fclose(f);
    cli_result r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("t.yaml"), cli_tmp("npy"),
                           cli_tmp("out"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "big-endian");
    expect_contains(r.err, "astype('<i4')");
    cli_result_free(&r);
    /* An output directory that cannot be made. */
    write_threshold_inputs(N, x, y);
    write_text(cli_tmp("file"), "x");
    r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("t.yaml"), cli_tmp("npy"),
                cli_tmp("file/sub"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "file/sub");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

/* ---- the primer's worked examples, from CSV through the command line ---------------------- */

/* Reads a numeric column into out[0..n) as doubles. */
static void read_as_doubles(const char *path, double *out, int64_t n) {
    cli_column c;
    char err[256];
    ck_assert_msg(cli_read_npy(path, &c, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(c.length == n, "%s: %lld rows, expected %lld", path, (long long)c.length,
                  (long long)n);
    for (int64_t i = 0; i < n; i++) {
        switch (c.type) {
        case SLUICE_I32: out[i] = ((int32_t *)c.data)[i]; break;
        case SLUICE_I64: out[i] = (double)((int64_t *)c.data)[i]; break;
        case SLUICE_F32: out[i] = ((float *)c.data)[i]; break;
        case SLUICE_F64: out[i] = ((double *)c.data)[i]; break;
        default: ck_abort_msg("%s: unexpected type %s", path, sluice_type_name(c.type));
        }
    }
    free(c.data);
}

static void expect_doubles(const char *path, const double *want, int64_t n, double tol) {
    double got[64];
    ck_assert_int_le(n, 64);
    read_as_doubles(path, got, n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= tol, "%s[%lld] = %.9g, expected %.9g", path,
                      (long long)i, got[i], want[i]);
}

START_TEST(primer_examples_through_the_command_line) {
    cli_tmp_make();
    /* Hillis-Steele / Blelloch: [3 1 7 0 4 1 6 3] scans to [3 4 11 11 15 16 22 25]; the
     * exclusive scan is [0 3 4 11 11 15 16 22] with total 25. */
    write_text(cli_tmp("scan.yaml"),
               "sluice: 1\nname: primer-scan\ninput:\n  x: i32\nstages:\n"
               "  - scan: {of: x, op: sum, into: inc}\n"
               "  - scan: {of: x, op: sum, kind: exclusive, into: exc}\n");
    write_text(cli_tmp("scan.csv"), "x\n3\n1\n7\n0\n4\n1\n6\n3\n");
    cli_result r = cli_run("run '%s' --in '%s' --out '%s' --batch-rows 3", cli_tmp("scan.yaml"),
                           cli_tmp("scan.csv"), cli_tmp("scan"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    expect_doubles(cli_tmp("scan/inc.npy"), (double[]){3, 4, 11, 11, 15, 16, 22, 25}, 8, 0);
    expect_doubles(cli_tmp("scan/exc.npy"), (double[]){0, 3, 4, 11, 11, 15, 16, 22}, 8, 0);

    /* Compaction: keeping positives of [5 -2 9 0 -7 3 8 -1]: the flags' exclusive scan is
     * [0 1 1 2 2 2 3 4] and the output [5 9 3 8]. */
    write_text(cli_tmp("offs.yaml"),
               "sluice: 1\nname: primer-offsets\ninput:\n  x: i32\nstages:\n"
               "  - flag: {keep: x > 0}\n"
               "  - scan: {of: keep, op: sum, kind: exclusive, into: off}\n"
               "output: [off]\n");
    write_text(cli_tmp("keep.yaml"),
               "sluice: 1\nname: primer-compact\ninput:\n  x: i32\nstages:\n"
               "  - filter: x > 0\n");
    write_text(cli_tmp("c.csv"), "x\n5\n-2\n9\n0\n-7\n3\n8\n-1\n");
    r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("offs.yaml"), cli_tmp("c.csv"),
                cli_tmp("offs"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    expect_doubles(cli_tmp("offs/off.npy"), (double[]){0, 1, 1, 2, 2, 2, 3, 4}, 8, 0);
    r = cli_run("run '%s' --in '%s' --out '%s' --batch-rows 2", cli_tmp("keep.yaml"),
                cli_tmp("c.csv"), cli_tmp("keep"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    expect_doubles(cli_tmp("keep/x.npy"), (double[]){5, 9, 3, 8}, 4, 0);

    /* The recurrence: a = [0.5 0.9 0.1 1.0], b = [1 2 3 4] gives [1.0 2.9 3.29 7.29]. */
    write_text(cli_tmp("lr.yaml"),
               "sluice: 1\nname: primer-linrec\ninput:\n  a: f32\n  b: f32\nstages:\n"
               "  - scan: {op: linrec, a: a, b: b, into: h}\n");
    write_text(cli_tmp("lr.csv"), "a,b\n0.5,1\n0.9,2\n0.1,3\n1.0,4\n");
    r = cli_run("run '%s' --in '%s' --out '%s' --batch-rows 1", cli_tmp("lr.yaml"),
                cli_tmp("lr.csv"), cli_tmp("lr"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    expect_doubles(cli_tmp("lr/h.npy"), (double[]){1.0, 2.9, 3.29, 7.29}, 4, 1e-5);

    /* 4096 copies of 0.1 in f16 sum to 409.5 with the default f32 accumulator; asking for
     * an f16 accumulator (which would stall at 256) is refused when the file is checked. */
    write_text(cli_tmp("h.yaml"),
               "sluice: 1\nname: primer-f16\ninput:\n  v: f16\nstages:\n"
               "  - scan: {of: v, op: sum, into: s}\n");
    FILE *f = fopen(cli_tmp("h.csv"), "w");
    fputs("v\n", f);
    for (int i = 0; i < 4096; i++) fputs("0.1\n", f);
    fclose(f);
    r = cli_run("run '%s' --in '%s' --out '%s' --batch-rows 1000", cli_tmp("h.yaml"),
                cli_tmp("h.csv"), cli_tmp("h"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    cli_column s;
    char err[256];
    ck_assert(cli_read_npy(cli_tmp("h/s.npy"), &s, err, sizeof err) == 0);
    ck_assert_int_eq(s.type, SLUICE_F32);
    ck_assert_int_eq(s.length, 4096);
    ck_assert_float_eq_tol(((float *)s.data)[4095], 409.5f, 1e-3f);
    free(s.data);
    write_text(cli_tmp("h16.yaml"),
               "sluice: 1\nname: primer-f16-acc\ninput:\n  v: f16\nstages:\n"
               "  - scan: {of: v, op: sum, into: s, acc: f16}\n");
    r = cli_run("check '%s'", cli_tmp("h16.yaml"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "h16.yaml:6:");
    expect_contains(r.err, "f32");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

/* ---- ragged input, batch cutting, gen, bench ---------------------------------------------- */

START_TEST(batch_rows_do_not_change_outputs) {
    cli_tmp_make();
    write_text(cli_tmp("r.yaml"), ragged_yaml);
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    cli_result r = cli_run("gen '%s' --rows 20000 --out '%s' --seed 3", cli_tmp("r.yaml"),
                           cli_tmp("rin"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    r = cli_run("gen '%s' --rows 20000 --out '%s' --seed 3", cli_tmp("t.yaml"), cli_tmp("tin"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    /* The oracle for the ragged sums, straight from the generated files. */
    cli_column v, rows;
    char err[256];
    ck_assert(cli_read_npy(cli_tmp("rin/v.npy"), &v, err, sizeof err) == 0);
    ck_assert(cli_read_npy(cli_tmp("rin/rows.npy"), &rows, err, sizeof err) == 0);
    ck_assert_int_eq(v.length, 20000);
    int64_t *expect = malloc(20000 * sizeof *expect);
    const int64_t *o = rows.data;
    ck_assert_int_eq(o[rows.length - 1], 20000);
    for (int64_t j = 0; j + 1 < rows.length; j++) {
        int64_t s = 0;
        for (int64_t i = o[j]; i < o[j + 1]; i++) expect[i] = s += ((int32_t *)v.data)[i];
    }
    static const char *batches[] = {"1", "5", "17", "1000", "2^62"};
    for (size_t b = 0; b < 5; b++) {
        r = cli_run("run '%s' --in '%s' --out '%s' --batch-rows %s", cli_tmp("r.yaml"),
                    cli_tmp("rin"), cli_tmp("r%zu", b), batches[b]);
        CLI_EXPECT(r, 0);
        cli_result_free(&r);
        cli_column c;
        ck_assert(cli_read_npy(cli_tmp("r%zu/c.npy", b), &c, err, sizeof err) == 0);
        ck_assert_int_eq(c.type, SLUICE_I64);
        ck_assert_int_eq(c.length, 20000);
        ck_assert_msg(memcmp(c.data, expect, 20000 * sizeof *expect) == 0,
                      "segmented sums differ from the oracle with --batch-rows %s", batches[b]);
        free(c.data);
        r = cli_run("run '%s' --in '%s' --out '%s' --batch-rows %s", cli_tmp("t.yaml"),
                    cli_tmp("tin"), cli_tmp("t%zu", b), batches[b]);
        CLI_EXPECT(r, 0);
        cli_result_free(&r);
        if (b > 0) {
            expect_same_file(cli_tmp("t0/x.npy"), cli_tmp("t%zu/x.npy", b));
            expect_same_file(cli_tmp("t0/total.npy"), cli_tmp("t%zu/total.npy", b));
        }
    }
    free(expect);
    free(v.data);
    free(rows.data);
    /* Offsets that do not end at the rows are a data error. */
    int64_t bad[] = {0, 5, 19999};
    write_npy(cli_tmp("rin/rows.npy"), SLUICE_I64, bad, 3);
    r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("r.yaml"), cli_tmp("rin"), cli_tmp("x"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "rows.npy");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

START_TEST(gen_is_deterministic) {
    cli_tmp_make();
    write_text(cli_tmp("r.yaml"), ragged_yaml);
    for (int k = 0; k < 3; k++) {
        cli_result r = cli_run("gen '%s' --rows 2^12 --out '%s' --seed %d", cli_tmp("r.yaml"),
                               cli_tmp("g%d", k), k < 2 ? 7 : 8);
        CLI_EXPECT(r, 0);
        cli_result_free(&r);
    }
    expect_same_file(cli_tmp("g0/v.npy"), cli_tmp("g1/v.npy"));
    expect_same_file(cli_tmp("g0/rows.npy"), cli_tmp("g1/rows.npy"));
    size_t la = 0, lb = 0;
    char *a = cli_slurp(cli_tmp("g0/v.npy"), &la), *b = cli_slurp(cli_tmp("g2/v.npy"), &lb);
    ck_assert(la == lb && memcmp(a, b, la) != 0);
    free(a);
    free(b);
    cli_column v;
    char err[256];
    ck_assert(cli_read_npy(cli_tmp("g0/v.npy"), &v, err, sizeof err) == 0);
    ck_assert_int_eq(v.length, 4096);
    free(v.data);
    cli_tmp_remove();
}
END_TEST

START_TEST(bench_reports_throughput_beside_memcpy) {
    cli_tmp_make();
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    write_text(cli_tmp("r.yaml"), ragged_yaml);
    cli_result r = cli_run("bench '%s' --rows 100000 --repeat 3 --backend cpu", cli_tmp("t.yaml"));
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "rows=100000");
    expect_contains(r.out, "passes=1");
    expect_contains(r.out, "sluice ");
    expect_contains(r.out, "memcpy");
    expect_contains(r.out, "GB/s");
    expect_contains(r.out, "sluice / memcpy");
    cli_result_free(&r);
    r = cli_run("bench '%s' --rows 50000 --repeat 1", cli_tmp("r.yaml"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    r = cli_run("gen '%s' --rows 1000 --out '%s'", cli_tmp("t.yaml"), cli_tmp("in"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    r = cli_run("bench '%s' --in '%s' --repeat 1 --batch-rows 100", cli_tmp("t.yaml"), cli_tmp("in"));
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "rows=1000");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

/* ---- outputs are all or nothing ----------------------------------------------------------- */

/* A directory's regular files as "name size hash" lines in name order, or "(absent)": two
 * equal snapshots mean no file was added, removed or changed by a byte. */
static char *dir_snapshot(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return strdup("(absent)");
    char names[64][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        ck_assert_int_lt(n, 64);
        snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    size_t cap = 64 + (size_t)n * 320, used = 0;
    char *snap = malloc(cap);
    snap[0] = '\0';
    for (int i = 0; i < n; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            used += (size_t)snprintf(snap + used, cap - used, "%s/\n", names[i]);
            continue;
        }
        size_t len = 0;
        char *bytes = cli_slurp(path, &len);
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        for (size_t k = 0; bytes && k < len; k++) h = (h ^ (unsigned char)bytes[k]) * 1099511628211ull;
        free(bytes);
        used += (size_t)snprintf(snap + used, cap - used, "%s %zu %016llx\n", names[i], len,
                                 (unsigned long long)h);
    }
    return snap;
}

static void expect_snapshot(const char *dir, const char *before, const char *what) {
    char *now = dir_snapshot(dir);
    ck_assert_msg(strcmp(now, before) == 0, "%s changed %s:\nbefore:\n%s\nafter:\n%s", dir, what,
                  before, now);
    free(now);
}

/* The example: a CSV for pipelines/cull-visible.yaml (x, y, id) whose line 1002 (data
 * row 1001) holds a bad x, pushed in batches of 100, so 1000 rows have gone through and their
 * results been written when the bad value is read. */
static void write_cull_csv(const char *path, int rows, int bad_line) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("x,y,id\n", f);
    tu_rng rng;
    tu_rng_seed(&rng, 5);
    for (int i = 0; i < rows; i++) {
        double x = (double)tu_rng_range(&rng, -512, 512) / 256.0;
        double y = (double)tu_rng_range(&rng, -512, 512) / 256.0;
        if (i + 2 == bad_line)
            fprintf(f, "1.5e,%g,%d\n", y, i);
        else
            fprintf(f, "%g,%g,%d\n", x, y, i);
    }
    fclose(f);
}

START_TEST(outputs_all_or_nothing_on_bad_data) {
    cli_tmp_make();
    write_cull_csv(cli_tmp("good.csv"), 2000, -1);
    write_cull_csv(cli_tmp("bad.csv"), 2000, 1002);
    /* Into a directory that did not exist: it does not exist afterwards either. Read ahead
     * or in turn, the run fails where the bad row is, after the 1000 rows before it. */
    static const char *const io[] = {"--io-threads 0 --write-behind off",
                                     "--io-threads 1 --write-behind on",
                                     "--io-threads 3 --write-behind on"};
    cli_result r;
    for (size_t k = 0; k < 3; k++) {
        r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s' --batch-rows 100 %s",
                    cli_tmp("bad.csv"), cli_tmp("fresh"), io[k]);
        CLI_EXPECT(r, 1);
        expect_contains(r.err, "sluice: error: ");
        expect_contains(r.err, "bad.csv:1002:1: data row 1001, column 'x'");
        expect_contains(r.err, "failed after 1000 rows in");
        cli_result_free(&r);
        struct stat st;
        ck_assert_msg(stat(cli_tmp("fresh"), &st) != 0, "the failed run left its output directory");
    }
    /* Over earlier results: they stay byte for byte, and nothing is added beside them. */
    r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s' --batch-rows 100",
                cli_tmp("good.csv"), cli_tmp("out"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    char *before = dir_snapshot(cli_tmp("out"));
    ck_assert_msg(strstr(before, "id.npy ") && strstr(before, "slot.npy "), "%s", before);
    r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s' --batch-rows 100",
                cli_tmp("bad.csv"), cli_tmp("out"));
    CLI_EXPECT(r, 1);
    cli_result_free(&r);
    expect_snapshot(cli_tmp("out"), before, "by a run that failed on bad data");
    /* A column whose place is taken by a directory: refused before any file is replaced. */
    ck_assert_int_eq(unlink(cli_tmp("out/x.npy")), 0);
    ck_assert_int_eq(mkdir(cli_tmp("out/x.npy"), 0777), 0);
    char *with_dir = dir_snapshot(cli_tmp("out"));
    r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s'", cli_tmp("good.csv"),
                cli_tmp("out"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "is a directory");
    cli_result_free(&r);
    expect_snapshot(cli_tmp("out"), with_dir, "by a run whose output was blocked");
    free(with_dir);
    free(before);
    cli_tmp_remove();
}
END_TEST

START_TEST(outputs_all_or_nothing_in_an_unwritable_directory) {
    cli_tmp_make();
    write_cull_csv(cli_tmp("good.csv"), 500, -1);
    cli_result r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s'",
                           cli_tmp("good.csv"), cli_tmp("out"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    char *before = dir_snapshot(cli_tmp("out"));
    /* As root permissions do not apply: the run is made as nobody, who needs to read the
     * scratch directory (mkdtemp made it private). */
    ck_assert_int_eq(chmod(cli_tmp_root, 0755), 0);
    ck_assert_int_eq(chmod(cli_tmp("good.csv"), 0644), 0);
    ck_assert_int_eq(chmod(cli_tmp("out"), 0555), 0);
    cli_spawn_options o = {.unprivileged = true};
    pid_t pid = cli_spawn(&o, (const char *const[]){"run", "pipelines/cull-visible.yaml", "--in",
                                                   cli_tmp("good.csv"), "--out", cli_tmp("out"),
                                                   NULL});
    r = cli_wait(pid);
    CLI_EXPECT(r, 1);
    expect_contains(r.err, cli_tmp("out"));
    expect_contains(r.err, "Permission denied");
    cli_result_free(&r);
    expect_snapshot(cli_tmp("out"), before, "by a run that could not write there");
    ck_assert_int_eq(chmod(cli_tmp("out"), 0755), 0);
    free(before);
    cli_tmp_remove();
}
END_TEST

START_TEST(outputs_all_or_nothing_on_a_full_disk) {
    cli_tmp_make();
    cli_result r = cli_run("gen pipelines/cull-visible.yaml --rows 1000 --out '%s'", cli_tmp("small"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    r = cli_run("gen pipelines/cull-visible.yaml --rows 200000 --out '%s'", cli_tmp("large"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s'", cli_tmp("small"),
                cli_tmp("out"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    char *before = dir_snapshot(cli_tmp("out"));
    /* The large run's id.npy needs far more than 64 KiB: a write past the limit fails with
     * EFBIG, as one on a full disk fails with ENOSPC. */
    /* In one batch, and in many with the writer failing while the readers are ahead (or
     * with every batch read, run and written in turn). */
    static const struct {
        const char *dir, *batch_rows, *io_threads, *write_behind;
    } cases[] = {{"out", "4194304", "1", "on"}, {"fresh", "4194304", "1", "auto"},
                 {"out", "1000", "2", "on"},    {"out", "1000", "0", "off"},
                 {"fresh", "777", "3", "on"},   {"out", "1000", "0", "on"}};
    for (int k = 0; k < 6; k++) {
        cli_spawn_options o = {.file_size_limit = 64 * 1024};
        pid_t pid = cli_spawn(&o, (const char *const[]){"run", "pipelines/cull-visible.yaml",
                                                       "--in", cli_tmp("large"), "--out",
                                                       cli_tmp("%s", cases[k].dir),
                                                       "--batch-rows", cases[k].batch_rows,
                                                       "--io-threads", cases[k].io_threads,
                                                       "--write-behind", cases[k].write_behind,
                                                       NULL});
        r = cli_wait(pid);
        CLI_EXPECT(r, 1);
        expect_contains(r.err, "File too large");
        cli_result_free(&r);
    }
    expect_snapshot(cli_tmp("out"), before, "by a run that ran out of space");
    struct stat st;
    ck_assert_msg(stat(cli_tmp("fresh"), &st) != 0, "the failed run left its output directory");
    free(before);
    cli_tmp_remove();
}
END_TEST

/* Waits until `sluice run` has its temporaries open in dir (the run is under way); returns
 * false after a minute. */
static bool wait_for_temporaries(const char *dir) {
    for (int tries = 0; tries < 6000; tries++) {
        DIR *d = opendir(dir);
        if (d) {
            struct dirent *e;
            bool found = false;
            while ((e = readdir(d)) != NULL) found |= strstr(e->d_name, ".npy.partial-") != NULL;
            closedir(d);
            if (found) return true;
        }
        usleep(10000);
    }
    return false;
}

static int count_tasks(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A run interrupted mid-stream: its CSV input is a pipe the test holds open, so the run waits
 * for more rows, under way, with its temporaries open, until the signal comes. */
START_TEST(outputs_all_or_nothing_when_interrupted) {
    cli_tmp_make();
    write_cull_csv(cli_tmp("good.csv"), 300, -1);
    cli_result r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s'",
                           cli_tmp("good.csv"), cli_tmp("out"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    char *before = dir_snapshot(cli_tmp("out"));
    ck_assert_int_eq(mkfifo(cli_tmp("in.fifo"), 0600), 0);
    static const struct {
        int sig;
        const char *threads, *out;
    } cases[] = {{SIGTERM, "1", "out"}, {SIGINT, "3", "out"}, {SIGTERM, "2", "fresh"}};
    int tasks[3];
    for (int k = 0; k < 3; k++) {
        /* Read and write: the open does not wait for a reader, and the pipe stays open. */
        int fd = open(cli_tmp("in.fifo"), O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        static const char rows[] = "x,y,id\n0.5,0.5,1\n0.25,-0.5,2\n9,9,3\n";
        ck_assert_int_eq(write(fd, rows, sizeof rows - 1), (ssize_t)(sizeof rows - 1));
        pid_t pid = cli_spawn(NULL, (const char *const[]){"run", "pipelines/cull-visible.yaml",
                                                         "--in", cli_tmp("in.fifo"), "--out",
                                                         cli_tmp("%s", cases[k].out),
                                                         "--batch-rows", "1", "--threads",
                                                         cases[k].threads, "--write-behind",
                                                         "on", NULL});
        if (!wait_for_temporaries(cli_tmp("%s", cases[k].out))) {
            kill(pid, SIGKILL);
            ck_abort_msg("the run never opened its outputs:\n%s", cli_wait(pid).err);
        }
        usleep(100000); /* let it take the rows written so far */
        tasks[k] = count_tasks(pid);
        ck_assert_int_eq(kill(pid, cases[k].sig), 0);
        r = cli_wait(pid);
        close(fd);
        ck_assert_msg(r.signal == cases[k].sig, "ended by signal %d, exit %d, expected signal %d\n%s",
                      r.signal, r.status, cases[k].sig, r.err);
        expect_contains(r.err, "interrupted");
        cli_result_free(&r);
    }
    expect_snapshot(cli_tmp("out"), before, "by an interrupted run");
    struct stat st;
    ck_assert_msg(stat(cli_tmp("fresh"), &st) != 0, "the interrupted run left its output directory");
    /* --threads N: the CPU backend's workers are N - 1 threads beside the run's own (the
     * writer thread is asked for in every case: by default it depends on the machine). */
    ck_assert_int_ge(tasks[0], 1);
    ck_assert_int_eq(tasks[1] - tasks[0], 2);
    ck_assert_int_eq(tasks[2] - tasks[0], 1);
    free(before);
    cli_tmp_remove();
}
END_TEST

/* ---- reading and writing overlapped with the pipeline ---------------------------------------- */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The file names of a directory, sorted, joined by spaces. */
static char *dir_names(const char *dir) {
    char *snap = dir_snapshot(dir);
    for (char *p = snap; *p; p++)
        if (*p == '\n') *p = ' ';
    return snap;
}

/* Every file of directory a is in directory b byte for byte, and b has no other. */
static void expect_same_dir(const char *a, const char *b) {
    char *sa = dir_snapshot(a), *sb = dir_snapshot(b);
    ck_assert_msg(strcmp(sa, sb) == 0, "%s and %s differ:\n%s\nvs\n%s", a, b, sa, sb);
    ck_assert_msg(strstr(sa, ".npy "), "%s holds no outputs:\n%s", a, sa);
    free(sa);
    free(sb);
}

/* Every shipped pipeline over its committed input (column files or CSV, offsets inputs
 * included), at several --batch-rows: reader threads ahead and the writer thread behind
 * write exactly the bytes of the run that reads, runs and writes in turn. (test_pipelines
 * holds the default against the golden outputs.) */
START_TEST(overlap_writes_the_sequential_outputs) {
    cli_tmp_make();
    static const char *const names[] = {"cull-visible", "output-offsets", "ragged-cumsum",
                                        "linrec", "sort-by-depth", "trades-vwap", "drawdown"};
    static const char *const batch_rows[] = {"1", "7", "64", "4194304"};
    int runs = 0;
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        char in[512], probe[700];
        struct stat st;
        snprintf(in, sizeof in, "pipelines/data/%s/in", names[n]);
        snprintf(probe, sizeof probe, "%s/%s", SLUICE_SOURCE_DIR, in);
        if (stat(probe, &st) != 0) snprintf(in, sizeof in, "pipelines/data/%s/in.csv", names[n]);
        for (size_t b = 0; b < 4; b++) {
            const char *seq = cli_tmp("%s-%s-seq", names[n], batch_rows[b]);
            cli_result r = cli_run("run pipelines/%s.yaml --in %s --out '%s' --backend cpu "
                                   "--batch-rows %s --io-threads 0 --write-behind off", names[n],
                                   in, seq,
                                   batch_rows[b]);
            CLI_EXPECT(r, 0);
            cli_result_free(&r);
            static const char *const io_threads[] = {"", "--io-threads 1 --write-behind on",
                                                     "--io-threads 3 --write-behind on"};
            for (size_t t = 0; t < 3; t++) {
                const char *out = cli_tmp("%s-%s-%zu", names[n], batch_rows[b], t);
                r = cli_run("run pipelines/%s.yaml --in %s --out '%s' --backend cpu "
                            "--batch-rows %s %s", names[n], in, out, batch_rows[b],
                            io_threads[t]);
                CLI_EXPECT(r, 0);
                cli_result_free(&r);
                expect_same_dir(seq, cli_tmp("%s-%s-%zu", names[n], batch_rows[b], t));
                runs++;
            }
        }
    }
    ck_assert_int_eq(runs, 7 * 4 * 3);
    /* Batches of several read chunks (4 MiB) per column, read by several threads, the last
     * batch shorter: 5M rows in batches of 2^21 are 8 MiB of x and 16 MiB of id each. */
    cli_result r = cli_run("gen pipelines/cull-visible.yaml --rows 5000000 --out '%s'",
                           cli_tmp("big"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    static const char *const big[] = {"--io-threads 0 --write-behind off",
                                      "--io-threads 1 --write-behind on",
                                      "--io-threads 3 --write-behind on",
                                      "--io-threads 0 --write-behind on"};
    for (size_t t = 0; t < 4; t++) {
        r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s' --batch-rows 2^21 %s",
                    cli_tmp("big"), cli_tmp("big-%zu", t), big[t]);
        CLI_EXPECT(r, 0);
        expect_contains(r.err, "5000000 rows in");
        cli_result_free(&r);
        if (t > 0) expect_same_dir(cli_tmp("big-0"), cli_tmp("big-%zu", t));
    }
    char *names_out = dir_names(cli_tmp("big-0"));
    expect_contains(names_out, "slot.npy");
    free(names_out);

    /* A .npy whose header leaves the data misaligned for its type (legal; odd writers): its
     * batches are read into buffers, in several chunks by several readers, not pushed from
     * the mapping. 3M f32 rows: 12 MiB a batch of 2^22, 3 chunks. */
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    int64_t n = 3000000;
    size_t hl = 67 - 10; /* data at offset 67 */
    unsigned char *img = malloc(67 + (size_t)n * 4);
    ck_assert_ptr_nonnull(img);
    char dict[96];
    int dl = snprintf(dict, sizeof dict, "{'descr':'<f4','fortran_order':False,'shape':(%lld,)}",
                      (long long)n);
    ck_assert_int_lt(dl, (int)hl);
    memcpy(img, "\x93NUMPY\x01\x00", 8);
    img[8] = (unsigned char)hl;
    img[9] = 0;
    memset(img + 10, ' ', hl);
    memcpy(img + 10, dict, (size_t)dl);
    img[10 + hl - 1] = '\n';
    int32_t *y = malloc((size_t)n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    for (int64_t i = 0; i < n; i++) {
        float x = (float)((i * 7919) % 2001 - 1000) / 100.0f;
        memcpy(img + 67 + (size_t)i * 4, &x, 4);
        y[i] = (int32_t)(i % 1000) - 500;
    }
    ck_assert_int_eq(mkdir(cli_tmp("odd"), 0777), 0);
    FILE *f = fopen(cli_tmp("odd/x.npy"), "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(img, 1, 67 + (size_t)n * 4, f), 67 + (size_t)n * 4);
    fclose(f);
    write_npy(cli_tmp("odd/y.npy"), SLUICE_I32, y, n);
    free(img);
    free(y);
    for (size_t t = 0; t < 3; t++) {
        r = cli_run("run '%s' --in '%s' --out '%s' %s", cli_tmp("t.yaml"), cli_tmp("odd"),
                    cli_tmp("odd-%zu", t), big[t]);
        CLI_EXPECT(r, 0);
        expect_contains(r.err, "3000000 rows in");
        cli_result_free(&r);
        if (t > 0) expect_same_dir(cli_tmp("odd-0"), cli_tmp("odd-%zu", t));
    }
    cli_tmp_remove();
}
END_TEST

/* The session failing mid-stream (a stream-wide sort out of memory: a push rejected, or the
 * flush) while readers are ahead and the writer behind: exit 1, the message of the
 * sequential path, OUTDIR as it was. The address-space limit that makes allocations fail
 * cannot be used under AddressSanitizer, which reserves terabytes. */
START_TEST(overlap_stops_when_the_session_fails) {
#if defined(__SANITIZE_ADDRESS__)
    return;
#else
    cli_tmp_make();
    cli_result r = cli_run("gen pipelines/sort-by-depth.yaml --rows 4000000 --out '%s'",
                           cli_tmp("in"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    ck_assert_int_eq(mkdir(cli_tmp("out"), 0777), 0);
    char *before = dir_snapshot(cli_tmp("out"));
    static const char *const io_threads[] = {"0", "1", "3"}, *const behind[] = {"off", "on", "on"};
    for (int k = 0; k < 3; k++) {
        cli_spawn_options o = {.address_space_limit = 120LL << 20};
        pid_t pid = cli_spawn(&o, (const char *const[]){"run", "pipelines/sort-by-depth.yaml",
                                                       "--in", cli_tmp("in"), "--out",
                                                       cli_tmp("out"), "--batch-rows", "100000",
                                                       "--threads", "1", "--io-threads",
                                                       io_threads[k], "--write-behind",
                                                       behind[k], "--backend", "cpu",
                                                       "--sort-memory", "0", NULL});
        r = cli_wait(pid);
        CLI_EXPECT(r, 1);
        ck_assert_msg(strstr(r.err, "was rejected: out of memory") ||
                          strstr(r.err, "finishing the stream failed: out of memory"),
                      "--io-threads %s: %s", io_threads[k], r.err);
        expect_contains(r.err, "is as it was");
        cli_result_free(&r);
        expect_snapshot(cli_tmp("out"), before, "by a run whose session failed");
    }
    free(before);
    cli_tmp_remove();
#endif
}
END_TEST

/* --sort-memory: a stream-wide sort over its budget spills sorted runs and merges them, with
 * the same outputs as holding every row; --spill-dir says where; bad sizes are usage errors. */
START_TEST(sort_memory_spills_to_disk) {
    cli_tmp_make();
    cli_result r = cli_run("gen pipelines/sort-by-depth.yaml --rows 300000 --out '%s' --seed 5",
                           cli_tmp("in"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    ck_assert_int_eq(mkdir(cli_tmp("spill"), 0777), 0);
    static const char *const budgets[] = {"0", "64K", "1M", "8g"};
    for (size_t b = 0; b < 4; b++) {
        r = cli_run("run pipelines/sort-by-depth.yaml --in '%s' --out '%s' --backend cpu "
                    "--batch-rows 20000 --sort-memory %s --spill-dir '%s'",
                    cli_tmp("in"), cli_tmp("out%zu", b), budgets[b], cli_tmp("spill"));
        CLI_EXPECT(r, 0);
        cli_result_free(&r);
        if (b == 0) continue;
        DIR *d = opendir(cli_tmp("out0"));
        ck_assert_ptr_nonnull(d);
        int files = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            expect_same_file(cli_tmp("out0/%s", e->d_name), cli_tmp("out%zu/%s", b, e->d_name));
            files++;
        }
        closedir(d);
        ck_assert_int_gt(files, 0);
    }
    DIR *d = opendir(cli_tmp("spill")); /* spilled runs are unlinked at once */
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        ck_assert_msg(e->d_name[0] == '.', "left in the spill directory: %s", e->d_name);
    closedir(d);
    static const char *const bad[] = {"-1", "12Q", "", "99999999999T"};
    for (size_t b = 0; b < 4; b++) {
        r = cli_run("run pipelines/sort-by-depth.yaml --in '%s' --out '%s' --sort-memory '%s'",
                    cli_tmp("in"), cli_tmp("bad"), bad[b]);
        CLI_EXPECT(r, 2);
        expect_contains(r.err, "--sort-memory needs a size");
        cli_result_free(&r);
    }
    cli_tmp_remove();
}
END_TEST

/* The writer failing (a full disk) while the reader waits in a read of a pipe that delivers
 * nothing more: the run still ends at once, exit 1, its temporaries removed. */
START_TEST(overlap_stops_when_the_writer_fails_and_the_input_stalls) {
    cli_tmp_make();
    static const char *const behind[] = {"on", "off"};
    for (int k = 0; k < 2; k++) {
        const char *fifo = cli_tmp("in%d.fifo", k);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        /* A child feeds the pipe 9500 visible rows, then holds it open without writing until
         * it is killed. 64 KiB hold 8176 ids: the write fails on the 9th batch of 1000, when
         * the reader has read the rows there are and waits in a read for the 10th batch's
         * rest (written behind, the writer thread fails while the run waits for that batch;
         * written in turn, the run fails and stops the reader). */
        fflush(NULL);
        pid_t feeder = fork();
        ck_assert_int_ge(feeder, 0);
        if (feeder == 0) {
            int fd = open(fifo, O_RDWR);
            if (fd < 0) _exit(1);
            FILE *f = fdopen(fd, "w");
            fputs("x,y,id\n", f);
            for (int i = 0; i < 9500; i++) fprintf(f, "0.25,0.5,%d\n", i);
            fflush(f);
            for (;;) pause();
        }
        cli_spawn_options o = {.file_size_limit = 64 * 1024};
        double t0 = now_seconds();
        pid_t pid = cli_spawn(&o, (const char *const[]){"run", "pipelines/cull-visible.yaml",
                                                       "--in", fifo, "--out", cli_tmp("out"),
                                                       "--batch-rows", "1000", "--write-behind",
                                                       behind[k], NULL});
        cli_result r = cli_wait(pid);
        double seconds = now_seconds() - t0;
        kill(feeder, SIGKILL);
        waitpid(feeder, NULL, 0);
        CLI_EXPECT(r, 1);
        expect_contains(r.err, "File too large");
        expect_contains(r.err, "is as it was");
        ck_assert_msg(seconds < 10, "--write-behind %s: the run took %.1f s to stop", behind[k],
                      seconds);
        cli_result_free(&r);
        struct stat st;
        ck_assert_msg(stat(cli_tmp("out"), &st) != 0, "the failed run left its output directory");
    }
    cli_tmp_remove();
}
END_TEST

START_TEST(io_threads_option) {
    cli_tmp_make();
    cli_result r = cli_run("run pipelines/cull-visible.yaml --in x --out y --io-threads 65");
    CLI_EXPECT(r, 2);
    expect_contains(r.err, "--io-threads needs an integer in 0..64, not '65'");
    cli_result_free(&r);
    r = cli_run("run pipelines/cull-visible.yaml --in x --out y --write-behind yes");
    CLI_EXPECT(r, 2);
    expect_contains(r.err, "--write-behind is auto, on or off, not 'yes'");
    cli_result_free(&r);
    r = cli_run("run pipelines/cull-visible.yaml --in x --out y --io-thread 2");
    CLI_EXPECT(r, 2);
    expect_contains(r.err, "did you mean '--io-threads'?");
    cli_result_free(&r);
    r = cli_run("run --help");
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "--io-threads N");
    expect_contains(r.out, "--write-behind W");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

/* ---- the command line's manners ----------------------------------------------------------- */

START_TEST(did_you_mean_for_commands_and_options) {
    cli_tmp_make();
    static const struct {
        const char *args, *hint;
    } cases[] = {
        {"rnu", "did you mean 'run'?"},
        {"chekc x.yaml", "did you mean 'check'?"},
        {"help bnech", "did you mean 'bench'?"},
        {"run x.yaml --in a --out b --bach-rows 3", "did you mean '--batch-rows'?"},
        {"run x.yaml --in a --out b --batch_rows=3", "did you mean '--batch-rows'?"},
        {"run x.yaml --input a --out b", "did you mean '--in'?"},
        {"run x.yaml --in a --out b --thread 2", "did you mean '--threads'?"},
        {"bench x.yaml --rwos 5", "did you mean '--rows'?"},
        {"gen x.yaml --seeds 5", "did you mean '--seed'?"},
        {"explain x.yaml --backed cpu", "did you mean '--backend'?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r = cli_run("%s", cases[i].args);
        ck_assert_msg(r.status == 2, "`sluice %s`: exit %d", cases[i].args, r.status);
        expect_contains(r.err, cases[i].hint);
        cli_result_free(&r);
    }
    /* Nothing close: no guess. */
    cli_result r = cli_run("frobnicate");
    CLI_EXPECT(r, 2);
    ck_assert_msg(!strstr(r.err, "did you mean"), "%s", r.err);
    cli_result_free(&r);
    r = cli_run("run x.yaml --in a --out b --zzzzzz");
    CLI_EXPECT(r, 2);
    ck_assert_msg(!strstr(r.err, "did you mean"), "%s", r.err);
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

START_TEST(help_says_what_the_command_does) {
    cli_tmp_make();
    cli_result r = cli_run("run --help");
    CLI_EXPECT(r, 0);
    /* Exit statuses, signals included, and the all-or-nothing promise. */
    expect_contains(r.out, "exit status:");
    expect_contains(r.out, "  0    success");
    expect_contains(r.out, "  1    an error in the pipeline or the data");
    expect_contains(r.out, "  2    a usage error");
    expect_contains(r.out, "128+N");
    expect_contains(r.out, "all or nothing");
    expect_contains(r.out, "--threads N");
    /* --batch-rows: the stages whose results depend on it are named. */
    expect_contains(r.out, "Outputs do not depend on\n                      it, except");
    expect_contains(r.out, "`reset: batch`");
    expect_contains(r.out, "`per: batch`");
    expect_contains(r.out, "offsets input");
    ck_assert_msg(!strstr(r.out, "outputs do not depend on it\n"), "%s", r.out);
    cli_result_free(&r);
    /* bench: --rows or --in, not --rows always. */
    r = cli_run("bench --help");
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "usage: sluice bench PIPELINE (--rows N | --in INPUT)");
    expect_contains(r.out, "exit status: 0 success");
    cli_result_free(&r);
    r = cli_run("check --help");
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "usage: sluice check PIPELINE...");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

START_TEST(check_takes_several_files) {
    cli_tmp_make();
    write_text(cli_tmp("a.yaml"), threshold_yaml);
    write_text(cli_tmp("b.yaml"), ragged_yaml);
    write_text(cli_tmp("empty-stages.yaml"), "sluice: 1\nname: e\ninput: {x: f32}\nstages: []\n");
    cli_result r = cli_run("check '%s' '%s'", cli_tmp("a.yaml"), cli_tmp("b.yaml"));
    CLI_EXPECT(r, 0);
    expect_contains(r.out, "a.yaml: ok");
    expect_contains(r.out, "b.yaml: ok");
    cli_result_free(&r);
    /* Every file is checked, whatever the others give; one bad file makes the status 1. */
    r = cli_run("check '%s' '%s' '%s' '%s'", cli_tmp("empty-stages.yaml"), cli_tmp("a.yaml"),
                cli_tmp_root, cli_tmp("b.yaml"));
    CLI_EXPECT(r, 1);
    expect_contains(r.out, "a.yaml: ok");
    expect_contains(r.out, "b.yaml: ok");
    expect_contains(r.err, "empty-stages.yaml:4:9: error: stages must be a non-empty list");
    expect_contains(r.err, "not an empty list");
    char dir_msg[600];
    snprintf(dir_msg, sizeof dir_msg, "%s is a directory, not a pipeline file", cli_tmp_root);
    expect_contains(r.err, dir_msg);
    ck_assert_msg(!strstr(r.err, "read error"), "%s", r.err);
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

START_TEST(messages_name_what_is_wrong) {
    cli_tmp_make();
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    cli_result r = cli_run("gen '%s' --rows 100 --out '%s'", cli_tmp("t.yaml"), cli_tmp("in"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    static const struct {
        const char *param, *needles[2];
    } params[] = {
        {"t=1e400", {"bad --param t=1e400: 't' is an f32 param", "'1e400' is out of range for f32"}},
        {"t=abc", {"bad --param t=abc: 't' is an f32 param", "cannot parse 'abc' as f32"}},
        {"tt=1", {"bad --param tt=1", "did you mean 't'?"}},
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        r = cli_run("run '%s' --in '%s' --out '%s' --param %s", cli_tmp("t.yaml"), cli_tmp("in"),
                    cli_tmp("out"), params[i].param);
        CLI_EXPECT(r, 2);
        for (int k = 0; k < 2; k++) expect_contains(r.err, params[i].needles[k]);
        ck_assert_msg(!strstr(r.err, "wrong shape"), "%s", r.err);
        cli_result_free(&r);
    }
    /* A param's default beyond its float type is out of range, not "not valid". */
    write_text(cli_tmp("big.yaml"), "sluice: 1\nname: big\nparams:\n  r: {type: f32, default: 1e400}\n"
                                    "input: {x: f32}\nstages:\n  - map: {y: x * r}\n");
    r = cli_run("check '%s'", cli_tmp("big.yaml"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "default '1e400' of param 'r' is out of range for f32");
    cli_result_free(&r);
    /* An f32 input of 1e400 in a CSV. */
    write_text(cli_tmp("in.csv"), "x,y\n1,2\n1e400,3\n");
    r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("t.yaml"), cli_tmp("in.csv"), cli_tmp("o"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "in.csv:3:1: data row 2, column 'x': '1e400' is out of range for f32");
    cli_result_free(&r);
    /* bench over no rows measures nothing: said so, not a ratio of two noises. */
    r = cli_run("bench '%s' --rows 0", cli_tmp("t.yaml"));
    CLI_EXPECT(r, 2);
    expect_contains(r.err, "nothing to measure");
    cli_result_free(&r);
    r = cli_run("gen '%s' --rows 0 --out '%s'", cli_tmp("t.yaml"), cli_tmp("none"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    r = cli_run("bench '%s' --in '%s'", cli_tmp("t.yaml"), cli_tmp("none"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "no rows: there is nothing to measure");
    ck_assert_msg(!strstr(r.out, "time ="), "%s", r.out);
    cli_result_free(&r);
    r = cli_run("bench '%s' --in '%s' --rows 5", cli_tmp("t.yaml"), cli_tmp("in"));
    CLI_EXPECT(r, 2);
    expect_contains(r.err, "not both");
    cli_result_free(&r);
    r = cli_run("run '%s' --in '%s' --out '%s' --threads 1000", cli_tmp("t.yaml"), cli_tmp("in"),
                cli_tmp("o"));
    CLI_EXPECT(r, 2);
    expect_contains(r.err, "--threads needs an integer in 0..256");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

/* Empty CSV fields: NaN in a float column, an error naming the row and column elsewhere. */
START_TEST(csv_empty_fields) {
    cli_tmp_make();
    write_text(cli_tmp("t.yaml"), threshold_yaml);
    write_text(cli_tmp("keep.yaml"), "sluice: 1\nname: keep\ninput:\n  x: f32\n  y: i32\n"
                                     "stages:\n  - map: {nan: isnan(x)}\n");
    write_text(cli_tmp("gaps.csv"), "x,y\n1.5,1\n,2\n 2.5 ,3\n");
    cli_result r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("keep.yaml"),
                           cli_tmp("gaps.csv"), cli_tmp("o"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    cli_column x, isnan_col;
    char err[256];
    ck_assert(cli_read_npy(cli_tmp("o/x.npy"), &x, err, sizeof err) == 0);
    ck_assert(cli_read_npy(cli_tmp("o/nan.npy"), &isnan_col, err, sizeof err) == 0);
    ck_assert_int_eq(x.length, 3);
    ck_assert_float_eq(((float *)x.data)[0], 1.5f);
    ck_assert(isnan(((float *)x.data)[1]));
    ck_assert_float_eq(((float *)x.data)[2], 2.5f);
    ck_assert_int_eq(((uint8_t *)isnan_col.data)[1], 1);
    ck_assert_int_eq(((uint8_t *)isnan_col.data)[0], 0);
    free(x.data);
    free(isnan_col.data);
    write_text(cli_tmp("gap-int.csv"), "x,y\n1.5,1\n2.5,\n");
    r = cli_run("run '%s' --in '%s' --out '%s'", cli_tmp("keep.yaml"), cli_tmp("gap-int.csv"),
                cli_tmp("o2"));
    CLI_EXPECT(r, 1);
    expect_contains(r.err, "gap-int.csv:3:2: data row 2, column 'y': empty field in an i32 column");
    cli_result_free(&r);
    cli_tmp_remove();
}
END_TEST

/* The summary line on stderr, the progress line when asked for, the memory warning, and a CSV
 * read from a pipe. */
START_TEST(summary_progress_and_memory) {
    cli_tmp_make();
    cli_result r = cli_run("gen pipelines/sort-by-depth.yaml --rows 5000 --out '%s'", cli_tmp("in"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    r = cli_run("run pipelines/sort-by-depth.yaml --in '%s' --out '%s' --batch-rows 1000",
                cli_tmp("in"), cli_tmp("o1"));
    CLI_EXPECT(r, 0);
    ck_assert_str_eq(r.out, "");
    char want[600];
    snprintf(want, sizeof want, "sluice run: pipelines/sort-by-depth.yaml: 5000 rows in, 5000 rows "
             "out to %s in ", cli_tmp("o1"));
    expect_contains(r.err, want);
    expect_contains(r.err, " rows/s)\n");
    /* Not a terminal and not asked for: no progress line. */
    ck_assert_msg(!strstr(r.err, "sorting"), "%s", r.err);
    cli_result_free(&r);
    r = cli_run("run pipelines/sort-by-depth.yaml --in '%s' --out '%s' --batch-rows 1000 --progress",
                cli_tmp("in"), cli_tmp("o2"));
    CLI_EXPECT(r, 0);
    expect_contains(r.err, "sluice run: 1 k rows in (");
    expect_contains(r.err, "rows/s, 0 rows out, 20%, ETA");
    expect_contains(r.err, "sluice run: 5 k rows in (80.5 kB), 0 rows out; sorting the whole stream... ");
    /* The final write knows its rows once the flush is done. */
    expect_contains(r.err, "0 of 5 k rows out; writing the outputs... ");
    expect_contains(r.err, "5 k rows out; syncing the outputs to disk... ");
    cli_result_free(&r);
    expect_same_file(cli_tmp("o1/depth.npy"), cli_tmp("o2/depth.npy"));
    /* --timings: where the time went, after the summary line. */
    r = cli_run("run pipelines/sort-by-depth.yaml --in '%s' --out '%s' --batch-rows 1000 --timings",
                cli_tmp("in"), cli_tmp("o4"));
    CLI_EXPECT(r, 0);
    const char *summary = strstr(r.err, "5000 rows out to ");
    ck_assert_ptr_nonnull(summary);
    ck_assert_msg(strstr(summary, "\nsluice run: timings: session open ") &&
                      strstr(summary, ", flush ") && strstr(summary, ", final write "),
                  "%s", r.err);
    cli_result_free(&r);
    r = cli_run("run pipelines/sort-by-depth.yaml --in '%s' --out '%s' --progress --no-progress",
                cli_tmp("in"), cli_tmp("o3"));
    CLI_EXPECT(r, 0);
    ck_assert_msg(!strstr(r.err, "sorting"), "%s", r.err);
    cli_result_free(&r);

    /* A pipe has no size, so --batch-rows 2^50 may really take 2^50 rows at once: warned
     * about. The run itself goes on, and reads the CSV from the pipe as from a file. */
    write_cull_csv(cli_tmp("c.csv"), 300, -1);
    r = cli_run("run pipelines/cull-visible.yaml --in '%s' --out '%s' --batch-rows 2^50",
                cli_tmp("c.csv"), cli_tmp("file"));
    CLI_EXPECT(r, 0);
    ck_assert_msg(!strstr(r.err, "warning"), "a 300-row file cannot fill a batch:\n%s", r.err);
    cli_result_free(&r);
    ck_assert_int_eq(mkfifo(cli_tmp("c.fifo"), 0600), 0);
    int fd = open(cli_tmp("c.fifo"), O_RDWR | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    size_t len;
    char *text = cli_slurp(cli_tmp("c.csv"), &len);
    ck_assert_uint_lt(len, 60000); /* fits in the pipe's buffer */
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    free(text);
    pid_t pid = cli_spawn(NULL, (const char *const[]){"run", "pipelines/cull-visible.yaml", "--in",
                                                     cli_tmp("c.fifo"), "--out", cli_tmp("pipe"),
                                                     "--batch-rows", "2^50", NULL});
    if (!wait_for_temporaries(cli_tmp("pipe"))) {
        kill(pid, SIGKILL);
        ck_abort_msg("the run never opened its outputs:\n%s", cli_wait(pid).err);
    }
    close(fd); /* the run has the pipe open: this is its end of file */
    r = cli_wait(pid);
    CLI_EXPECT(r, 0);
    expect_contains(r.err, "warning: --batch-rows 1125899906842624 holds up to");
    expect_contains(r.err, "the run may fail for lack of memory");
    cli_result_free(&r);
    const char *cols[] = {"id", "x", "y", "r2", "slot"};
    for (int i = 0; i < 5; i++)
        expect_same_file(cli_tmp("file/%s.npy", cols[i]), cli_tmp("pipe/%s.npy", cols[i]));
    cli_tmp_remove();
}
END_TEST

/* On a terminal the progress line is rewritten in place (\r), and ends with a newline before
 * the summary. The run is made with stderr on a pseudo-terminal; --progress shows the line
 * from the start (unasked, it waits for a run to take a second). */
START_TEST(progress_on_a_terminal) {
    cli_tmp_make();
    cli_result r = cli_run("gen pipelines/sort-by-depth.yaml --rows 3000 --out '%s'", cli_tmp("in"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    ck_assert_int_ge(master, 0);
    ck_assert_int_eq(grantpt(master), 0);
    ck_assert_int_eq(unlockpt(master), 0);
    char slave_name[128];
    ck_assert_int_eq(ptsname_r(master, slave_name, sizeof slave_name), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setsid();
        int slave = open(slave_name, O_RDWR);
        int null = open("/dev/null", O_RDWR);
        if (slave < 0 || null < 0 || chdir(SLUICE_SOURCE_DIR) != 0) _exit(126);
        dup2(null, 0);
        dup2(null, 1);
        dup2(slave, 2);
        close(master);
        execl(SLUICE_CLI, SLUICE_CLI, "run", "pipelines/sort-by-depth.yaml", "--in", cli_tmp("in"),
              "--out", cli_tmp("out"), "--batch-rows", "1000", "--progress", (char *)NULL);
        _exit(127);
    }
    /* Reads until the terminal's last writer is gone (EIO). */
    char text[16384];
    size_t used = 0;
    for (;;) {
        ssize_t n = read(master, text + used, sizeof text - 1 - used);
        if (n > 0) {
            used += (size_t)n;
            if (used < sizeof text - 1) continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;
    }
    text[used] = '\0';
    close(master);
    int raw = 0;
    ck_assert_int_eq(waitpid(pid, &raw, 0), pid);
    ck_assert_msg(WIFEXITED(raw) && WEXITSTATUS(raw) == 0, "status %d:\n%s", raw, text);
    /* The terminal turns \n into \r\n: a bare \r is the line rewritten in place. */
    expect_contains(text, "\rsluice run: 3 k rows in (");
    expect_contains(text, "sorting the whole stream...");
    /* A line replaced in place: "\rsluice run: 3 k rows in" right after the previous line's
     * text, with no newline between them. */
    bool in_place = false;
    for (const char *at = text; (at = strstr(at, "\rsluice run: 3 k rows in")) != NULL; at++)
        in_place |= at > text && at[-1] != '\n';
    ck_assert_msg(in_place, "the progress line was not rewritten in place:\n%s", text);
    /* The summary starts on a line of its own. */
    expect_contains(text, "\r\nsluice run: pipelines/sort-by-depth.yaml: 3000 rows in, 3000 rows out");
    cli_tmp_remove();
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, version_and_help);
    tcase_add_test(tc, usage_errors_exit_2);
    tcase_add_test(tc, check_reports_every_error_with_location);
    tcase_add_test(tc, explain_prints_the_plan);
    tcase_add_test(tc, run_npy_raw_and_csv_agree_with_an_oracle);
    tcase_add_test(tc, run_round_trips_every_type);
    tcase_add_test(tc, run_rejects_bad_files_with_exit_1);
    tcase_add_test(tc, primer_examples_through_the_command_line);
    tcase_add_test(tc, batch_rows_do_not_change_outputs);
    tcase_add_test(tc, gen_is_deterministic);
    tcase_add_test(tc, bench_reports_throughput_beside_memcpy);
    tcase_add_test(tc, outputs_all_or_nothing_on_bad_data);
    tcase_add_test(tc, outputs_all_or_nothing_in_an_unwritable_directory);
    tcase_add_test(tc, outputs_all_or_nothing_on_a_full_disk);
    tcase_add_test(tc, outputs_all_or_nothing_when_interrupted);
    tcase_add_test(tc, overlap_writes_the_sequential_outputs);
    tcase_add_test(tc, overlap_stops_when_the_session_fails);
    tcase_add_test(tc, sort_memory_spills_to_disk);
    tcase_add_test(tc, overlap_stops_when_the_writer_fails_and_the_input_stalls);
    tcase_add_test(tc, io_threads_option);
    tcase_add_test(tc, did_you_mean_for_commands_and_options);
    tcase_add_test(tc, help_says_what_the_command_does);
    tcase_add_test(tc, check_takes_several_files);
    tcase_add_test(tc, messages_name_what_is_wrong);
    tcase_add_test(tc, csv_empty_fields);
    tcase_add_test(tc, summary_progress_and_memory);
    tcase_add_test(tc, progress_on_a_terminal);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
