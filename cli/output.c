/* output.c — streaming the result batches of a session into .npy files (see output.h). */
#include "output.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "errbuf.h"
#include "npy.h"

typedef struct output_column {
    sluice_column_info info;
    sl_npy_writer writer;
} output_column;

struct sl_output {
    size_t ncols;
    output_column *cols;
};

int sl_output_open(sl_output **out, const sluice_pipeline *pipeline, const char *dir, char *err,
                   size_t errcap) {
    *out = NULL;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return sl_errf(err, errcap, "%s: cannot create the output directory: %s", dir,
                       strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sl_errf(err, errcap, "%s: exists and is not a directory", dir);
    sl_output *o = calloc(1, sizeof *o);
    size_t n = sluice_pipeline_output_count(pipeline);
    if (!o || !(o->cols = calloc(n ? n : 1, sizeof *o->cols))) {
        free(o);
        return sl_errf(err, errcap, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        output_column *c = &o->cols[i];
        if (sluice_pipeline_output(pipeline, i, &c->info) != SLUICE_OK) {
            sl_output_close(o, NULL, 0);
            return sl_errf(err, errcap, "cannot read the pipeline's output %zu", i);
        }
        size_t len = strlen(dir) + strlen(c->info.name) + 6;
        char *path = malloc(len);
        if (!path) {
            sl_output_close(o, NULL, 0);
            return sl_errf(err, errcap, "out of memory");
        }
        snprintf(path, len, "%s/%s.npy", dir, c->info.name);
        int rc = sl_npy_writer_open(&c->writer, path, c->info.type, err, errcap);
        free(path);
        o->ncols = i + 1;
        if (rc != 0) {
            sl_output_close(o, NULL, 0);
            return -1;
        }
    }
    o->ncols = n;
    *out = o;
    return 0;
}

int sl_output_append(sl_output *o, const sluice_batch *batch, char *err, size_t errcap) {
    for (size_t i = 0; i < o->ncols; i++) {
        output_column *c = &o->cols[i];
        sluice_column col;
        sluice_status st = sluice_batch_column_by_name(batch, c->info.name, &col);
        if (st != SLUICE_OK)
            return sl_errf(err, errcap, "result batch lacks output column '%s': %s",
                           c->info.name, sluice_strerror(st));
        if (col.type != c->info.type)
            return sl_errf(err, errcap, "result column '%s' is %s, the pipeline said %s",
                           c->info.name, sluice_type_name(col.type),
                           sluice_type_name(c->info.type));
        if (sl_npy_writer_append(&c->writer, col.data, col.length, err, errcap) != 0) return -1;
    }
    return 0;
}

int64_t sl_output_rows(const sl_output *o) {
    return o->ncols > 0 ? o->cols[0].writer.length : 0;
}

int sl_output_close(sl_output *o, char *err, size_t errcap) {
    if (!o) return 0;
    int rc = 0;
    for (size_t i = 0; i < o->ncols; i++)
        if (sl_npy_writer_close(&o->cols[i].writer, rc == 0 ? err : NULL, errcap) != 0) rc = -1;
    free(o->cols);
    free(o);
    return rc;
}
