/* sort.c — stable LSD radix sort: for each 8-bit digit, every worker counts the digits of
 * its contiguous slice, one serial step turns the counts into per-(digit, worker) start
 * offsets (digit-major, worker-minor: that keeps the sort stable), then every worker scatters
 * its slice. A pass whose digit is the same for all keys is skipped. */
#include "cpu/sort.h"

#include <string.h>

#define RADIX (1 << SL_CPU_RADIX_BITS)
#define MAX_SORT_WORKERS 64
#define MIN_ROWS_PER_WORKER 65536

typedef struct radix_pass {
    const void *keys, *vals;
    void *keys_out, *vals_out;
    bool wide, vals_wide, has_vals;
    int shift;
    uint64_t mask; /* digit mask: 8 bits, fewer in a last pass that ends at hi */
    int64_t n;
    int nworkers;
    int64_t (*counts)[RADIX]; /* per worker: digit counts, then start offsets */
} radix_pass;

static void slice(int64_t n, int nworkers, int w, int64_t *begin, int64_t *end) {
    *begin = n * w / nworkers;
    *end = n * (w + 1) / nworkers;
}

static void count_task(void *arg, int w) {
    radix_pass *rp = arg;
    int64_t b, e;
    slice(rp->n, rp->nworkers, w, &b, &e);
    int64_t *c = rp->counts[w];
    memset(c, 0, sizeof(int64_t) * RADIX);
    int s = rp->shift;
    uint64_t m = rp->mask;
    if (rp->wide) {
        const uint64_t *k = rp->keys;
        for (int64_t i = b; i < e; i++) c[(k[i] >> s) & m]++;
    } else {
        const uint32_t *k = rp->keys;
        for (int64_t i = b; i < e; i++) c[(k[i] >> s) & m]++;
    }
}

#define SCATTER_LOOP(KT, VT)                                                             \
    do {                                                                                 \
        const KT *k_ = rp->keys;                                                         \
        KT *ko_ = rp->keys_out;                                                          \
        const VT *v_ = rp->vals;                                                         \
        VT *vo_ = rp->vals_out;                                                          \
        for (int64_t i = b; i < e; i++) {                                                \
            KT key = k_[i];                                                              \
            int64_t at = pos[(key >> s) & m]++;                                \
            ko_[at] = key;                                                               \
            if (v_) vo_[at] = v_[i];                                                     \
        }                                                                                \
    } while (0)

static void scatter_task(void *arg, int w) {
    radix_pass *rp = arg;
    int64_t b, e;
    slice(rp->n, rp->nworkers, w, &b, &e);
    int64_t *pos = rp->counts[w]; /* holds start offsets by now */
    int s = rp->shift;
    uint64_t m = rp->mask;
    if (rp->wide) {
        if (!rp->has_vals) {
            const uint64_t *k = rp->keys;
            uint64_t *ko = rp->keys_out;
            for (int64_t i = b; i < e; i++) ko[pos[(k[i] >> s) & m]++] = k[i];
        } else if (rp->vals_wide) {
            SCATTER_LOOP(uint64_t, uint64_t);
        } else {
            SCATTER_LOOP(uint64_t, uint32_t);
        }
    } else {
        if (!rp->has_vals) {
            const uint32_t *k = rp->keys;
            uint32_t *ko = rp->keys_out;
            for (int64_t i = b; i < e; i++) ko[pos[(k[i] >> s) & m]++] = k[i];
        } else if (rp->vals_wide) {
            SCATTER_LOOP(uint32_t, uint64_t);
        } else {
            SCATTER_LOOP(uint32_t, uint32_t);
        }
    }
}

size_t sl_cpu_radix_counts(const sl_cpu_pool *pool) {
    int nworkers = pool ? sl_cpu_pool_size(pool) : 1;
    if (nworkers > MAX_SORT_WORKERS) nworkers = MAX_SORT_WORKERS;
    return (size_t)nworkers * RADIX;
}

bool sl_cpu_radix_sort(sl_cpu_pool *pool, int64_t *counts, void *keys, void *keys_tmp, bool wide,
                       void *vals, void *vals_tmp, bool vals_wide, int64_t n, int lo, int hi) {
    if (n <= 1 || hi <= lo) return false;
    radix_pass rp_storage;
    radix_pass *rp = &rp_storage;
    rp->counts = (int64_t(*)[RADIX])counts;
    int nworkers = pool ? sl_cpu_pool_size(pool) : 1;
    if (nworkers > MAX_SORT_WORKERS) nworkers = MAX_SORT_WORKERS;
    int64_t by_size = n / MIN_ROWS_PER_WORKER;
    if (by_size < 1) by_size = 1;
    if (nworkers > by_size) nworkers = (int)by_size;
    rp->nworkers = nworkers;
    rp->n = n;
    rp->wide = wide;
    rp->vals_wide = vals_wide;
    rp->has_vals = vals != NULL;
    bool in_tmp = false;
    for (int shift = lo; shift < hi; shift += SL_CPU_RADIX_BITS) {
        rp->shift = shift;
        rp->keys = in_tmp ? keys_tmp : keys;
        rp->keys_out = in_tmp ? keys : keys_tmp;
        rp->vals = in_tmp ? vals_tmp : vals;
        rp->vals_out = in_tmp ? vals : vals_tmp;
        int width = hi - shift < SL_CPU_RADIX_BITS ? hi - shift : SL_CPU_RADIX_BITS;
        rp->mask = ((uint64_t)1 << width) - 1;
        if (nworkers > 1) sl_cpu_pool_run(pool, count_task, rp, nworkers);
        else count_task(rp, 0);
        bool trivial = false;
        for (int d = 0; d < RADIX && !trivial; d++) {
            int64_t total = 0;
            for (int w = 0; w < nworkers; w++) total += rp->counts[w][d];
            if (total == n) trivial = true;
        }
        if (trivial) continue;
        int64_t at = 0;
        for (int d = 0; d < RADIX; d++) {
            for (int w = 0; w < nworkers; w++) {
                int64_t c = rp->counts[w][d];
                rp->counts[w][d] = at;
                at += c;
            }
        }
        if (nworkers > 1) sl_cpu_pool_run(pool, scatter_task, rp, nworkers);
        else scatter_task(rp, 0);
        in_tmp = !in_tmp;
    }
    return in_tmp;
}
