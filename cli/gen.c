/* gen.c — synthetic columns (see gen.h) and the `sluice gen` command, which writes one .npy
 * per input column, streaming so that N may exceed memory. */
#include "gen.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "errbuf.h"
#include "npy.h"

/* splitmix64's finaliser: a bijective mix, good enough that neighbouring counters give
 * unrelated values. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t draw(uint64_t seed, uint64_t column, uint64_t index, uint64_t lane) {
    return mix64(mix64(mix64(seed ^ 0x9e3779b97f4a7c15ULL) + column * 0x632be59bd9b4e019ULL +
                       lane) + index);
}

/* Uniform in (0, 1): 53 random bits, never exactly 0 (log(0) below). */
static double unit(uint64_t bits) { return ((double)(bits >> 11) + 0.5) * 0x1.0p-53; }

static double normal(uint64_t seed, uint64_t column, uint64_t index) {
    double u1 = unit(draw(seed, column, index, 1)), u2 = unit(draw(seed, column, index, 2));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2); /* Box-Muller */
}

void sl_gen_values(sluice_type type, uint64_t seed, uint64_t column, int64_t start, int64_t n,
                   void *dst) {
    for (int64_t r = 0; r < n; r++) {
        uint64_t idx = (uint64_t)(start + r), bits = draw(seed, column, idx, 0);
        int64_t ranged = (int64_t)(bits % 2000001u) - 1000000;
        switch (type) {
        case SLUICE_BOOL: ((uint8_t *)dst)[r] = (uint8_t)(bits >> 63); break;
        case SLUICE_I8: ((int8_t *)dst)[r] = (int8_t)(uint8_t)bits; break;
        case SLUICE_U8: ((uint8_t *)dst)[r] = (uint8_t)bits; break;
        case SLUICE_I16: ((int16_t *)dst)[r] = (int16_t)(uint16_t)bits; break;
        case SLUICE_U16: ((uint16_t *)dst)[r] = (uint16_t)bits; break;
        case SLUICE_U32: ((uint32_t *)dst)[r] = (uint32_t)bits; break;
        case SLUICE_I32: ((int32_t *)dst)[r] = (int32_t)ranged; break;
        case SLUICE_I64: ((int64_t *)dst)[r] = ranged; break;
        case SLUICE_U64: ((uint64_t *)dst)[r] = bits >> 32; break;
        case SLUICE_F16: ((uint16_t *)dst)[r] = sluice_f32_to_f16((float)normal(seed, column, idx)); break;
        case SLUICE_F32: ((float *)dst)[r] = (float)normal(seed, column, idx); break;
        case SLUICE_F64: ((double *)dst)[r] = normal(seed, column, idx); break;
        default: break;
        }
    }
}

void sl_gen_segments_init(sl_gen_segments *it, uint64_t seed, uint64_t column, int64_t rows) {
    *it = (sl_gen_segments){seed, column, rows, 0, 0};
}

bool sl_gen_segments_next(sl_gen_segments *it, int64_t *end) {
    if (it->at >= it->rows) return false;
    int64_t len = (int64_t)(draw(it->seed, it->column, (uint64_t)it->index++, 3) % 33u);
    it->at = len > it->rows - it->at ? it->rows : it->at + len;
    *end = it->at;
    return true;
}

int sl_gen_offsets(uint64_t seed, uint64_t column, int64_t rows, int64_t **out, int64_t *count) {
    /* Mean 16 rows a segment: rows/8 + 16 entries is ample; grow if the draw is unlucky. */
    size_t cap = (size_t)(rows / 8 + 16), k = 0;
    int64_t *o = malloc(cap * sizeof *o), end;
    if (!o) return -1;
    o[0] = 0;
    sl_gen_segments it;
    sl_gen_segments_init(&it, seed, column, rows);
    while (sl_gen_segments_next(&it, &end)) {
        if (k + 2 > cap) {
            int64_t *grown = realloc(o, cap * 2 * sizeof *o);
            if (!grown) {
                free(o);
                return -1;
            }
            o = grown;
            cap *= 2;
        }
        o[++k] = end;
    }
    *out = o;
    *count = (int64_t)k + 1;
    return 0;
}

/* ---- `sluice gen` ---------------------------------------------------------------------- */

#define GEN_CHUNK_ROWS (INT64_C(1) << 16)
/* Threads that compute and write a column's chunks (at most; one per core). Every value
 * depends on its row alone, so the file is the same for any number. */
#define GEN_MAX_THREADS 16

typedef struct gen_job {
    const sl_npy_writer *w;
    sluice_type type;
    uint64_t seed, column, pos; /* pos: where row 0 goes in the file */
    int64_t rows;
    int thread, nthreads;
    int rc;
    char err[512];
} gen_job;

/* Chunks thread, thread + nthreads, ... of the column. */
static void *gen_chunks(void *arg) {
    gen_job *j = arg;
    size_t elem = sluice_type_size(j->type);
    void *chunk = malloc((size_t)GEN_CHUNK_ROWS * elem);
    if (!chunk) {
        j->rc = sl_errf(j->err, sizeof j->err, "out of memory");
        return NULL;
    }
    for (int64_t at = (int64_t)j->thread * GEN_CHUNK_ROWS; at < j->rows && j->rc == 0;
         at += (int64_t)j->nthreads * GEN_CHUNK_ROWS) {
        int64_t n = j->rows - at < GEN_CHUNK_ROWS ? j->rows - at : GEN_CHUNK_ROWS;
        sl_gen_values(j->type, j->seed, j->column, at, n, chunk);
        j->rc = sl_npy_writer_write_at(j->w, j->pos + (uint64_t)at * elem, chunk, (size_t)n * elem,
                                       j->err, sizeof j->err);
    }
    free(chunk);
    return NULL;
}

/* Writes one column of `rows` rows into path, its chunks computed and written by several
 * threads at once. */
static int write_data_column(const char *path, sluice_type type, uint64_t seed, uint64_t column,
                             int64_t rows) {
    char err[512];
    sl_npy_writer w;
    if (sl_npy_writer_open(&w, path, type, err, sizeof err) != 0) return sl_fail("%s", err);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t chunks = (rows + GEN_CHUNK_ROWS - 1) / GEN_CHUNK_ROWS;
    int nthreads = cores < 1 ? 1 : cores > GEN_MAX_THREADS ? GEN_MAX_THREADS : (int)cores;
    if (nthreads > chunks) nthreads = chunks < 1 ? 1 : (int)chunks;
    gen_job jobs[GEN_MAX_THREADS];
    pthread_t threads[GEN_MAX_THREADS];
    uint64_t pos = sl_npy_writer_place(&w, rows);
    int started = 0;
    for (int t = 0; t < nthreads; t++) {
        jobs[t] = (gen_job){&w, type, seed, column, pos, rows, t, nthreads, 0, ""};
        /* Thread 0 is this one; a thread that cannot start leaves its chunks undone: fail. */
        if (t > 0 && pthread_create(&threads[t], NULL, gen_chunks, &jobs[t]) != 0) {
            jobs[t].rc = sl_errf(jobs[t].err, sizeof jobs[t].err, "cannot start a thread");
            break;
        }
        started = t + 1;
    }
    if (started > 0) gen_chunks(&jobs[0]);
    int rc = 0;
    for (int t = 0; t < nthreads; t++) {
        if (t > 0 && t < started) pthread_join(threads[t], NULL);
        if (t <= started && t < nthreads && jobs[t].rc != 0 && rc == 0) {
            rc = -1;
            memcpy(err, jobs[t].err, sizeof err);
        }
    }
    if (sl_npy_writer_close(&w, rc == 0 ? err : NULL, sizeof err) != 0) rc = -1;
    return rc == 0 ? SL_EXIT_OK : sl_fail("%s", err);
}

/* Streams the offsets of an offsets input over `rows` rows into path. */
static int write_offsets_column(const char *path, uint64_t seed, uint64_t column, int64_t rows) {
    char err[512];
    sl_npy_writer w;
    if (sl_npy_writer_open(&w, path, SLUICE_I64, err, sizeof err) != 0) return sl_fail("%s", err);
    int64_t chunk[4096], m = 0, end;
    int rc = 0;
    chunk[m++] = 0;
    sl_gen_segments it;
    sl_gen_segments_init(&it, seed, column, rows);
    while (rc == 0 && sl_gen_segments_next(&it, &end)) {
        chunk[m++] = end;
        if (m == (int64_t)(sizeof chunk / sizeof chunk[0])) {
            rc = sl_npy_writer_append(&w, chunk, m, err, sizeof err);
            m = 0;
        }
    }
    if (rc == 0 && m > 0) rc = sl_npy_writer_append(&w, chunk, m, err, sizeof err);
    if (sl_npy_writer_close(&w, rc == 0 ? err : NULL, sizeof err) != 0) rc = -1;
    return rc == 0 ? SL_EXIT_OK : sl_fail("%s", err);
}

static int gen_main(const sl_command *self, int argc, char **argv) {
    const char *path = NULL, *dir = NULL, *value;
    int64_t rows = -1, seed = 1;
    for (int i = 1; i < argc;) {
        int got;
        if ((got = sl_option(self, argc, argv, &i, "rows", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 0, INT64_MAX / 2, &rows))
                return sl_usage_error(self, "--rows needs a non-negative integer (or 2^K), not '%s'",
                                      value);
        } else if ((got = sl_option(self, argc, argv, &i, "seed", &value)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
            if (!sl_parse_int(value, 0, INT64_MAX, &seed))
                return sl_usage_error(self, "--seed needs a non-negative integer, not '%s'", value);
        } else if ((got = sl_option(self, argc, argv, &i, "out", &dir)) != 0) {
            if (got < 0) return SL_EXIT_USAGE;
        } else if (sl_take_pipeline_arg(self, argv, &i, &path) != SL_EXIT_OK) {
            return SL_EXIT_USAGE;
        }
    }
    if (!path) return sl_usage_error(self, "which pipeline file?");
    if (rows < 0) return sl_usage_error(self, "--rows N is required");
    if (!dir) return sl_usage_error(self, "--out DIR is required");

    sluice_context *ctx = sl_context_new(0);
    sluice_pipeline *p = ctx ? sl_load_pipeline(ctx, path) : NULL;
    int rc = p ? SL_EXIT_OK : SL_EXIT_ERROR;
    if (rc == SL_EXIT_OK && mkdir(dir, 0777) != 0 && errno != EEXIST)
        rc = sl_fail("%s: cannot create the directory: %s", dir, strerror(errno));
    for (size_t c = 0; rc == SL_EXIT_OK && c < sluice_pipeline_input_count(p); c++) {
        sluice_column_info info;
        if (sluice_pipeline_input(p, c, &info) != SLUICE_OK) {
            rc = sl_fail("cannot read the pipeline's input %zu", c);
            break;
        }
        size_t len = strlen(dir) + strlen(info.name) + 6;
        char *file = malloc(len);
        if (!file) {
            rc = sl_fail("out of memory");
            break;
        }
        snprintf(file, len, "%s/%s.npy", dir, info.name);
        rc = info.role == SLUICE_ROLE_OFFSETS
                 ? write_offsets_column(file, (uint64_t)seed, c, rows)
                 : write_data_column(file, info.type, (uint64_t)seed, c, rows);
        free(file);
    }
    if (rc == SL_EXIT_OK)
        printf("%s: %" PRId64 " rows of %zu columns written to %s\n", path, rows,
               sluice_pipeline_input_count(p), dir);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return rc;
}

const sl_command sl_command_gen = {
    "gen", "PIPELINE --rows N --out DIR [--seed S]",
    "Write a synthetic input stream for a pipeline: DIR/COLUMN.npy per input column.",
    "Values per type: bool half true; i8 u8 i16 u16 u32 over their whole range; i32 i64 in\n"
    "[-1e6, 1e6]; u64 in [0, 2^32); floats standard normal; an offsets input gets segments of\n"
    "0..32 rows (mean 16) covering the N rows. The same seed gives the same files.\n\n"
    "options:\n"
    "  --rows N    data rows (2^K accepted)\n"
    "  --out DIR   created if missing\n"
    "  --seed S    default 1\n",
    gen_main, (const char *const[]){"rows", "out", "seed", NULL}};
