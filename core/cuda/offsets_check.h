/* offsets_check.h — checking an offsets input in device memory (core/cuda/offsets_check.cu). */
#ifndef SL_CUDA_OFFSETS_CHECK_H
#define SL_CUDA_OFFSETS_CHECK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bits of the verdict. */
#define SL_OFFSETS_BAD_START 1u /* offsets[0] != 0 */
#define SL_OFFSETS_DECREASE 2u  /* some offsets[i] < offsets[i-1] */
#define SL_OFFSETS_BAD_END 4u   /* offsets[count-1] != rows */
#define SL_OFFSETS_NEGATIVE 8u

/* Queues on stream: *verdict (device) = the OR of the bits above over the count offsets
 * (rows < 0: the last offset is not compared). Returns a cudaError_t as int. */
int sl_cuda_offsets_check(const int64_t *offsets, int64_t count, int64_t rows, unsigned *verdict,
                          void *stream);

#ifdef __cplusplus
}
#endif
#endif
