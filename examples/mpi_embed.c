/* mpi_embed.c — the smallest useful distributed embedding of sluice: every MPI rank holds its
 * part of one stream (rank 0 the first rows), keeps the rows whose id is not a multiple of 3,
 * and numbers them with a running count and a running total that carry across ranks, as one
 * process would over the whole stream. Each rank checks its rows against the closed form and
 * rank 0 prints a summary. Run with `mpirun -np N mpi_embed`; build against an installed
 * sluice built with MPI (examples/CMakeLists.txt: find_package(sluice COMPONENTS mpi), or
 * pkg-config sluice-mpi). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <sluice_mpi.h>

static const char pipeline_yaml[] =
    "sluice: 1\n"
    "name: numbered\n"
    "input: {id: u64}\n"
    "stages:\n"
    "  - filter: id % 3 != 0\n"
    "  - scan: {op: count, kind: exclusive, into: slot}\n"
    "  - scan: {of: id, op: sum, into: total}\n"
    "output: [id, slot, total]\n";

enum { ROWS_PER_RANK = 100000, BATCH = 30000 };

/* Prints every diagnostic of the context, prefixed by the rank. */
static void report(sluice_context *ctx, sluice_status st, int rank) {
    char buf[1024];
    fprintf(stderr, "rank %d: sluice: %s\n", rank, sluice_strerror(st));
    for (size_t i = 0; i < sluice_context_diagnostic_count(ctx); i++) {
        sluice_diagnostic_format(sluice_context_diagnostic(ctx, i), buf, sizeof buf);
        fprintf(stderr, "rank %d: %s", rank, buf);
    }
}

/* The sum of the ids in [0, n) that are not multiples of 3. */
static uint64_t kept_sum(uint64_t n) {
    if (n == 0) return 0;
    uint64_t multiples = (n + 2) / 3; /* 0, 3, 6, ... below n */
    return n * (n - 1) / 2 - 3 * (multiples * (multiples - 1) / 2);
}

/* This rank's results so far: rows seen, rows whose slot or total is not the closed form's. */
typedef struct checked {
    int64_t first; /* this rank's first row in the global result */
    int64_t kept, wrong;
} checked;

/* Takes every ready result batch: slot is the row's place among the kept rows of all ranks,
 * total the sum of every kept id up to this one, across ranks. */
static sluice_status check_results(sluice_mpi_session *s, checked *c) {
    sluice_batch *out;
    sluice_status st;
    while ((st = sluice_mpi_session_pull(s, &out)) == SLUICE_OK && out) {
        sluice_column ids, slots, totals;
        sluice_batch_column_by_name(out, "id", &ids);
        sluice_batch_column_by_name(out, "slot", &slots);
        sluice_batch_column_by_name(out, "total", &totals);
        for (int64_t i = 0; i < sluice_batch_rows(out); i++) {
            uint64_t v = ((const uint64_t *)ids.data)[i];
            c->wrong += ((const int64_t *)slots.data)[i] != c->first + c->kept ||
                        ((const uint64_t *)totals.data)[i] != kept_sum(v + 1);
            c->kept++;
        }
        sluice_batch_free(out);
    }
    return st;
}

int main(int argc, char **argv) {
    int provided = 0, rank = 0, size = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    sluice_context *ctx = NULL;
    sluice_pipeline *p = NULL;
    sluice_mpi_session *s = NULL;
    sluice_status st = sluice_context_create(&ctx, NULL);
    if (st != SLUICE_OK) {
        fprintf(stderr, "rank %d: sluice: %s\n", rank, sluice_strerror(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    st = sluice_pipeline_load_string(ctx, pipeline_yaml, strlen(pipeline_yaml), "numbered", &p);
    /* Collective: every rank opens, and every rank fails together. */
    if (st == SLUICE_OK) st = sluice_mpi_session_open(p, NULL, MPI_COMM_WORLD, &s);

    /* This rank's part: ids [rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK). */
    uint64_t *id = malloc(ROWS_PER_RANK * sizeof *id);
    for (int i = 0; i < ROWS_PER_RANK; i++) id[i] = (uint64_t)rank * ROWS_PER_RANK + (uint64_t)i;
    checked c = {0};
    int more = 0;
    /* Pass after pass (the session says how many): push the whole part, then flush. Result
     * batches come out in the final pass only. */
    while (st == SLUICE_OK && (st = sluice_mpi_session_begin_pass(s, &more)) == SLUICE_OK && more) {
        if (sluice_mpi_session_final_pass(s))
            st = sluice_mpi_session_output_range(s, &c.first, NULL, NULL);
        for (int at = 0; st == SLUICE_OK && at < ROWS_PER_RANK; at += BATCH) {
            int n = ROWS_PER_RANK - at < BATCH ? ROWS_PER_RANK - at : BATCH;
            sluice_column col = {"id", SLUICE_U64, id + at, n};
            st = sluice_mpi_session_push(s, &col, 1);
            if (st == SLUICE_OK) st = check_results(s, &c);
        }
        if (st == SLUICE_OK) st = sluice_mpi_session_flush(s);
        if (st == SLUICE_OK) st = check_results(s, &c);
    }
    int64_t kept = c.kept, wrong = c.wrong;
    if (st != SLUICE_OK) report(ctx, st, rank);
    int64_t all_kept = 0, all_wrong = 0;
    int failed = st != SLUICE_OK, any_failed = 0;
    MPI_Reduce(&kept, &all_kept, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wrong, &all_wrong, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int64_t expect = (int64_t)size * ROWS_PER_RANK - ((int64_t)size * ROWS_PER_RANK + 2) / 3;
    if (rank == 0 && !any_failed)
        printf("%d ranks: kept %lld of %lld ids (expected %lld), %lld rows with a wrong slot or "
               "total\n", size, (long long)all_kept, (long long)size * ROWS_PER_RANK,
               (long long)expect, (long long)all_wrong);
    int ok = !any_failed && all_kept == expect && all_wrong == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(id);
    sluice_mpi_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    MPI_Finalize();
    return ok ? 0 : 1;
}
