/* racecheck_probe.cu — does compute-sanitizer racecheck accept the hand-over of the fused
 * kernels with a look-back warp? The pattern, stripped of everything else: 256 row-owning
 * threads and one more warp run one loop; per iteration thread 0 writes a slot, every thread
 * meets one __syncthreads, the extra warp reads the slot and its lane 0 answers in another
 * slot, which the row threads read after the next __syncthreads. Variants (argv[1]):
 *   0  as the generated kernel: the row threads also sync among themselves (bar.sync 1, 256)
 *      and the extra warp `continue`s past their part;
 *   1  without the row threads' named barrier (which leaves a real race on `scratch`, read by
 *      thread 0 without a barrier: those hazards are expected; the question is the slot);
 *   2  without `continue` (if/else);
 *   3  every thread reads the slot after the barrier (no roles at all).
 * Build and run on the GPU machine:
 *   nvcc -arch=sm_90 -lineinfo -o probe scripts/racecheck_probe.cu
 *   for v in 0 1 2 3; do compute-sanitizer --tool racecheck ./probe $v; done
 * A hazard reported for a variant is a racecheck verdict on this pattern alone. */
#include <cstdio>
#include <cstdlib>

#define BLOCK 256
#define THREADS (BLOCK + 32)
#define SLOTS 3

__global__ void probe(int variant, int iterations, unsigned long long *out) {
    __shared__ unsigned long long handed[SLOTS], answer[SLOTS];
    __shared__ unsigned long long scratch[BLOCK];
    unsigned long long sum = 0;
    for (int j = 0; j < iterations; j++) {
        const int s = j % SLOTS, sp = (j + SLOTS - 1) % SLOTS;
        if (threadIdx.x < BLOCK) {
            scratch[threadIdx.x] = (unsigned long long)j * threadIdx.x;
            if (variant != 1) asm volatile("bar.sync 1, 256;" ::: "memory");
            if (threadIdx.x == 0) handed[s] = (unsigned long long)j + scratch[BLOCK - 1];
        }
        __syncthreads();
        if (variant == 3) {
            sum += handed[s];
            continue;
        }
        if (threadIdx.x >= BLOCK) {
            const unsigned long long got = handed[s];
            if ((threadIdx.x & 31) == 0) answer[s] = got * 2 + 1;
            __syncwarp();
            if (variant != 2) continue;
        } else {
            if (j > 0) sum += answer[sp];
            if (variant != 1) asm volatile("bar.sync 1, 256;" ::: "memory");
        }
    }
    atomicAdd(out, sum);
}

int main(int argc, char **argv) {
    const int variant = argc > 1 ? atoi(argv[1]) : 0;
    unsigned long long *out = nullptr, got = 0;
    cudaMalloc(&out, sizeof *out);
    cudaMemset(out, 0, sizeof *out);
    probe<<<4, THREADS>>>(variant, 50, out);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost);
    printf("variant %d: %s, sum %llu\n", variant, cudaGetErrorString(e), got);
    cudaFree(out);
    return e == cudaSuccess ? 0 : 1;
}
