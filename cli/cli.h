/* cli.h — what the subcommands of the `sluice` program share: the command table entry, exit
 * statuses, option parsing, and loading a pipeline with its diagnostics printed. The command
 * line is written on the public API (sluice.h) only. */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sluice.h"

/* Exit statuses of every subcommand. */
enum {
    SL_EXIT_OK = 0,
    SL_EXIT_ERROR = 1, /* an error in the pipeline or the data: diagnostics on stderr */
    SL_EXIT_USAGE = 2  /* a malformed command line: a message and the usage on stderr */
};

typedef struct sl_command sl_command;
struct sl_command {
    const char *name;
    const char *usage;   /* the argument synopsis after "sluice NAME " */
    const char *summary; /* one line for `sluice help` */
    const char *help;    /* the options, for `sluice NAME --help` */
    int (*main)(const sl_command *self, int argc, char **argv); /* argv[0] is NAME */
    const char *const *options; /* its long option names without "--", NULL-terminated: an
                                   unknown option is answered with the closest of them */
};

extern const sl_command sl_command_run, sl_command_check, sl_command_explain, sl_command_gen,
    sl_command_bench;

/* Prints "sluice NAME: MESSAGE" and the usage line to stderr; returns SL_EXIT_USAGE. */
int sl_usage_error(const sl_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "sluice: error: MESSAGE" to stderr; returns SL_EXIT_ERROR. */
int sl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* If argv[*i] is the option --NAME (as "--NAME VALUE" or "--NAME=VALUE"), stores its value,
 * moves *i past it and returns 1; returns 0 when argv[*i] is another argument, -1 (after a
 * usage message) when the value is missing. */
int sl_option(const sl_command *cmd, int argc, char **argv, int *i, const char *name,
              const char **value);
/* If argv[*i] is the flag --NAME (no value), moves *i past it and returns true. */
bool sl_flag(char **argv, int *i, const char *name);
/* Takes argv[*i], which is not an option of the command, as the pipeline file (the one
 * positional argument) and moves *i past it. Returns SL_EXIT_OK, or SL_EXIT_USAGE (after a
 * message, with the closest option of the command for a misspelt one) for an unknown option
 * or a second file. */
int sl_take_pipeline_arg(const sl_command *cmd, char **argv, int *i, const char **path);
/* The candidate closest to `word` by edit distance (a swap of neighbours counts one), or NULL
 * when none is close enough to be what was meant. */
const char *sl_closest(const char *word, const char *const *candidates, size_t count);
/* The most --threads accepted: the CPU backend starts no more workers than this. */
#define SL_MAX_THREADS 256
/* Parses a decimal integer in [lo, hi]; accepts a power-of-two shorthand "2^26". Returns
 * false when the text is not one. */
bool sl_parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out);
/* "auto" | "cpu" | "cuda". */
bool sl_parse_backend(const char *text, sluice_backend *out);

/* A context whose CPU backend runs `cpu_threads` workers (0: one per core); NULL (after a
 * message) when it cannot be made. */
sluice_context *sl_context_new(int cpu_threads);
/* Prints every diagnostic the context holds to stderr, formatted. */
void sl_print_diagnostics(const sluice_context *ctx);
/* Loads a pipeline file; on failure prints every diagnostic (or says that the path is a
 * directory) and returns NULL. */
sluice_pipeline *sl_load_pipeline(sluice_context *ctx, const char *path);

/* Pulls every result batch that is ready and hands each to sink (which must not free it;
 * it returns SL_EXIT_OK or prints why not). Returns SL_EXIT_OK, or the first failure, after
 * printing the context's diagnostics for a failed pull. */
int sl_pull_ready(sluice_session *session, sluice_context *ctx,
                  int (*sink)(const sluice_batch *batch, void *payload), void *payload);

/* Seconds on a monotonic clock. */
double sl_now(void);

/* The CLOCK_REALTIME instant `ms` milliseconds from now, the deadline form
 * pthread_cond_timedwait takes. */
struct timespec sl_deadline_in(long ms);

#endif
