/* schedule.c — how many passes a distributed session makes over each rank's part, and which
 * scans' states cross ranks in which pass, worked out from the plan alone (so `explain` can
 * say it without a communicator).
 *
 * A scan's global carry phase is its group's base (the phases of the fused groups before it:
 * a group after a sort reads rows that are exact only once every earlier phase is) plus the
 * plan's stage phase. Pass k runs with the incoming states of phases < k exact, so a value of
 * global level < k is exact in it: the phase-k aggregates are, and the rows out are once
 * every compaction's flag is.
 *
 * A reduce's values join like scans (one entry each, its phase). What it emits, and the
 * index it writes, are exact only later (dist.h, dist_reduce): its rows count like a
 * compaction's whose flag is exact from pass count_pass, and the groups after it start
 * from base count_pass. */
#include "dist.h"

static bool scan_crosses_ranks(const sl_scan *sc) {
    /* Offsets segments and `reset: batch` restart at every batch, and a rank's batches are
     * batches of the global stream: nothing to carry between ranks. */
    return !sc->reset_per_batch && sc->segments != SL_SEGMENTS_OFFSETS;
}

sluice_status sl_dist_schedule(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                               dist_schedule *out) {
    *out = (dist_schedule){0};
    int total = 0, nreduces = 0;
    for (int s = 0; s < p->nstages; s++) {
        total += p->stages[s].kind == SL_STAGE_SCAN;
        if (p->stages[s].kind == SL_STAGE_REDUCE) {
            total += p->stages[s].reduce.nvalues;
            nreduces++;
        }
    }
    out->group_scans = sl_calloc(ctx, (size_t)plan->ngroups + 1, sizeof(int));
    out->scans = sl_calloc(ctx, (size_t)total + 1, sizeof(dist_scan));
    out->reduces = sl_calloc(ctx, (size_t)nreduces + 1, sizeof(dist_reduce));
    if (!out->group_scans || !out->scans || !out->reduces) {
        sl_dist_schedule_free(ctx, out);
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: a distributed session");
    }
    for (int s = 0; s < p->nstages; s++) {
        sl_stage_kind k = p->stages[s].kind;
        if (k != SL_STAGE_MAP && k != SL_STAGE_COMPACT && k != SL_STAGE_SCAN &&
            k != SL_STAGE_SORT && k != SL_STAGE_REDUCE) {
            sl_dist_schedule_free(ctx, out);
            return sl_diag(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE, p->stages[s].loc,
                           "a distributed session cannot run a '%s' stage yet (map, flag, "
                           "filter, compact, scan, segmented_scan, reduce and sort it can)",
                           p->stages[s].kind_name ? p->stages[s].kind_name : "?");
        }
    }
    int base = 0, max_flag_level = -1;
    for (int gi = 0; gi < plan->ngroups; gi++) {
        const sl_group *g = &plan->groups[gi];
        if (g->kind != SL_GROUP_FUSED) continue;
        int slot = 0, group_phases = 0;
        for (int st = g->first; st < g->last; st++) {
            const sl_stage *stage = &p->stages[st];
            if (stage->kind == SL_STAGE_COMPACT) {
                int level = base + plan->level[stage->compact.by];
                if (level > max_flag_level) max_flag_level = level;
            }
            if (stage->kind == SL_STAGE_REDUCE) {
                const sl_reduce *rd = &stage->reduce;
                dist_reduce *dr = &out->reduces[out->nreduces++];
                dr->group = gi;
                dr->slot = slot;
                dr->stage = st;
                dr->phase = base + plan->stage_phase[st];
                dr->carried = !rd->per_batch && rd->segments != SL_SEGMENTS_OFFSETS;
                dr->count_pass = dr->phase + (dr->carried ? 1 : 0);
                for (int v = 0; v < rd->nvalues; v++) {
                    dist_scan *d = &out->scans[out->nscans++];
                    *d = (dist_scan){gi, slot++, st, v, dr->phase, dr->carried};
                }
                /* its rows are exact from pass count_pass on, like a compaction's whose flag
                   is of level count_pass - 1; what it writes, from the pass after */
                if (dr->count_pass - 1 > max_flag_level) max_flag_level = dr->count_pass - 1;
                if (dr->count_pass - base > group_phases) group_phases = dr->count_pass - base;
                continue;
            }
            if (stage->kind != SL_STAGE_SCAN) continue;
            dist_scan *d = &out->scans[out->nscans++];
            d->group = gi;
            d->slot = slot++;
            d->stage = st;
            d->value = -1;
            d->phase = base + plan->stage_phase[st];
            d->carried = scan_crosses_ranks(&stage->scan);
            if (plan->stage_phase[st] > group_phases) group_phases = plan->stage_phase[st];
        }
        out->group_scans[gi] = slot;
        base += group_phases;
    }
    for (int i = 0; i < out->nscans; i++)
        if (out->scans[i].carried && out->scans[i].phase > out->phases)
            out->phases = out->scans[i].phase;
    /* At least one pass before the final one: a rank must know its rows out (and so its
     * first global output row) before it hands out its first result. */
    out->rows_level = max_flag_level + 1 > 1 ? max_flag_level + 1 : 1;
    out->npasses = (out->phases > out->rows_level ? out->phases : out->rows_level) + 1;
    return SLUICE_OK;
}

const sl_scan *sl_dist_scan_of(const sluice_pipeline *p, const dist_scan *d) {
    const sl_stage *stage = &p->stages[d->stage];
    return d->value >= 0 ? &stage->reduce.values[d->value] : &stage->scan;
}

void sl_dist_schedule_free(sluice_context *ctx, dist_schedule *sch) {
    sl_free(ctx, sch->scans);
    sl_free(ctx, sch->reduces);
    sl_free(ctx, sch->group_scans);
    *sch = (dist_schedule){0};
}
