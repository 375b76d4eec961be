/* inspect.c — `sluice check` (every diagnostic of a pipeline file) and `sluice explain` (the
 * plan: stages, fusion groups, predicted passes over memory). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mpi_run.h"

/* Checks one file; prints "PATH: ok (…)" or its diagnostics. */
static int check_one(const char *path) {
    sluice_context *ctx = sl_context_new(0);
    if (!ctx) return SL_EXIT_ERROR;
    sluice_pipeline *p = sl_load_pipeline(ctx, path);
    int rc = SL_EXIT_ERROR;
    if (p) {
        printf("%s: ok (pipeline '%s': %zu inputs, %zu outputs, %zu params)\n", path,
               sluice_pipeline_name(p), sluice_pipeline_input_count(p),
               sluice_pipeline_output_count(p), sluice_pipeline_param_count(p));
        rc = SL_EXIT_OK;
    }
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return rc;
}

static int check_main(const sl_command *self, int argc, char **argv) {
    int files = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] == '-' && arg[1] != '\0') {
            int at = i;
            const char *unused = NULL;
            return sl_take_pipeline_arg(self, argv, &at, &unused); /* the unknown-option message */
        }
        files++;
    }
    if (files == 0) return sl_usage_error(self, "which pipeline file?");
    /* Every file is checked, whatever the earlier ones gave. */
    int rc = SL_EXIT_OK;
    for (int i = 1; i < argc; i++)
        if (check_one(argv[i]) != SL_EXIT_OK) rc = SL_EXIT_ERROR;
    if (files > 1 && rc != SL_EXIT_OK) fprintf(stderr, "sluice check: not every file is valid\n");
    return rc;
}

static int explain_main(const sl_command *self, int argc, char **argv) {
    const char *path = NULL, *value;
    sluice_backend backend = SLUICE_BACKEND_AUTO;
    bool ranks = false;
    for (int i = 1; i < argc;) {
        if (sl_flag(argv, &i, "ranks")) {
            ranks = true;
            continue;
        }
        int got = sl_option(self, argc, argv, &i, "backend", &value);
        if (got < 0) return SL_EXIT_USAGE;
        if (got) {
            if (!sl_parse_backend(value, &backend))
                return sl_usage_error(self, "--backend is auto, cpu or cuda, not '%s'", value);
            continue;
        }
        if (sl_take_pipeline_arg(self, argv, &i, &path) != SL_EXIT_OK) return SL_EXIT_USAGE;
    }
    if (!path) return sl_usage_error(self, "which pipeline file?");
    sluice_context *ctx = sl_context_new(0);
    if (!ctx) return SL_EXIT_ERROR;
    sluice_pipeline *p = sl_load_pipeline(ctx, path);
    int rc = SL_EXIT_ERROR;
    if (p) {
        char *text = NULL;
        int passes = 0;
        sluice_status st = sluice_pipeline_explain(p, backend, &text, &passes);
        if (st == SLUICE_OK) {
            fputs(text, stdout);
            size_t n = strlen(text);
            if (n == 0 || text[n - 1] != '\n') fputc('\n', stdout);
            rc = ranks ? sl_mpi_explain(ctx, p) : SL_EXIT_OK;
        } else if (sluice_context_diagnostic_count(ctx) > 0) {
            sl_print_diagnostics(ctx);
        } else {
            sl_fail("%s: cannot explain: %s", path, sluice_strerror(st));
        }
        sluice_free_text(ctx, text);
    }
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return rc;
}

const sl_command sl_command_check = {
    "check", "PIPELINE...",
    "Load and check pipeline files; print every problem found, not only the first.",
    "Each file is checked on its own: a valid one prints PATH: ok, and each problem is printed\n"
    "as PATH:LINE:COL: error: MESSAGE with the source line and a caret.\n\n"
    "exit status: 0 every file is valid, 1 any file has errors, 2 a usage error\n",
    check_main, NULL};

const sl_command sl_command_explain = {
    "explain", "PIPELINE [--backend auto|cpu|cuda] [--ranks]",
    "Print the plan of a pipeline: its stages, fusion groups and predicted passes over memory.",
    "options:\n"
    "  --backend B   plan for this backend (auto: CUDA when available, else the CPU)\n"
    "  --ranks       also what a run over MPI ranks (mpirun -np N sluice run) sends between\n"
    "                ranks, stage by stage, and its passes over each rank's rows\n",
    explain_main, (const char *const[]){"backend", "ranks", NULL}};
