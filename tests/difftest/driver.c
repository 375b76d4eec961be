/* driver.c — the differential tester's bridge to the library: loads one pipeline, reads its
 * inputs as .npy files, pushes them to a session on the chosen backend cut at given row
 * positions, and writes every output column as .npy. It uses only the public API (sluice.h),
 * so what it exercises is exactly what an embedding program sees; the reference, the
 * generator and the judging live in the Python side (difftest.py).
 *
 *   driver PIPELINE INDIR OUTDIR [--backend cpu|cuda] [--threads N] [--max-batch-rows N]
 *          [--sort-memory BYTES] [--warmup | --oneshot] [--pull-at-end]
 *
 * INDIR holds NAME.npy for every input, optionally params.txt ("B NAME TEXT" per line: set
 * parameter NAME to TEXT with sluice_session_set_param just before push number B, counting
 * from 0), and cuts.txt: row positions (one per line,
 * non-decreasing, each in [0, rows]) where the stream is cut into batches; a repeated position
 * pushes a zero-row batch. An offsets input's file holds the offsets of the whole stream; each
 * batch gets the offsets that fall inside it, shifted to start at 0 and closed at its row count
 * (so a cut is also a segment boundary, as the API says an offsets input describes whole
 * segments of its own batch); an empty segment goes to the batch that starts at or after it
 * (at the stream's end, the last batch with rows) and a zero-row batch gets none. Outputs are
 * pulled after every push and after the flush, and concatenated; OUTDIR/outputs.txt lists
 * "NAME TYPE" per output in the pipeline's order.
 * --warmup first pushes the whole stream without pulling and calls sluice_session_reset, which
 * must leave nothing of it behind; --oneshot runs sluice_run on the whole input instead
 * (cuts and parameter changes are ignored); --pull-at-end pulls only after the flush;
 * --sort-memory sets sort_memory_bytes (a stream-wide sort spills sorted runs to $TMPDIR).
 * Without either, OUTDIR/pulls.txt has a line per push: the rows pulled so far after it. Every
 * other push lists its columns in reverse order (the API matches them by name).
 *
 * Exit status: 0 success; 2 usage or file problems; 3 the pipeline did not load; 4 a push,
 * flush or pull failed; 77 the backend is not available here (the caller skips). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"
#include "npy.h"

#define MAX_COLS 1100

static void print_diags(const sluice_context *ctx, const char *what, sluice_status st) {
    fprintf(stderr, "driver: %s failed: %s\n", what, sluice_status_name(st));
    char msg[2048];
    for (size_t i = 0; i < sluice_context_diagnostic_count(ctx); i++) {
        sluice_diagnostic_format(sluice_context_diagnostic(ctx, i), msg, sizeof msg);
        fputs(msg, stderr);
    }
}

/* Reads a whole .npy file; returns its data (malloc'd, caller frees) or NULL with a message. */
static void *read_npy(const char *path, sl_npy_header *h) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "driver: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "driver: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    char err[256];
    if (sl_npy_parse_header(buf, (size_t)size, h, err, sizeof err) != 0 ||
        sl_npy_check_size(h, (uint64_t)size, err, sizeof err) != 0) {
        fprintf(stderr, "driver: %s: %s\n", path, err);
        free(buf);
        return NULL;
    }
    size_t bytes = (size_t)h->length * sluice_type_size(h->type);
    void *data = malloc(bytes ? bytes : 1);
    if (!data) {
        free(buf);
        return NULL;
    }
    memcpy(data, buf + h->data_offset, bytes);
    free(buf);
    return data;
}

typedef struct outcol {
    const char *name;
    sluice_type type;
    unsigned char *data;
    int64_t length, cap;
} outcol;

/* Appends every output column of a pulled batch; returns 0 or -1 with a message. */
static int take_batch(sluice_batch *b, outcol *outs, size_t nout) {
    int64_t rows = sluice_batch_rows(b);
    for (size_t i = 0; i < nout; i++) {
        sluice_column c;
        if (sluice_batch_column_by_name(b, outs[i].name, &c) != SLUICE_OK) {
            fprintf(stderr, "driver: a result batch lacks output column %s\n", outs[i].name);
            return -1;
        }
        if (c.type != outs[i].type || c.length != rows) {
            fprintf(stderr, "driver: result column %s has type %s length %lld (want %s, %lld)\n",
                    outs[i].name, sluice_type_name(c.type), (long long)c.length,
                    sluice_type_name(outs[i].type), (long long)rows);
            return -1;
        }
        size_t es = sluice_type_size(c.type);
        if (outs[i].length + rows > outs[i].cap) {
            int64_t cap = (outs[i].cap ? outs[i].cap * 2 : 1024);
            while (cap < outs[i].length + rows) cap *= 2;
            unsigned char *d = realloc(outs[i].data, (size_t)cap * es);
            if (!d) return -1;
            outs[i].data = d;
            outs[i].cap = cap;
        }
        if (rows > 0) memcpy(outs[i].data + (size_t)outs[i].length * es, c.data, (size_t)rows * es);
        outs[i].length += rows;
    }
    return 0;
}

static int pull_all(sluice_context *ctx, sluice_session *s, outcol *outs, size_t nout) {
    for (;;) {
        sluice_batch *b = NULL;
        sluice_status st = sluice_session_pull(s, &b);
        if (st != SLUICE_OK) {
            print_diags(ctx, "pull", st);
            return -1;
        }
        if (!b) return 0;
        int r = take_batch(b, outs, nout);
        sluice_batch_free(b);
        if (r) return -1;
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: driver PIPELINE INDIR OUTDIR [--backend cpu|cuda] [--threads N]"
                        " [--max-batch-rows N] [--sort-memory BYTES] [--warmup | --oneshot]"
                        " [--pull-at-end]\n");
        return 2;
    }
    const char *pipe_path = argv[1], *indir = argv[2], *outdir = argv[3];
    sluice_backend backend = SLUICE_BACKEND_CPU;
    int threads = 0, warmup = 0, oneshot = 0, pull_at_end = 0;
    long long max_rows = 0, sort_memory = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "cpu")) backend = SLUICE_BACKEND_CPU;
            else if (!strcmp(argv[i], "cuda")) backend = SLUICE_BACKEND_CUDA;
            else {
                fprintf(stderr, "driver: unknown backend %s (cpu or cuda)\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--warmup")) {
            warmup = 1;
        } else if (!strcmp(argv[i], "--oneshot")) {
            oneshot = 1;
        } else if (!strcmp(argv[i], "--pull-at-end")) {
            pull_at_end = 1;
        } else if (!strcmp(argv[i], "--max-batch-rows") && i + 1 < argc) {
            max_rows = atoll(argv[++i]);
        } else if (!strcmp(argv[i], "--sort-memory") && i + 1 < argc) {
            sort_memory = atoll(argv[++i]);
        } else {
            fprintf(stderr, "driver: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (!sluice_backend_available(backend)) {
        fprintf(stderr, "driver: backend %s is not available here\n", sluice_backend_name(backend));
        return 77;
    }

    sluice_context_options copt = SLUICE_CONTEXT_OPTIONS_INIT;
    copt.cpu_threads = threads;
    sluice_context *ctx = NULL;
    if (sluice_context_create(&ctx, &copt) != SLUICE_OK) return 2;
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_file(ctx, pipe_path, &p);
    if (st != SLUICE_OK) {
        print_diags(ctx, "load", st);
        sluice_context_destroy(ctx);
        return 3;
    }

    /* Inputs. */
    size_t nin = sluice_pipeline_input_count(p);
    if (nin > MAX_COLS) {
        fprintf(stderr, "driver: more than %d inputs\n", MAX_COLS);
        return 2;
    }
    sluice_column_info infos[MAX_COLS];
    void *data[MAX_COLS];
    int64_t lens[MAX_COLS];
    int64_t rows = -1;
    char path[4096];
    int rc = 0;
    for (size_t i = 0; i < nin; i++) {
        sluice_pipeline_input(p, i, &infos[i]);
        snprintf(path, sizeof path, "%s/%s.npy", indir, infos[i].name);
        sl_npy_header h;
        data[i] = read_npy(path, &h);
        if (!data[i]) return 2;
        sluice_type want = infos[i].role == SLUICE_ROLE_OFFSETS ? SLUICE_I64 : infos[i].type;
        if (h.type != want) {
            fprintf(stderr, "driver: %s holds %s, the pipeline wants %s\n", path,
                    sluice_type_name(h.type), sluice_type_name(want));
            return 2;
        }
        lens[i] = h.length;
        if (infos[i].role == SLUICE_ROLE_DATA) {
            if (rows >= 0 && rows != h.length) {
                fprintf(stderr, "driver: input columns differ in length\n");
                return 2;
            }
            rows = h.length;
        }
    }
    if (rows < 0) rows = 0;
    size_t noffsets = 0;
    for (size_t i = 0; i < nin; i++) noffsets += infos[i].role == SLUICE_ROLE_OFFSETS;
    if (noffsets > 1) { /* one shared buffer below; the generator declares at most one */
        fprintf(stderr, "driver: more than one offsets input is not supported\n");
        return 2;
    }

    /* Cuts. */
    int64_t *cuts = NULL;
    size_t ncuts = 0, cutcap = 0;
    snprintf(path, sizeof path, "%s/cuts.txt", indir);
    FILE *cf = fopen(path, "r");
    if (cf) {
        long long v;
        while (fscanf(cf, "%lld", &v) == 1) {
            if (v < 0 || v > rows || (ncuts && v < cuts[ncuts - 1])) {
                fprintf(stderr, "driver: bad cut %lld (rows %lld)\n", v, (long long)rows);
                return 2;
            }
            if (ncuts == cutcap) {
                cutcap = cutcap ? cutcap * 2 : 16;
                cuts = realloc(cuts, cutcap * sizeof *cuts);
                if (!cuts) return 2;
            }
            cuts[ncuts++] = v;
        }
        fclose(cf);
    }

    size_t nout = sluice_pipeline_output_count(p);
    outcol *outs = calloc(nout ? nout : 1, sizeof *outs);
    for (size_t i = 0; i < nout; i++) {
        sluice_column_info oi;
        sluice_pipeline_output(p, i, &oi);
        outs[i].name = oi.name;
        outs[i].type = oi.type;
    }

    sluice_session_options sopt = SLUICE_SESSION_OPTIONS_INIT;
    sopt.backend = backend;
    sopt.max_batch_rows = max_rows;
    sopt.sort_memory_bytes = sort_memory;
    sluice_session *s = NULL;
    st = sluice_session_open(p, &sopt, &s);
    if (st != SLUICE_OK) {
        print_diags(ctx, "session open", st);
        return st == SLUICE_ERR_BACKEND_UNAVAILABLE ? 77 : 4;
    }

    /* Parameter changes between pushes. */
    typedef struct pset {
        long long batch;
        char name[65], text[256];
    } pset;
    pset *psets = NULL;
    size_t npsets = 0;
    snprintf(path, sizeof path, "%s/params.txt", indir);
    FILE *pf = fopen(path, "r");
    if (pf) {
        pset ps;
        while (fscanf(pf, "%lld %64s %255s", &ps.batch, ps.name, ps.text) == 3) {
            pset *np = realloc(psets, (npsets + 1) * sizeof *psets);
            if (!np) return 2;
            psets = np;
            psets[npsets++] = ps;
        }
        fclose(pf);
    }

    int64_t *boffs = NULL;
    /* The rows pulled so far after each push (pulls.txt): when rows come out, not only which. */
    int64_t *pulled = calloc(ncuts + 1, sizeof *pulled);
    if (!pulled) return 2;
    if (oneshot) { /* sluice_run: one batch, flushed, every output in one batch */
        sluice_column cols[MAX_COLS];
        for (size_t i = 0; i < nin; i++) {
            cols[i].name = infos[i].name;
            cols[i].type = infos[i].role == SLUICE_ROLE_OFFSETS ? SLUICE_I64 : infos[i].type;
            cols[i].data = data[i];
            cols[i].length = lens[i];
        }
        sluice_batch *b = NULL;
        st = sluice_run(p, &sopt, cols, nin, &b);
        if (st != SLUICE_OK) {
            print_diags(ctx, "sluice_run", st);
            rc = 4;
        } else {
            if (take_batch(b, outs, nout)) rc = 4;
            sluice_batch_free(b);
        }
    }
    /* With --warmup the whole stream is pushed once (parameter changes aside) and left
     * unpulled, then sluice_session_reset must drop that stream's state and outputs. */
    for (int pass = warmup ? 0 : 1; pass < 2 && rc == 0 && !oneshot; pass++)
    for (size_t b = 0; b <= ncuts && rc == 0; b++) {
        if (pass == 0 && b == ncuts) {
            st = sluice_session_reset(s);
            if (st != SLUICE_OK) {
                print_diags(ctx, "reset", st);
                rc = 4;
            }
            break;
        }
        for (size_t i = 0; i < npsets && rc == 0 && pass == 1; i++) {
            if (psets[i].batch != (long long)b) continue;
            st = sluice_session_set_param(s, psets[i].name, psets[i].text);
            if (st != SLUICE_OK) {
                print_diags(ctx, "set_param", st);
                rc = 4;
            }
        }
        if (rc) break;
        int64_t lo = b == 0 ? 0 : cuts[b - 1], hi = b == ncuts ? rows : cuts[b];
        sluice_column cols[MAX_COLS];
        for (size_t i = 0; i < nin; i++) {
            cols[i].name = infos[i].name;
            if (infos[i].role == SLUICE_ROLE_OFFSETS) {
                /* The stream's segments cut at lo and hi. An empty segment (a repeated
                 * offset) goes to the batch whose rows start at or after it, or to the last
                 * batch with rows for those at the stream's end, so a reduce sees each one
                 * once; the batch's leading 0 stands for one offset equal to lo, if any. */
                const int64_t *o = data[i];
                boffs = realloc(boffs, (size_t)(lens[i] + 2) * sizeof *boffs);
                int64_t k = 0;
                boffs[k++] = 0;
                int skip = lo > 0;
                for (int64_t j = 1; hi > lo && j + 1 < lens[i]; j++) {
                    if (o[j] < lo || o[j] > hi || (o[j] == hi && hi < rows)) continue;
                    if (o[j] == lo && skip) {
                        skip = 0;
                        continue;
                    }
                    boffs[k++] = o[j] - lo;
                }
                if (hi > lo) boffs[k++] = hi - lo; /* a zero-row batch has no segments: [0] */
                cols[i].type = SLUICE_I64;
                cols[i].data = boffs;
                cols[i].length = k;
            } else {
                cols[i].type = infos[i].type;
                cols[i].data = (const unsigned char *)data[i] + (size_t)lo * sluice_type_size(infos[i].type);
                cols[i].length = hi - lo;
            }
        }
        if (b % 2 == 1) /* columns are matched by name: every other push lists them reversed */
            for (size_t i = 0; i < nin / 2; i++) {
                sluice_column t = cols[i];
                cols[i] = cols[nin - 1 - i];
                cols[nin - 1 - i] = t;
            }
        st = sluice_session_push(s, cols, nin);
        if (st != SLUICE_OK) {
            print_diags(ctx, "push", st);
            rc = 4;
            break;
        }
        if (pass == 1 && !pull_at_end && pull_all(ctx, s, outs, nout)) rc = 4;
        pulled[b] = nout ? outs[0].length : 0;
    }
    if (rc == 0 && !oneshot) {
        st = sluice_session_flush(s);
        if (st != SLUICE_OK) {
            print_diags(ctx, "flush", st);
            rc = 4;
        } else if (pull_all(ctx, s, outs, nout)) {
            rc = 4;
        }
    }
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/outputs.txt", outdir);
        FILE *lf = fopen(path, "w");
        if (!lf) {
            fprintf(stderr, "driver: cannot write %s\n", path);
            rc = 2;
        }
        for (size_t i = 0; i < nout && rc == 0; i++) {
            char err[256];
            fprintf(lf, "%s %s\n", outs[i].name, sluice_type_name(outs[i].type));
            snprintf(path, sizeof path, "%s/%s.npy", outdir, outs[i].name);
            if (sl_npy_write_file(path, outs[i].type, outs[i].data, outs[i].length, err, sizeof err)) {
                fprintf(stderr, "driver: %s: %s\n", path, err);
                rc = 2;
            }
        }
        if (lf) fclose(lf);
    }
    for (size_t i = 0; i < nout; i++) free(outs[i].data);
    free(outs);
    if (rc == 0 && !oneshot && !pull_at_end) {
        snprintf(path, sizeof path, "%s/pulls.txt", outdir);
        FILE *pf2 = fopen(path, "w");
        if (!pf2) {
            fprintf(stderr, "driver: cannot write %s\n", path);
            rc = 2;
        } else {
            for (size_t b = 0; b <= ncuts; b++) fprintf(pf2, "%lld\n", (long long)pulled[b]);
            fclose(pf2);
        }
    }
    free(pulled);
    free(boffs);
    free(psets);
    free(cuts);
    for (size_t i = 0; i < nin; i++) free(data[i]);
    sluice_session_close(s);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    return rc;
}
