/* nccl_abi.h — the part of NCCL's binary interface (nccl.h of NCCL 2.x) that dist/nccl.c
 * uses, declared here rather than included: NCCL is loaded at run time and its header is
 * not needed to build. The values are nccl.h's: ncclResult_t's ncclSuccess, ncclDataType_t's
 * ncclUint8, NCCL_UNIQUE_ID_BYTES (prefixed SL_ here); the unique id is a 128-byte struct passed by value to
 * ncclCommInitRank; enums are int-sized in C; a communicator is an opaque pointer; the
 * stream argument is a cudaStream_t (a pointer). tests/mpi/nccl_abi_check.c compares them
 * with nccl.h at build time where the CUDA toolkit ships it. */
#ifndef SL_DIST_NCCL_ABI_H
#define SL_DIST_NCCL_ABI_H

#include <stddef.h>

enum { SL_NCCL_SUCCESS = 0, SL_NCCL_UNIQUE_ID_BYTES = 128, SL_NCCL_UINT8 = 1 };
typedef struct nccl_comm *nccl_comm_t;                                  /* ncclComm_t */
typedef struct { char internal[SL_NCCL_UNIQUE_ID_BYTES]; } nccl_unique_id; /* ncclUniqueId */

/* The signatures, as the library's symbols are called (names are NCCL's, prefix "nccl"). */
typedef int (*nccl_get_version_fn)(int *version);
typedef int (*nccl_get_unique_id_fn)(nccl_unique_id *id);
typedef int (*nccl_comm_init_rank_fn)(nccl_comm_t *comm, int nranks, nccl_unique_id id, int rank);
typedef int (*nccl_comm_fn)(nccl_comm_t comm); /* ncclCommDestroy, ncclCommAbort */
typedef int (*nccl_comm_get_async_error_fn)(nccl_comm_t comm, int *error);
typedef const char *(*nccl_get_error_string_fn)(int result);
typedef const char *(*nccl_get_last_error_fn)(nccl_comm_t comm);
typedef int (*nccl_group_fn)(void); /* ncclGroupStart, ncclGroupEnd */
typedef int (*nccl_send_fn)(const void *buf, size_t count, int type, int peer, nccl_comm_t comm,
                            void *stream);
typedef int (*nccl_recv_fn)(void *buf, size_t count, int type, int peer, nccl_comm_t comm,
                            void *stream);

#endif
