/* nccl.c — which transport moves a distributed session's rows between ranks (the knob
 * SLUICE_MPI_TRANSPORT=auto|mpi|nccl), and the NCCL one: device buffers sent GPU to GPU.
 *
 * Why loaded at run time. NCCL is not in every distribution (not in Debian) and a library
 * that links it would not load where it is absent; so libnccl.so.2 (or SLUICE_NCCL_LIBRARY)
 * is dlopened when a session asks for it, and the few functions used here are declared with
 * NCCL's ABI in dist/nccl_abi.h (checked against nccl.h where the build finds it).
 *
 * When NCCL moves rows: the session runs on the CUDA backend, NCCL loads on every rank, and
 * every rank drives a GPU of its own (PCI bus ids exchanged over MPI: NCCL refuses two ranks
 * on one GPU, which is how two ranks share the one GPU of a test machine). Otherwise MPI moves
 * them through host memory — under `auto` silently (sluice_mpi_session_transport says why),
 * under `nccl` as an error on every rank. The decision is collective and the same on every
 * rank: each rank's verdict is agreed over MPI before any NCCL collective call is made, so no
 * rank waits in ncclCommInitRank for one that gave up.
 *
 * The data path (sl_dist_nccl_exchange): the rows a rank sends are packed in sorted order on
 * the host (the sample sort's order is worked out there, from key images), copied once to a
 * device staging buffer, and sent with one NCCL group of ncclSend/ncclRecv per peer straight
 * into the receiving session's device buffer; the receive side's host staging and copy to the
 * device are gone, and the wire is NVLink / GPUDirect where NCCL finds them. The receive
 * buffers come from the session's stream-ordered pool on the session's own stream, which this
 * file cannot name (a session opened by sluice_session_open does not hand it out), so NCCL runs
 * on a stream of its own after a device synchronisation, and the exchange returns only when
 * that stream is done: the local sort that follows on the session's stream sees the rows.
 * NOT RUN ON A GPU: no machine here has two GPUs, and two ranks on one GPU fall back to MPI. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "nccl_abi.h"

#if SLUICE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- the functions used, resolved from the library ---------------------------------- */

typedef struct nccl_api {
    void *lib;
    int version;
    nccl_get_version_fn get_version;
    nccl_get_unique_id_fn get_unique_id;
    nccl_comm_init_rank_fn comm_init_rank;
    nccl_comm_fn comm_destroy, comm_abort;
    nccl_comm_get_async_error_fn comm_get_async_error;
    nccl_get_error_string_fn get_error_string;
    nccl_get_last_error_fn get_last_error; /* NCCL >= 2.13; NULL before */
    nccl_group_fn group_start, group_end;
    nccl_send_fn send;
    nccl_recv_fn recv;
} nccl_api;

struct dist_nccl {
    nccl_api api;
    nccl_comm_t comm;
    int device;
    void *stream;        /* cudaStream_t: the exchanges' stream */
    void *staging;       /* device memory: the packed rows this rank sends */
    size_t staging_bytes;
};

/* The library's file: SLUICE_NCCL_LIBRARY when set (a NCCL outside the loader's path, e.g. a
 * Python wheel's), else the soname. */
static const char *nccl_library(void) {
    const char *env = getenv("SLUICE_NCCL_LIBRARY");
    return env && *env ? env : "libnccl.so.2";
}

/* Loads NCCL and every function used here; false with why[] said when it cannot. */
static bool nccl_load(nccl_api *a, char *why, size_t cap) {
    memset(a, 0, sizeof *a);
    const char *file = nccl_library();
    a->lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        const char *e = dlerror();
        snprintf(why, cap, "NCCL (%s) cannot be loaded: %s", file, e ? e : "dlopen failed");
        return false;
    }
    struct { const char *name; void **fn; bool optional; } syms[] = {
        {"ncclGetVersion", (void **)&a->get_version, false},
        {"ncclGetUniqueId", (void **)&a->get_unique_id, false},
        {"ncclCommInitRank", (void **)&a->comm_init_rank, false},
        {"ncclCommDestroy", (void **)&a->comm_destroy, false},
        {"ncclCommAbort", (void **)&a->comm_abort, false},
        {"ncclCommGetAsyncError", (void **)&a->comm_get_async_error, false},
        {"ncclGetErrorString", (void **)&a->get_error_string, false},
        {"ncclGetLastError", (void **)&a->get_last_error, true},
        {"ncclGroupStart", (void **)&a->group_start, false},
        {"ncclGroupEnd", (void **)&a->group_end, false},
        {"ncclSend", (void **)&a->send, false},
        {"ncclRecv", (void **)&a->recv, false},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(a->lib, syms[i].name);
        if (!*syms[i].fn && !syms[i].optional) {
            snprintf(why, cap, "NCCL (%s) lacks %s (ncclSend/ncclRecv need NCCL 2.7 or later)",
                     file, syms[i].name);
            dlclose(a->lib);
            a->lib = NULL;
            return false;
        }
    }
    if (a->get_version(&a->version) != SL_NCCL_SUCCESS) a->version = 0;
    return true;
}

static void nccl_unload(nccl_api *a) {
    if (a->lib) dlclose(a->lib);
    a->lib = NULL;
}

/* "2.21.5" from NCCL_VERSION_CODE (major*10000 + minor*100 + patch from 2.9; *1000 before). */
static void version_text(int v, char *buf, size_t cap) {
    if (v >= 20900) snprintf(buf, cap, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else if (v > 0) snprintf(buf, cap, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
    else snprintf(buf, cap, "(version unknown)");
}

/* NCCL's words for a failure: its error string, and its last error's text where it has one. */
static void nccl_error_text(const nccl_api *a, nccl_comm_t comm, int r, char *buf, size_t cap) {
    const char *s = a->get_error_string ? a->get_error_string(r) : NULL;
    const char *last = a->get_last_error ? a->get_last_error(comm) : NULL;
    snprintf(buf, cap, "%s (NCCL result %d)%s%s", s ? s : "unknown error", r,
             last && *last ? ": " : "", last && *last ? last : "");
}

/* ---- the choice ------------------------------------------------------------------------ */

typedef enum { REQ_AUTO, REQ_MPI, REQ_NCCL } transport_request;

static sluice_status read_request(sluice_context *ctx, transport_request *out) {
    const char *v = getenv("SLUICE_MPI_TRANSPORT");
    *out = REQ_AUTO;
    if (!v || !*v || strcmp(v, "auto") == 0) return SLUICE_OK;
    if (strcmp(v, "mpi") == 0) *out = REQ_MPI;
    else if (strcmp(v, "nccl") == 0) *out = REQ_NCCL;
    else
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "SLUICE_MPI_TRANSPORT='%.60s' is not one of auto, mpi, nccl", v);
    return SLUICE_OK;
}

/* Whether every rank can go on (ok), agreed; when one cannot, the first such rank's reason
 * (why[]) is every rank's, prefixed by its rank. Returns -1 when MPI itself fails. */
static int agree_verdict(sluice_mpi_session *ds, bool ok, char *why, size_t cap) {
    int mine = ok ? ds->size : ds->rank, first = ds->size;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, ds->comm) != MPI_SUCCESS) return -1;
    if (first == ds->size) return 1;
    char text[400] = {0};
    if (ds->rank == first) snprintf(text, sizeof text, "rank %d: %s", first, why);
    if (MPI_Bcast(text, (int)sizeof text, MPI_CHAR, first, ds->comm) != MPI_SUCCESS) return -1;
    snprintf(why, cap, "%s", text);
    return 0;
}

#if SLUICE_WITH_CUDA
/* The GPU this rank's session drives (the current device at open, as the CUDA backend took
 * it) and its PCI bus id; false with why[] said. */
static bool rank_gpu(int *device, char *bus, size_t bus_cap, char *why, size_t cap) {
    cudaError_t e = cudaGetDevice(device);
    if (e == cudaSuccess) e = cudaDeviceGetPCIBusId(bus, (int)bus_cap, *device);
    if (e != cudaSuccess) {
        snprintf(why, cap, "cannot read this rank's GPU's PCI bus id: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return false;
    }
    return true;
}
#endif

bool sl_dist_moves_rows(const sluice_pipeline *p, const sl_plan *plan) {
    for (int gi = 0; gi < plan->ngroups; gi++)
        if (plan->groups[gi].kind == SL_GROUP_SORT && !p->stages[plan->groups[gi].first].sort.per_batch)
            return true;
    return false;
}

/* Sets ds->transport and, for NCCL, ds->nccl, from the request and what every rank can do.
 * Collective. Errors: as sluice_mpi_session_open documents for the knob. */
sluice_status sl_dist_transport_open(sluice_mpi_session *ds) {
    sluice_context *ctx = ds->ctx;
    transport_request req = REQ_AUTO;
    SL_TRY(sl_dist_agree(ds, read_request(ctx, &req)));
    int lo = (int)req, hi = (int)req, r = (int)req;
    if (MPI_Allreduce(&r, &lo, 1, MPI_INT, MPI_MIN, ds->comm) != MPI_SUCCESS ||
        MPI_Allreduce(&r, &hi, 1, MPI_INT, MPI_MAX, ds->comm) != MPI_SUCCESS)
        return sl_error(ctx, SLUICE_ERR_IO, "MPI_Allreduce failed (choosing the row transport)");
    if (lo != hi)
        return sl_error(ctx, SLUICE_ERR_MISUSE,
                        "the ranks' SLUICE_MPI_TRANSPORT differ (every rank needs the same "
                        "value: pass it to all, e.g. mpirun -x SLUICE_MPI_TRANSPORT)");
    if (!sl_dist_moves_rows(ds->pipeline, ds->plan)) { /* no NCCL communicator for nothing */
        snprintf(ds->transport, sizeof ds->transport,
                 "none: no stage moves rows between ranks (no stream-wide sort)");
        return SLUICE_OK;
    }
    if (req == REQ_MPI) {
        snprintf(ds->transport, sizeof ds->transport, "mpi: SLUICE_MPI_TRANSPORT=mpi");
        return SLUICE_OK;
    }

    char why[300] = "";
    dist_nccl *nc = sl_calloc(ctx, 1, sizeof *nc);
    if (!nc) return sl_dist_agree(ds, sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory"));
    /* Whether this rank can: NCCL loads, the session is on the CUDA backend, its GPU known. */
    bool ok = nccl_load(&nc->api, why, sizeof why);
    char bus[32] = "";
    if (ok && ds->local->backend->id != SLUICE_BACKEND_CUDA) {
        snprintf(why, sizeof why, "the session runs on the %s backend (NCCL moves device "
                 "memory only)", ds->local->backend->name);
        ok = false;
    }
#if SLUICE_WITH_CUDA
    if (ok) ok = rank_gpu(&nc->device, bus, sizeof bus, why, sizeof why);
#else
    if (ok) {
        snprintf(why, sizeof why, "this build has no CUDA backend");
        ok = false;
    }
#endif
    int v = agree_verdict(ds, ok, why, sizeof why);
    /* Every rank has a GPU: they must be different ones. */
    char *buses = NULL;
    if (v == 1) {
        buses = sl_calloc(ctx, (size_t)ds->size, sizeof bus);
        bool mem = buses != NULL;
        if (MPI_Allreduce(MPI_IN_PLACE, &mem, 1, MPI_C_BOOL, MPI_LAND, ds->comm) != MPI_SUCCESS)
            v = -1;
        else if (!mem) {
            snprintf(why, sizeof why, "out of memory comparing the ranks' GPUs");
            v = 0;
        } else if (MPI_Allgather(bus, (int)sizeof bus, MPI_CHAR, buses, (int)sizeof bus, MPI_CHAR,
                                 ds->comm) != MPI_SUCCESS) {
            v = -1;
        }
        for (int a = 0; v == 1 && a < ds->size; a++)
            for (int b = a + 1; v == 1 && b < ds->size; b++)
                if (strncmp(buses + (size_t)a * sizeof bus, buses + (size_t)b * sizeof bus,
                            sizeof bus) == 0) {
                    snprintf(why, sizeof why, "ranks %d and %d share the GPU at PCI %.31s (NCCL "
                             "needs a GPU per rank)", a, b, buses + (size_t)a * sizeof bus);
                    v = 0;
                }
        sl_free(ctx, buses);
    }
    /* The communicator: rank 0's unique id to every rank, then ncclCommInitRank everywhere. */
    if (v == 1) {
        struct { int result; nccl_unique_id id; } uid;
        memset(&uid, 0, sizeof uid);
        if (ds->rank == 0) uid.result = nc->api.get_unique_id(&uid.id);
        if (MPI_Bcast(&uid, (int)sizeof uid, MPI_BYTE, 0, ds->comm) != MPI_SUCCESS) v = -1;
        else if (uid.result != SL_NCCL_SUCCESS) {
            char e[200];
            nccl_error_text(&nc->api, NULL, uid.result, e, sizeof e);
            snprintf(why, sizeof why, "rank 0: ncclGetUniqueId failed: %s", e);
            v = 0;
        } else {
            int res = nc->api.comm_init_rank(&nc->comm, ds->size, uid.id, ds->rank);
            if (res != SL_NCCL_SUCCESS) {
                char e[200];
                nccl_error_text(&nc->api, nc->comm, res, e, sizeof e);
                snprintf(why, sizeof why, "ncclCommInitRank failed: %s", e);
                if (nc->comm) nc->api.comm_abort(nc->comm);
                nc->comm = NULL;
            }
#if SLUICE_WITH_CUDA
            cudaStream_t stream = NULL;
            if (res == SL_NCCL_SUCCESS) {
                cudaError_t ce = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
                if (ce != cudaSuccess) {
                    snprintf(why, sizeof why, "cannot create NCCL's stream: %s",
                             cudaGetErrorString(ce));
                    cudaGetLastError();
                    res = -1;
                } else {
                    nc->stream = stream;
                }
            }
#endif
            v = agree_verdict(ds, res == SL_NCCL_SUCCESS, why, sizeof why);
        }
    }
    if (v == 1) {
        char ver[32];
        version_text(nc->api.version, ver, sizeof ver);
        snprintf(ds->transport, sizeof ds->transport,
                 "nccl %s: the CUDA backend on every rank, each rank on a GPU of its own", ver);
        ds->nccl = nc;
        return SLUICE_OK;
    }
    sl_dist_transport_free(ctx, nc, true); /* a rank whose init failed never joins */
    if (v < 0) return sl_error(ctx, SLUICE_ERR_IO, "MPI failed while choosing the row transport");
    if (req == REQ_NCCL)
        return sl_error(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                        "SLUICE_MPI_TRANSPORT=nccl, but NCCL cannot move this session's rows "
                        "(%s); use auto or mpi", why);
    snprintf(ds->transport, sizeof ds->transport, "mpi: not NCCL, since %s", why);
    return SLUICE_OK;
}

void sl_dist_transport_free(sluice_context *ctx, dist_nccl *nc, bool abort_comm) {
    if (!nc) return;
#if SLUICE_WITH_CUDA
    int prev = -1;
    if (nc->stream || nc->staging) {
        cudaGetDevice(&prev);
        cudaSetDevice(nc->device);
    }
    if (nc->stream && !abort_comm) cudaStreamSynchronize((cudaStream_t)nc->stream);
#endif
    /* After a failure peers may be gone or stuck: abort rather than wait in destroy. */
    if (nc->comm) (abort_comm ? nc->api.comm_abort : nc->api.comm_destroy)(nc->comm);
#if SLUICE_WITH_CUDA
    if (nc->staging) cudaFree(nc->staging);
    if (nc->stream) cudaStreamDestroy((cudaStream_t)nc->stream);
    if (prev >= 0 && prev != nc->device) cudaSetDevice(prev);
    cudaGetLastError();
#endif
    nccl_unload(&nc->api);
    sl_free(ctx, nc);
}

/* ---- the data path ----------------------------------------------------------------------- */

#if SLUICE_WITH_CUDA
static sluice_status cuda_fail(sluice_context *ctx, cudaError_t e, const char *what) {
    cudaGetLastError();
    return sl_error(ctx, SLUICE_ERR_CUDA, "%s for NCCL's rows exchange failed: %s", what,
                    cudaGetErrorString(e));
}

static sluice_status exchange_on_device(sluice_mpi_session *ds, dist_nccl *nc, const void *send,
                                        const int64_t *send_counts, const int64_t *recv_counts,
                                        size_t w, void *recv) {
    sluice_context *ctx = ds->ctx;
    size_t bytes = 0;
    for (int r = 0; r < ds->size; r++) bytes += (size_t)send_counts[r] * w;
    cudaError_t e;
    if (bytes > nc->staging_bytes) {
        if (nc->staging) cudaFree(nc->staging);
        nc->staging = NULL;
        nc->staging_bytes = 0;
        if ((e = cudaMalloc(&nc->staging, bytes)) != cudaSuccess)
            return cuda_fail(ctx, e, "device memory for the rows sent");
        nc->staging_bytes = bytes;
    }
    cudaStream_t stream = (cudaStream_t)nc->stream;
    /* The receive buffers were allocated on the session's stream (stream-ordered pool). */
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
        return cuda_fail(ctx, e, "waiting for the session's stream");
    if (bytes > 0 && (e = cudaMemcpyAsync(nc->staging, send, bytes, cudaMemcpyHostToDevice,
                                          stream)) != cudaSuccess)
        return cuda_fail(ctx, e, "copying the rows sent to the device");
    const nccl_api *a = &nc->api;
    int res = a->group_start();
    size_t sat = 0, rat = 0;
    for (int r = 0; res == SL_NCCL_SUCCESS && r < ds->size; r++) {
        size_t sb = (size_t)send_counts[r] * w, rb = (size_t)recv_counts[r] * w;
        if (sb > 0) res = a->send((const char *)nc->staging + sat, sb, SL_NCCL_UINT8, r, nc->comm, stream);
        if (res == SL_NCCL_SUCCESS && rb > 0)
            res = a->recv((char *)recv + rat, rb, SL_NCCL_UINT8, r, nc->comm, stream);
        sat += sb;
        rat += rb;
    }
    int end = a->group_end(); /* always: a group left open would swallow later calls */
    if (res == SL_NCCL_SUCCESS) res = end;
    if (res == SL_NCCL_SUCCESS && (e = cudaStreamSynchronize(stream)) != cudaSuccess)
        return cuda_fail(ctx, e, "waiting for the NCCL transfers");
    int async = SL_NCCL_SUCCESS;
    if (res == SL_NCCL_SUCCESS && a->comm_get_async_error(nc->comm, &async) == SL_NCCL_SUCCESS)
        res = async;
    if (res != SL_NCCL_SUCCESS) {
        char text[300];
        nccl_error_text(a, nc->comm, res, text, sizeof text);
        return sl_error(ctx, SLUICE_ERR_CUDA,
                        "NCCL failed moving the rows of a distributed sort: %s", text);
    }
    return SLUICE_OK;
}
#endif

sluice_status sl_dist_nccl_exchange(sluice_mpi_session *ds, const void *send,
                                    const int64_t *send_counts, const int64_t *recv_counts,
                                    size_t w, void *recv) {
    dist_nccl *nc = ds->nccl;
    if (!nc)
        return sl_error(ds->ctx, SLUICE_ERR_MISUSE, "internal: an NCCL exchange without NCCL");
#if SLUICE_WITH_CUDA
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != nc->device) cudaSetDevice(nc->device);
    sluice_status st = exchange_on_device(ds, nc, send, send_counts, recv_counts, w, recv);
    if (prev >= 0 && prev != nc->device) cudaSetDevice(prev);
    return st;
#else
    (void)send;
    (void)send_counts;
    (void)recv_counts;
    (void)w;
    (void)recv;
    return sl_error(ds->ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                    "internal: NCCL in a build without CUDA");
#endif
}

/* What explain says of the transport: the knob and, on this machine, whether NCCL loads. */
void sl_dist_transport_explain(sl_strbuf *sb) {
    const char *v = getenv("SLUICE_MPI_TRANSPORT");
    if (!v || !*v) v = "auto";
    char why[300] = "";
    nccl_api a;
    bool loads = nccl_load(&a, why, sizeof why);
    char ver[32] = "";
    if (loads) version_text(a.version, ver, sizeof ver);
    nccl_unload(&a);
    sl_strbuf_printf(sb, "rows a stream-wide sort moves between ranks: SLUICE_MPI_TRANSPORT=%s: ",
                     v);
    if (strcmp(v, "mpi") == 0)
        sl_strbuf_append(sb, "MPI, through host memory\n");
    else if (strcmp(v, "auto") != 0 && strcmp(v, "nccl") != 0)
        sl_strbuf_append(sb, "not a valid value (auto, mpi or nccl): a session refuses it\n");
    else if (loads)
        sl_strbuf_printf(sb, "NCCL %s (it loads here) device to device where the session runs "
                         "on CUDA and every rank has a GPU of its own, else %s\n", ver,
                         strcmp(v, "nccl") == 0 ? "an error on every rank"
                                                : "MPI through host memory");
    else
        sl_strbuf_printf(sb, "MPI through host memory here (%s)%s\n", why,
                         strcmp(v, "nccl") == 0 ? "; a session asking for nccl fails" : "");
}
