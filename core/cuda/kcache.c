/* kcache.c — on-disk cache of compiled kernels: hashing the key, validating an entry before
 * use, atomic replacement (temporary file + rename). See kcache.h for the contract. */
#define _GNU_SOURCE
#include "cuda/kcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/context.h"
#include "cuda/nvrtc.h"

#define SL_KCACHE_MAGIC "SLKCACH1"
#define SL_KCACHE_MAX_ENTRY ((size_t)1 << 30)

typedef struct sl_cuda_kcache_header {
    char magic[8];
    uint64_t key[2];
    uint64_t payload_size;
    uint64_t payload_checksum;
} sl_cuda_kcache_header;

/* FNV-1a, 64-bit, continuing from `h` (two different starting points give the two halves
 * of the key). Not cryptographic: the cache guards against accidents, and an entry's full
 * key and checksum are checked on every read. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void sl_cuda_kcache_key(const char *source, int arch, uint64_t headers_digest, uint64_t key[2]) {
    char options[256];
    sl_cuda_nvrtc_options_line(arch, options, sizeof options);
    char version[32];
    sl_cuda_nvrtc_version_text(version, sizeof version);
    const uint64_t seeds[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    for (int k = 0; k < 2; k++) {
        uint64_t h = seeds[k];
        /* Each part is followed by its length, so part boundaries cannot be shifted. */
        const char *parts[3] = {source, options, version};
        for (int i = 0; i < 3; i++) {
            size_t n = strlen(parts[i]);
            h = fnv1a(h, parts[i], n);
            h = fnv1a(h, &n, sizeof n);
        }
        h = fnv1a(h, &arch, sizeof arch);
        h = fnv1a(h, &headers_digest, sizeof headers_digest);
        key[k] = h;
    }
}

bool sl_cuda_kcache_dir(const sluice_context *ctx, char *buf, size_t cap) {
    const char *dir = ctx->kernel_cache_dir;
    if (dir) {
        if (!dir[0]) return false;
        return (size_t)snprintf(buf, cap, "%s", dir) < cap;
    }
    const char *env = getenv("SLUICE_CACHE_DIR");
    if (env && env[0]) return (size_t)snprintf(buf, cap, "%s", env) < cap;
    env = getenv("XDG_CACHE_HOME");
    if (env && env[0]) return (size_t)snprintf(buf, cap, "%s/sluice", env) < cap;
    env = getenv("HOME");
    if (env && env[0]) return (size_t)snprintf(buf, cap, "%s/.cache/sluice", env) < cap;
    return false;
}

/* mkdir -p; true when the directory exists afterwards. */
static bool make_dirs(char *path) {
    struct stat st;
    if (stat(path, &st) == 0) return S_ISDIR(st.st_mode);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            *p = '/';
            return false;
        }
        *p = '/';
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

/* Reads and validates the entry; NULL when absent or not to be trusted. */
static void *read_entry(sluice_context *ctx, const char *path, const uint64_t key[2],
                        size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    sl_cuda_kcache_header h;
    void *payload = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || fread(&h, sizeof h, 1, f) != 1 ||
        memcmp(h.magic, SL_KCACHE_MAGIC, 8) != 0 || h.key[0] != key[0] || h.key[1] != key[1] ||
        h.payload_size == 0 || h.payload_size > SL_KCACHE_MAX_ENTRY ||
        (uint64_t)st.st_size != sizeof h + h.payload_size)
        goto reject;
    payload = sl_alloc(ctx, (size_t)h.payload_size);
    if (!payload || fread(payload, (size_t)h.payload_size, 1, f) != 1) goto reject;
    if (fnv1a(0xcbf29ce484222325ull, payload, (size_t)h.payload_size) != h.payload_checksum)
        goto reject;
    fclose(f);
    *size = (size_t)h.payload_size;
    return payload;
reject:
    sl_free(ctx, payload);
    fclose(f);
    return NULL;
}

/* Writes the entry through a temporary file and rename; failures are ignored (the cache
 * is an optimisation). */
static void write_entry(const char *dir, const char *path, const uint64_t key[2],
                        const void *cubin, size_t size) {
    char tmp[4200];
    static unsigned counter;
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/.tmp-%016llx-%ld-%u", dir,
                         (unsigned long long)key[0], (long)getpid(), counter++) >= sizeof tmp)
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        return;
    }
    sl_cuda_kcache_header h;
    memcpy(h.magic, SL_KCACHE_MAGIC, 8);
    h.key[0] = key[0];
    h.key[1] = key[1];
    h.payload_size = size;
    h.payload_checksum = fnv1a(0xcbf29ce484222325ull, cubin, size);
    bool ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(cubin, size, 1, f) == 1;
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

sluice_status sl_cuda_kcache_get(sluice_context *ctx, const char *source, const char *name, int arch,
                                 int fit_blocks, int spill_bytes, void **cubin, size_t *size,
                                 bool *hit) {
    if (hit) *hit = false;
    char dir[4096], path[4200];
    uint64_t key[2];
    sl_cuda_kcache_key(source, arch, sl_cuda_nvrtc_headers_digest(), key);
    bool cached = sl_cuda_kcache_dir(ctx, dir, sizeof dir) &&
                  (size_t)snprintf(path, sizeof path, "%s/sm%d-%016llx%016llx.cubin", dir, arch,
                                   (unsigned long long)key[0],
                                   (unsigned long long)key[1]) < sizeof path;
    if (cached) {
        void *bin = read_entry(ctx, path, key, size);
        if (bin) {
            *cubin = bin;
            if (hit) *hit = true;
            return SLUICE_OK;
        }
    }
    SL_TRY(sl_cuda_nvrtc_compile_fitted(ctx, source, name, arch, fit_blocks, spill_bytes,
                                        cubin, size, NULL, NULL));
    if (cached && make_dirs(dir)) write_entry(dir, path, key, *cubin, *size);
    return SLUICE_OK;
}
