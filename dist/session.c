/* session.c — the distributed session of include/sluice_mpi.h: one local session per rank,
 * the pass schedule that makes each rank's incoming carried state exact one carry phase at a
 * time, the ordered fold of the ranks' scan aggregates, the ranks' global output rows, and
 * the agreement that turns one rank's failure into an error on every rank.
 *
 * Why passes. A scan's state after rank r's part is (incoming state) ⊕ (rank r's aggregate)
 * only when the aggregate does not itself depend on the incoming state; a scan that reads a
 * value computed from another scan (a later carry phase, plan.h's levels) or rows kept by a
 * compaction of such a value has an aggregate that does. So pass k pushes the rank's part
 * with the incoming states of phases < k already exact, and ends with one exchange of the
 * aggregates of the phase-k scans; after the last phase (and, when the rows out depend on
 * the last phase, one counting pass) a final pass produces the results. Across a stream-wide
 * sort the phases simply continue: the groups after it see the globally sorted rows (the
 * exchange hook, dist/sort.c), pass after pass.
 *
 * The fold. Every rank gathers every rank's aggregate (MPI_Allgather of fixed-size records)
 * and folds the ones before its own in rank order, left on the left: the incoming state of
 * rank r is A_0 ⊕ A_1 ⊕ … ⊕ A_{r-1} exactly as one process would have combined them (an
 * MPI_Exscan with a user op would be equally right only with commute = 0; the gather keeps
 * the order explicit and the fold the CPU backend's own combine, so exact results are the
 * same bits). Segmented scans fold (headed, first key, last key, value) records: a rank
 * whose part started a segment restarts the state; a rank whose first key equals the
 * previous part's last key continues its segment, so segments that span ranks come out as
 * one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "cpu/scan.h"

/* ---- errors ------------------------------------------------------------------------------ */

/* What one rank tells the others about its failure. */
typedef struct fail_note {
    int status;
    char message[480];
} fail_note;

sluice_status sl_dist_note_failure(sluice_mpi_session *ds, sluice_status st) {
    const sluice_diagnostic *d = sluice_context_diagnostic(ds->ctx, 0);
    ds->failed = true;
    ds->fail_status = st;
    snprintf(ds->fail_message, sizeof ds->fail_message, "%s",
             d ? d->message : sluice_strerror(st));
    return st;
}

sluice_status sl_dist_agree(sluice_mpi_session *ds, sluice_status st) {
    if (st != SLUICE_OK) sl_dist_note_failure(ds, st);
    int mine = ds->failed ? ds->rank : ds->size, first = ds->size;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, ds->comm) != MPI_SUCCESS)
        return sl_error(ds->ctx, SLUICE_ERR_IO, "MPI_Allreduce failed (distributed session)");
    if (first == ds->size) return SLUICE_OK;
    fail_note note = {0};
    if (ds->rank == first) {
        note.status = (int)ds->fail_status;
        snprintf(note.message, sizeof note.message, "%s", ds->fail_message);
    }
    MPI_Bcast(&note, (int)sizeof note, MPI_BYTE, first, ds->comm);
    sluice_status failed = (sluice_status)note.status;
    if (failed <= SLUICE_OK || failed >= SLUICE_STATUS_COUNT_) failed = SLUICE_ERR_MISUSE;
    if (ds->rank != first) { /* later agreements, whoever is first then, say the same */
        ds->failed = true;
        ds->fail_status = failed;
        snprintf(ds->fail_message, sizeof ds->fail_message, "%.470s", note.message);
    }
    if (ds->rank == first && st != SLUICE_OK) return failed; /* its diagnostics say it */
    if (ds->rank == first)
        return sl_error(ds->ctx, failed, "this rank (%d of %d) failed earlier (%s): %s", first,
                        ds->size, sluice_status_name(failed), note.message);
    return sl_error(ds->ctx, failed, "rank %d of %d failed (%s): %s", first, ds->size,
                    sluice_status_name(failed), note.message);
}

/* ---- the schedule ------------------------------------------------------------------------ */

static sluice_status build_seeds(sluice_mpi_session *ds) {
    sluice_context *ctx = ds->ctx;
    SL_TRY(sl_dist_schedule(ctx, ds->pipeline, ds->plan, &ds->sch));
    ds->seed = sl_calloc(ctx, (size_t)ds->plan->ngroups + 1, sizeof(sl_scan_carry *));
    if (!ds->seed) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: a distributed session");
    for (int gi = 0; gi < ds->plan->ngroups; gi++) {
        int n = ds->sch.group_scans[gi];
        if (n != sl_carry_group_scans(ds->local, gi))
            return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                            "internal: plan group %d has %d scans but its session carries %d", gi,
                            n, sl_carry_group_scans(ds->local, gi));
        if (n == 0) continue;
        ds->seed[gi] = sl_calloc(ctx, (size_t)n, sizeof(sl_scan_carry));
        if (!ds->seed[gi])
            return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: a distributed session");
    }
    return SLUICE_OK;
}

/* Every carry of a fresh stream: the identities, no key seen. */
static void init_seeds(sluice_mpi_session *ds) {
    for (int i = 0; i < ds->sch.nscans; i++) {
        const dist_scan *d = &ds->sch.scans[i];
        const sl_scan *sc = sl_dist_scan_of(ds->pipeline, d);
        sl_scan_carry *c = &ds->seed[d->group][d->slot];
        *c = (sl_scan_carry){0};
        memcpy(c->v, sc->identity, sizeof(sl_value) * (size_t)sc->nfields);
    }
    /* Until a carried reduce's phase is exchanged no rank emits its open segment at flush:
     * the state it would consume is the rank's aggregate, read after the flush. */
    for (int i = 0; i < ds->sch.nreduces; i++) {
        const dist_reduce *dr = &ds->sch.reduces[i];
        if (dr->carried) ds->seed[dr->group][dr->slot].continues = true;
    }
}

/* Whether any scan of plan group gi carries state between ranks, or the group ends in a
 * reduce (whose index and flush need seeding even per batch): only those groups' carries
 * are read and seeded (so a backend that cannot hand out its carries still runs pipelines
 * whose scans all restart per batch). */
static bool group_carried(const sluice_mpi_session *ds, int gi) {
    for (int i = 0; i < ds->sch.nscans; i++)
        if (ds->sch.scans[i].group == gi && ds->sch.scans[i].carried) return true;
    for (int i = 0; i < ds->sch.nreduces; i++)
        if (ds->sch.reduces[i].group == gi) return true;
    return false;
}

/* The reduce whose first value is schedule entry d, or NULL. */
static const dist_reduce *reduce_of(const sluice_mpi_session *ds, const dist_scan *d) {
    if (d->value != 0) return NULL;
    for (int i = 0; i < ds->sch.nreduces; i++)
        if (ds->sch.reduces[i].stage == d->stage) return &ds->sch.reduces[i];
    return NULL;
}

/* A carried reduce's part in the fold, from every rank's state of its first value (all[r]):
 * its incoming segment is open when a rank before had rows reaching it, and the open
 * segment at flush is this rank's to emit only when no later rank has such rows and this
 * one does (a whole-stream reduce: only on the last rank, even with no rows anywhere). */
static void seed_reduce(const sluice_mpi_session *ds, const dist_reduce *dr, sl_scan_carry *c,
                        const sl_scan_carry *all, size_t stride) {
    bool before = false, later = false;
    for (int r = 0; r < ds->size; r++) {
        bool rows = all[(size_t)r * stride].has_first;
        if (r < ds->rank) before |= rows;
        if (r > ds->rank) later |= rows;
    }
    bool mine = all[(size_t)ds->rank * stride].has_first;
    c->open = before;
    if (ds->pipeline->stages[dr->stage].reduce.segments == SL_SEGMENTS_NONE)
        c->continues = ds->rank != ds->size - 1;
    else
        c->continues = later || !mine;
}

/* End of pass dr->count_pass: the segments each rank emitted in it (exact now), gathered;
 * this rank's first index is the sum of those before it. */
static sluice_status count_segments(sluice_mpi_session *ds, const dist_reduce *dr) {
    sluice_context *ctx = ds->ctx;
    int n = ds->sch.group_scans[dr->group];
    sl_scan_carry *now = sl_calloc(ctx, (size_t)n, sizeof(sl_scan_carry));
    int64_t *all = sl_calloc(ctx, (size_t)ds->size, sizeof(int64_t));
    sluice_status st = SLUICE_OK;
    if (!now || !all) st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: segment counts");
    if (st == SLUICE_OK) st = sl_carry_get(ds->local, dr->group, now);
    st = sl_dist_agree(ds, st);
    sl_scan_carry *c = &ds->seed[dr->group][dr->slot];
    int64_t emitted = st == SLUICE_OK ? now[dr->slot].segments - c->segments : 0;
    if (st == SLUICE_OK &&
        MPI_Allgather(&emitted, 1, MPI_INT64_T, all, 1, MPI_INT64_T, ds->comm) != MPI_SUCCESS)
        st = sl_error(ctx, SLUICE_ERR_IO, "MPI_Allgather of reduce segment counts failed");
    if (st == SLUICE_OK) {
        c->segments = 0;
        for (int r = 0; r < ds->rank; r++) c->segments += all[r];
    }
    sl_free(ctx, now);
    sl_free(ctx, all);
    return st;
}

/* ---- the fold ---------------------------------------------------------------------------- */

/* C ⊕ A for one scan across a rank boundary: C the state of the ranks before, A a rank's
 * aggregate (its part run from the identity with no key carried). */
static void fold(const sl_scan *sc, sl_scan_carry *c, const sl_scan_carry *a) {
    if (!a->has_first) return; /* no row reached the scan on that rank: nothing to combine */
    sl_value v[SL_MAX_FIELDS];
    switch (sc->segments) {
    case SL_SEGMENTS_KEY:
        if (a->headed || !c->has_key || c->last_key != a->first_key) {
            memcpy(c->v, a->v, sizeof c->v); /* the rank's first row or a later one opened a segment */
        } else {
            sl_cpu_scan_combine(sc, c->v, a->v, v);
            memcpy(c->v, v, sizeof(sl_value) * (size_t)sc->nfields);
        }
        c->last_key = a->last_key;
        c->has_key = true;
        break;
    case SL_SEGMENTS_HEADFLAG:
        if (a->headed) {
            memcpy(c->v, a->v, sizeof c->v);
        } else {
            sl_cpu_scan_combine(sc, c->v, a->v, v);
            memcpy(c->v, v, sizeof(sl_value) * (size_t)sc->nfields);
        }
        break;
    default:
        sl_cpu_scan_combine(sc, c->v, a->v, v);
        memcpy(c->v, v, sizeof(sl_value) * (size_t)sc->nfields);
        break;
    }
}

/* End of pass k: the aggregates of the phase-k scans, gathered and folded into this rank's
 * incoming states. */
static sluice_status exchange_phase(sluice_mpi_session *ds, int k) {
    sluice_context *ctx = ds->ctx;
    int n = 0;
    for (int i = 0; i < ds->sch.nscans; i++) n += ds->sch.scans[i].carried && ds->sch.scans[i].phase == k;
    if (n == 0) return SLUICE_OK;
    size_t rec = sizeof(sl_scan_carry);
    sl_scan_carry *mine = sl_calloc(ctx, (size_t)n, rec);
    sl_scan_carry *all = sl_calloc(ctx, (size_t)n * (size_t)ds->size, rec);
    sl_scan_carry *group = NULL;
    sluice_status st = SLUICE_OK;
    if (!mine || !all) st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: scan states");
    /* This rank's aggregates: the local session's carries after the pass. */
    int j = 0, cap = 0;
    for (int gi = 0; st == SLUICE_OK && gi < ds->plan->ngroups; gi++) {
        int gn = ds->sch.group_scans[gi];
        if (gn == 0) continue;
        bool wanted = false;
        for (int i = 0; i < ds->sch.nscans; i++)
            wanted |= ds->sch.scans[i].group == gi && ds->sch.scans[i].carried && ds->sch.scans[i].phase == k;
        if (!wanted) continue;
        if (gn > cap) {
            sl_free(ctx, group);
            group = sl_calloc(ctx, (size_t)gn, rec);
            cap = gn;
            if (!group) {
                st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: scan states");
                break;
            }
        }
        st = sl_carry_get(ds->local, gi, group);
        for (int i = 0; st == SLUICE_OK && i < ds->sch.nscans; i++) {
            const dist_scan *d = &ds->sch.scans[i];
            if (d->group == gi && d->carried && d->phase == k) mine[j++] = group[d->slot];
        }
    }
    sl_free(ctx, group);
    st = sl_dist_agree(ds, st);
    if (st == SLUICE_OK &&
        MPI_Allgather(mine, (int)(rec * (size_t)n), MPI_BYTE, all, (int)(rec * (size_t)n), MPI_BYTE,
                      ds->comm) != MPI_SUCCESS)
        st = sl_error(ctx, SLUICE_ERR_IO, "MPI_Allgather of scan states failed");
    /* Fold ranks 0 .. rank-1 in order into the incoming state (the identity so far). */
    j = 0;
    for (int i = 0; st == SLUICE_OK && i < ds->sch.nscans; i++) {
        const dist_scan *d = &ds->sch.scans[i];
        if (!d->carried || d->phase != k) continue;
        const sl_scan *sc = sl_dist_scan_of(ds->pipeline, d);
        sl_scan_carry *c = &ds->seed[d->group][d->slot];
        for (int r = 0; r < ds->rank; r++) fold(sc, c, &all[(size_t)r * (size_t)n + (size_t)j]);
        c->headed = c->has_first = false;
        const dist_reduce *dr = reduce_of(ds, d);
        if (dr) seed_reduce(ds, dr, c, &all[j], (size_t)n);
        j++;
    }
    sl_free(ctx, mine);
    sl_free(ctx, all);
    return st;
}

/* ---- the calls --------------------------------------------------------------------------- */

/* A digest of what must be the same on every rank: the pipeline's name, inputs, stages and
 * outputs, and the pass schedule. */
static uint64_t pipeline_digest(const sluice_mpi_session *ds) {
    uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
    const char *name = sluice_pipeline_name(ds->pipeline);
    for (const char *c = name; c && *c; c++) MIX((unsigned char)*c);
    size_t nin = sluice_pipeline_input_count(ds->pipeline);
    for (size_t i = 0; i < nin; i++) {
        sluice_column_info info;
        if (sluice_pipeline_input(ds->pipeline, i, &info) != SLUICE_OK) continue;
        for (const char *c = info.name; *c; c++) MIX((unsigned char)*c);
        MIX(info.type);
        MIX(info.role);
    }
    MIX(ds->pipeline->nstages);
    for (int s = 0; s < ds->pipeline->nstages; s++) MIX(ds->pipeline->stages[s].kind);
    MIX(sluice_pipeline_output_count(ds->pipeline));
    MIX(ds->plan->ngroups);
    MIX(ds->sch.npasses);
#undef MIX
    return h;
}

sluice_status sluice_mpi_session_open(sluice_pipeline *pipeline,
                                      const sluice_session_options *options, MPI_Comm comm,
                                      sluice_mpi_session **out) {
    if (out) *out = NULL;
    if (!pipeline || !out) return SLUICE_ERR_INVALID_ARGUMENT;
    sluice_context *ctx = pipeline->ctx;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "sluice_mpi_session_open: MPI is not initialised (call MPI_Init first)");
    if (comm == MPI_COMM_NULL)
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                        "sluice_mpi_session_open: the communicator is MPI_COMM_NULL");
    sluice_mpi_session *ds = sl_calloc(ctx, 1, sizeof *ds);
    if (!ds) return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: a distributed session");
    ds->ctx = ctx;
    ds->pipeline = pipeline;
    ds->comm = MPI_COMM_NULL;
    if (MPI_Comm_dup(comm, &ds->comm) != MPI_SUCCESS) {
        sl_free(ctx, ds);
        return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT, "MPI_Comm_dup failed");
    }
    MPI_Comm_rank(ds->comm, &ds->rank);
    MPI_Comm_size(ds->comm, &ds->size);

    sluice_session_options opts = SLUICE_SESSION_OPTIONS_INIT;
    if (options) {
        if (options->version != SLUICE_SESSION_OPTIONS_VERSION && options->version != 1) {
            sluice_status st = sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                                        "session options version %u is not %u: initialise with "
                                        "SLUICE_SESSION_OPTIONS_INIT", options->version,
                                        SLUICE_SESSION_OPTIONS_VERSION);
            sl_dist_agree(ds, st);
            sluice_mpi_session_close(ds);
            return st;
        }
        opts.backend = options->backend;
        opts.max_batch_rows = options->max_batch_rows;
        opts.params = options->params;
        opts.param_count = options->param_count;
    }
    opts.sort_memory_bytes = 0; /* the exchange takes the held rows: no spilled runs */
    sluice_status st = sluice_session_open(pipeline, &opts, &ds->local);
    if (st == SLUICE_OK) {
        ds->plan = &ds->local->plan;
        st = build_seeds(ds);
    }
    /* A backend that cannot hand out its carries fails here, at open, not at the first pass. */
    for (int gi = 0; st == SLUICE_OK && gi < ds->plan->ngroups; gi++)
        if (group_carried(ds, gi)) st = sl_carry_get(ds->local, gi, ds->seed[gi]);
    if (st == SLUICE_OK) init_seeds(ds); /* after the probe, which wrote the seeds */
    if (st == SLUICE_OK) sl_carry_set_sort_exchange(ds->local, sl_dist_sort_exchange, ds);
    st = sl_dist_agree(ds, st);
    if (st == SLUICE_OK) {
        uint64_t d = pipeline_digest(ds), lo = 0, hi = 0;
        MPI_Allreduce(&d, &lo, 1, MPI_UINT64_T, MPI_MIN, ds->comm);
        MPI_Allreduce(&d, &hi, 1, MPI_UINT64_T, MPI_MAX, ds->comm);
        if (lo != hi)
            st = sl_error(ctx, SLUICE_ERR_MISUSE,
                          "the ranks opened distributed sessions on different pipelines (rank "
                          "%d's is '%s'): every rank must load the same pipeline file",
                          ds->rank, sluice_pipeline_name(pipeline));
    }
    /* Which transport moves rows: collective, and only once the ranks agree on the rest. */
    if (st == SLUICE_OK) st = sl_dist_transport_open(ds);
    if (st != SLUICE_OK) {
        sluice_mpi_session_close(ds);
        return st;
    }
    *out = ds;
    return SLUICE_OK;
}

int sluice_mpi_session_passes(const sluice_mpi_session *ds) { return ds ? ds->sch.npasses : 0; }

const char *sluice_mpi_session_transport(const sluice_mpi_session *ds) {
    return ds ? ds->transport : "";
}

int sluice_mpi_session_final_pass(const sluice_mpi_session *ds) {
    return ds && ds->in_pass && ds->pass == ds->sch.npasses;
}

sluice_status sluice_mpi_session_begin_pass(sluice_mpi_session *ds, int *more) {
    if (!ds || !more) return SLUICE_ERR_INVALID_ARGUMENT;
    *more = 0;
    sluice_status st = SLUICE_OK;
    if (ds->in_pass)
        st = sl_error(ds->ctx, SLUICE_ERR_MISUSE,
                      "sluice_mpi_session_begin_pass: pass %d was not flushed", ds->pass);
    SL_TRY(sl_dist_agree(ds, st));
    if (ds->pass >= ds->sch.npasses) return SLUICE_OK;
    ds->pass++;
    st = sluice_session_reset(ds->local);
    for (int gi = 0; st == SLUICE_OK && gi < ds->plan->ngroups; gi++)
        if (group_carried(ds, gi)) st = sl_carry_set(ds->local, gi, ds->seed[gi]);
    SL_TRY(sl_dist_agree(ds, st));
    ds->rows_out = 0;
    ds->in_pass = true;
    *more = 1;
    return SLUICE_OK;
}

/* Outside the final pass result batches only count rows: take and free them. */
static sluice_status drain(sluice_mpi_session *ds) {
    if (ds->pass == ds->sch.npasses) return SLUICE_OK;
    for (;;) {
        sluice_batch *b = NULL;
        SL_TRY(sluice_session_pull(ds->local, &b));
        if (!b) return SLUICE_OK;
        ds->rows_out += sluice_batch_rows(b);
        sluice_batch_free(b);
    }
}

sluice_status sluice_mpi_session_push(sluice_mpi_session *ds, const sluice_column *columns,
                                      size_t count) {
    if (!ds) return SLUICE_ERR_INVALID_ARGUMENT;
    if (ds->failed)
        return sl_error(ds->ctx, SLUICE_ERR_MISUSE,
                        "sluice_mpi_session_push: an earlier call of this distributed session "
                        "failed (only close is useful now)");
    if (!ds->in_pass)
        return sl_error(ds->ctx, SLUICE_ERR_MISUSE,
                        "sluice_mpi_session_push outside a pass (call "
                        "sluice_mpi_session_begin_pass first)");
    sluice_status st = sluice_session_push(ds->local, columns, count);
    if (st == SLUICE_OK) st = drain(ds);
    if (st != SLUICE_OK) sl_dist_note_failure(ds, st);
    return st;
}

sluice_status sluice_mpi_session_pull(sluice_mpi_session *ds, sluice_batch **out) {
    if (out) *out = NULL;
    if (!ds || !out) return SLUICE_ERR_INVALID_ARGUMENT;
    if (ds->pass != ds->sch.npasses || ds->failed) return SLUICE_OK;
    return sluice_session_pull(ds->local, out);
}

sluice_status sluice_mpi_session_flush(sluice_mpi_session *ds) {
    if (!ds) return SLUICE_ERR_INVALID_ARGUMENT;
    sluice_status st = SLUICE_OK;
    if (!ds->in_pass)
        st = sl_error(ds->ctx, SLUICE_ERR_MISUSE,
                      "sluice_mpi_session_flush outside a pass (call "
                      "sluice_mpi_session_begin_pass first)");
    /* The local flush runs collectives itself when the pipeline has a stream-wide sort (the
     * exchange agrees first), so a rank that failed earlier still calls it: it fails there
     * together with the others instead of leaving them waiting. */
    if (st == SLUICE_OK) st = sluice_session_flush(ds->local);
    if (st == SLUICE_OK) st = drain(ds);
    ds->in_pass = false;
    SL_TRY(sl_dist_agree(ds, st));
    if (ds->pass < ds->sch.npasses) SL_TRY(exchange_phase(ds, ds->pass));
    for (int i = 0; i < ds->sch.nreduces && ds->pass < ds->sch.npasses; i++)
        if (ds->sch.reduces[i].count_pass == ds->pass)
            SL_TRY(count_segments(ds, &ds->sch.reduces[i]));
    if (!ds->rows_known && ds->pass >= ds->sch.rows_level && ds->pass < ds->sch.npasses) {
        /* Rows out are exact from this pass on: this rank's first global output row. */
        int64_t *all = sl_calloc(ds->ctx, (size_t)ds->size, sizeof(int64_t));
        st = all ? SLUICE_OK : sl_error(ds->ctx, SLUICE_ERR_NO_MEMORY, "out of memory");
        SL_TRY(sl_dist_agree(ds, st));
        MPI_Allgather(&ds->rows_out, 1, MPI_INT64_T, all, 1, MPI_INT64_T, ds->comm);
        ds->out_first = ds->out_total = 0;
        for (int r = 0; r < ds->size; r++) {
            if (r < ds->rank) ds->out_first += all[r];
            ds->out_total += all[r];
        }
        ds->out_rows = ds->rows_out;
        ds->rows_known = true;
        sl_free(ds->ctx, all);
    }
    return SLUICE_OK;
}

sluice_status sluice_mpi_session_output_range(const sluice_mpi_session *ds, int64_t *first,
                                              int64_t *rows, int64_t *total) {
    if (!ds) return SLUICE_ERR_INVALID_ARGUMENT;
    if (!ds->rows_known)
        return sl_error(ds->ctx, SLUICE_ERR_MISUSE,
                        "sluice_mpi_session_output_range before the final pass (pass %d of %d)",
                        ds->pass, ds->sch.npasses);
    if (first) *first = ds->out_first;
    if (rows) *rows = ds->out_rows;
    if (total) *total = ds->out_total;
    return SLUICE_OK;
}

void sluice_mpi_session_close(sluice_mpi_session *ds) {
    if (!ds) return;
    sluice_context *ctx = ds->ctx;
    if (ds->seed)
        for (int gi = 0; ds->plan && gi < ds->plan->ngroups; gi++) sl_free(ctx, ds->seed[gi]);
    sl_free(ctx, ds->seed);
    sl_dist_transport_free(ctx, ds->nccl, ds->failed); /* before the session's own memory */
    sluice_session_close(ds->local); /* after the seeds: ds->plan is the session's */
    sl_dist_schedule_free(ctx, &ds->sch);
    if (ds->comm != MPI_COMM_NULL) MPI_Comm_free(&ds->comm);
    sl_free(ctx, ds);
}
