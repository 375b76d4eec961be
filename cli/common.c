/* common.c — helpers every subcommand uses (see cli.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

bool sl_flag(char **argv, int *i, const char *name) {
    const char *arg = argv[*i];
    if (strncmp(arg, "--", 2) != 0 || strcmp(arg + 2, name) != 0) return false;
    *i += 1;
    return true;
}

/* Optimal string alignment distance (Levenshtein plus swaps of neighbours), for short words. */
static size_t edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return SIZE_MAX;
    size_t d[64][64];
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

const char *sl_closest(const char *word, const char *const *candidates, size_t count) {
    /* Close enough: about one edit in three characters, at least one, at most three. */
    size_t len = strlen(word), limit = len / 3;
    if (limit < 1) limit = 1;
    if (limit > 3) limit = 3;
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < count; i++) {
        size_t d = edit_distance(word, candidates[i]);
        /* A prefix ("--batch" for "--batch-rows") or an extension ("--input" for "--in") is
         * a likely meaning too. */
        size_t clen = strlen(candidates[i]);
        bool prefix = (len >= 3 && strncmp(candidates[i], word, len) == 0) ||
                      (clen >= 2 && strncmp(word, candidates[i], clen) == 0);
        if (prefix && d > limit) d = limit;
        if (d <= limit && d < best_d && d < clen) {
            best = candidates[i];
            best_d = d;
        }
    }
    return best;
}

int sl_take_pipeline_arg(const sl_command *cmd, char **argv, int *i, const char **path) {
    const char *arg = argv[*i];
    if (arg[0] == '-' && arg[1] != '\0') {
        /* The closest option of the command to what was typed (without "--" and "=VALUE"). */
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        char typed[64];
        snprintf(typed, sizeof typed, "%.*s", (int)strcspn(name, "="), name);
        size_t n = 0;
        while (cmd->options && cmd->options[n]) n++;
        const char *hint = n ? sl_closest(typed, cmd->options, n) : NULL;
        if (hint) return sl_usage_error(cmd, "unknown option '%s' (did you mean '--%s'?)", arg, hint);
        return sl_usage_error(cmd, "unknown option '%s'", arg);
    }
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

sluice_context *sl_context_new(int cpu_threads) {
    sluice_context *ctx = NULL;
    sluice_context_options opts = SLUICE_CONTEXT_OPTIONS_INIT;
    opts.cpu_threads = cpu_threads;
    sluice_status st = sluice_context_create(&ctx, &opts);
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
    /* The library reads a directory as a file that fails to read ("read error"). */
    struct stat info;
    if (stat(path, &info) == 0 && S_ISDIR(info.st_mode)) {
        sl_fail("%s is a directory, not a pipeline file", path);
        return NULL;
    }
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

struct timespec sl_deadline_in(long ms) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}
