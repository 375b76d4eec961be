/* fuzz_io.c — libFuzzer harness for the command line's input readers (cli/npy.h, cli/csv.h,
 * cli/raw.h), driven from memory buffers. The first byte picks the reader, the rest is the
 * file:
 *   0  .npy: header parse, size check against the buffer, every element read; and every
 *      header the writer formats must parse back to the same type and length;
 *   1  CSV: header row and every record, each field parsed as a type chosen per column;
 *   2  one CSV field parsed as each type; a parsed value printed and parsed again must give
 *      the same bits (NaN aside); the same for the library's literal parser (params, YAML
 *      defaults: sl_value_parse) and its shortest round-trip formatter;
 *   3  raw: the element count of a file of a given size, for each type;
 *   4  a directory input (cli/input.h) of rows.npy (offsets), v (.npy or raw .bin) and k
 *      (.bin or .npy) for a segmented-scan pipeline, read in batches of a chosen size;
 *   5  a CSV input for a pipeline of four typed columns, read in batches.
 * Every failure must come with a non-empty reason. Every batch the input layer hands out
 * must be one the library accepts (push returns SLUICE_OK), and together they must hold
 * exactly the rows the input announced. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "common/types.h"
#include "cli/csv.h"
#include "cli/input.h"
#include "cli/npy.h"
#include "cli/raw.h"

/* A reason may quote the offending text (which can hold a newline inside a quoted CSV
 * field), so only its presence is checked. */
static void fz_check_reason(const char *err, const char *what) {
    sl_fuzz_check(err[0] != '\0', "%s failed without a reason", what);
}

static void fuzz_npy(const uint8_t *data, size_t size) {
    sl_npy_header h;
    char err[512] = "";
    if (sl_npy_parse_header(data, size, &h, err, sizeof err) != 0) {
        fz_check_reason(err, "sl_npy_parse_header");
        return;
    }
    sl_fuzz_check((unsigned)h.type < SLUICE_TYPE_COUNT_, "header type %d", (int)h.type);
    sl_fuzz_check(h.length >= 0, "negative length %" PRId64, h.length);
    sl_fuzz_check(h.data_offset >= 10 && h.data_offset <= size,
                  "data offset %zu outside the %zu-byte buffer", h.data_offset, size);
    err[0] = '\0';
    if (sl_npy_check_size(&h, size, err, sizeof err) != 0) {
        fz_check_reason(err, "sl_npy_check_size");
        return;
    }
    /* The size check passed: exactly length elements follow the header. Touch them all so
     * ASan sees any disagreement between the check and the buffer. */
    size_t w = sluice_type_size(h.type);
    sl_fuzz_check((uint64_t)h.length * w == size - h.data_offset,
                  "size check accepted %" PRId64 " x %zu bytes in %zu", h.length, w,
                  size - h.data_offset);
    unsigned sum = 0;
    for (size_t i = h.data_offset; i < size; i++) sum += data[i];
    (void)sum;
}

/* The writer's headers, for every type and some lengths from the input, parse back. */
static void fuzz_npy_roundtrip(uint64_t seed) {
    uint8_t buf[SL_NPY_HEADER_SIZE];
    int64_t length = (int64_t)(seed >> 1);
    sluice_type t = (sluice_type)(seed % SLUICE_TYPE_COUNT_);
    if (sl_npy_format_header(buf, sizeof buf, t, length) != 0) return;
    sl_npy_header h;
    char err[512] = "";
    sl_fuzz_check(sl_npy_parse_header(buf, sizeof buf, &h, err, sizeof err) == 0,
                  "a header the writer made does not parse: %s", err);
    sl_fuzz_check(h.type == t && h.length == length && h.data_offset == SL_NPY_HEADER_SIZE,
                  "header round trip changed type/length/offset");
}

static void fuzz_csv(const uint8_t *data, size_t size, uint8_t type_seed) {
    sl_csv_reader *r = NULL;
    char err[512] = "";
    if (sl_csv_open_memory(&r, data, size, "fuzz.csv", err, sizeof err) != 0) {
        fz_check_reason(err, "sl_csv_open_memory");
        sl_fuzz_check(r == NULL, "failed open left a reader");
        return;
    }
    size_t ncols = sl_csv_column_count(r);
    sl_fuzz_check(ncols >= 1, "a header with no columns was accepted");
    for (size_t i = 0; i < ncols; i++) {
        const char *name = sl_csv_column_name(r, i);
        sl_fuzz_check(name != NULL, "column %zu has no name", i);
        long at = sl_csv_column_index(r, name);
        sl_fuzz_check(at >= 0 && (size_t)at <= i, "column '%s' found at %ld, not <= %zu", name,
                      at, i);
    }
    sl_fuzz_check(sl_csv_column_name(r, ncols) == NULL, "a name past the last column");
    int64_t last_line = 0;
    for (int records = 0; records < 100000; records++) {
        char *const *fields = NULL;
        err[0] = '\0';
        int got = sl_csv_next(r, &fields, err, sizeof err);
        if (got == 0) break;
        if (got < 0) {
            fz_check_reason(err, "sl_csv_next");
            break;
        }
        sl_fuzz_check(got == 1, "sl_csv_next returned %d", got);
        int64_t line = sl_csv_line(r);
        sl_fuzz_check(line > last_line, "record line %" PRId64 " after %" PRId64, line,
                      last_line);
        last_line = line;
        for (size_t i = 0; i < ncols; i++) {
            sl_fuzz_check(fields[i] != NULL, "field %zu is NULL", i);
            sluice_type t = (sluice_type)((type_seed + i) % SLUICE_TYPE_COUNT_);
            uint64_t value = 0;
            err[0] = '\0';
            if (sl_csv_parse_value(fields[i], t, &value, err, sizeof err) != 0)
                fz_check_reason(err, "sl_csv_parse_value");
        }
    }
    sl_csv_close(r);
}

static bool same_bits_or_both_nan(sluice_type t, uint64_t a, uint64_t b) {
    if (a == b) return true;
    if (t == SLUICE_F64) {
        double x, y;
        memcpy(&x, &a, 8);
        memcpy(&y, &b, 8);
        return isnan(x) && isnan(y);
    }
    if (t == SLUICE_F32) {
        float x, y;
        memcpy(&x, &a, 4);
        memcpy(&y, &b, 4);
        return isnan(x) && isnan(y);
    }
    if (t == SLUICE_F16) return isnan(sluice_f16_to_f32((uint16_t)a)) &&
                                isnan(sluice_f16_to_f32((uint16_t)b));
    return false;
}

/* Prints a parsed value the way a CSV writer would, exactly enough to parse back. */
static void print_value(sluice_type t, uint64_t bits, char *buf, size_t cap) {
    switch (t) {
    case SLUICE_BOOL: snprintf(buf, cap, "%s", (bits & 1) ? "true" : "false"); break;
    case SLUICE_I8: snprintf(buf, cap, "%d", (int)(int8_t)bits); break;
    case SLUICE_I16: snprintf(buf, cap, "%d", (int)(int16_t)bits); break;
    case SLUICE_I32: snprintf(buf, cap, "%" PRId32, (int32_t)bits); break;
    case SLUICE_I64: snprintf(buf, cap, "%" PRId64, (int64_t)bits); break;
    case SLUICE_U8: case SLUICE_U16: case SLUICE_U32: case SLUICE_U64:
        snprintf(buf, cap, "%" PRIu64, bits);
        break;
    case SLUICE_F16: snprintf(buf, cap, "%.9g", (double)sluice_f16_to_f32((uint16_t)bits)); break;
    case SLUICE_F32: {
        float f;
        uint32_t b32 = (uint32_t)bits;
        memcpy(&f, &b32, 4);
        snprintf(buf, cap, "%.9g", (double)f);
        break;
    }
    default: {
        double d;
        memcpy(&d, &bits, 8);
        snprintf(buf, cap, "%.17g", d);
        break;
    }
    }
}

/* The library's literals: what parses must format and parse back to the same value. */
static void fuzz_literal(const char *text) {
    for (int t = 0; t < SLUICE_TYPE_COUNT_; t++) {
        sl_value v;
        if (!sl_value_parse(text, (sluice_type)t, &v)) continue;
        sl_fuzz_check(v.type == (sluice_type)t, "'%s' parsed as %s has type %d", text,
                      sluice_type_name((sluice_type)t), (int)v.type);
        char printed[64];
        sl_value_format(v, printed, sizeof printed);
        sl_value again;
        sl_fuzz_check(sl_value_parse(printed, (sluice_type)t, &again),
                      "'%s' parsed as %s, formatted '%s', does not parse back", text,
                      sluice_type_name((sluice_type)t), printed);
        bool same = sl_type_is_float((sluice_type)t)
                        ? (v.f == again.f && signbit(v.f) == signbit(again.f)) ||
                              (isnan(v.f) && isnan(again.f))
                        : v.u == again.u;
        sl_fuzz_check(same, "'%s' as %s formatted '%s' parsed back differently", text,
                      sluice_type_name((sluice_type)t), printed);
    }
}

static void fuzz_value(const uint8_t *data, size_t size) {
    char text[256];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    fuzz_literal(text);
    for (int t = 0; t < SLUICE_TYPE_COUNT_; t++) {
        uint64_t v = 0;
        char err[512] = "";
        if (sl_csv_parse_value(text, (sluice_type)t, &v, err, sizeof err) != 0) {
            fz_check_reason(err, "sl_csv_parse_value");
            continue;
        }
        char printed[64];
        print_value((sluice_type)t, v, printed, sizeof printed);
        uint64_t again = 0;
        err[0] = '\0';
        sl_fuzz_check(sl_csv_parse_value(printed, (sluice_type)t, &again, err, sizeof err) == 0,
                      "'%s' parsed as %s, printed as '%s', does not parse back: %s", text,
                      sluice_type_name((sluice_type)t), printed, err);
        sl_fuzz_check(same_bits_or_both_nan((sluice_type)t, v, again),
                      "'%s' as %s: %" PRIx64 " printed '%s' parsed back as %" PRIx64, text,
                      sluice_type_name((sluice_type)t), v, printed, again);
    }
}

static void fuzz_raw(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    uint64_t file_size = fz_u64(&r);
    for (int t = -1; t <= SLUICE_TYPE_COUNT_; t++) {
        int64_t count = -1;
        char err[512] = "";
        if (sl_raw_element_count(file_size, (sluice_type)t, &count, err, sizeof err) != 0) {
            fz_check_reason(err, "sl_raw_element_count");
            continue;
        }
        size_t w = sluice_type_size((sluice_type)t);
        sl_fuzz_check(w > 0 && count >= 0 && (uint64_t)count * w == file_size,
                      "raw count %" PRId64 " of %zu-byte elements for %" PRIu64 " bytes", count,
                      w, file_size);
    }
}


/* ---- the input layer over real files ---------------------------------------------------- */

static const char *const fz_io_ragged_yaml =
    "sluice: 1\nname: fz-io-ragged\n"
    "input:\n  rows: {type: i64, role: offsets}\n  v: f32\n  k: u8\n"
    "stages:\n  - segmented_scan: {of: v, op: sum, segments: rows, into: s}\n";
static const char *const fz_io_flat_yaml =
    "sluice: 1\nname: fz-io-flat\n"
    "input:\n  a: i16\n  b: f16\n  c: bool\n  d: u64\n"
    "stages:\n  - map: {e: a + 1}\n";

static sluice_context *fz_io_ctx;
static sluice_pipeline *fz_io_ragged, *fz_io_flat;
static char fz_io_dir[64];

static const char *const fz_io_files[] = {"rows.npy", "rows.bin", "v.npy", "v.bin",
                                          "k.npy",    "k.bin",    "in.csv"};

static void fz_io_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", fz_io_dir, name);
}

static void fz_io_cleanup(void) {
    char path[128];
    for (size_t i = 0; i < FZ_ARRAY_LEN(fz_io_files); i++) {
        fz_io_path(path, sizeof path, fz_io_files[i]);
        unlink(path);
    }
    rmdir(fz_io_dir);
}

static void fz_io_init(void) {
    if (fz_io_ctx) return;
    sluice_context_options co = SLUICE_CONTEXT_OPTIONS_INIT;
    co.cpu_threads = 1;
    co.kernel_cache_dir = "";
    sl_fuzz_check(sluice_context_create(&fz_io_ctx, &co) == SLUICE_OK, "context");
    sl_fuzz_check(sluice_pipeline_load_string(fz_io_ctx, fz_io_ragged_yaml,
                                              strlen(fz_io_ragged_yaml), NULL,
                                              &fz_io_ragged) == SLUICE_OK &&
                      sluice_pipeline_load_string(fz_io_ctx, fz_io_flat_yaml,
                                                  strlen(fz_io_flat_yaml), NULL,
                                                  &fz_io_flat) == SLUICE_OK,
                  "the input harness's pipelines do not load");
    snprintf(fz_io_dir, sizeof fz_io_dir, "/tmp/sluice-fuzz-io-XXXXXX");
    sl_fuzz_check(mkdtemp(fz_io_dir) != NULL, "mkdtemp");
    atexit(fz_io_cleanup);
}

static void fz_io_write(const char *name, const uint8_t *data, size_t size) {
    char path[128];
    fz_io_path(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    sl_fuzz_check(f != NULL, "cannot write %s", path);
    if (size) sl_fuzz_check(fwrite(data, 1, size, f) == size, "short write");
    fclose(f);
}

/* Reads the whole input in batches of at most max_rows and pushes each into a session. */
static void fz_io_drain(sluice_pipeline *p, const char *path, int64_t max_rows) {
    sl_input *in = NULL;
    char err[512] = "";
    if (sl_input_open(&in, p, path, err, sizeof err) != 0) {
        fz_check_reason(err, "sl_input_open");
        sl_fuzz_check(in == NULL, "failed open left an input");
        return;
    }
    int64_t total = sl_input_total_rows(in), seen = 0;
    sluice_session_options so = SLUICE_SESSION_OPTIONS_INIT;
    so.backend = SLUICE_BACKEND_CPU;
    sluice_session *s = NULL;
    sl_fuzz_check(sluice_session_open(p, &so, &s) == SLUICE_OK, "session");
    size_t ncols = sluice_pipeline_input_count(p);
    bool ragged = false; /* batches then take whole segments, at least one however long */
    for (size_t i = 0; i < ncols; i++) {
        sluice_column_info info;
        sluice_pipeline_input(p, i, &info);
        ragged |= info.role == SLUICE_ROLE_OFFSETS;
    }
    sluice_column cols[8];
    for (int batches = 0;; batches++) {
        sl_fuzz_check(batches < 100000, "the input never ends");
        int64_t rows = -1;
        err[0] = '\0';
        int got = sl_input_next(in, max_rows, cols, &rows, err, sizeof err);
        if (got == 0) break;
        if (got < 0) {
            fz_check_reason(err, "sl_input_next");
            break;
        }
        sl_fuzz_check(got == 1 && rows >= 0, "sl_input_next gave %d, %" PRId64 " rows", got,
                      rows);
        for (size_t i = 0; i < ncols; i++) {
            sluice_column_info info;
            sluice_pipeline_input(p, i, &info);
            sl_fuzz_check(cols[i].type == info.type && !strcmp(cols[i].name, info.name),
                          "column %zu is not input '%s'", i, info.name);
            if (info.role != SLUICE_ROLE_OFFSETS) {
                sl_fuzz_check(cols[i].length == rows, "'%s' has %" PRId64 " of %" PRId64 " rows",
                              info.name, cols[i].length, rows);
                sl_fuzz_check(ragged || rows <= max_rows, "batch of %" PRId64 " rows for a budget of %" PRId64
                              " without an offsets input", rows, max_rows);
            }
        }
        sluice_status st = sluice_session_push(s, cols, ncols);
        if (st != SLUICE_OK) {
            char d[1024];
            sluice_diagnostic_format(sluice_context_diagnostic(fz_io_ctx, 0), d, sizeof d);
            sl_fuzz_fail("the library refused a batch the input layer made: %s", d);
        }
        seen += rows;
    }
    if (total >= 0 && err[0] == '\0')
        sl_fuzz_check(seen == total, "%" PRId64 " rows read of the %" PRId64 " announced", seen,
                      total);
    sl_fuzz_check(sluice_session_flush(s) == SLUICE_OK, "flush");
    for (;;) {
        sluice_batch *b = NULL;
        sl_fuzz_check(sluice_session_pull(s, &b) == SLUICE_OK, "pull");
        if (!b) break;
        sluice_batch_free(b);
    }
    sluice_session_close(s);
    sl_input_close(in);
}

/* Layout: flags, max_rows, then rows file and v file each as a 2-byte length and its bytes,
 * then the k file (the rest). flags bit 0: v as raw .bin; bit 1: k as .npy; bit 2: rows as
 * raw .bin (which the layer does not accept for an offsets input unless it is there). */
static void fuzz_input_dir(const uint8_t *data, size_t size) {
    fz_io_init();
    fz_reader r = {data, size};
    uint8_t flags = fz_u8(&r);
    int64_t max_rows = 1 + fz_u8(&r) % 64;
    size_t len;
    for (size_t i = 0; i < FZ_ARRAY_LEN(fz_io_files); i++) {
        char path[128];
        fz_io_path(path, sizeof path, fz_io_files[i]);
        unlink(path);
    }
    size_t want = fz_u8(&r) | (size_t)fz_u8(&r) << 8;
    const uint8_t *rows = fz_bytes(&r, want, &len);
    fz_io_write(flags & 4 ? "rows.bin" : "rows.npy", rows, len);
    want = fz_u8(&r) | (size_t)fz_u8(&r) << 8;
    const uint8_t *v = fz_bytes(&r, want, &len);
    fz_io_write(flags & 1 ? "v.bin" : "v.npy", v, len);
    const uint8_t *k = fz_bytes(&r, r.left, &len);
    fz_io_write(flags & 2 ? "k.npy" : "k.bin", k, len);
    fz_io_drain(fz_io_ragged, fz_io_dir, max_rows);
}

static void fuzz_input_csv(const uint8_t *data, size_t size) {
    fz_io_init();
    if (size < 1) return;
    int64_t max_rows = 1 + data[0] % 16;
    fz_io_write("in.csv", data + 1, size - 1);
    char path[128];
    fz_io_path(path, sizeof path, "in.csv");
    fz_io_drain(fz_io_flat, path, max_rows);
}

int sl_fuzz_io(const uint8_t *data, size_t size);
int sl_fuzz_io(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    switch (mode % 6) {
    case 0: {
        fuzz_npy(data, size);
        fz_reader r = {data, size};
        fuzz_npy_roundtrip(fz_u64(&r));
        break;
    }
    case 1: fuzz_csv(data, size, (uint8_t)(mode / 6)); break;
    case 2: fuzz_value(data, size); break;
    case 3: fuzz_raw(data, size); break;
    case 4: fuzz_input_dir(data, size); break;
    default: fuzz_input_csv(data, size); break;
    }
    return 0;
}

#ifndef SL_FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return sl_fuzz_io(data, size); }
#endif
