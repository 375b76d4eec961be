/* plan.c — the physical plan (see plan.h): cuts the stage list at each sort and after each
 * reduce, then works out per group the columns it reads, writes and passes through, the
 * liveness after every stage (one backwards pass), each column's carry level (one forwards
 * pass per group), where the rows reaching a group may be cut, the rows a group gives, and
 * the capability check backends call at open. */
#include <string.h>

#include "common/context.h"
#include "plan/plan.h"
#include "stages/kind.h"

int sl_plan_sort_passes(sluice_backend backend, int bits) {
    /* Both backends sort 8 bits a pass (CUB's onesweep on the GPU, LSD with 256 buckets on
     * the CPU). */
    (void)backend;
    if (bits <= 0) return 0;
    return (bits + 7) / 8;
}

int sl_plan_sort_key_bits(const sluice_pipeline *p, const sl_sort *sort) {
    if (sort->nkeys == 1) return sort->bits_hi - sort->bits_lo;
    int bits = 0;
    for (int k = 0; k < sort->nkeys; k++) bits += sl_type_bits(p->columns[sort->keys[k]].type);
    return bits;
}

static sluice_status oom(sluice_context *ctx) {
    return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory planning");
}

/* ---- liveness: backwards, precise ------------------------------------------------------- */

static sluice_status liveness(sluice_context *ctx, const sluice_pipeline *p, sl_plan *plan) {
    size_t n = (size_t)p->ncolumns + 1;
    bool *need = sl_calloc(ctx, n, sizeof(bool));
    if (!need) return oom(ctx);
    for (int i = 0; i < p->noutputs; i++) need[p->outputs[i]] = true;
    sluice_status st = SLUICE_OK;
    for (int i = p->nstages - 1; i >= 0 && st == SLUICE_OK; i--) {
        plan->need_after[i] = sl_calloc(ctx, n, sizeof(bool));
        if (!plan->need_after[i]) {
            st = oom(ctx);
            break;
        }
        memcpy(plan->need_after[i], need, n);
        const sl_stage *s = &p->stages[i];
        if (sl_stage_kind_desc_of(s)->need_before(ctx, s, need, &plan->map_entry_live[i]) !=
            SLUICE_OK)
            st = oom(ctx);
    }
    sl_free(ctx, need);
    return st;
}

/* ---- carry levels: forwards within each fused group ------------------------------------- */

/* Levels, phases and the columns a fused group reads. `read`, `made` and `level` are
 * scratch of p->ncolumns + 1 entries, cleared here: a column an earlier group made is
 * materialised, so it is level 0 here. */
static void fused_levels(const sluice_pipeline *p, sl_plan *plan, sl_group *g, bool *read,
                         bool *made, int *level) {
    memset(read, 0, (size_t)p->ncolumns + 1);
    memset(made, 0, (size_t)p->ncolumns + 1);
    memset(level, 0, ((size_t)p->ncolumns + 1) * sizeof *level);
    sl_level_walk w = {level, read, made, NULL, 0, false};
    for (int s = g->first; s < g->last; s++) {
        const sl_stage *st = &p->stages[s];
        const sl_stage_kind_desc *kind = sl_stage_kind_desc_of(st);
        if (kind->shape == SL_SHAPE_BARRIER) continue; /* never inside a fused group */
        if (kind->shape == SL_SHAPE_REDUCE) g->reduces = true;
        w.def_live = plan->map_entry_live[s];
        int phase = 0;
        plan->reads_level[s] = kind->carry_levels(st, &w, &phase);
        if (kind->offsets_column(st) >= 0) g->reads_offsets = true;
        if (phase > 0) {
            if (phase > g->phases) g->phases = phase;
            plan->stage_phase[s] = phase;
        }
    }
    if (w.compacts) g->compacts = true;
    /* The kept-row count is one more phase after the last compaction's flag. */
    if (g->compacts && w.alive + 1 > g->phases) g->phases = w.alive + 1;
    for (int c = 0; c < p->ncolumns; c++)
        if (made[c]) plan->level[c] = level[c];
}

/* ---- columns per group ------------------------------------------------------------------ */

static int *column_list(sluice_context *ctx, int ncolumns) {
    return sl_calloc(ctx, (size_t)ncolumns + 1, sizeof(int));
}

const bool *sl_plan_live_at_group(const sluice_pipeline *p, const sl_plan *plan, int gi,
                                  bool *inputs_live) {
    int stage = gi < plan->ngroups ? plan->groups[gi].first : p->nstages;
    if (stage > 0) return p->stages[stage - 1].live_after;
    for (int c = 0; c < p->ncolumns; c++)
        inputs_live[c] = c < p->ninputs && p->columns[c].role == SLUICE_ROLE_DATA;
    return inputs_live;
}

static sluice_status group_columns(sluice_context *ctx, const sluice_pipeline *p, sl_plan *plan,
                                   int gi, bool *read, bool *made, bool *inputs_live,
                                   int *level) {
    sl_group *g = &plan->groups[gi];
    g->in = column_list(ctx, p->ncolumns);
    g->out = column_list(ctx, p->ncolumns);
    g->pass = column_list(ctx, p->ncolumns);
    if (!g->in || !g->out || !g->pass) return oom(ctx);
    const bool *live_start = sl_plan_live_at_group(p, plan, gi, inputs_live);
    const bool *live_end = p->stages[g->last - 1].live_after;
    const bool *need = plan->need_after[g->last - 1];
    if (g->kind == SL_GROUP_SORT) {
        const sl_sort *so = &p->stages[g->first].sort;
        for (int c = 0; c < p->ncolumns; c++) {
            bool key = false;
            for (int k = 0; k < so->nkeys; k++) key |= so->keys[k] == c;
            if (p->columns[c].role == SLUICE_ROLE_OFFSETS) continue;
            if (live_start[c] && (need[c] || key)) g->in[g->nin++] = c;
            if (live_end[c] && need[c]) g->out[g->nout++] = c;
        }
        return SLUICE_OK;
    }
    fused_levels(p, plan, g, read, made, level);
    for (int c = 0; c < p->ncolumns; c++) {
        if (p->columns[c].role == SLUICE_ROLE_OFFSETS || !need[c] || !live_end[c]) continue;
        if (made[c] || g->compacts || g->reduces) {
            g->out[g->nout++] = c;
            read[c] = true; /* a compaction gathers it, a reduce takes a segment's key */
        } else {
            g->pass[g->npass++] = c;
        }
    }
    for (int c = 0; c < p->ncolumns; c++)
        if (read[c] && !made[c] && p->columns[c].role != SLUICE_ROLE_OFFSETS) g->in[g->nin++] = c;
    return SLUICE_OK;
}

/* ---- cutting ---------------------------------------------------------------------------- */

static void cuts(const sluice_pipeline *p, sl_plan *plan) {
    bool never = false;
    for (int gi = plan->ngroups - 1; gi >= 0; gi--) {
        sl_group *g = &plan->groups[gi];
        for (int s = g->first; s < g->last; s++) {
            const sl_stage *st = &p->stages[s];
            if (sl_stage_kind_desc_of(st)->batch_bound(st)) never = true;
        }
        if (never) g->cut = SL_CUT_NEVER;
        else if (gi == 0 && plan->offsets_input >= 0) g->cut = SL_CUT_SEGMENTS;
        else g->cut = SL_CUT_ANYWHERE;
    }
}

/* ---- build, free, check ----------------------------------------------------------------- */

/* A fused group ends before a barrier stage (today only a sort), which is a group of its own. */
static bool is_barrier(const sl_stage *s) {
    return sl_stage_kind_desc_of(s)->shape == SL_SHAPE_BARRIER;
}

/* A fused group ends after a stage that changes the row space (a reduce). */
static bool ends_group(const sl_stage *s) {
    return sl_stage_kind_desc_of(s)->shape == SL_SHAPE_REDUCE;
}

int64_t sl_plan_rows_out(const sluice_pipeline *p, const sl_plan *plan, int gi, int64_t rows,
                         int64_t nsegments, bool end_of_stream) {
    const sl_group *g = &plan->groups[gi];
    int64_t n = end_of_stream ? 0 : rows;
    for (int s = g->first; s < g->last; s++) {
        const sl_stage *st = &p->stages[s];
        const sl_stage_kind_desc *kind = sl_stage_kind_desc_of(st);
        if (kind->rows_out) n = kind->rows_out(st, n, nsegments, end_of_stream);
    }
    return n;
}

sluice_status sl_plan_build(sluice_context *ctx, const sluice_pipeline *p, sluice_backend backend,
                            sl_plan *out) {
    memset(out, 0, sizeof *out);
    out->ncolumns = p->ncolumns;
    out->nstages = p->nstages;
    out->offsets_input = -1;
    for (int c = 0; c < p->ninputs; c++)
        if (p->columns[c].role == SLUICE_ROLE_OFFSETS) out->offsets_input = c;
    out->groups = sl_calloc(ctx, (size_t)p->nstages + 1, sizeof *out->groups);
    out->need_after = sl_calloc(ctx, (size_t)p->nstages + 1, sizeof *out->need_after);
    out->map_entry_live = sl_calloc(ctx, (size_t)p->nstages + 1, sizeof *out->map_entry_live);
    out->level = sl_calloc(ctx, (size_t)p->ncolumns + 1, sizeof *out->level);
    out->reads_level = sl_calloc(ctx, (size_t)p->nstages + 1, sizeof *out->reads_level);
    out->stage_phase = sl_calloc(ctx, (size_t)p->nstages + 1, sizeof *out->stage_phase);
    size_t n = (size_t)p->ncolumns + 1;
    bool *scratch = sl_calloc(ctx, 3 * n, sizeof(bool));
    int *level = sl_calloc(ctx, n, sizeof(int));
    sluice_status st = SLUICE_OK;
    if (!out->groups || !out->need_after || !out->map_entry_live || !out->level ||
        !out->reads_level || !out->stage_phase || !scratch || !level)
        st = oom(ctx);
    if (st == SLUICE_OK) st = liveness(ctx, p, out);
    int s = 0;
    while (st == SLUICE_OK && s < p->nstages) {
        sl_group *g = &out->groups[out->ngroups++];
        if (is_barrier(&p->stages[s])) {
            g->kind = SL_GROUP_SORT;
            g->first = s;
            g->last = s + 1;
            g->passes = sl_plan_sort_passes(backend, sl_plan_sort_key_bits(p, &p->stages[s].sort));
            /* A sort that opens the pipeline (or follows another sort) also writes its key
             * images in a pass of its own; after a fused group that pass is fused into it. */
            if (s == 0 || is_barrier(&p->stages[s - 1])) g->passes += 1;
            s++;
        } else {
            g->kind = SL_GROUP_FUSED;
            g->first = s;
            while (s < p->nstages && !is_barrier(&p->stages[s]))
                if (ends_group(&p->stages[s++])) break;
            g->last = s;
            g->passes = 1;
        }
        out->passes += g->passes;
        st = group_columns(ctx, p, out, out->ngroups - 1, scratch, scratch + n, scratch + 2 * n,
                           level);
    }
    if (st == SLUICE_OK) cuts(p, out);
    for (int gi = 0; st == SLUICE_OK && gi < out->ngroups; gi++)
        out->groups[gi].emits_at_flush = sl_plan_rows_out(p, out, gi, 0, -1, true) > 0;
    if (p->nstages == 0) out->passes = 1; /* inputs still flow through once */
    sl_free(ctx, scratch);
    sl_free(ctx, level);
    if (st != SLUICE_OK) sl_plan_free(ctx, out);
    return st;
}

void sl_plan_free(sluice_context *ctx, sl_plan *plan) {
    for (int gi = 0; plan->groups && gi < plan->ngroups; gi++) {
        sl_free(ctx, plan->groups[gi].in);
        sl_free(ctx, plan->groups[gi].out);
        sl_free(ctx, plan->groups[gi].pass);
    }
    for (int s = 0; s < plan->nstages; s++) {
        if (plan->need_after) sl_free(ctx, plan->need_after[s]);
        if (plan->map_entry_live) sl_free(ctx, plan->map_entry_live[s]);
    }
    sl_free(ctx, plan->groups);
    sl_free(ctx, plan->need_after);
    sl_free(ctx, plan->map_entry_live);
    sl_free(ctx, plan->level);
    sl_free(ctx, plan->reads_level);
    sl_free(ctx, plan->stage_phase);
    memset(plan, 0, sizeof *plan);
}

sluice_status sl_plan_check(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                            const sl_backend_caps *caps) {
    for (int gi = 0; gi < plan->ngroups; gi++) {
        const sl_group *g = &plan->groups[gi];
        if (g->kind != SL_GROUP_FUSED) continue;
        if (g->reduces && !caps->reduce)
            return sl_diag(ctx, SLUICE_ERR_BACKEND_UNAVAILABLE, p->stages[g->last - 1].loc,
                           "the reduce stage (line %d) does not run on this backend yet; use "
                           "the CPU backend (--backend cpu, or SLUICE_BACKEND_CPU)",
                           p->stages[g->last - 1].loc.line);
        int offsets_col = -1;
        for (int s = g->first; s < g->last; s++) {
            const sl_stage *st = &p->stages[s];
            int offsets = sl_stage_kind_desc_of(st)->offsets_column(st);
            if (offsets < 0) continue;
            /* Both backends: after a sort the rows no longer follow the batch's offsets. */
            if (gi != 0)
                return sl_diag(ctx, SLUICE_ERR_TYPE, st->loc,
                               "a segmented_scan with segments from an offsets input must come "
                               "before any sort (after a sort, rows no longer follow the "
                               "offsets); use a head-flag or {key: COLUMN} segments instead");
            if (caps->one_offsets_per_group && offsets_col >= 0 &&
                offsets_col != offsets)
                return sl_diag(ctx, SLUICE_ERR_LIMIT, st->loc,
                               "two different offsets inputs in one pass are not supported on "
                               "this backend");
            offsets_col = offsets;
        }
        if (caps->max_phases > 0 && g->phases > caps->max_phases)
            return sl_diag(ctx, SLUICE_ERR_LIMIT, p->stages[g->first].loc,
                           "more than %d scans (or a compaction) depend on each other in one "
                           "pass; put a sort between them or simplify the pipeline",
                           caps->max_phases);
    }
    return SLUICE_OK;
}
