/* nvrtc.c — NVRTC driver: builds a program from generated source plus the embedded kernel
 * headers, compiles it for one architecture, returns the cubin or the compiler's log. */
#include "nvrtc.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Written by cmake/embed.cmake (embedded_kernels.c in the build folder). */
typedef struct sl_embedded_file {
    const char *name;
    const char *text;
} sl_embedded_file;
extern const sl_embedded_file sl_embedded_files[];
extern const size_t sl_embedded_file_count;

/* No -use_fast_math and no FMA contraction: the expression language promises the CPU's
 * results (kernels/sl_ops.h), and the scan combines go through the same helpers. */
static const char *const sl_nvrtc_fixed_options[] = {"-std=c++17", "--fmad=false",
                                                     "-default-device"};
#define SL_NVRTC_NFIXED ((int)SL_ARRAY_LEN(sl_nvrtc_fixed_options))

/* SLUICE_NVRTC_LINEINFO=1 adds -lineinfo, so compute-sanitizer and Nsight name lines of the
 * generated source; it is part of the options line, hence of the kernel cache key. */
static bool lineinfo_wanted(void) {
    const char *env = getenv("SLUICE_NVRTC_LINEINFO");
    return env && strcmp(env, "1") == 0;
}

char *sl_nvrtc_options_line(int arch, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "--gpu-architecture=sm_%d", arch);
    for (int i = 0; i < SL_NVRTC_NFIXED && n >= 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, " %s", sl_nvrtc_fixed_options[i]);
    if (lineinfo_wanted() && n >= 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " -lineinfo");
    return buf;
}

uint64_t sl_nvrtc_headers_digest_of(const char *const *names, const char *const *texts,
                                    size_t count) {
    /* FNV-1a over each name and text, each followed by its length (no shifted boundaries) */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < count; i++) {
        const char *parts[2] = {names[i], texts[i]};
        for (int k = 0; k < 2; k++) {
            size_t n = strlen(parts[k]);
            for (size_t j = 0; j < n; j++) h = (h ^ (unsigned char)parts[k][j]) * 0x100000001b3ull;
            for (size_t j = 0; j < sizeof n; j++) h = (h ^ ((n >> (8 * j)) & 0xffu)) * 0x100000001b3ull;
        }
    }
    return h;
}

uint64_t sl_nvrtc_headers_digest(void) {
    const char *names[64], *texts[64];
    size_t count = 0;
    for (size_t i = 0; i < sl_embedded_file_count && count < 64; i++, count++) {
        names[count] = sl_embedded_files[i].name;
        texts[count] = sl_embedded_files[i].text;
    }
    return sl_nvrtc_headers_digest_of(names, texts, count);
}

char *sl_nvrtc_version_text(char *buf, size_t cap) {
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) major = minor = -1;
    snprintf(buf, cap, "%d.%d", major, minor);
    return buf;
}

sluice_status sl_nvrtc_compile(sluice_context *ctx, const char *source, const char *name, int arch,
                               void **cubin, size_t *size) {
    *cubin = NULL;
    *size = 0;
    const char *header_texts[64];
    const char *header_names[64];
    int nheaders = 0;
    for (size_t i = 0; i < sl_embedded_file_count && nheaders < 64; i++) {
        header_texts[nheaders] = sl_embedded_files[i].text;
        header_names[nheaders] = sl_embedded_files[i].name;
        nheaders++;
    }
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, source, name, nheaders, header_texts, header_names);
    if (r != NVRTC_SUCCESS)
        return sl_error(ctx, r == NVRTC_ERROR_OUT_OF_MEMORY ? SLUICE_ERR_NO_MEMORY : SLUICE_ERR_COMPILE,
                        "NVRTC could not create a program for kernel %s: %s", name,
                        nvrtcGetErrorString(r));
    char arch_opt[48];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    const char *options[2 + SL_NVRTC_NFIXED];
    int noptions = 0;
    options[noptions++] = arch_opt;
    for (int i = 0; i < SL_NVRTC_NFIXED; i++) options[noptions++] = sl_nvrtc_fixed_options[i];
    if (lineinfo_wanted()) options[noptions++] = "-lineinfo";
    r = nvrtcCompileProgram(prog, noptions, options);
    if (r != NVRTC_SUCCESS) {
        size_t log_size = 0;
        char *log = NULL;
        if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0) {
            log = sl_alloc(ctx, log_size + 1);
            if (log && nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS) log[0] = '\0';
            if (log) log[log_size] = '\0';
        }
        /* Keep the message bounded: the first lines of the log name the problem. */
        if (log && strlen(log) > 4000) strcpy(log + 3990, " …(cut)");
        sluice_status st = sl_error(ctx, SLUICE_ERR_COMPILE,
                                    "NVRTC failed to compile generated kernel %s for sm_%d (%s); "
                                    "this is a bug in sluice's code generator, please report it "
                                    "with the pipeline file. Compiler log:\n%s",
                                    name, arch, nvrtcGetErrorString(r), log ? log : "(no log)");
        sl_free(ctx, log);
        nvrtcDestroyProgram(&prog);
        return st;
    }
    size_t n = 0;
    r = nvrtcGetCUBINSize(prog, &n);
    void *bin = r == NVRTC_SUCCESS && n > 0 ? sl_alloc(ctx, n) : NULL;
    if (!bin || nvrtcGetCUBIN(prog, bin) != NVRTC_SUCCESS) {
        sl_free(ctx, bin);
        nvrtcDestroyProgram(&prog);
        if (r == NVRTC_SUCCESS && n > 0 && !bin)
            return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "no memory for a %zu-byte cubin", n);
        return sl_error(ctx, SLUICE_ERR_COMPILE,
                        "NVRTC produced no cubin for kernel %s (sm_%d): %s", name, arch,
                        nvrtcGetErrorString(r));
    }
    nvrtcDestroyProgram(&prog);
    *cubin = bin;
    *size = n;
    return SLUICE_OK;
}
