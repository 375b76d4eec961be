/* mpi_run.h — `mpirun -np N sluice run …`: the run subcommand when the program was started by
 * an MPI launcher (cli/mpi_run.c; the distributed session of include/sluice_mpi.h). */
#ifndef SL_CLI_MPI_RUN_H
#define SL_CLI_MPI_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice.h"

/* True when an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx) started this process, as
 * its environment says; read before MPI is initialised. */
bool sl_mpi_launched(void);

/* What `sluice run` was asked, as run.c parsed it. */
typedef struct sl_mpi_run_args {
    const char *pipeline, *in, *out;
    sluice_backend backend;
    int64_t batch_rows;
    const sluice_param_value *params;
    size_t param_count;
} sl_mpi_run_args;

/* Runs the pipeline over the input split among the ranks (each reads only its range of rows
 * of each column file, whole segments with an offsets input) and writes every rank's rows at
 * their global positions into one set of OUTDIR/COLUMN.npy files, all or nothing: the files
 * are renamed into place only when every rank succeeded. Initialises and finalises MPI.
 * Returns an SL_EXIT_* status, the same on every rank. In a build without MPI it says so and
 * returns SL_EXIT_ERROR (every rank would otherwise run the whole input alone). */
int sl_mpi_run(sluice_context *ctx, sluice_pipeline *p, const sl_mpi_run_args *a);

/* Prints what a distributed run of p sends between ranks (sluice_mpi_explain) to stdout.
 * Returns SL_EXIT_OK, or SL_EXIT_ERROR after a message (a build without MPI says so). Needs no
 * launcher. */
int sl_mpi_explain(sluice_context *ctx, sluice_pipeline *p);

#endif
