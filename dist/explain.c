/* explain.c — sluice_mpi_explain: what a distributed run of a pipeline sends between ranks,
 * stage by stage, and how many passes over each rank's part it makes. The figures are the
 * ones notes/DISTRIBUTED.md's cost model uses: bytes per rank and the number of latency-bound
 * collective steps. */
#include "dist.h"

static size_t state_bytes(void) { return sizeof(sl_scan_carry); }

static const char *segments_name(const sl_scan *sc) {
    switch (sc->segments) {
    case SL_SEGMENTS_HEADFLAG: return "head-flag segments";
    case SL_SEGMENTS_KEY: return "key segments";
    case SL_SEGMENTS_OFFSETS: return "offsets segments";
    default: return NULL;
    }
}

sluice_status sluice_mpi_explain(const sluice_pipeline *p, char **text) {
    if (text) *text = NULL;
    if (!p || !text) return SLUICE_ERR_INVALID_ARGUMENT;
    sluice_context *ctx = p->ctx;
    sl_plan plan;
    SL_TRY(sl_plan_build(ctx, p, SLUICE_BACKEND_CPU, &plan));
    dist_schedule sch;
    sluice_status st = sl_dist_schedule(ctx, p, &plan, &sch);
    if (st != SLUICE_OK) {
        sl_plan_free(ctx, &plan);
        return st;
    }
    sl_strbuf sb;
    sl_strbuf_init(&sb, ctx);
    sl_strbuf_printf(&sb, "distributed pipeline %s: what crosses ranks (p ranks)\n", p->name);
    int si = 0;
    for (int gi = 0; gi < plan.ngroups; gi++) {
        const sl_group *g = &plan.groups[gi];
        if (g->kind == SL_GROUP_SORT) {
            const sl_sort *so = &p->stages[g->first].sort;
            size_t w = 0;
            for (int j = 0; j < g->nin; j++) w += sluice_type_size(p->columns[g->in[j]].type);
            if (so->per_batch)
                sl_strbuf_printf(&sb, "group %d: sort per batch, line %d: nothing (each rank "
                                 "sorts its own batches)\n", gi + 1, p->stages[g->first].loc.line);
            else
                sl_strbuf_printf(&sb,
                                 "group %d: stream-wide sort, line %d: sample sort, per pass: "
                                 "2 allreduce/exscan of 8 B, an allgather of <= 64 samples of "
                                 "%d B from every rank, an alltoall of p x 8 B counts, then "
                                 "each row's %zu B sent to the rank that holds its place "
                                 "(about (p-1)/p of the rows leave their rank)\n",
                                 gi + 1, p->stages[g->first].loc.line, (so->nkeys + 2) * 8, w);
            continue;
        }
        sl_strbuf_printf(&sb, "group %d: fused, stages on lines %d-%d\n", gi + 1,
                         p->stages[g->first].loc.line, p->stages[g->last - 1].loc.line);
        bool crosses = false;
        for (int s = g->first; s < g->last; s++) {
            sl_stage_kind k = p->stages[s].kind;
            crosses |= k == SL_STAGE_COMPACT || k == SL_STAGE_SCAN || k == SL_STAGE_REDUCE;
        }
        if (!crosses)
            sl_strbuf_append(&sb, "    elementwise stages only: nothing crosses ranks\n");
        for (int s = g->first; s < g->last; s++) {
            const sl_stage *stage = &p->stages[s];
            if (stage->kind == SL_STAGE_COMPACT)
                sl_strbuf_printf(&sb, "    %-15s line %-4d rows kept: their global positions "
                                 "from one allgather of 8 B per rank (once)\n",
                                 stage->kind_name ? stage->kind_name : "compact", stage->loc.line);
            if (stage->kind == SL_STAGE_REDUCE) {
                const dist_reduce *dr = NULL;
                for (int i = 0; i < sch.nreduces; i++)
                    if (sch.reduces[i].stage == s) dr = &sch.reduces[i];
                const sl_reduce *rd = &stage->reduce;
                si += rd->nvalues;
                if (!dr) continue;
                const char *seg = segments_name(&rd->values[0]);
                if (dr->carried)
                    sl_strbuf_printf(&sb, "    %-15s line %-4d its %d value%s' states (%s, "
                                     "%zu B a value) in one allgather at the end of pass %d, "
                                     "folded in rank order; the open segment is emitted once, "
                                     "by the last rank %s\n", "reduce", stage->loc.line,
                                     rd->nvalues, rd->nvalues == 1 ? "" : "s",
                                     seg ? seg : "the whole stream", state_bytes(), dr->phase,
                                     seg ? "holding it" : "(identities for an empty stream)");
                else
                    sl_strbuf_printf(&sb, "    %-15s line %-4d no state: its segments end in "
                                     "each batch (%s)\n", "reduce", stage->loc.line,
                                     rd->per_batch ? "per: batch" : "offsets segments");
                sl_strbuf_printf(&sb, "    %-15s line %-4d segments emitted: one allgather of 8 B "
                                 "per rank at the end of pass %d (the index and the reduced "
                                 "rows' positions)\n", "", stage->loc.line, dr->count_pass);
                continue;
            }
            if (stage->kind != SL_STAGE_SCAN) continue;
            const dist_scan *d = &sch.scans[si++];
            const sl_scan *sc = &stage->scan;
            const char *seg = segments_name(sc);
            if (!d->carried)
                sl_strbuf_printf(&sb, "    %-15s line %-4d nothing: it restarts at every batch "
                                 "(%s)\n", stage->kind_name, stage->loc.line,
                                 sc->reset_per_batch ? "reset: batch" : "offsets segments");
            else
                sl_strbuf_printf(&sb, "    %-15s line %-4d its state (%d field%s%s%s, a %zu B "
                                 "record) in one allgather at the end of pass %d, folded in rank "
                                 "order\n", stage->kind_name, stage->loc.line, sc->nfields,
                                 sc->nfields == 1 ? "" : "s", seg ? ", " : "", seg ? seg : "",
                                 state_bytes(), d->phase);
        }
    }
    sl_strbuf_printf(&sb, "passes over each rank's part: %d (%d carry phase%s, rows out exact "
                     "from pass %d, then the final pass)\n", sch.npasses, sch.phases,
                     sch.phases == 1 ? "" : "s", sch.rows_level);
    /* Only a stream-wide sort moves rows, so only then does the transport matter. */
    if (sl_dist_moves_rows(p, &plan)) sl_dist_transport_explain(&sb);
    sl_dist_schedule_free(ctx, &sch);
    sl_plan_free(ctx, &plan);
    *text = sl_strbuf_take(&sb);
    if (!*text) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory writing the plan");
    return SLUICE_OK;
}
