/* test_pipelines.c — every shipped pipeline (each .yaml file in pipelines/) passes `sluice check` and,
 * run by `sluice run` over its committed input (pipelines/data/NAME/in or in.csv), writes
 * exactly the golden outputs (pipelines/data/NAME/golden, made by make_golden.py from NumPy,
 * not by sluice): integers exactly, floats within a relative tolerance. Each run is repeated
 * with small --batch-rows, whose outputs must not differ (batch-cutting invariance end to
 * end, through the command line's segment-aware cutting). */
#include <dirent.h>

#include "cli_testutil.h"

#define MAX_PIPELINES 64
static char pipeline_names[MAX_PIPELINES][128];
static int pipeline_count;

static void find_pipelines(void) {
    DIR *d = opendir(SLUICE_SOURCE_DIR "/pipelines");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && pipeline_count < MAX_PIPELINES) {
        size_t n = strlen(e->d_name);
        if (n > 5 && n - 5 < sizeof pipeline_names[0] && strcmp(e->d_name + n - 5, ".yaml") == 0) {
            memcpy(pipeline_names[pipeline_count], e->d_name, n - 5);
            pipeline_names[pipeline_count][n - 5] = '\0';
            pipeline_count++;
        }
    }
    closedir(d);
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The input a pipeline's data directory provides: in/ or in.csv (relative to the source). */
static const char *input_of(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "pipelines/data/%s/in", name);
    char abs_path[700];
    snprintf(abs_path, sizeof abs_path, "%s/%s", SLUICE_SOURCE_DIR, path);
    if (is_dir(abs_path)) return path;
    snprintf(path, sizeof path, "pipelines/data/%s/in.csv", name);
    snprintf(abs_path, sizeof abs_path, "%s/%s", SLUICE_SOURCE_DIR, path);
    ck_assert_msg(access(abs_path, R_OK) == 0,
                  "pipeline %s has no input: add pipelines/data/%s/in/ or in.csv (see "
                  "make_golden.py)", name, name);
    return path;
}

/* Compares every golden column with the run's output; returns how many were compared. */
static int compare_with_golden(const char *name, const char *outdir) {
    char golden[700];
    snprintf(golden, sizeof golden, "%s/pipelines/data/%s/golden", SLUICE_SOURCE_DIR, name);
    DIR *d = opendir(golden);
    ck_assert_msg(d != NULL, "pipeline %s has no golden outputs in %s", name, golden);
    int compared = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".npy") != 0) continue;
        char want[1024], got[1024];
        snprintf(want, sizeof want, "%s/%s", golden, e->d_name);
        snprintf(got, sizeof got, "%s/%s", outdir, e->d_name);
        cli_column probe;
        char err[256];
        ck_assert_msg(cli_read_npy(want, &probe, err, sizeof err) == 0, "%s", err);
        double rtol = probe.type == SLUICE_F64 ? 1e-9 : 1e-4;
        free(probe.data);
        cli_expect_same_npy(got, want, rtol);
        compared++;
    }
    closedir(d);
    return compared;
}

START_TEST(shipped_pipeline_matches_golden) {
    ck_assert_int_gt(pipeline_count, 0);
    const char *name = pipeline_names[_i];
    cli_tmp_make();
    cli_result r = cli_run("check pipelines/%s.yaml", name);
    CLI_EXPECT(r, 0);
    cli_result_free(&r);

    const char *in = input_of(name);
    r = cli_run("run pipelines/%s.yaml --in %s --out '%s' --backend cpu", name, in,
                cli_tmp("whole"));
    CLI_EXPECT(r, 0);
    cli_result_free(&r);
    int outputs = compare_with_golden(name, cli_tmp("whole"));
    ck_assert_msg(outputs > 0, "pipeline %s: no golden columns", name);
    size_t files = 0;
    DIR *d = opendir(cli_tmp("whole"));
    for (struct dirent *e; d && (e = readdir(d));) files += e->d_name[0] != '.';
    if (d) closedir(d);
    ck_assert_msg(files == (size_t)outputs, "pipeline %s wrote %zu columns, golden has %d", name,
                  files, outputs);

    /* Small batches (cut at segment boundaries for offsets inputs) give the same outputs. */
    static const int batch_rows[] = {1, 7, 64};
    for (size_t b = 0; b < sizeof batch_rows / sizeof batch_rows[0]; b++) {
        r = cli_run("run pipelines/%s.yaml --in %s --out '%s' --backend cpu --batch-rows %d",
                    name, in, cli_tmp("b%d", batch_rows[b]), batch_rows[b]);
        CLI_EXPECT(r, 0);
        cli_result_free(&r);
        ck_assert_int_eq(compare_with_golden(name, cli_tmp("b%d", batch_rows[b])), outputs);
    }
    cli_tmp_remove();
}
END_TEST

START_TEST(every_pipeline_has_a_header_comment) {
    for (int i = 0; i < pipeline_count; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/pipelines/%s.yaml", SLUICE_SOURCE_DIR, pipeline_names[i]);
        char *text = cli_slurp(path, NULL);
        ck_assert_ptr_nonnull(text);
        ck_assert_msg(strncmp(text, "# ", 2) == 0, "%s does not open with a comment header", path);
        free(text);
    }
    /* The minimum cookbook. */
    static const char *const required[] = {"cull-visible", "output-offsets", "ragged-cumsum",
                                           "linrec", "sort-by-depth", "trades-vwap",
                                           "drawdown"};
    for (size_t r = 0; r < sizeof required / sizeof required[0]; r++) {
        bool found = false;
        for (int i = 0; i < pipeline_count; i++) found |= !strcmp(pipeline_names[i], required[r]);
        ck_assert_msg(found, "pipelines/%s.yaml is missing", required[r]);
    }
}
END_TEST

int main(void) {
    find_pipelines();
    Suite *s = suite_create("pipelines");
    TCase *tc = tcase_create("cookbook");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, every_pipeline_has_a_header_comment);
    tcase_add_loop_test(tc, shipped_pipeline_matches_golden, 0,
                        pipeline_count > 0 ? pipeline_count : 1);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
