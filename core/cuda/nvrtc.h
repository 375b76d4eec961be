/* nvrtc.h — compiling generated kernel source to a cubin at run time with NVRTC. NVRTC
 * needs no GPU, so CI compiles every kernel the code generator can emit. The kernel
 * library (the .cuh and .h files of kernels/, embedded as text by cmake/embed.cmake) is offered
 * to the program as its headers, so generated source just #includes them. NVRTC itself is
 * loaded with dlopen on first use (libsluice has no link-time dependency on it), so every
 * entry point here may report that it is missing. */
#ifndef SL_CUDA_NVRTC_H
#define SL_CUDA_NVRTC_H

#include "common/diag.h"

/* Loads NVRTC once per process (thread-safe; later calls return the first outcome).
 * sl_cuda_nvrtc_available: whether it loaded. sl_cuda_nvrtc_load: SLUICE_OK, or
 * SLUICE_ERR_BACKEND_UNAVAILABLE with a message naming the library and the loader's reason. */
bool sl_cuda_nvrtc_available(void);
sluice_status sl_cuda_nvrtc_load(sluice_context *ctx);

/* The NVRTC options used for every kernel of `arch` (major*10+minor), as one line: part of
 * the kernel cache key. Written into buf (NUL-terminated); returns buf. */
char *sl_cuda_nvrtc_options_line(int arch, char *buf, size_t cap);
/* NVRTC's version as "major.minor" (part of the cache key; "-1.-1" when NVRTC is not
 * loaded, and then nothing compiles), written into buf; returns buf.
 * (No static buffer: contexts may be used from several threads at once.) */
char *sl_cuda_nvrtc_version_text(char *buf, size_t cap);

/* A 64-bit digest of header files (their names and texts, in order): what a kernel
 * includes is part of the kernel cache key, so a changed kernel library never reuses a
 * cubin built from the old one even when the generated source is the same. */
uint64_t sl_cuda_nvrtc_headers_digest_of(const char *const *names, const char *const *texts,
                                    size_t count);
/* The digest of the embedded kernel library the compiler offers. */
uint64_t sl_cuda_nvrtc_headers_digest(void);

/* Compiles `source` (named `name` in messages) for sm_<arch>. On success *cubin is a buffer
 * from the context's allocator (free with sl_free) of *size bytes. Errors:
 * SLUICE_ERR_COMPILE with NVRTC's log in the diagnostic, SLUICE_ERR_NO_MEMORY,
 * SLUICE_ERR_BACKEND_UNAVAILABLE (NVRTC could not be loaded). */
sluice_status sl_cuda_nvrtc_compile(sluice_context *ctx, const char *source, const char *name, int arch,
                               void **cubin, size_t *size);

/* What ptxas -v reports of a compiled program: the bytes of spill stores over all its
 * functions, and the most registers a thread of any of its kernels uses. */
typedef struct sl_ptxas_usage {
    size_t spill_bytes;
    int registers;
} sl_ptxas_usage;

/* The same, with the register bound asked of a generated kernel: min_blocks > 0 compiles
 * with -DMIN_BLOCKS=min_blocks, which a generated source's __launch_bounds__ takes in place
 * of its own choice (core/cuda/codegen.c emits that choice under #ifndef MIN_BLOCKS); 0
 * keeps the source's. usage (may be NULL) receives what ptxas reported (it compiles with
 * ptxas -v then, which changes nothing in the cubin). */
sluice_status sl_cuda_nvrtc_compile_bounded(sluice_context *ctx, const char *source, const char *name,
                                            int arch, int min_blocks, void **cubin, size_t *size,
                                            sl_ptxas_usage *usage);

/* Compiles a generated source whose kernels ask for min_blocks resident blocks (its
 * MIN_BLOCKS) at the most blocks, min_blocks or fewer, whose spill stores ptxas reports as
 * at most spill_bytes: at min_blocks, then one block fewer while they are more, down to one
 * (kept whatever it spills); up to min_blocks compiles. A spill pays for the extra blocks'
 * share of registers with local-memory traffic; one block fewer gives each thread more
 * registers instead (kernels/tuning.h, spill_bytes, has the measurements). The kernels'
 * grid is sized from the cubin at load time (core/cuda/fused.c), so nothing else changes.
 * *bound (may be NULL): the blocks compiled for (min_blocks itself when it is 1 or less:
 * then this is sl_cuda_nvrtc_compile); usage (may be NULL): what ptxas reported at them.
 * Errors: those of sl_cuda_nvrtc_compile. */
sluice_status sl_cuda_nvrtc_compile_fitted(sluice_context *ctx, const char *source, const char *name,
                                           int arch, int min_blocks, int spill_bytes, void **cubin,
                                           size_t *size, int *bound, sl_ptxas_usage *usage);

/* The bytes of spill stores a ptxas -v log reports, summed over its functions (0 for NULL
 * or a log that reports none). */
size_t sl_cuda_ptxas_spill_bytes(const char *log);

/* The most registers a thread uses that a ptxas -v log reports ("Used N registers"), over its
 * functions (0 for NULL or a log that reports none). */
int sl_cuda_ptxas_registers(const char *log);

#endif
