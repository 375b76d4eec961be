/* fuzz_session.c — libFuzzer harness for sessions: the input is a program of API calls
 * (push a good batch, push a bad one of each kind, push zero rows, flush, pull, reset,
 * set_param, close and reopen, and "refuse the Nth host allocation of the next call") run
 * against one of eight fixed pipelines: a map/filter/scan chain, a stream-wide sort, a
 * segmented scan over an offsets input, a mix of key segments, a linear recurrence, a
 * per-batch scan and a per-batch sort, and four reduces: the whole stream (after a filter and
 * a scan), per batch, per segment of an offsets input, and per run of equal keys (with a
 * scan after it).
 *
 * Invariants checked: every status is the one the API documents for that call in that state
 * (or SLUICE_ERR_NO_MEMORY when an allocation was refused); a rejected batch, or a call that
 * ran out of memory, changes nothing; after a flush, pulling drains and then yields NULL;
 * every result batch has the pipeline's output columns; once flushed, the rows out are what
 * the pipeline promises (all rows in; one row for a whole-stream reduce; one per accepted
 * batch for a per-batch reduce; one per offsets segment); and for the exact pipelines the
 * output of the stream as the program cut it equals the output of one session given the
 * whole stream as one batch (batch-cut invariance). */
#include <inttypes.h>
#include <math.h>

#include "fuzz_util.h"

/* How many rows a flushed stream gives. */
typedef enum fz_rows {
    FZ_ROWS_ANY,      /* data dependent (filters, key runs) */
    FZ_ROWS_ALL,      /* rows out == rows in */
    FZ_ROWS_ONE,      /* a whole-stream reduce: one row, even for an empty stream */
    FZ_ROWS_BATCHES,  /* a per-batch reduce: one row per accepted push, empty ones included */
    FZ_ROWS_SEGMENTS, /* a reduce over an offsets input: one row per segment, empty included */
} fz_rows;

typedef struct fz_pipe {
    const char *yaml;
    bool cut_invariant; /* output independent of batch cuts, compared bit for bit */
    fz_rows rows;       /* the rows out once flushed */
    const char *param;  /* a param name, or NULL */
} fz_pipe;

static const fz_pipe fz_pipes[] = {
    {"sluice: 1\n"
     "name: fz-cull\n"
     "params:\n"
     "  limit: {type: f32, default: 10.0}\n"
     "input:\n"
     "  x: f32\n"
     "  y: f32\n"
     "  id: u32\n"
     "stages:\n"
     "  - map:\n"
     "      r2: x*x + y*y\n"
     "  - filter: r2 < limit && !isnan(x)\n"
     "  - scan: {of: id, op: sum, kind: exclusive, into: id_before}\n"
     "  - scan: {op: count, into: n}\n"
     "output: [id, r2, id_before, n]\n",
     true, FZ_ROWS_ANY, "limit"},
    {"sluice: 1\n"
     "name: fz-sort\n"
     "input:\n"
     "  k: i16\n"
     "  v: f64\n"
     "  tag: u64\n"
     "stages:\n"
     "  - sort: {keys: [k, v], order: descending}\n",
     true, FZ_ROWS_ALL, NULL},
    {"sluice: 1\n"
     "name: fz-ragged\n"
     "input:\n"
     "  rows: {type: i64, role: offsets}\n"
     "  v: i32\n"
     "stages:\n"
     "  - segmented_scan: {of: v, op: sum, segments: rows, into: run}\n"
     "  - segmented_scan: {of: v, op: max, segments: rows, kind: exclusive, into: best}\n",
     true, FZ_ROWS_ALL, NULL},
    {"sluice: 1\n"
     "name: fz-mix\n"
     "params:\n"
     "  decay: {type: f32, default: 0.5}\n"
     "input:\n"
     "  k: u8\n"
     "  a: f32\n"
     "  b: f32\n"
     "stages:\n"
     "  - segmented_scan: {of: b, op: sum, segments: {key: k}, into: ks}\n"
     "  - scan: {op: linrec, a: a * decay, b: b, into: h}\n"
     "  - scan: {of: k, op: xor, reset: batch, into: kx}\n"
     "  - sort: {key: a, per: batch}\n",
     false, FZ_ROWS_ALL, "decay"},
    /* The reduces use exact operators only (integer sums, min/max, bitwise, count, integer
     * linrec), so that the cut stream must match the whole one bit for bit. */
    {"sluice: 1\n"
     "name: fz-total\n"
     "params:\n"
     "  limit: {type: i32, default: 100}\n"
     "input:\n"
     "  x: i32\n"
     "  y: f32\n"
     "stages:\n"
     "  - filter: x < limit\n"
     "  - scan: {of: x, op: sum, into: run}\n"
     "  - reduce:\n"
     "      values:\n"
     "        - {op: sum, of: x, into: sx}\n"
     "        - {op: count, into: n}\n"
     "        - {op: min, of: y, into: lo}\n"
     "        - {op: max, of: run, into: hi}\n"
     "        - {op: xor, of: x, into: xx}\n",
     true, FZ_ROWS_ONE, "limit"},
    {"sluice: 1\n"
     "name: fz-per-batch\n"
     "input:\n"
     "  v: i64\n"
     "  w: u16\n"
     "stages:\n"
     "  - reduce:\n"
     "      per: batch\n"
     "      index: b\n"
     "      values:\n"
     "        - {op: sum, of: v, into: sv}\n"
     "        - {op: max, of: w, into: mw}\n"
     "        - {op: and, of: w, into: aw}\n",
     false, FZ_ROWS_BATCHES, NULL},
    {"sluice: 1\n"
     "name: fz-ragged-reduce\n"
     "input:\n"
     "  rows: {type: i64, role: offsets}\n"
     "  v: i32\n"
     "  f: f64\n"
     "stages:\n"
     "  - map: {g: v / 2}\n"
     "  - reduce:\n"
     "      segments: rows\n"
     "      index: seg\n"
     "      values:\n"
     "        - {op: sum, of: g, into: total}\n"
     "        - {op: count, into: n}\n"
     "        - {op: min, of: f, into: lo}\n"
     "        - {op: linrec, a: v, b: g, into: h}\n",
     true, FZ_ROWS_SEGMENTS, NULL},
    {"sluice: 1\n"
     "name: fz-runs\n"
     "input:\n"
     "  k: u8\n"
     "  x: i16\n"
     "  y: f32\n"
     "stages:\n"
     "  - map: {key: k / 64}\n"
     "  - reduce:\n"
     "      segments: {key: key}\n"
     "      index: run\n"
     "      values:\n"
     "        - {op: sum, of: x, into: sx}\n"
     "        - {op: max, of: y, into: hi}\n"
     "        - {op: or, of: x, into: ox}\n"
     "        - {op: count, into: n}\n"
     "  - scan: {of: n, op: sum, into: rows_before, kind: exclusive}\n",
     true, FZ_ROWS_ANY, NULL},
};
#define FZ_NPIPES (sizeof fz_pipes / sizeof fz_pipes[0])
#define FZ_MAX_COLS 8
#define FZ_MAX_STREAM_ROWS 4096

static sluice_context *fz_ctx;
static sluice_pipeline *fz_loaded[FZ_NPIPES];

/* The context's allocator refuses one allocation when `countdown` reaches zero: the program
 * arms it for the call that follows, and it is disarmed after that call. */
static struct {
    long countdown; /* 0: off */
    bool hit;       /* an allocation was refused since the last arming */
} fz_mem;

static bool fz_refuse(void) {
    if (fz_mem.countdown > 0 && --fz_mem.countdown == 0) {
        fz_mem.hit = true;
        return true;
    }
    return false;
}
static void *fz_alloc(size_t size, void *opaque) {
    (void)opaque;
    return fz_refuse() ? NULL : malloc(size);
}
static void *fz_realloc(void *ptr, size_t size, void *opaque) {
    (void)opaque;
    return fz_refuse() ? NULL : realloc(ptr, size);
}
static void fz_free(void *ptr, void *opaque) {
    (void)opaque;
    free(ptr);
}
static const sluice_allocator fz_allocator = {fz_alloc, fz_realloc, fz_free, NULL};

/* The call failed only because an allocation was refused: it must say so. */
static bool fz_out_of_memory(sluice_status r) {
    if (r != SLUICE_ERR_NO_MEMORY) return false;
    sl_fuzz_check(fz_mem.hit, "SLUICE_ERR_NO_MEMORY with no allocation refused");
    fz_check_diagnostics(fz_ctx, r);
    return true;
}

static void fz_init(void) {
    if (fz_ctx) return;
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.allocator = &fz_allocator;
    co.cpu_threads = 1;
    co.kernel_cache_dir = "";
    sl_fuzz_check(sluice_context_create(&fz_ctx, &co) == SLUICE_OK, "context");
    for (size_t i = 0; i < FZ_NPIPES; i++) {
        if (sluice_pipeline_load_string(fz_ctx, fz_pipes[i].yaml, strlen(fz_pipes[i].yaml),
                                        "fuzz_session.c", &fz_loaded[i]) != SLUICE_OK) {
            for (size_t d = 0; d < sluice_context_diagnostic_count(fz_ctx); d++) {
                char buf[1024];
                sluice_diagnostic_format(sluice_context_diagnostic(fz_ctx, d), buf, sizeof buf);
                fputs(buf, stderr);
            }
            sl_fuzz_fail("fixed pipeline %zu does not load", i);
        }
    }
}

/* Columns growing row by row: the accepted stream, or the pulled outputs. */
typedef struct fz_table {
    size_t ncols;
    sluice_type types[FZ_MAX_COLS];
    uint8_t *data[FZ_MAX_COLS];
    size_t cap[FZ_MAX_COLS]; /* bytes allocated at data[i] */
    int64_t rows;
    int64_t *offsets; /* accepted stream only: concatenated, rebased segment bounds */
    int64_t noffsets;
} fz_table;

static void fz_table_clear(fz_table *t) {
    for (size_t i = 0; i < FZ_MAX_COLS; i++) {
        free(t->data[i]);
        t->data[i] = NULL;
        t->cap[i] = 0;
    }
    free(t->offsets);
    t->offsets = NULL;
    t->rows = 0;
    t->noffsets = 0;
}

/* Appends rows of column i (data of rows elements). The column grows geometrically: a
 * session with max_batch_rows 1 gives thousands of one-row batches, and growing by the rows
 * of each would copy the table once a batch (gigabytes through ASan's quarantine). */
static void fz_table_append(fz_table *t, size_t i, const void *data, int64_t rows,
                            int64_t at) {
    size_t w = sluice_type_size(t->types[i]);
    size_t need = (size_t)(at + rows) * w + 1; /* + 1: never NULL, even with no rows */
    if (need > t->cap[i]) {
        size_t cap = t->cap[i] * 2 > need ? t->cap[i] * 2 : need;
        uint8_t *grown = realloc(t->data[i], cap);
        sl_fuzz_check(grown != NULL, "out of memory in the harness");
        t->data[i] = grown;
        t->cap[i] = cap;
    }
    if (rows) memcpy(t->data[i] + (size_t)at * w, data, (size_t)rows * w);
}

typedef struct fz_state {
    const fz_pipe *pipe;
    sluice_pipeline *p;
    sluice_session *s;
    size_t ninputs, noutputs;
    sluice_column_info in[FZ_MAX_COLS];
    int offsets_input; /* -1 when none */
    bool flushed;
    bool param_changed; /* set_param while the stream had rows: no single-batch equivalent */
    bool overflowed;    /* the stream got too long to keep for the comparison */
    int64_t batches;    /* pushes accepted in this stream, empty ones included */
    int64_t segments;   /* offsets segments accepted in this stream */
    char param_now[32]; /* the session's value of the pipeline's param ("": the default) */
    char param_stream[32]; /* its value when the stream's first rows came in */
    fz_table stream, pulled;
} fz_state;

static void fz_open(fz_state *st, int64_t max_rows) {
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    so.max_batch_rows = max_rows;
    sluice_status r = sluice_session_open(st->p, &so, &st->s);
    if (fz_out_of_memory(r)) {
        sl_fuzz_check(st->s == NULL, "failed open left a session");
        fz_mem.countdown = 0;
        r = sluice_session_open(st->p, &so, &st->s);
    }
    sl_fuzz_check(r == SLUICE_OK, "session_open: %s", sluice_status_name(r));
}

static void fz_new_stream(fz_state *st) {
    fz_table_clear(&st->stream);
    fz_table_clear(&st->pulled);
    st->flushed = false;
    st->param_changed = false;
    st->overflowed = false;
    st->batches = 0;
    st->segments = 0;
}

/* Makes a valid batch of `rows` rows; cols/bufs have ninputs entries. */
static void fz_make_good(fz_state *st, int64_t rows, uint64_t seed, sluice_column *cols,
                         void **bufs) {
    for (size_t i = 0; i < st->ninputs; i++) {
        cols[i].name = st->in[i].name;
        cols[i].type = st->in[i].type;
        if ((int)i == st->offsets_input) {
            size_t cap = 2 * (size_t)rows + 2, k = 0;
            int64_t *off = malloc(cap * sizeof *off), at = 0;
            sl_fuzz_check(off != NULL, "harness out of memory");
            uint64_t s = seed ^ 0xABCDEF;
            off[k++] = 0;
            while (at < rows && k < cap - 1) {
                at += (int64_t)(fz_mix(&s) % 5);
                if (at > rows) at = rows;
                off[k++] = at;
            }
            if (off[k - 1] != rows) off[k++] = rows;
            cols[i].data = bufs[i] = off;
            cols[i].length = (int64_t)k;
        } else {
            void *d = malloc(sluice_type_size(st->in[i].type) * (size_t)(rows + 1));
            sl_fuzz_check(d != NULL, "harness out of memory");
            fz_fill_column(st->in[i].type, d, rows, seed + i * 7919);
            cols[i].data = bufs[i] = d;
            cols[i].length = rows;
        }
    }
}

/* Records an accepted batch into the stream table. */
static void fz_record(fz_state *st, const sluice_column *cols, int64_t rows) {
    if (st->stream.rows == 0) memcpy(st->param_stream, st->param_now, sizeof st->param_now);
    st->batches++;
    if (st->offsets_input >= 0) st->segments += cols[st->offsets_input].length - 1;
    if (st->overflowed || st->stream.rows + rows > FZ_MAX_STREAM_ROWS) {
        st->overflowed = true;
        return;
    }
    for (size_t i = 0; i < st->ninputs; i++) {
        if ((int)i == st->offsets_input) {
            const int64_t *off = cols[i].data;
            int64_t k = cols[i].length;
            int64_t *grown = realloc(st->stream.offsets,
                                     (size_t)(st->stream.noffsets + k + 1) * sizeof *grown);
            sl_fuzz_check(grown != NULL, "harness out of memory");
            st->stream.offsets = grown;
            if (st->stream.noffsets == 0) grown[st->stream.noffsets++] = 0;
            for (int64_t j = 1; j < k; j++)
                grown[st->stream.noffsets++] = st->stream.rows + off[j];
        } else {
            fz_table_append(&st->stream, i, cols[i].data, rows, st->stream.rows);
        }
    }
    st->stream.rows += rows;
}

static void fz_push_good(fz_state *st, int64_t rows, uint64_t seed) {
    sluice_column cols[FZ_MAX_COLS];
    void *bufs[FZ_MAX_COLS] = {0};
    fz_make_good(st, rows, seed, cols, bufs);
    /* Any order of columns is accepted: push them reversed now and then. */
    sluice_column order[FZ_MAX_COLS];
    for (size_t i = 0; i < st->ninputs; i++)
        order[i] = cols[seed & 1 ? st->ninputs - 1 - i : i];
    sluice_status r = sluice_session_push(st->s, order, st->ninputs);
    /* Out of memory comes first: even a misuse is reported as out of memory when its
     * diagnostic cannot be recorded. */
    if (fz_out_of_memory(r)) {
        /* rejected as a whole: not part of the stream */
    } else if (st->flushed) {
        sl_fuzz_check(r == SLUICE_ERR_MISUSE, "push after flush gave %s", sluice_status_name(r));
        fz_check_diagnostics(fz_ctx, r);
    } else {
        sl_fuzz_check(r == SLUICE_OK, "good push of %" PRId64 " rows gave %s", rows,
                      sluice_status_name(r));
        fz_record(st, cols, rows);
    }
    for (size_t i = 0; i < st->ninputs; i++) free(bufs[i]);
}

/* Pushes a batch broken in one of several ways and checks the documented status. */
static void fz_push_bad(fz_state *st, uint8_t how, int64_t rows, uint64_t seed) {
    sluice_column cols[FZ_MAX_COLS + 1];
    void *bufs[FZ_MAX_COLS] = {0};
    if (rows < 1) rows = 1;
    fz_make_good(st, rows, seed, cols, bufs);
    size_t count = st->ninputs;
    size_t victim = seed % st->ninputs;
    sluice_status want = SLUICE_ERR_INVALID_ARGUMENT;
    const sluice_column *arg = cols;
    switch (how % 9) {
    case 0: /* a column missing */
        cols[victim] = cols[count - 1];
        count--;
        want = SLUICE_ERR_BATCH_MISSING_COLUMN;
        break;
    case 1: /* a column of the wrong type */
        cols[victim].type = cols[victim].type == SLUICE_U8 ? SLUICE_I8 : SLUICE_U8;
        want = SLUICE_ERR_BATCH_TYPE;
        break;
    case 2: /* a data column of another length */
        if ((int)victim == st->offsets_input) victim = (victim + 1) % st->ninputs;
        if (st->ninputs - (st->offsets_input >= 0) < 2) {
            /* one data column: make the offsets disagree with it instead */
            cols[victim].length--;
            want = st->offsets_input >= 0 ? SLUICE_ERR_BAD_OFFSETS : SLUICE_OK;
        } else {
            cols[victim].length--;
            want = SLUICE_ERR_BATCH_LENGTH;
        }
        break;
    case 3: /* an unknown extra column */
        cols[count] = cols[0];
        cols[count].name = "no_such_column";
        count++;
        want = SLUICE_ERR_UNKNOWN_COLUMN;
        break;
    case 4: /* a column given twice */
        cols[count] = cols[victim];
        count++;
        want = SLUICE_ERR_INVALID_ARGUMENT;
        break;
    case 5: /* negative length */
        cols[victim].length = -1 - (int64_t)(seed % 3);
        want = SLUICE_ERR_INVALID_ARGUMENT;
        break;
    case 6: /* rows but no data */
        cols[victim].data = NULL;
        want = SLUICE_ERR_INVALID_ARGUMENT;
        break;
    case 7: /* NULL columns with a count */
        arg = NULL;
        want = SLUICE_ERR_INVALID_ARGUMENT;
        break;
    default: /* malformed offsets, or (no offsets input) a column without a name */
        if (st->offsets_input >= 0) {
            int64_t *off = bufs[st->offsets_input];
            int64_t k = cols[st->offsets_input].length;
            switch (seed % 3) {
            case 0: off[0] = 1 + (int64_t)(seed % 5); break;      /* does not start at 0 */
            case 1: off[k - 1] = rows + 1; break;                  /* does not end at n */
            default:                                               /* decreases */
                if (k >= 3) {
                    off[1] = rows;
                    off[2] = 0;
                } else {
                    off[k - 1] = -1;
                }
                break;
            }
            want = SLUICE_ERR_BAD_OFFSETS;
        } else {
            cols[victim].name = NULL;
            want = SLUICE_ERR_INVALID_ARGUMENT;
        }
        break;
    }
    sluice_status r = sluice_session_push(st->s, arg, count);
    if (fz_out_of_memory(r)) {
        /* out of memory judging the batch or recording the verdict */
    } else if (st->flushed) {
        sl_fuzz_check(r == SLUICE_ERR_MISUSE, "bad push after flush gave %s",
                      sluice_status_name(r));
    } else if (want == SLUICE_OK) {
        /* The mutation left a valid batch (possible with one column): it was accepted. */
        sl_fuzz_check(r == SLUICE_OK, "push gave %s", sluice_status_name(r));
        fz_record(st, cols, cols[0].length);
    } else {
        sl_fuzz_check(r == want, "bad batch (kind %d) gave %s, expected %s", how % 9,
                      sluice_status_name(r), sluice_status_name(want));
    }
    if (r != SLUICE_OK) fz_check_diagnostics(fz_ctx, r);
    for (size_t i = 0; i < st->ninputs; i++) free(bufs[i]);
}

static void fz_check_and_keep(fz_state *st, sluice_batch *b) {
    sl_fuzz_check(sluice_batch_column_count(b) == st->noutputs, "result has %zu columns",
                  sluice_batch_column_count(b));
    int64_t rows = sluice_batch_rows(b);
    sl_fuzz_check(rows >= 0, "negative rows");
    for (size_t i = 0; i < st->noutputs; i++) {
        sluice_column c;
        sl_fuzz_check(sluice_batch_column(b, i, &c) == SLUICE_OK, "result column %zu", i);
        sl_fuzz_check(c.type == st->pulled.types[i] && c.length == rows,
                      "result column %zu: type %d, %" PRId64 " rows of %" PRId64, i, (int)c.type,
                      c.length, rows);
        sluice_column by_name;
        sl_fuzz_check(sluice_batch_column_by_name(b, c.name, &by_name) == SLUICE_OK &&
                          by_name.data == c.data,
                      "column '%s' not found by its name", c.name);
        if (st->pulled.rows + rows <= 4 * FZ_MAX_STREAM_ROWS)
            fz_table_append(&st->pulled, i, c.data, rows, st->pulled.rows);
    }
    st->pulled.rows += rows;
    sluice_batch_free(b);
}

static bool fz_pull_one(fz_state *st) {
    sluice_batch *b = (sluice_batch *)&b; /* pull must overwrite it, NULL or a batch */
    sluice_status r = sluice_session_pull(st->s, &b);
    if (fz_out_of_memory(r)) return false;
    sl_fuzz_check(r == SLUICE_OK, "pull gave %s", sluice_status_name(r));
    if (!b) return false;
    fz_check_and_keep(st, b);
    return true;
}

static void fz_drain(fz_state *st) {
    fz_mem.countdown = 0; /* draining is checked without refusals */
    int guard = 0;
    while (fz_pull_one(st)) sl_fuzz_check(++guard < 1000000, "pull never runs dry");
    sluice_batch *b = NULL;
    sl_fuzz_check(sluice_session_pull(st->s, &b) == SLUICE_OK && b == NULL,
                  "pull after draining returned a batch");
}

static bool fz_same_value(sluice_type t, const uint8_t *x, const uint8_t *y) {
    size_t w = sluice_type_size(t);
    if (memcmp(x, y, w) == 0) return true;
    if (t == SLUICE_F64) {
        double a, b;
        memcpy(&a, x, 8);
        memcpy(&b, y, 8);
        return isnan(a) && isnan(b);
    }
    if (t == SLUICE_F32) {
        float a, b;
        memcpy(&a, x, 4);
        memcpy(&b, y, 4);
        return isnan(a) && isnan(b);
    }
    return false;
}

/* The stream as cut by the program must give what one whole batch gives. */
static void fz_check_cut_invariance(fz_state *st) {
    fz_mem.countdown = 0;
    if (!st->pipe->cut_invariant || st->param_changed || st->overflowed ||
        st->pulled.rows > 4 * FZ_MAX_STREAM_ROWS)
        return;
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    sluice_param_value pv = {st->pipe->param, st->param_stream};
    if (st->param_stream[0]) {
        so.params = &pv;
        so.param_count = 1;
    }
    sluice_session *ref = NULL;
    sluice_status r = sluice_session_open(st->p, &so, &ref);
    sl_fuzz_check(r == SLUICE_OK, "reference session: %s", sluice_status_name(r));
    sluice_column cols[FZ_MAX_COLS];
    static const int64_t empty_offsets[1] = {0};
    for (size_t i = 0; i < st->ninputs; i++) {
        cols[i].name = st->in[i].name;
        cols[i].type = st->in[i].type;
        if ((int)i == st->offsets_input) {
            cols[i].data = st->stream.noffsets ? st->stream.offsets : empty_offsets;
            cols[i].length = st->stream.noffsets ? st->stream.noffsets : 1;
        } else {
            cols[i].data = st->stream.data[i];
            cols[i].length = st->stream.rows;
        }
    }
    r = sluice_session_push(ref, cols, st->ninputs);
    sl_fuzz_check(r == SLUICE_OK, "reference push of %" PRId64 " rows: %s", st->stream.rows,
                  sluice_status_name(r));
    sl_fuzz_check(sluice_session_flush(ref) == SLUICE_OK, "reference flush");
    int64_t at = 0;
    for (;;) {
        sluice_batch *b = NULL;
        sl_fuzz_check(sluice_session_pull(ref, &b) == SLUICE_OK, "reference pull");
        if (!b) break;
        int64_t rows = sluice_batch_rows(b);
        sl_fuzz_check(at + rows <= st->pulled.rows, "whole stream gives more rows (%" PRId64
                      "+) than the cut one (%" PRId64 ")", at + rows, st->pulled.rows);
        for (size_t i = 0; i < st->noutputs; i++) {
            sluice_column c;
            sl_fuzz_check(sluice_batch_column(b, i, &c) == SLUICE_OK, "reference column");
            size_t w = sluice_type_size(c.type);
            for (int64_t j = 0; j < rows; j++) {
                const uint8_t *want = (const uint8_t *)c.data + (size_t)j * w;
                const uint8_t *got = st->pulled.data[i] + (size_t)(at + j) * w;
                sl_fuzz_check(fz_same_value(c.type, want, got),
                              "pipeline %s, column '%s', row %" PRId64
                              ": cut stream differs from the whole stream",
                              sluice_pipeline_name(st->p), c.name, at + j);
            }
        }
        at += rows;
        sluice_batch_free(b);
    }
    sl_fuzz_check(at == st->pulled.rows, "whole stream gives %" PRId64 " rows, cut one %" PRId64,
                  at, st->pulled.rows);
    sluice_session_close(ref);
}

static void fz_end_stream(fz_state *st) {
    fz_mem.countdown = 0;
    if (!st->flushed) {
        sluice_status r = sluice_session_flush(st->s);
        sl_fuzz_check(r == SLUICE_OK, "flush gave %s", sluice_status_name(r));
        st->flushed = true;
    }
    fz_drain(st);
    int64_t want = -1;
    switch (st->pipe->rows) {
    case FZ_ROWS_ALL: want = st->overflowed ? -1 : st->stream.rows; break;
    case FZ_ROWS_ONE: want = 1; break;
    case FZ_ROWS_BATCHES: want = st->batches; break;
    case FZ_ROWS_SEGMENTS: want = st->segments; break;
    case FZ_ROWS_ANY: break;
    }
    if (want >= 0)
        sl_fuzz_check(st->pulled.rows == want,
                      "pipeline %s: %" PRId64 " rows in (%" PRId64 " batches, %" PRId64
                      " segments), %" PRId64 " out, %" PRId64 " expected",
                      sluice_pipeline_name(st->p), st->stream.rows, st->batches, st->segments,
                      st->pulled.rows, want);
    fz_check_cut_invariance(st);
}

int sl_fuzz_session(const uint8_t *data, size_t size);
int sl_fuzz_session(const uint8_t *data, size_t size) {
    fz_init();
    fz_reader in = {data, size};
    fz_state st;
    memset(&st, 0, sizeof st);
    size_t which = fz_below(&in, FZ_NPIPES);
    st.pipe = &fz_pipes[which];
    st.p = fz_loaded[which];
    st.offsets_input = -1;
    st.ninputs = sluice_pipeline_input_count(st.p);
    st.noutputs = sluice_pipeline_output_count(st.p);
    sl_fuzz_check(st.ninputs <= FZ_MAX_COLS && st.noutputs <= FZ_MAX_COLS, "too many columns");
    for (size_t i = 0; i < st.ninputs; i++) {
        sl_fuzz_check(sluice_pipeline_input(st.p, i, &st.in[i]) == SLUICE_OK, "input info");
        st.stream.types[i] = st.in[i].type;
        if (st.in[i].role == SLUICE_ROLE_OFFSETS) st.offsets_input = (int)i;
    }
    st.stream.ncols = st.ninputs;
    st.pulled.ncols = st.noutputs;
    for (size_t i = 0; i < st.noutputs; i++) {
        sluice_column_info info;
        sl_fuzz_check(sluice_pipeline_output(st.p, i, &info) == SLUICE_OK, "output info");
        st.pulled.types[i] = info.type;
    }
    fz_open(&st, 1 + fz_below(&in, 64));
    fz_new_stream(&st);

    long arm_next = 0;
    for (int step = 0; step < 64 && in.left; step++) {
        uint8_t op = fz_u8(&in);
        uint64_t seed = fz_u64(&in);
        int64_t rows = fz_u8(&in);
        if (rows > 200) rows = (rows - 200) * 40; /* now and then a batch of many tiles */
        if (getenv("SL_FUZZ_TRACE"))
            fprintf(stderr, "step %d: op %d rows %" PRId64 " armed %ld flushed %d\n", step,
                    op % 11, rows, arm_next, st.flushed);
        fz_mem.countdown = arm_next; /* this call may run out of memory */
        fz_mem.hit = false;
        arm_next = 0;
        switch (op % 11) {
        case 0: case 1: fz_push_good(&st, rows, seed); break;
        case 2: fz_push_bad(&st, (uint8_t)(op / 10), rows, seed); break;
        case 3: fz_push_good(&st, 0, seed); break;
        case 4: {
            sluice_status r = sluice_session_flush(st.s);
            if (fz_out_of_memory(r)) {
                /* the stream goes on as if flush had not been called */
            } else if (st.flushed) {
                sl_fuzz_check(r == SLUICE_ERR_MISUSE, "second flush gave %s",
                              sluice_status_name(r));
                fz_check_diagnostics(fz_ctx, r);
            } else {
                sl_fuzz_check(r == SLUICE_OK, "flush gave %s", sluice_status_name(r));
                st.flushed = true;
            }
            break;
        }
        case 5: fz_pull_one(&st); break;
        case 6:
            if (st.flushed) fz_end_stream(&st);
            else fz_drain(&st);
            break;
        case 7: {
            sluice_status r = sluice_session_reset(st.s);
            if (fz_out_of_memory(r)) {
                fz_mem.countdown = 0;
                r = sluice_session_reset(st.s);
            }
            sl_fuzz_check(r == SLUICE_OK, "reset gave %s", sluice_status_name(r));
            fz_new_stream(&st);
            break;
        }
        case 10: /* refuse the Nth allocation of the next call */
            arm_next = 1 + (long)(seed % 48);
            break;
        case 8: {
            static const char *const texts[] = {"0", "1.5", "-2", "1e30", "nan", "inf", "abc",
                                                "", "1.0.0", "100"};
            const char *name = st.pipe->param ? st.pipe->param : "nope";
            const char *text = texts[seed % FZ_ARRAY_LEN(texts)];
            bool unknown = (seed >> 8) % 4 == 0 || !st.pipe->param;
            if (unknown) name = (seed >> 10) & 1 ? "no_such_param" : "";
            sluice_status r = sluice_session_set_param(st.s, name, text);
            if (fz_out_of_memory(r)) {
                /* the param keeps its value */
            } else if (unknown) {
                sl_fuzz_check(r == SLUICE_ERR_UNKNOWN_PARAM, "unknown param gave %s",
                              sluice_status_name(r));
            } else if (r == SLUICE_OK) {
                if (st.stream.rows > 0) st.param_changed = true;
                snprintf(st.param_now, sizeof st.param_now, "%s", text);
            } else {
                sl_fuzz_check(r == SLUICE_ERR_BAD_VALUE, "param text '%s' gave %s", text,
                              sluice_status_name(r));
            }
            if (r != SLUICE_OK) fz_check_diagnostics(fz_ctx, r);
            break;
        }
        case 9: /* close and reopen: a new session, a new stream, default params */
            sluice_session_close(st.s);
            st.s = NULL;
            fz_open(&st, 1 + (int64_t)(seed % 64));
            fz_new_stream(&st);
            st.param_now[0] = '\0';
            break;
        default: break;
        }
    }
    fz_end_stream(&st);
    sluice_session_close(st.s);
    fz_table_clear(&st.stream);
    fz_table_clear(&st.pulled);
    return 0;
}

#ifndef SL_FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return sl_fuzz_session(data, size);
}
#endif
