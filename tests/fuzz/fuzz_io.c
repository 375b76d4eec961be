/* fuzz_io.c — libFuzzer harness for the command line's input readers (cli/npy.h, cli/csv.h,
 * cli/raw.h), driven from memory buffers. The first byte picks the reader, the rest is the
 * file:
 *   0  .npy: header parse, size check against the buffer, every element read; and every
 *      header the writer formats must parse back to the same type and length;
 *   1  CSV: header row and every record, each field parsed as a type chosen per column;
 *   2  one CSV field parsed as each type; a parsed value printed and parsed again must give
 *      the same bits (NaN aside);
 *   3  raw: the element count of a file of a given size, for each type.
 * Every failure must come with a non-empty reason. */
#include <inttypes.h>
#include <math.h>

#include "fuzz_util.h"
#include "cli/csv.h"
#include "cli/half.h"
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
    if (t == SLUICE_F16) return isnan(sl_cli_f16_to_f32((uint16_t)a)) &&
                                isnan(sl_cli_f16_to_f32((uint16_t)b));
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
    case SLUICE_F16: snprintf(buf, cap, "%.9g", (double)sl_cli_f16_to_f32((uint16_t)bits)); break;
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

static void fuzz_value(const uint8_t *data, size_t size) {
    char text[256];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
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

int sl_fuzz_io(const uint8_t *data, size_t size);
int sl_fuzz_io(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    switch (mode % 4) {
    case 0: {
        fuzz_npy(data, size);
        fz_reader r = {data, size};
        fuzz_npy_roundtrip(fz_u64(&r));
        break;
    }
    case 1: fuzz_csv(data, size, (uint8_t)(mode / 4)); break;
    case 2: fuzz_value(data, size); break;
    default: fuzz_raw(data, size); break;
    }
    return 0;
}

#ifndef SL_FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return sl_fuzz_io(data, size); }
#endif
