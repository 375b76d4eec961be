/* gen.h — synthetic input streams for `sluice gen` and `sluice bench`. Values come from a
 * counter-based generator (a hash of seed, column and row), so any window of rows can be made
 * on its own, in any order, and the stream is the same for a seed on every machine.
 *
 * Distributions, per type:
 *   bool                       half true
 *   i8 u8 i16 u16 u32          uniform over the type's whole range
 *   i32 i64                    uniform in [-1000000, 1000000]
 *   u64                        uniform in [0, 2^32)
 *   f16 f32 f64                standard normal (about half negative)
 *   offsets inputs             segment lengths uniform in [0, 32] (mean 16), the last one
 *                              cut so that the segments cover exactly the rows */
#ifndef SL_CLI_GEN_H
#define SL_CLI_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice.h"

/* Writes rows [start, start + n) of data column number `column` of type `type` to dst. */
void sl_gen_values(sluice_type type, uint64_t seed, uint64_t column, int64_t start, int64_t n,
                   void *dst);

/* Walks the segment ends of offsets column number `column` over `rows` rows. */
typedef struct sl_gen_segments {
    uint64_t seed, column;
    int64_t rows, at, index;
} sl_gen_segments;
void sl_gen_segments_init(sl_gen_segments *it, uint64_t seed, uint64_t column, int64_t rows);
/* Stores the end of the next segment in *end; false when the segments cover the rows. */
bool sl_gen_segments_next(sl_gen_segments *it, int64_t *end);

/* Builds the offsets (k+1 entries, first 0, last rows) of an offsets input over `rows` rows.
 * Returns 0, or -1 when out of memory. The caller frees *out. */
int sl_gen_offsets(uint64_t seed, uint64_t column, int64_t rows, int64_t **out, int64_t *count);

#endif
