/* nccl_abi_check.c — dist/nccl_abi.h, sluice's own declarations of the NCCL functions it
 * loads at run time, against the real thing: at compile time against nccl.h (the values of
 * the enums used, the sizes of the unique id, the enums and the handles), and at run time,
 * where libnccl.so.2 loads, by calling through those declarations the two functions that need
 * no GPU (ncclGetVersion must give the header's NCCL_VERSION_CODE when the library is the
 * header's; ncclGetErrorString a text for every result). Built only where CMake finds nccl.h;
 * exits 77 (skipped) where the library does not load. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <nccl.h>

#include "nccl_abi.h"

_Static_assert((int)SL_NCCL_SUCCESS == (int)ncclSuccess, "ncclSuccess");
_Static_assert((int)SL_NCCL_UINT8 == (int)ncclUint8, "ncclUint8");
_Static_assert(SL_NCCL_UNIQUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "NCCL_UNIQUE_ID_BYTES");
_Static_assert(sizeof(nccl_unique_id) == sizeof(ncclUniqueId), "ncclUniqueId's size");
_Static_assert(_Alignof(nccl_unique_id) == _Alignof(ncclUniqueId), "ncclUniqueId's alignment");
_Static_assert(sizeof(ncclResult_t) == sizeof(int), "ncclResult_t is int-sized");
_Static_assert(sizeof(ncclDataType_t) == sizeof(int), "ncclDataType_t is int-sized");
_Static_assert(sizeof(ncclComm_t) == sizeof(nccl_comm_t), "ncclComm_t is a pointer");
_Static_assert(sizeof(cudaStream_t) == sizeof(void *), "cudaStream_t is a pointer");

int main(void) {
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("libnccl.so.2 does not load here (%s): run-time checks skipped\n", dlerror());
        return 77;
    }
    int failures = 0;
    nccl_get_version_fn get_version = (nccl_get_version_fn)dlsym(lib, "ncclGetVersion");
    nccl_get_error_string_fn error_string =
        (nccl_get_error_string_fn)dlsym(lib, "ncclGetErrorString");
    int version = 0;
    if (!get_version || !error_string) {
        printf("FAIL: libnccl.so.2 lacks ncclGetVersion or ncclGetErrorString\n");
        failures++;
    } else if (get_version(&version) != SL_NCCL_SUCCESS || version < 20700) {
        printf("FAIL: ncclGetVersion gave %d\n", version);
        failures++;
    } else {
        Dl_info info;
        const char *path = dladdr((void *)get_version, &info) && info.dli_fname ? info.dli_fname : "?";
        printf("libnccl.so.2 (%s): version %d, header %d\n", path, version, NCCL_VERSION_CODE);
        for (int r = 0; r < ncclNumResults; r++) {
            const char *text = error_string(r);
            if (!text || !*text) {
                printf("FAIL: ncclGetErrorString(%d) gave no text\n", r);
                failures++;
            }
        }
        if (strcmp(error_string(SL_NCCL_SUCCESS), error_string((int)ncclInvalidArgument)) == 0) {
            printf("FAIL: ncclGetErrorString says the same of success and an error\n");
            failures++;
        }
    }
    dlclose(lib);
    return failures ? 1 : 0;
}
