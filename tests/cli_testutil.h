/* cli_testutil.h — helpers of the suites that drive the `sluice` program (test_cli.c,
 * test_pipelines.c): running it with captured stdout/stderr and exit status (or in the
 * background, under a file size limit or unprivileged, to be signalled), scratch
 * directories, and reading/comparing .npy columns (with cli/npy.c, linked into those suites).
 * Header-only: each suite includes it once. */
#ifndef SL_CLI_TESTUTIL_H
#define SL_CLI_TESTUTIL_H

#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/npy.h"
#include "testutil.h"

/* What a run of the program gave back. */
typedef struct cli_result {
    int status;     /* exit status; -1 when it did not exit normally (a crash) */
    int signal;     /* the signal that ended it (cli_wait only; 0 when it exited) */
    char *out, *err;
} cli_result;

static char cli_tmp_root[256];

static inline void cli_tmp_make(void) {
    snprintf(cli_tmp_root, sizeof cli_tmp_root, "/tmp/sluice_cli_test_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(cli_tmp_root));
}

static inline void cli_tmp_remove(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cli_tmp_root);
    ck_assert_int_eq(system(cmd), 0);
}

/* A path under the scratch directory (formatted); valid until the 8th call after. */
static inline const char *cli_tmp(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline const char *cli_tmp(const char *fmt, ...) {
    static char ring[8][512];
    static int next;
    char *p = ring[next++ % 8];
    int n = snprintf(p, 512, "%s/", cli_tmp_root);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p + n, 512 - (size_t)n, fmt, ap);
    va_end(ap);
    return p;
}

static inline char *cli_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

/* Runs `sluice ARGS` (ARGS formatted, passed through the shell) in the source directory. */
static inline cli_result cli_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline cli_result cli_run(const char *fmt, ...) {
    char args[4096], cmd[8192], out_path[300], err_path[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(out_path, sizeof out_path, "%s/.stdout", cli_tmp_root);
    snprintf(err_path, sizeof err_path, "%s/.stderr", cli_tmp_root);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >'%s' 2>'%s' </dev/null", SLUICE_SOURCE_DIR,
             SLUICE_CLI, args, out_path, err_path);
    int raw = system(cmd);
    cli_result r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.signal = 0;
    r.out = cli_slurp(out_path, NULL);
    r.err = cli_slurp(err_path, NULL);
    if (!r.out) r.out = strdup("");
    if (!r.err) r.err = strdup("");
    /* Under a sanitizer build a report may come with the exit status a test expects (ASan
     * exits 1, like a data error): the report itself fails the test. */
    ck_assert_msg(!strstr(r.err, "Sanitizer") && !strstr(r.err, "runtime error:"),
                  "`sluice %s` hit a sanitizer:\n%s", args, r.err);
    return r;
}

/* How cli_spawn starts the program beyond its arguments. */
typedef struct cli_spawn_options {
    long long file_size_limit; /* > 0: RLIMIT_FSIZE in bytes, with SIGXFSZ ignored, so a write
                                  past it fails with EFBIG as on a full disk */
    bool unprivileged;         /* run as nobody when the tests run as root, for whom file
                                  permissions would not apply */
    long long address_space_limit; /* > 0: RLIMIT_AS in bytes, so that allocations fail */
} cli_spawn_options;

/* Starts `sluice ARGV…` (argv[0] is the first argument after the program, the list ends with
 * NULL) in the source directory, in the background, stdout and stderr going to files of the
 * scratch directory that cli_wait reads. Returns its pid. */
static inline pid_t cli_spawn(const cli_spawn_options *o, const char *const *argv) {
    char out_path[300], err_path[300];
    snprintf(out_path, sizeof out_path, "%s/.stdout", cli_tmp_root);
    snprintf(err_path, sizeof err_path, "%s/.stderr", cli_tmp_root);
    const char *args[64];
    size_t n = 0;
    args[n++] = SLUICE_CLI;
    while (argv[n - 1] && n < 63) {
        args[n] = argv[n - 1];
        n++;
    }
    args[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        int in = open("/dev/null", O_RDONLY);
        if (out < 0 || err < 0 || in < 0 || chdir(SLUICE_SOURCE_DIR) != 0) _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        if (o && o->file_size_limit > 0) {
            struct rlimit lim = {(rlim_t)o->file_size_limit, (rlim_t)o->file_size_limit};
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(126);
        }
        if (o && o->address_space_limit > 0) {
            struct rlimit lim = {(rlim_t)o->address_space_limit, (rlim_t)o->address_space_limit};
            if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(126);
        }
        if (o && o->unprivileged && geteuid() == 0) {
            if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(126);
        }
        execv(SLUICE_CLI, (char *const *)args);
        _exit(127);
    }
    return pid;
}

/* Waits for a program cli_spawn started and reads what it printed. One still running after
 * two minutes is hung: it is killed and the test fails. */
static inline cli_result cli_wait(pid_t pid) {
    int raw = 0;
    pid_t got = 0;
    for (int tries = 0; tries < 12000 && (got = waitpid(pid, &raw, WNOHANG)) == 0; tries++)
        usleep(10000);
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &raw, 0);
        ck_abort_msg("sluice (pid %d) still ran after two minutes", (int)pid);
    }
    ck_assert_int_eq(got, pid);
    char out_path[300], err_path[300];
    snprintf(out_path, sizeof out_path, "%s/.stdout", cli_tmp_root);
    snprintf(err_path, sizeof err_path, "%s/.stderr", cli_tmp_root);
    cli_result r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.signal = WIFSIGNALED(raw) ? WTERMSIG(raw) : 0;
    r.out = cli_slurp(out_path, NULL);
    r.err = cli_slurp(err_path, NULL);
    if (!r.out) r.out = strdup("");
    if (!r.err) r.err = strdup("");
    ck_assert_msg(r.status != 126 && r.status != 127, "the program could not be started");
    ck_assert_msg(!strstr(r.err, "Sanitizer") && !strstr(r.err, "runtime error:"),
                  "sluice hit a sanitizer:\n%s", r.err);
    return r;
}

static inline void cli_result_free(cli_result *r) {
    free(r->out);
    free(r->err);
}

/* Runs and checks the exit status; prints the program's output when it differs. */
#define CLI_EXPECT(result, want)                                                            \
    ck_assert_msg((result).status == (want), "exit %d, expected %d\nstdout:\n%s\nstderr:\n%s", \
                  (result).status, (want), (result).out, (result).err)

/* A column read from a .npy file. */
typedef struct cli_column {
    sluice_type type;
    int64_t length;
    void *data; /* malloc'd */
} cli_column;

static inline int cli_read_npy(const char *path, cli_column *col, char *err, size_t errcap) {
    size_t len;
    char *file = cli_slurp(path, &len);
    if (!file) {
        snprintf(err, errcap, "%s: cannot read", path);
        return -1;
    }
    sl_npy_header h;
    if (sl_npy_parse_header(file, len, &h, err, errcap) != 0 ||
        sl_npy_check_size(&h, len, err, errcap) != 0) {
        free(file);
        return -1;
    }
    size_t bytes = (size_t)h.length * sluice_type_size(h.type);
    col->type = h.type;
    col->length = h.length;
    col->data = malloc(bytes ? bytes : 1);
    memcpy(col->data, file + h.data_offset, bytes);
    free(file);
    return 0;
}

static inline double cli_float_at(const cli_column *c, int64_t i) {
    switch (c->type) {
    case SLUICE_F32: return ((const float *)c->data)[i];
    case SLUICE_F64: return ((const double *)c->data)[i];
    default: return NAN;
    }
}

/* Compares a column the program wrote with the expected one: same type and length; integers
 * and bools bit for bit; floats within a relative tolerance (scaled by the column's mean
 * magnitude for values near zero), NaN only where NaN is expected. Returns 0 or -1 with the
 * first difference in err. */
static inline int cli_compare_columns(const cli_column *got, const cli_column *want, double rtol,
                               char *err, size_t errcap) {
    if (got->type != want->type) {
        snprintf(err, errcap, "type %s, expected %s", sluice_type_name(got->type),
                 sluice_type_name(want->type));
        return -1;
    }
    if (got->length != want->length) {
        snprintf(err, errcap, "%lld rows, expected %lld", (long long)got->length,
                 (long long)want->length);
        return -1;
    }
    if (got->type != SLUICE_F32 && got->type != SLUICE_F64) {
        size_t w = sluice_type_size(got->type);
        for (int64_t i = 0; i < got->length; i++) {
            if (memcmp((const char *)got->data + (size_t)i * w,
                       (const char *)want->data + (size_t)i * w, w) != 0) {
                snprintf(err, errcap, "row %lld differs (integers compare exactly)", (long long)i);
                return -1;
            }
        }
        return 0;
    }
    double scale = 0;
    for (int64_t i = 0; i < want->length; i++) {
        double v = fabs(cli_float_at(want, i));
        if (isfinite(v)) scale += v;
    }
    scale = want->length ? scale / (double)want->length : 0;
    for (int64_t i = 0; i < got->length; i++) {
        double a = cli_float_at(got, i), b = cli_float_at(want, i);
        if (isnan(b) || isnan(a)) {
            if (isnan(a) != isnan(b)) {
                snprintf(err, errcap, "row %lld: %g, expected %g", (long long)i, a, b);
                return -1;
            }
            continue;
        }
        if (a == b) continue;
        if (!(fabs(a - b) <= rtol * (fabs(b) + scale))) {
            snprintf(err, errcap, "row %lld: %.9g, expected %.9g (rtol %g)", (long long)i, a, b,
                     rtol);
            return -1;
        }
    }
    return 0;
}

/* Compares OUTDIR/NAME.npy with the expected .npy file; fails the test on a difference. */
static inline void cli_expect_same_npy(const char *got_path, const char *want_path, double rtol) {
    cli_column got, want;
    char err[512];
    ck_assert_msg(cli_read_npy(want_path, &want, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(cli_read_npy(got_path, &got, err, sizeof err) == 0, "%s", err);
    int rc = cli_compare_columns(&got, &want, rtol, err, sizeof err);
    free(got.data);
    free(want.data);
    ck_assert_msg(rc == 0, "%s vs %s: %s", got_path, want_path, err);
}

#endif
