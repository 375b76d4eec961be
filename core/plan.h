/* plan.h — fusion: which stages run together in one pass over memory. Every run of
 * map/flag/compact/scan/segmented-scan stages between sorts (or the ends) is one group,
 * executed as one pass (one kernel on the GPU, one tiled sweep on the CPU); each sort is a
 * group of its own whose passes are its radix passes. */
#ifndef SL_PLAN_H
#define SL_PLAN_H

#include "ir.h"

typedef enum sl_group_kind {
    SL_GROUP_FUSED, /* stages [first, last) are elementwise / scan / compact */
    SL_GROUP_SORT   /* stage first is a sort; last = first + 1 */
} sl_group_kind;

typedef struct sl_group {
    sl_group_kind kind;
    int first, last;
    int passes; /* full passes over memory this group is predicted to make */
} sl_group;

typedef struct sl_plan {
    int ngroups;
    sl_group *groups;
    int passes; /* sum over groups */
} sl_plan;

/* Builds the plan for a pipeline on a backend (the GPU and CPU plans have the same groups;
 * sort passes differ: digit width 8 on the CPU, CUB's on the GPU). */
sluice_status sl_plan_build(sluice_context *ctx, const sluice_pipeline *p, sluice_backend backend,
                            sl_plan *out);
void sl_plan_free(sluice_context *ctx, sl_plan *plan);
/* Radix passes for sorting `bits` key bits on a backend. */
int sl_sort_passes(sluice_backend backend, int bits);
/* Total key bits a sort stage sorts (sum over keys, narrowed by bits:). */
int sl_sort_key_bits(const sluice_pipeline *p, const sl_sort *sort);

#endif
