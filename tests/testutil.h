/* testutil.h — shared helpers of the Check suites: deterministic random data, loading a
 * pipeline from text with its diagnostics printed on failure, running it in one shot. */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>

#include "sluice.h"

/* xorshift64* generator: same sequence on every machine. */
typedef struct tu_rng {
    uint64_t s;
} tu_rng;
void tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(tu_rng *r);
double tu_rng_uniform(tu_rng *r);           /* [0, 1) */
double tu_rng_normal(tu_rng *r);
int64_t tu_rng_range(tu_rng *r, int64_t lo, int64_t hi); /* [lo, hi] */

/* Loads a pipeline from text; on failure prints every diagnostic and fails the test. */
sluice_pipeline *tu_load(sluice_context *ctx, const char *yaml);
/* Loads expecting failure; returns the status and copies the first diagnostic's formatted
 * text into buf. */
sluice_status tu_load_fail(sluice_context *ctx, const char *yaml, char *buf, size_t cap);
/* Prints the context's diagnostics to stderr. */
void tu_print_diags(const sluice_context *ctx);

/* An allocator whose hooks fail once `budget` allocations have been made (< 0: never),
 * for tests of what a failed call leaves behind. Use with tu_failing_allocator(&f). */
typedef struct tu_failing {
    long budget; /* allocations left before one fails; < 0: never fail */
} tu_failing;
sluice_allocator tu_failing_allocator(tu_failing *f);

/* Runs a Check suite made by `make_suite`; returns 0 when all pass (the main of a suite). */
int tu_run_suite(Suite *s);

#endif
