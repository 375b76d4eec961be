/* dist.h — what the files of the distributed component (dist/, include/sluice_mpi.h) share:
 * the session's state, the pass schedule worked out from the plan, the collective error
 * agreement, and the stream-sort exchange (dist/sort.c). Internal: built into libsluice_mpi
 * only, on top of the core's internal headers and its hooks in core/runtime/carry.h. */
#ifndef SL_DIST_H
#define SL_DIST_H

#include <mpi.h>

#include "sluice_mpi.h"
#include "common/context.h"
#include "runtime/carry.h"
#include "runtime/session.h"

/* One scan whose state crosses ranks: a `reset: never` scan whose segments (if any) are head
 * flags or keys. Offsets segments and `reset: batch` scans restart at every batch, and a
 * rank's batches are batches of the global stream, so they carry nothing between ranks.
 * A reduce's values are scans too (inclusive, segmented as the reduce is, restarting per
 * batch under `per: batch`), one entry each. */
typedef struct dist_scan {
    int group;   /* plan group */
    int slot;    /* index among the group's scans (stage order): the carry's index */
    int stage;
    int value;   /* -1 for a scan stage; else the index among the reduce's values */
    int phase;   /* global carry phase, from 1: base of its group + the plan's stage phase */
    bool carried;/* false for offsets / reset: batch scans (nothing crosses ranks) */
} dist_scan;

/* A reduce (ending plan group `group`): beside its values' states, which segment a rank
 * closes at flush and the global index of the segments it emits.
 *  - A carried reduce (not `per: batch`, not offsets) learns at the end of pass `phase`,
 *    from the gathered states of its first value, which ranks have rows reaching it: its
 *    incoming segment is open when an earlier rank had some, and only the last rank with
 *    rows (for a whole-stream reduce, the last rank) emits the open segment at flush. So
 *    the segments a rank emits are exact from pass phase + 1 on.
 *  - Its index: at the end of pass `count_pass` (phase + 1 when carried, else phase) the
 *    ranks gather the segments each emitted; a rank's first index is the sum of those
 *    before it. Everything the reduce writes is exact from pass count_pass + 1 on, which is
 *    the base the groups after it start from. */
typedef struct dist_reduce {
    int group, slot, stage; /* slot: its first value's carry index */
    int phase, count_pass;
    bool carried;
} dist_reduce;

/* The pass schedule of a pipeline over ranks (dist/schedule.c), from its plan alone. */
typedef struct dist_schedule {
    int nscans;
    dist_scan *scans;      /* every scan stage and reduce value of the fused groups, in
                              stage order */
    int nreduces;
    dist_reduce *reduces;  /* every reduce, in stage order */
    int *group_scans;      /* per plan group: its scans (the carries sl_carry_get reads) */
    int phases;            /* global carry phases of the scans that cross ranks */
    int rows_level;        /* the pass (from 1) from which rows out are exact: the highest
                              compaction flag level + 1, at least 1 */
    int npasses;           /* max(phases, rows_level) passes, then the final one */
} dist_schedule;

/* Works out the schedule; SLUICE_ERR_NO_MEMORY. Free with sl_dist_schedule_free. */
sluice_status sl_dist_schedule(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                               dist_schedule *out);
void sl_dist_schedule_free(sluice_context *ctx, dist_schedule *sch);
/* The scan a schedule entry stands for: a scan stage's, or the reduce value's. */
const sl_scan *sl_dist_scan_of(const sluice_pipeline *p, const dist_scan *d);

/* The NCCL transport's state (dist/nccl.c). */
typedef struct dist_nccl dist_nccl;

struct sluice_mpi_session {
    MPI_Comm comm;
    int rank, size;
    sluice_context *ctx;
    sluice_pipeline *pipeline;
    sluice_session *local;
    const sl_plan *plan;

    dist_schedule sch;
    sl_scan_carry **seed;  /* per plan group: the incoming state of each of its scans */

    int pass;              /* 0 before the first; 1..npasses */
    bool in_pass;
    bool failed;           /* a local call failed: the next collective call fails everywhere */
    sluice_status fail_status;  /* and how: its status and first diagnostic, kept from the */
    char fail_message[480];     /* failing call (later calls clear the context's) */
    bool rows_known;
    int64_t rows_out;      /* rows out of the local session in this pass */
    int64_t out_first, out_rows, out_total;
    dist_nccl *nccl;       /* NULL: rows move over MPI through host memory */
    char transport[400];   /* what moves rows and why (sluice_mpi_session_transport) */
};

/* The collective agreement: every rank says whether its side failed (local status st); when
 * any rank did, every rank returns the first failing rank's status with a diagnostic naming
 * that rank and carrying its message. Returns SLUICE_OK when none failed. */
sluice_status sl_dist_agree(sluice_mpi_session *ds, sluice_status st);
/* Marks the session failed on this rank by st (not SLUICE_OK), keeping the context's first
 * diagnostic for the next agreement. Returns st. */
sluice_status sl_dist_note_failure(sluice_mpi_session *ds, sluice_status st);

/* The stream-sort exchange hook (core/runtime/carry.h, sl_sort_exchange_fn): a distributed
 * sample sort's partition and all-to-all of the rows reaching stream-wide sort group gi. */
sluice_status sl_dist_sort_exchange(void *arg, sluice_session *s, int gi, void *const *cols,
                                    int64_t rows, void **out_cols, int64_t *out_rows);

/* Sends or receives `bytes` bytes as messages of at most 1 GiB (MPI counts are int). */
int sl_dist_isend(const void *buf, size_t bytes, int peer, int tag, MPI_Comm comm,
                  MPI_Request **reqs, int *nreqs, int *cap);
int sl_dist_irecv(void *buf, size_t bytes, int peer, int tag, MPI_Comm comm,
                  MPI_Request **reqs, int *nreqs, int *cap);

/* The row transport (dist/nccl.c). sl_dist_transport_open: collective, after the local
 * session is open; reads SLUICE_MPI_TRANSPORT, sets ds->transport and, where NCCL moves rows,
 * ds->nccl (its communicator made). Errors, on every rank: SLUICE_ERR_INVALID_ARGUMENT (a bad
 * value), SLUICE_ERR_MISUSE (the ranks' values differ), SLUICE_ERR_BACKEND_UNAVAILABLE (nccl
 * asked for and not usable). sl_dist_transport_free: local, NULL harmless; abort_comm after a
 * failure (ncclCommAbort: peers may never finish), else ncclCommDestroy. */
sluice_status sl_dist_transport_open(sluice_mpi_session *ds);
void sl_dist_transport_free(sluice_context *ctx, dist_nccl *nc, bool abort_comm);
/* One column of a sort's all-to-all over NCCL: send[] (host, this rank's rows packed in
 * destination order, send_counts[r] rows of w bytes for rank r) to the ranks, their rows into
 * recv (device memory, source-rank order). Complete when it returns. Local status (the caller
 * agrees). */
sluice_status sl_dist_nccl_exchange(sluice_mpi_session *ds, const void *send,
                                    const int64_t *send_counts, const int64_t *recv_counts,
                                    size_t w, void *recv);
/* Whether a distributed run of p moves rows between ranks (a stream-wide sort); only then is
 * a transport chosen (else ds->transport says "none"). */
bool sl_dist_moves_rows(const sluice_pipeline *p, const sl_plan *plan);
/* explain's line on the transport: the knob's value and whether NCCL loads here. */
void sl_dist_transport_explain(sl_strbuf *sb);

#endif
