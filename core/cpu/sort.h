/* sort.h — the CPU backend's stable LSD radix sort over unsigned key images (see
 * core/runtime/sortkey.h for how keys of every type become images), with an optional payload (the
 * row permutation that moves the other columns). */
#ifndef SL_CPU_SORT_H
#define SL_CPU_SORT_H

#include "cpu/threads.h"

#define SL_CPU_RADIX_BITS 8

/* Entries of the digit-count scratch a sort on this pool needs (int64_t each). */
size_t sl_cpu_radix_counts(const sl_cpu_pool *pool);

/* Sorts n images stably by their bits [lo, hi) (0 <= lo <= hi <= 32 or 64), 8 bits a pass,
 * skipping passes in which every key has the same digit. keys: uint32_t[n] (wide false) or
 * uint64_t[n]; vals: NULL or a payload of uint32_t[n] (vals_wide false) / uint64_t[n];
 * keys_tmp / vals_tmp: buffers of the same sizes; counts: sl_cpu_radix_counts(pool) entries. The sorted data ends either in keys/vals or
 * in the tmp buffers: returns true for the latter. Histograms and scatters run on the pool. */
bool sl_cpu_radix_sort(sl_cpu_pool *pool, int64_t *counts, void *keys, void *keys_tmp, bool wide,
                       void *vals, void *vals_tmp, bool vals_wide, int64_t n, int lo, int hi);

#endif
