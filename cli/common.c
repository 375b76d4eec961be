/* common.c — helpers every subcommand uses (see cli.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int sl_usage_error(const sl_command *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sluice %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: sluice %s %s\n(see `sluice %s --help`)\n", cmd->name, cmd->usage,
            cmd->name);
    return SL_EXIT_USAGE;
}

int sl_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("sluice: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return SL_EXIT_ERROR;
}

int sl_option(const sl_command *cmd, int argc, char **argv, int *i, const char *name,
              const char **value) {
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, "--", 2) != 0 || strncmp(arg + 2, name, n) != 0) return 0;
    if (arg[2 + n] == '=') {
        *value = arg + 3 + n;
        *i += 1;
        return 1;
    }
    if (arg[2 + n] != '\0') return 0;
    if (*i + 1 >= argc) {
        sl_usage_error(cmd, "option --%s needs a value", name);
        return -1;
    }
    *value = argv[*i + 1];
    *i += 2;
    return 1;
}

int sl_take_pipeline_arg(const sl_command *cmd, char **argv, int *i, const char **path) {
    const char *arg = argv[*i];
    if (arg[0] == '-' && arg[1] != '\0') return sl_usage_error(cmd, "unknown option '%s'", arg);
    if (*path) return sl_usage_error(cmd, "one pipeline file at a time ('%s' is extra)", arg);
    *path = arg;
    *i += 1;
    return SL_EXIT_OK;
}

bool sl_parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    if (!text || !*text) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text) return false;
    if (*end == '^' && v == 2) { /* 2^K */
        const char *exp_text = end + 1;
        long long k = strtoll(exp_text, &end, 10);
        if (end == exp_text || k < 0 || k > 62) return false;
        v = 1LL << k;
    }
    if (*end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool sl_parse_backend(const char *text, sluice_backend *out) {
    static const sluice_backend all[] = {SLUICE_BACKEND_AUTO, SLUICE_BACKEND_CPU,
                                         SLUICE_BACKEND_CUDA};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(text, sluice_backend_name(all[i])) == 0) {
            *out = all[i];
            return true;
        }
    }
    return false;
}

sluice_context *sl_context_new(void) {
    sluice_context *ctx = NULL;
    sluice_status st = sluice_context_create(&ctx, NULL);
    if (st != SLUICE_OK) {
        sl_fail("cannot create a context: %s", sluice_strerror(st));
        return NULL;
    }
    return ctx;
}

void sl_print_diagnostics(const sluice_context *ctx) {
    size_t n = sluice_context_diagnostic_count(ctx);
    for (size_t i = 0; i < n; i++) {
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, i);
        if (!d) continue;
        char small[1024];
        size_t need = sluice_diagnostic_format(d, small, sizeof small);
        if (need < sizeof small) {
            fputs(small, stderr);
            continue;
        }
        char *big = malloc(need + 1);
        if (big) {
            sluice_diagnostic_format(d, big, need + 1);
            fputs(big, stderr);
            free(big);
        } else {
            fputs(small, stderr);
        }
    }
}

sluice_pipeline *sl_load_pipeline(sluice_context *ctx, const char *path) {
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_file(ctx, path, &p);
    if (st != SLUICE_OK) {
        if (sluice_context_diagnostic_count(ctx) > 0)
            sl_print_diagnostics(ctx);
        else
            sl_fail("%s: %s", path, sluice_strerror(st));
        return NULL;
    }
    return p;
}

int sl_pull_ready(sluice_session *session, sluice_context *ctx,
                  int (*sink)(const sluice_batch *batch, void *payload), void *payload) {
    for (;;) {
        sluice_batch *b = NULL;
        sluice_status st = sluice_session_pull(session, &b);
        if (st != SLUICE_OK) {
            sl_print_diagnostics(ctx);
            return sl_fail("pulling results failed: %s", sluice_strerror(st));
        }
        if (!b) return SL_EXIT_OK;
        int rc = sink(b, payload);
        sluice_batch_free(b);
        if (rc != SL_EXIT_OK) return rc;
    }
}

double sl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
