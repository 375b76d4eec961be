/* carry.h — a local session seen from outside the executor: its scans' carried stream state,
 * read and seeded, and the exchange hook of its stream-wide sorts. This is what a distributed
 * session (dist/, include/sluice_mpi.h) needs so that one process's session can run one
 * rank's part of a stream spread over many; nothing in the core sets or calls these, and a
 * session whose hook is unset behaves exactly as before. */
#ifndef SL_CARRY_H
#define SL_CARRY_H

#include "runtime/session.h"

/* The scans of plan group gi whose carries sl_carry_get/set address: the group's
 * scan stages in stage order, then the values of a reduce ending it (0 for a sort group). */
int sl_carry_group_scans(const sluice_session *s, int gi);
/* Copies the carried state of each scan of plan group gi (after the rows pushed so far, at
 * flush included) into out[0 .. sl_carry_group_scans). SLUICE_ERR_BACKEND_UNAVAILABLE
 * (with a diagnostic) when the session's backend cannot hand out its carries. With pushes in
 * flight (CUDA) call it once they are complete (after a flush, or pulls until none is in
 * flight): the CUDA backend waits for the work issued so far, but a failure found later in
 * flight would reject pushes whose state it already read. The CUDA backend's device state
 * lacks two things the CPU keeps (core/cuda/backend.c, carry_get_impl): has_first of a scan
 * without a key is whether rows entered its group (a compaction before it may have kept
 * none), and a key-segmented scan seeded with a key reports that key as first_key (right
 * whenever headed is false). A reduce's records the same way (reduce_record_get there):
 * has_first is exactly whether rows reached it only when it was seeded without an open
 * segment and no flush has emitted one since (else as above), and `continues` is what was
 * seeded (the backend keeps it on the host and its flush then writes nothing). */
sluice_status sl_carry_get(sluice_session *s, int gi, sl_scan_carry *out);
/* Makes in[] the carried state of group gi's scans, as if the stream so far had ended in
 * it; `headed` and `has_first` are taken as given (false: nothing seen since). Call between
 * pushes (after sluice_session_reset, before the first push, for a rank's incoming state).
 * SLUICE_ERR_BACKEND_UNAVAILABLE as above. */
sluice_status sl_carry_set(sluice_session *s, int gi, const sl_scan_carry *in);
/* Sets (or with fn NULL clears) the session's stream-sort exchange (session.h). */
void sl_carry_set_sort_exchange(sluice_session *s, sl_sort_exchange_fn fn, void *arg);

#endif
