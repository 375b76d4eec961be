/* bench_time.h — the clock and the median the benchmark programs in bench/ share: now_ms()
 * reads the monotonic clock in milliseconds, bench_median() sorts n values in place and
 * returns the middle one. For C and CUDA C++ alike. */
#ifndef SLUICE_BENCH_TIME_H
#define SLUICE_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

static inline double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of t[0..n) (n >= 1); t is left sorted. */
static inline double bench_median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
    return t[n / 2];
}

#endif
