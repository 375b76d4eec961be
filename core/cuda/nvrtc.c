/* nvrtc.c — NVRTC driver: builds a program from generated source plus the embedded kernel
 * headers, compiles it for one architecture, returns the cubin or the compiler's log.
 *
 * NVRTC is loaded with dlopen on first use, not linked: a CUDA-enabled libsluice.so and
 * `sluice` binary must load and run the CPU backend on a machine without the CUDA toolkit
 * (as CuPy and PyTorch do). <nvrtc.h> is included for its types and prototypes only; every
 * call goes through the function table below, resolved once. */
#include "cuda/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The library names tried, in order: the soname of the toolkit sluice was built with (found
 * through LD_LIBRARY_PATH, the binary's RUNPATH and ld.so.cache), the same file in that
 * toolkit's lib directory (a toolkit outside the loader's search path), then the unversioned
 * development name (another NVRTC release; its C API has been stable across majors).
 * SLUICE_NVRTC_SONAME and SLUICE_CUDA_LIBDIR come from CMakeLists.txt. */
#ifndef SLUICE_NVRTC_SONAME
#error "SLUICE_NVRTC_SONAME (e.g. \"libnvrtc.so.13\") is set by CMakeLists.txt"
#endif
#ifndef SLUICE_CUDA_LIBDIR
#define SLUICE_CUDA_LIBDIR ""
#endif

/* Written by cmake/embed.cmake (embedded_kernels.c in the build folder). */
typedef struct sl_cuda_embedded_file {
    const char *name;
    const char *text;
} sl_cuda_embedded_file;
extern const sl_cuda_embedded_file sl_cuda_embedded_files[];
extern const size_t sl_cuda_embedded_file_count;

/* One pointer per NVRTC function used, typed from <nvrtc.h>'s own prototypes. */
typedef struct nvrtc_api {
    __typeof__(nvrtcVersion) *Version;
    __typeof__(nvrtcGetErrorString) *GetErrorString;
    __typeof__(nvrtcCreateProgram) *CreateProgram;
    __typeof__(nvrtcCompileProgram) *CompileProgram;
    __typeof__(nvrtcGetProgramLogSize) *GetProgramLogSize;
    __typeof__(nvrtcGetProgramLog) *GetProgramLog;
    __typeof__(nvrtcGetCUBINSize) *GetCUBINSize;
    __typeof__(nvrtcGetCUBIN) *GetCUBIN;
    __typeof__(nvrtcDestroyProgram) *DestroyProgram;
} nvrtc_api;

static nvrtc_api api;
static bool api_loaded;
/* Why loading failed (the loader's messages), kept for every later request. */
static char load_error[768];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* dlsym returns void *; ISO C has no cast from it to a function pointer, POSIX requires that
 * this copy works. */
static bool resolve(void *lib, const char *name, void *slot) {
    void *f = dlsym(lib, name);
    if (!f) return false;
    memcpy(slot, &f, sizeof f);
    return true;
}

static void load_nvrtc(void) {
    char in_toolkit[512] = "";
    if (SLUICE_CUDA_LIBDIR[0])
        snprintf(in_toolkit, sizeof in_toolkit, "%s/%s", SLUICE_CUDA_LIBDIR, SLUICE_NVRTC_SONAME);
    const char *const candidates[] = {SLUICE_NVRTC_SONAME, in_toolkit, "libnvrtc.so"};
    void *lib = NULL;
    size_t used = 0;
    for (size_t i = 0; i < SL_ARRAY_LEN(candidates) && !lib; i++) {
        if (!candidates[i][0]) continue;
        lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib && used < sizeof load_error) {
            const char *why = dlerror();
            int n = snprintf(load_error + used, sizeof load_error - used, "%s%s", used ? "; " : "",
                             why ? why : candidates[i]);
            if (n > 0) used += (size_t)n;
        }
    }
    if (!lib) return;
    struct {
        const char *name;
        void *slot;
    } const symbols[] = {
        {"nvrtcVersion", &api.Version},
        {"nvrtcGetErrorString", &api.GetErrorString},
        {"nvrtcCreateProgram", &api.CreateProgram},
        {"nvrtcCompileProgram", &api.CompileProgram},
        {"nvrtcGetProgramLogSize", &api.GetProgramLogSize},
        {"nvrtcGetProgramLog", &api.GetProgramLog},
        {"nvrtcGetCUBINSize", &api.GetCUBINSize},
        {"nvrtcGetCUBIN", &api.GetCUBIN},
        {"nvrtcDestroyProgram", &api.DestroyProgram},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(symbols); i++) {
        if (!resolve(lib, symbols[i].name, symbols[i].slot)) {
            snprintf(load_error, sizeof load_error, "the loaded NVRTC library lacks %s",
                     symbols[i].name);
            dlclose(lib);
            memset(&api, 0, sizeof api);
            return;
        }
    }
    /* Kept open for the life of the process: compiled programs may be in use at exit. */
    api_loaded = true;
}

bool sl_cuda_nvrtc_available(void) {
    pthread_once(&load_once, load_nvrtc);
    return api_loaded;
}

sluice_status sl_cuda_nvrtc_load(sluice_context *ctx) {
    if (sl_cuda_nvrtc_available()) return SLUICE_OK;
    return sl_error(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                    "the CUDA backend needs NVRTC (%s), which could not be loaded (%s); install "
                    "the CUDA toolkit's NVRTC or add its lib directory to LD_LIBRARY_PATH, or use "
                    "backend cpu or auto",
                    SLUICE_NVRTC_SONAME, load_error[0] ? load_error : "no reason given");
}

/* No -use_fast_math and no FMA contraction: the expression language promises the CPU's
 * results (kernels/sl_ops.h), and the scan combines go through the same helpers. */
static const char *const sl_cuda_nvrtc_fixed_options[] = {"-std=c++17", "--fmad=false",
                                                     "-default-device"};
#define SL_NVRTC_NFIXED ((int)SL_ARRAY_LEN(sl_cuda_nvrtc_fixed_options))

/* Options for looking inside the kernels, each from an environment variable set to 1; they are
 * part of the options line, hence of the kernel cache key. SLUICE_NVRTC_LINEINFO: -lineinfo,
 * so compute-sanitizer and Nsight name lines of the generated source. SLUICE_NVRTC_TRACE:
 * -DSL_TRACE, the tile loops' step clocks (kernels/sl_trace.cuh), printed by the kernels. */
static const struct {
    const char *env, *option;
} sl_cuda_nvrtc_debug_options[] = {{"SLUICE_NVRTC_LINEINFO", "-lineinfo"},
                                   {"SLUICE_NVRTC_TRACE", "-DSL_TRACE"}};
#define SL_NVRTC_NDEBUG ((int)SL_ARRAY_LEN(sl_cuda_nvrtc_debug_options))

static bool debug_option_wanted(int i) {
    const char *env = getenv(sl_cuda_nvrtc_debug_options[i].env);
    return env && strcmp(env, "1") == 0;
}

char *sl_cuda_nvrtc_options_line(int arch, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "--gpu-architecture=sm_%d", arch);
    for (int i = 0; i < SL_NVRTC_NFIXED && n >= 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, " %s", sl_cuda_nvrtc_fixed_options[i]);
    for (int i = 0; i < SL_NVRTC_NDEBUG && n >= 0 && (size_t)n < cap; i++)
        if (debug_option_wanted(i))
            n += snprintf(buf + n, cap - (size_t)n, " %s", sl_cuda_nvrtc_debug_options[i].option);
    return buf;
}

uint64_t sl_cuda_nvrtc_headers_digest_of(const char *const *names, const char *const *texts,
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

uint64_t sl_cuda_nvrtc_headers_digest(void) {
    const char *names[64], *texts[64];
    size_t count = 0;
    for (size_t i = 0; i < sl_cuda_embedded_file_count && count < 64; i++, count++) {
        names[count] = sl_cuda_embedded_files[i].name;
        texts[count] = sl_cuda_embedded_files[i].text;
    }
    return sl_cuda_nvrtc_headers_digest_of(names, texts, count);
}

char *sl_cuda_nvrtc_version_text(char *buf, size_t cap) {
    int major = -1, minor = -1;
    if (!sl_cuda_nvrtc_available() || api.Version(&major, &minor) != NVRTC_SUCCESS) major = minor = -1;
    snprintf(buf, cap, "%d.%d", major, minor);
    return buf;
}

/* The program's log (NUL-terminated, from the context's allocator), or NULL. */
static char *program_log(sluice_context *ctx, nvrtcProgram prog) {
    size_t log_size = 0;
    if (api.GetProgramLogSize(prog, &log_size) != NVRTC_SUCCESS || log_size == 0) return NULL;
    char *log = sl_alloc(ctx, log_size + 1);
    if (log && api.GetProgramLog(prog, log) != NVRTC_SUCCESS) log[0] = '\0';
    if (log) log[log_size] = '\0';
    return log;
}

size_t sl_cuda_ptxas_spill_bytes(const char *log) {
    /* ptxas -v writes "N bytes spill stores, M bytes spill loads" under each function */
    size_t total = 0;
    static const char marker[] = " bytes spill stores";
    for (const char *at = log ? strstr(log, marker) : NULL; at; at = strstr(at + 1, marker)) {
        const char *digits = at;
        while (digits > log && digits[-1] >= '0' && digits[-1] <= '9') digits--;
        if (digits < at) total += strtoull(digits, NULL, 10);
    }
    return total;
}

int sl_cuda_ptxas_registers(const char *log) {
    int most = 0;
    static const char marker[] = "Used ";
    for (const char *at = log ? strstr(log, marker) : NULL; at; at = strstr(at + 1, marker)) {
        char *end = NULL;
        const long n = strtol(at + sizeof marker - 1, &end, 10);
        if (end && strncmp(end, " registers", 10) == 0 && n > most) most = (int)n;
    }
    return most;
}

sluice_status sl_cuda_nvrtc_compile(sluice_context *ctx, const char *source, const char *name, int arch,
                               void **cubin, size_t *size) {
    return sl_cuda_nvrtc_compile_bounded(ctx, source, name, arch, 0, cubin, size, NULL);
}

sluice_status sl_cuda_nvrtc_compile_fitted(sluice_context *ctx, const char *source, const char *name,
                                           int arch, int min_blocks, int spill_bytes, void **cubin,
                                           size_t *size, int *bound, sl_ptxas_usage *usage) {
    if (bound) *bound = min_blocks;
    if (min_blocks <= 1) return sl_cuda_nvrtc_compile_bounded(ctx, source, name, arch, 0, cubin, size, usage);
    for (int blocks = min_blocks;; blocks--) {
        sl_ptxas_usage taken;
        SL_TRY(sl_cuda_nvrtc_compile_bounded(ctx, source, name, arch, blocks, cubin, size, &taken));
        if (bound) *bound = blocks;
        if (usage) *usage = taken;
        if (taken.spill_bytes <= (size_t)(spill_bytes > 0 ? spill_bytes : 0) || blocks == 1) return SLUICE_OK;
        sl_free(ctx, *cubin);
        *cubin = NULL;
        *size = 0;
    }
}

sluice_status sl_cuda_nvrtc_compile_bounded(sluice_context *ctx, const char *source, const char *name,
                                            int arch, int min_blocks, void **cubin, size_t *size,
                                            sl_ptxas_usage *usage) {
    *cubin = NULL;
    *size = 0;
    if (usage) *usage = (sl_ptxas_usage){0, 0};
    SL_TRY(sl_cuda_nvrtc_load(ctx));
    const char *header_texts[64];
    const char *header_names[64];
    int nheaders = 0;
    for (size_t i = 0; i < sl_cuda_embedded_file_count && nheaders < 64; i++) {
        header_texts[nheaders] = sl_cuda_embedded_files[i].text;
        header_names[nheaders] = sl_cuda_embedded_files[i].name;
        nheaders++;
    }
    nvrtcProgram prog;
    nvrtcResult r = api.CreateProgram(&prog, source, name, nheaders, header_texts, header_names);
    if (r != NVRTC_SUCCESS)
        return sl_error(ctx, r == NVRTC_ERROR_OUT_OF_MEMORY ? SLUICE_ERR_NO_MEMORY : SLUICE_ERR_COMPILE,
                        "NVRTC could not create a program for kernel %s: %s", name,
                        api.GetErrorString(r));
    char arch_opt[48];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    char bound_opt[48];
    snprintf(bound_opt, sizeof bound_opt, "-DMIN_BLOCKS=%d", min_blocks);
    const char *options[3 + SL_NVRTC_NFIXED + SL_NVRTC_NDEBUG];
    int noptions = 0;
    options[noptions++] = arch_opt;
    for (int i = 0; i < SL_NVRTC_NFIXED; i++) options[noptions++] = sl_cuda_nvrtc_fixed_options[i];
    for (int i = 0; i < SL_NVRTC_NDEBUG; i++)
        if (debug_option_wanted(i)) options[noptions++] = sl_cuda_nvrtc_debug_options[i].option;
    if (min_blocks > 0) options[noptions++] = bound_opt;
    if (usage) options[noptions++] = "--ptxas-options=-v";
    r = api.CompileProgram(prog, noptions, options);
    if (r != NVRTC_SUCCESS) {
        char *log = program_log(ctx, prog);
        /* Keep the message bounded: the first lines of the log name the problem. */
        if (log && strlen(log) > 4000) strcpy(log + 3990, " …(cut)");
        sluice_status st = sl_error(ctx, SLUICE_ERR_COMPILE,
                                    "NVRTC failed to compile generated kernel %s for sm_%d (%s); "
                                    "this is a bug in sluice's code generator, please report it "
                                    "with the pipeline file. Compiler log:\n%s",
                                    name, arch, api.GetErrorString(r), log ? log : "(no log)");
        sl_free(ctx, log);
        api.DestroyProgram(&prog);
        return st;
    }
    size_t n = 0;
    r = api.GetCUBINSize(prog, &n);
    void *bin = r == NVRTC_SUCCESS && n > 0 ? sl_alloc(ctx, n) : NULL;
    if (!bin || api.GetCUBIN(prog, bin) != NVRTC_SUCCESS) {
        sl_free(ctx, bin);
        api.DestroyProgram(&prog);
        if (r == NVRTC_SUCCESS && n > 0 && !bin)
            return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "no memory for a %zu-byte cubin", n);
        return sl_error(ctx, SLUICE_ERR_COMPILE,
                        "NVRTC produced no cubin for kernel %s (sm_%d): %s", name, arch,
                        api.GetErrorString(r));
    }
    if (usage) {
        char *log = program_log(ctx, prog);
        usage->spill_bytes = sl_cuda_ptxas_spill_bytes(log);
        usage->registers = sl_cuda_ptxas_registers(log);
        sl_free(ctx, log);
    }
    api.DestroyProgram(&prog);
    *cubin = bin;
    *size = n;
    return SLUICE_OK;
}
