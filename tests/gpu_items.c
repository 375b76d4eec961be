/* gpu_items.c — a thread's registers for a column (kernels/sl_items.cuh) on the GPU, where the
 * packed values are read and written with `prmt` (the host emulation of the kernels takes
 * shifts and masks instead, so only this suite runs the device's instructions on their own).
 * For i8, u8, i16, u16, bool and f16 values, packed and as arrays, a kernel compiled by NVRTC
 * loads 32 random bytes into sl::items, reads every value (its sign or zero extension) and its
 * held form, and writes the values back in reverse order into zeroed items; the host checks
 * each against the bytes as memory holds them. Exits 77 without a GPU. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "common/context.h"
#include "cuda/nvrtc.h"
#include "sluice.h"
#include "testutil.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* One kernel per case: `in` 32 bytes of values; `out` the N values read (extended to 32 bits),
 * their N held forms, then the 32 bytes of the reversed items. */
static const char KERNELS[] =
    "#include \"sl_items.cuh\"\n"
    "#include \"sl_ops.h\"\n"
    "template <typename T, bool PACKED> __device__ void items_case(const unsigned *in, unsigned *out) {\n"
    "    constexpr int N = 32 / (int)sizeof(T);\n"
    "    sl::items<T, N, PACKED> c;\n"
    "    memcpy(sl::raw_of(c), in, 32);\n"
    "    const sl::items<T, N, PACKED> &cc = c;\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N; i++) {\n"
    "        out[i] = (unsigned)(int)cc[i];\n"
    "        out[N + i] = cc.held(i);\n"
    "    }\n"
    "    sl::items<T, N, PACKED> d = {};\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < N; i++) d[i] = c[N - 1 - i];\n"
    "    memcpy(out + 2 * N, sl::raw_of(d), 32);\n"
    "}\n"
    "#define CASE(name, T, P) extern \"C\" __global__ void name(const unsigned *in, unsigned *out) "
    "{ items_case<T, P>(in, out); }\n"
    "CASE(k_i8, int8_t, true)\nCASE(k_u8, uint8_t, true)\nCASE(k_i16, int16_t, true)\n"
    "CASE(k_u16, uint16_t, true)\nCASE(k_bool, sl_bool, true)\nCASE(k_f16, sl_half, true)\n"
    "CASE(k_i8_array, int8_t, false)\nCASE(k_i16_array, int16_t, false)\n";

static const struct {
    const char *kernel;
    int size;
    bool is_signed;
} CASES[] = {
    {"k_i8", 1, true},        {"k_u8", 1, false},  {"k_i16", 2, true},         {"k_u16", 2, false},
    {"k_bool", 1, false},     {"k_f16", 2, false}, {"k_i8_array", 1, true},    {"k_i16_array", 2, true},
};

static int arch_of_device(void) {
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return major * 10 + minor;
}

/* value i of `size` bytes at `bytes`, extended to 32 bits */
static uint32_t value_at(const uint8_t *bytes, int size, bool is_signed, int i) {
    if (size == 1) return is_signed ? (uint32_t)(int32_t)(int8_t)bytes[i] : bytes[i];
    const uint16_t v = (uint16_t)(bytes[2 * i] | bytes[2 * i + 1] << 8);
    return is_signed ? (uint32_t)(int32_t)(int16_t)v : v;
}

START_TEST(items_read_and_write_every_value) {
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    void *cubin = NULL;
    size_t size = 0;
    ck_assert_msg(sl_cuda_nvrtc_compile(ctx, KERNELS, "items.cu", arch_of_device(), &cubin, &size) == SLUICE_OK,
                  "%s", sluice_context_diagnostic(ctx, 0) ? sluice_context_diagnostic(ctx, 0)->message : "");
    cudaLibrary_t lib;
    ck_assert_int_eq(cudaLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0), cudaSuccess);
    uint32_t *d_in, *d_out;
    ck_assert_int_eq(cudaMalloc((void **)&d_in, 32), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&d_out, 4 * (2 * 32 + 8)), cudaSuccess);
    uint64_t seed = 0x5eed;
    for (size_t c = 0; c < NELEM(CASES); c++)
        for (int round = 0; round < 16; round++) {
            uint8_t bytes[32];
            for (int b = 0; b < 32; b++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                bytes[b] = (uint8_t)(seed >> 56);
            }
            /* every round's first bytes at the edges: the sign bit alone, all ones, zero */
            bytes[0] = 0x80, bytes[1] = 0xff, bytes[2] = 0x00, bytes[3] = 0x7f;
            ck_assert_int_eq(cudaMemcpy(d_in, bytes, 32, cudaMemcpyHostToDevice), cudaSuccess);
            ck_assert_int_eq(cudaMemset(d_out, 0xa5, 4 * (2 * 32 + 8)), cudaSuccess);
            cudaKernel_t k;
            ck_assert_int_eq(cudaLibraryGetKernel(&k, lib, CASES[c].kernel), cudaSuccess);
            void *args[] = {&d_in, &d_out};
            ck_assert_int_eq(cudaLaunchKernel((const void *)k, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, 0),
                             cudaSuccess);
            uint32_t out[2 * 32 + 8];
            ck_assert_int_eq(cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
            const int n = 32 / CASES[c].size;
            for (int i = 0; i < n; i++) {
                const uint32_t want = value_at(bytes, CASES[c].size, CASES[c].is_signed, i);
                ck_assert_msg(out[i] == want, "%s value %d: 0x%08x, not 0x%08x", CASES[c].kernel, i, out[i], want);
                ck_assert_msg(out[n + i] == want, "%s held %d: 0x%08x, not 0x%08x", CASES[c].kernel, i, out[n + i],
                              want);
            }
            uint8_t reversed[32];
            memcpy(reversed, out + 2 * n, 32);
            for (int i = 0; i < n; i++)
                for (int b = 0; b < CASES[c].size; b++)
                    ck_assert_msg(reversed[i * CASES[c].size + b] == bytes[(n - 1 - i) * CASES[c].size + b],
                                  "%s: value %d written back wrong (byte %d)", CASES[c].kernel, i, b);
        }
    cudaFree(d_in);
    cudaFree(d_out);
    cudaLibraryUnload(lib);
    sl_free(ctx, cubin);
    sluice_context_destroy(ctx);
}
END_TEST

static Suite *gpu_items_suite(void) {
    Suite *s = suite_create("gpu_items");
    TCase *tc = tcase_create("items");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, items_read_and_write_every_value);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    setenv("CK_FORK", "no", 1); /* CUDA does not survive fork() */
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "gpu_items: no GPU, skipped\n");
        return 77;
    }
    return tu_run_suite(gpu_items_suite());
}
