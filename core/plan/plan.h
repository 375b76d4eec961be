/* plan.h — the physical plan: which stages run together in one pass over memory, and every
 * fact about a group that a backend and the shared executor (core/runtime/exec.h) need, computed
 * once here so no backend works it out again.
 *
 * Groups. Every run of map/flag/compact/scan/segmented-scan stages between sorts (or the
 * ends) is one fused group, executed as one pass (one kernel on the GPU, one tiled sweep on
 * the CPU); each sort is a group of its own whose passes are its radix passes. A reduce
 * (one row per segment) ends the fused group it is in: it is fused with the stages before
 * it, and the stages after it run over its rows in a new group.
 *
 * Liveness (one analysis, backwards and precise). need_after[s][c] is true when column c is
 * read by a stage after s or is an output. A map's entries are walked last first, so an
 * entry only a later entry of the same map reads is computed, and an entry nothing needs is
 * not (map_entry_live). A backend computes exactly the live entries and moves exactly the
 * columns a group lists; anything else is a bug the plan tests catch.
 *
 * Carry dependence (one analysis). level[c] is 0 when column c's value within its group is
 * known without any carried (stream-wide) state, and k when it is known only after the k-th
 * chained carry phase of the group: a scan's outputs are one phase after what the scan reads
 * (its `of`, its segment column, and the flags of the compactions before it); a map entry is
 * at the level of what it reads. The CPU waits for the previous tile's carry before a stage
 * whose reads_level is > 0; the GPU runs `phases` chained look-backs. */
#ifndef SL_PLAN_H
#define SL_PLAN_H

#include "ir/ir.h"

typedef enum sl_group_kind {
    SL_GROUP_FUSED, /* stages [first, last) are elementwise / scan / compact */
    SL_GROUP_SORT   /* stage first is a sort; last = first + 1 */
} sl_group_kind;

/* Where the rows reaching a group may be cut into pieces without changing any result of
 * that group or the groups after it. */
typedef enum sl_cut {
    SL_CUT_ANYWHERE, /* no boundary means anything from here on */
    SL_CUT_SEGMENTS, /* only between segments of the batch's offsets input (group 0 only) */
    SL_CUT_NEVER     /* a `reset: batch` scan or a `per: batch` sort follows: the batch is
                        one unit */
} sl_cut;

typedef struct sl_group {
    sl_group_kind kind;
    int first, last;
    int passes;      /* full passes over memory this group is predicted to make */
    /* Columns (pipeline ids, increasing). An offsets input is never in these lists. */
    int nin, *in;    /* read by the group from what exists at its start (a sort: the
                        columns it takes, keys included) */
    int nout, *out;  /* written by the group: needed after it and existing at its end, and
                        made by it or moved by it (a compaction or a sort moves rows) */
    int npass, *pass;/* needed after it, unchanged by it and not moved (no compaction): a
                        backend may keep using the buffer it already has */
    bool compacts;   /* a fused group with a compaction: rows out <= rows in */
    bool reads_offsets; /* a fused group with a scan segmented by the offsets input */
    bool reduces;    /* a fused group ending in a reduce: one row per segment; `out` is every
                        column live after it (the key moved, index and values made) and
                        sl_plan_rows_out bounds its rows out */
    bool emits_at_flush; /* holds rows back until the end of the stream (a reduce's open
                            segment): the executor runs it once more at flush */
    int phases;      /* chained carry phases (0: nothing carried but the row count) */
    sl_cut cut;      /* how rows reaching this group may be cut (see sl_cut) */
} sl_group;

typedef struct sl_plan {
    int ngroups;
    sl_group *groups;
    int passes;           /* sum over groups */
    int ncolumns, nstages;
    int offsets_input;    /* the offsets input's column id, -1 when none */
    bool **need_after;    /* [stage][column]: needed after the stage */
    bool **map_entry_live;/* [stage][entry] for map stages (NULL for others): computed */
    int *level;           /* [column]: carry level within the group that makes it */
    int *reads_level;     /* [stage]: the highest level among the values the stage reads */
    int *stage_phase;     /* [stage]: a scan's carry phase (its outputs' level), 0 for others */
} sl_plan;

/* What a backend can run; sl_plan_check compares a plan with it. */
typedef struct sl_backend_caps {
    int max_phases;            /* chained carry phases in one fused group; 0: no limit */
    bool one_offsets_per_group;/* a fused group reads at most one offsets input */
    bool reduce;               /* runs fused groups that end in a reduce (sl_group.reduces) */
} sl_backend_caps;

/* Builds the plan for a pipeline on a backend (the GPU and CPU plans have the same groups;
 * sort passes differ: digit width 8 on the CPU, CUB's on the GPU). SLUICE_ERR_NO_MEMORY. */
sluice_status sl_plan_build(sluice_context *ctx, const sluice_pipeline *p, sluice_backend backend,
                            sl_plan *out);
void sl_plan_free(sluice_context *ctx, sl_plan *plan);
/* Checks that a backend with `caps` can run the plan: a diagnostic at the offending stage
 * (SLUICE_ERR_TYPE, SLUICE_ERR_LIMIT, or SLUICE_ERR_BACKEND_UNAVAILABLE for a stage kind the
 * backend does not run) when it cannot. The one capability check per backend, made when a
 * session opens. */
sluice_status sl_plan_check(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                            const sl_backend_caps *caps);
/* Live columns at the start of group gi (inputs of role DATA for group 0), length
 * p->ncolumns; inputs_live is the scratch used for group 0. */
const bool *sl_plan_live_at_group(const sluice_pipeline *p, const sl_plan *plan, int gi,
                                  bool *inputs_live);
/* The most rows group gi gives for a piece of `rows` rows (`nsegments` segments of the
 * offsets input, -1 when none), or at flush from what it holds back (end_of_stream, rows 0):
 * what a backend sizes the group's output for. Asks each stage's kind (rows_out). */
int64_t sl_plan_rows_out(const sluice_pipeline *p, const sl_plan *plan, int gi, int64_t rows,
                         int64_t nsegments, bool end_of_stream);
/* Radix passes for sorting `bits` key bits on a backend. */
int sl_plan_sort_passes(sluice_backend backend, int bits);
/* Total key bits a sort stage sorts (sum over keys, narrowed by bits:). */
int sl_plan_sort_key_bits(const sluice_pipeline *p, const sl_sort *sort);

#endif
