/* kcache.h — the on-disk kernel cache: a pipeline's kernels compile once per machine.
 *
 * An entry is keyed by a 128-bit hash of (generated source, NVRTC options, architecture,
 * NVRTC version, the kernel library's headers). Its file stores the key again and a
 * checksum of the cubin: an entry whose key, size or checksum does not match (stale,
 * truncated, corrupt, a hash-prefix collision) is compiled again and replaced, never
 * trusted. Entries are written to a temporary file and
 * renamed into place, so concurrent processes never see half an entry.
 *
 * Directory: the context's kernel_cache_dir, else $SLUICE_CACHE_DIR, else
 * $XDG_CACHE_HOME/sluice, else $HOME/.cache/sluice; an empty kernel_cache_dir disables the
 * cache. A cache that cannot be read or written only costs compile time: it never fails a
 * call. */
#ifndef SL_CUDA_KCACHE_H
#define SL_CUDA_KCACHE_H

#include "common/diag.h"

/* The cache directory for ctx into buf; false when caching is disabled or no directory can
 * be determined. */
bool sl_cuda_kcache_dir(const sluice_context *ctx, char *buf, size_t cap);

/* The key of `source` for sm_<arch> when the kernel headers have digest `headers_digest`
 * (sl_cuda_nvrtc_headers_digest); an entry's file stores it after its 8-byte magic. */
void sl_cuda_kcache_key(const char *source, int arch, uint64_t headers_digest, uint64_t key[2]);

/* The cubin of `source` for sm_<arch>, from the cache or compiled (and then stored).
 * fit_blocks > 1 compiles it by sl_cuda_nvrtc_compile_fitted from that many blocks (the
 * source's MIN_BLOCKS) keeping at most spill_bytes of spill stores (such a source must say
 * both in its text, so that its entry is not a plain compile's nor another bound's);
 * otherwise as it is. *cubin comes from the context's allocator (sl_free). *hit (may be
 * NULL) is true when the cache supplied it. Errors: those of sl_cuda_nvrtc_compile. */
sluice_status sl_cuda_kcache_get(sluice_context *ctx, const char *source, const char *name, int arch,
                                 int fit_blocks, int spill_bytes, void **cubin, size_t *size,
                                 bool *hit);

#endif
