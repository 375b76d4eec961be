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
 * rank's batches are batches of the global stream, so they carry nothing between ranks. */
typedef struct dist_scan {
    int group;   /* plan group */
    int slot;    /* index among the group's scans (stage order): the carry's index */
    int stage;
    int phase;   /* global carry phase, from 1: base of its group + the plan's stage phase */
    bool carried;/* false for offsets / reset: batch scans (nothing crosses ranks) */
} dist_scan;

/* The pass schedule of a pipeline over ranks (dist/schedule.c), from its plan alone. */
typedef struct dist_schedule {
    int nscans;
    dist_scan *scans;      /* every scan stage of the fused groups, in stage order */
    int *group_scans;      /* per plan group: its scans (the carries sl_session_carry_get reads) */
    int phases;            /* global carry phases of the scans that cross ranks */
    int rows_level;        /* the pass (from 1) from which rows out are exact: the highest
                              compaction flag level + 1, at least 1 */
    int npasses;           /* max(phases, rows_level) passes, then the final one */
} dist_schedule;

/* Works out the schedule; SLUICE_ERR_NO_MEMORY. Free with sl_dist_schedule_free. */
sluice_status sl_dist_schedule(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                               dist_schedule *out);
void sl_dist_schedule_free(sluice_context *ctx, dist_schedule *sch);

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

#endif
