/* scan.h — the CPU backend's per-tile scan kernels: a scan's monoid run over the rows of a
 * tile (optionally restarting at segment heads), and the carry fix-up that turns a tile's
 * local prefix into the stream-wide one. Fast loops for every builtin operator × acc type;
 * declared operators and the rest go through sl_monoid_combine. */
#ifndef SL_CPU_SCAN_H
#define SL_CPU_SCAN_H

#include "ir/ir.h"

/* Runs the monoid of `scan` over n rows. x[f]: the rows' values of state field f (typed as
 * scan->acc[f]); head: NULL, or head[i] != 0 restarts the state at the identity before row i;
 * state: the state before row 0 on entry, after row n-1 on return. Writes y[f][i] for every
 * field: the inclusive prefix (state after row i) or, for an exclusive scan, the state
 * before row i. y[f] may alias x[f]. y NULL: no prefix is written, only the state, bit for
 * bit the one the same call with y would give (a reduce without segments needs no more). */
void sl_cpu_scan_rows(const sl_scan *scan, int64_t n, const void *const *x, const uint8_t *head,
                      sl_value *state, void *const *y);

/* y[f][i] = (carry ⊕ y[i]).f for i < n, in place: a tile's local prefixes (computed from the
 * identity) become the prefixes of the whole stream. Left stays left. */
void sl_cpu_scan_apply_carry(const sl_scan *scan, int64_t n, const sl_value *carry,
                             void *const *y);

/* Combines two states (a ⊕ b) and rounds the result to the acc types, exactly as the fast
 * loops do; used for the carries between tiles. */
void sl_cpu_scan_combine(const sl_scan *scan, const sl_value *a, const sl_value *b, sl_value *out);

/* ---- declared operators, vectorised ---------------------------------------------------------
 * A declared operator's combine is an expression per state field; run row by row it costs an
 * interpretation per row. These entry points evaluate it over arrays instead: a tile is cut
 * into SL_CPU_COMBINE_LANES lanes scanned side by side (one vector combine per step across
 * the lanes), then each lane is combined with the total of the lanes before it. */
#define SL_CPU_COMBINE_LANES 64

typedef struct sl_cpu_combine {
    sl_expr_program *prog[SL_MAX_FIELDS]; /* NULL when the operator is not vectorised */
    size_t scratch;                       /* the largest program scratch */
} sl_cpu_combine;

/* Per-worker buffers: three arrays of max_rows 8-byte elements per field, and the programs'
 * scratch (sl_cpu_combine.scratch bytes). */
typedef struct sl_cpu_combine_scratch {
    void *buf[3][SL_MAX_FIELDS];
    void *expr;
} sl_cpu_combine_scratch;

/* Compiles scan's declared combine for tiles of max_rows. Leaves c empty (the row-by-row path
 * is used) when an expression's type is not its field's. SLUICE_ERR_NO_MEMORY. */
sluice_status sl_cpu_combine_compile(sluice_context *ctx, const sl_scan *scan, int64_t max_rows,
                                     sl_cpu_combine *c);
void sl_cpu_combine_free(sluice_context *ctx, sl_cpu_combine *c);

/* sl_cpu_scan_rows and sl_cpu_scan_apply_carry with a compiled combine (n <= max_rows). */
void sl_cpu_scan_rows_declared(const sl_scan *scan, const sl_cpu_combine *c, const sl_value *params,
                               sl_cpu_combine_scratch *s, int64_t n, const void *const *x,
                               const uint8_t *head, sl_value *state, void *const *y);
void sl_cpu_scan_apply_carry_declared(const sl_scan *scan, const sl_cpu_combine *c,
                                      const sl_value *params, sl_cpu_combine_scratch *s, int64_t n,
                                      const sl_value *carry, void *const *y);

#endif
