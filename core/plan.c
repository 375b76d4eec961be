/* plan.c — fusion planning: cuts the stage list at each sort. Everything between two sorts
 * (or a sort and an end) is one fused group, one pass over memory; a sort costs its radix
 * passes. See plan.h. */
#include "context.h"
#include "plan.h"

int sl_sort_passes(sluice_backend backend, int bits) {
    /* Both backends sort 8 bits a pass (CUB's onesweep on the GPU, LSD with 256 buckets on
     * the CPU). */
    (void)backend;
    if (bits <= 0) return 0;
    return (bits + 7) / 8;
}

int sl_sort_key_bits(const sluice_pipeline *p, const sl_sort *sort) {
    if (sort->nkeys == 1) return sort->bits_hi - sort->bits_lo;
    int bits = 0;
    for (int k = 0; k < sort->nkeys; k++) bits += sl_type_bits(p->columns[sort->keys[k]].type);
    return bits;
}

sluice_status sl_plan_build(sluice_context *ctx, const sluice_pipeline *p, sluice_backend backend,
                            sl_plan *out) {
    out->ngroups = 0;
    out->passes = 0;
    out->groups = sl_calloc(ctx, (size_t)p->nstages + 1, sizeof *out->groups);
    if (!out->groups) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory planning");
    int s = 0;
    while (s < p->nstages) {
        sl_group *g = &out->groups[out->ngroups++];
        if (p->stages[s].kind == SL_STAGE_SORT) {
            g->kind = SL_GROUP_SORT;
            g->first = s;
            g->last = s + 1;
            g->passes = sl_sort_passes(backend, sl_sort_key_bits(p, &p->stages[s].sort));
            /* A sort that opens the pipeline (or follows another sort) also writes its key
             * images in a pass of its own; after a fused group that pass is fused into it. */
            if (s == 0 || p->stages[s - 1].kind == SL_STAGE_SORT) g->passes += 1;
            s++;
        } else {
            g->kind = SL_GROUP_FUSED;
            g->first = s;
            while (s < p->nstages && p->stages[s].kind != SL_STAGE_SORT) s++;
            g->last = s;
            g->passes = 1;
        }
        out->passes += g->passes;
    }
    if (p->nstages == 0) out->passes = 1; /* inputs still flow through once */
    return SLUICE_OK;
}

void sl_plan_free(sluice_context *ctx, sl_plan *plan) {
    sl_free(ctx, plan->groups);
    plan->groups = NULL;
    plan->ngroups = 0;
}
