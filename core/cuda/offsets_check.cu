// offsets_check.cu — validates an offsets input that lives in device memory (the host
// check of core/runtime/session.c cannot read it): starts at 0, never decreases, ends at the row
// count. One pass over the k+1 offsets; the verdict is a bit mask the host reads back with
// the push's other counts.
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/offsets_check.h"

__global__ static void offsets_check_kernel(const int64_t *__restrict__ off, int64_t count,
                                            int64_t rows, unsigned *verdict) {
    unsigned bad = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t v = off[i];
        if (i == 0 && v != 0) bad |= SL_OFFSETS_BAD_START;
        if (i > 0 && v < off[i - 1]) bad |= SL_OFFSETS_DECREASE;
        if (i == count - 1 && rows >= 0 && v != rows) bad |= SL_OFFSETS_BAD_END;
        if (v < 0) bad |= SL_OFFSETS_NEGATIVE;
    }
    if (bad) atomicOr(verdict, bad);
}

extern "C" int sl_cuda_offsets_check(const int64_t *offsets, int64_t count, int64_t rows,
                                     unsigned *verdict, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaMemsetAsync(verdict, 0, sizeof(unsigned), st);
    if (e != cudaSuccess || count <= 0) return e;
    int64_t blocks = (count + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    offsets_check_kernel<<<(unsigned)blocks, 256, 0, st>>>(offsets, count, rows, verdict);
    return cudaGetLastError();
}
