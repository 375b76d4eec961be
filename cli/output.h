/* output.h — where `sluice run` puts its results: OUTDIR/COLUMN.npy per output column, each
 * written as result batches are pulled (the header's length is patched at the end), so the
 * output never has to fit in memory. (Outputs are always row columns: an offsets input
 * cannot be an output.) */
#ifndef SL_CLI_OUTPUT_H
#define SL_CLI_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

typedef struct sl_output sl_output;

/* Creates dir if needed and one .npy per output column of `pipeline`. Returns 0, or -1 with
 * the reason in err. */
int sl_output_open(sl_output **out, const sluice_pipeline *pipeline, const char *dir, char *err,
                   size_t errcap);
/* Appends a result batch. Returns 0, or -1 (write error, or the batch lacks a column). */
int sl_output_append(sl_output *o, const sluice_batch *batch, char *err, size_t errcap);
/* Rows written so far (0 when the pipeline has no outputs). */
int64_t sl_output_rows(const sl_output *o);
/* Patches the headers and closes the files. Returns 0, or -1 with the first error. Frees o. */
int sl_output_close(sl_output *o, char *err, size_t errcap);

#endif
