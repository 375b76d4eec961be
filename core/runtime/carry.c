/* carry.c — the outside view of a session's carries and its stream-sort exchange hook
 * (carry.h): checks, then the backend's carry operations. */
#include "common/context.h"
#include "runtime/carry.h"

int sl_carry_group_scans(const sluice_session *s, int gi) {
    if (!s || gi < 0 || gi >= s->plan.ngroups) return 0;
    const sl_group *g = &s->plan.groups[gi];
    if (g->kind != SL_GROUP_FUSED) return 0;
    int n = 0;
    for (int st = g->first; st < g->last; st++) {
        const sl_stage *stage = &s->pipeline->stages[st];
        if (stage->kind == SL_STAGE_SCAN) n++;
        if (stage->kind == SL_STAGE_REDUCE) n += stage->reduce.nvalues;
    }
    return n;
}

static sluice_status check(sluice_session *s, int gi, bool ok) {
    if (gi < 0 || gi >= s->plan.ngroups)
        return sl_error(s->ctx, SLUICE_ERR_INVALID_ARGUMENT, "internal: no plan group %d", gi);
    if (!ok)
        return sl_error(s->ctx, SLUICE_ERR_BACKEND_UNAVAILABLE,
                        "the %s backend cannot hand its scans' carried state to a distributed "
                        "session (pipeline '%s' carries scan state between ranks); use the CPU "
                        "backend", s->backend->name, s->pipeline->name);
    return SLUICE_OK;
}

sluice_status sl_carry_get(sluice_session *s, int gi, sl_scan_carry *out) {
    SL_TRY(check(s, gi, s->backend->carry_get != NULL));
    if (sl_carry_group_scans(s, gi) == 0) return SLUICE_OK;
    return s->backend->carry_get(s, gi, out);
}

sluice_status sl_carry_set(sluice_session *s, int gi, const sl_scan_carry *in) {
    SL_TRY(check(s, gi, s->backend->carry_set != NULL));
    if (sl_carry_group_scans(s, gi) == 0) return SLUICE_OK;
    return s->backend->carry_set(s, gi, in);
}

void sl_carry_set_sort_exchange(sluice_session *s, sl_sort_exchange_fn fn, void *arg) {
    s->sort_exchange = fn;
    s->sort_exchange_arg = fn ? arg : NULL;
}
