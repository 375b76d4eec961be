/* scan.h — the CPU backend's per-tile scan kernels: a scan's monoid run over the rows of a
 * tile (optionally restarting at segment heads), and the carry fix-up that turns a tile's
 * local prefix into the stream-wide one. Fast loops for every builtin operator × acc type;
 * declared operators and the rest go through sl_monoid_combine. */
#ifndef SL_CPU_SCAN_H
#define SL_CPU_SCAN_H

#include "ir.h"

/* Runs the monoid of `scan` over n rows. x[f]: the rows' values of state field f (typed as
 * scan->acc[f]); head: NULL, or head[i] != 0 restarts the state at the identity before row i;
 * state: the state before row 0 on entry, after row n-1 on return. Writes y[f][i] for every
 * field: the inclusive prefix (state after row i) or, for an exclusive scan, the state
 * before row i. y[f] may alias x[f]. */
void sl_cpu_scan_rows(const sl_scan *scan, int64_t n, const void *const *x, const uint8_t *head,
                      sl_value *state, void *const *y);

/* y[f][i] = (carry ⊕ y[i]).f for i < n, in place: a tile's local prefixes (computed from the
 * identity) become the prefixes of the whole stream. Left stays left. */
void sl_cpu_scan_apply_carry(const sl_scan *scan, int64_t n, const sl_value *carry,
                             void *const *y);

/* Combines two states (a ⊕ b) and rounds the result to the acc types, exactly as the fast
 * loops do; used for the carries between tiles. */
void sl_cpu_scan_combine(const sl_scan *scan, const sl_value *a, const sl_value *b, sl_value *out);

#endif
