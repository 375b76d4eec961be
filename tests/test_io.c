/* test_io.c — the command line's file formats, tested from their sources: .npy headers and
 * the streaming writer, the CSV reader and typed fields, raw sizes, the synthetic generator,
 * the batch source that cuts a directory or CSV into batches (whole, or as windows read by
 * several threads, as `sluice run`'s readers do), and the writer threads behind a run. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/csv.h"
#include "cli/flow.h"
#include "cli/gen.h"
#include "cli/input.h"
#include "cli/npy.h"
#include "cli/output.h"
#include "cli/raw.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------------------------- */

/* A .npy image: magic, version 1.0, the dict text padded to a 64-byte boundary, then `data`. */
static size_t make_npy(unsigned char *buf, size_t cap, const char *dict, const void *data,
                       size_t data_len) {
    size_t dlen = strlen(dict), total_header = 10 + dlen + 1;
    size_t padded = (total_header + 63) / 64 * 64;
    ck_assert(padded + data_len <= cap);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t hl = padded - 10;
    buf[8] = (unsigned char)(hl & 0xff);
    buf[9] = (unsigned char)(hl >> 8);
    memset(buf + 10, ' ', hl);
    memcpy(buf + 10, dict, dlen);
    buf[padded - 1] = '\n';
    if (data_len) memcpy(buf + padded, data, data_len);
    return padded + data_len;
}

static int parse_dict(const char *dict, sl_npy_header *h, char *err, size_t cap) {
    unsigned char buf[512];
    size_t n = make_npy(buf, sizeof buf, dict, NULL, 0);
    return sl_npy_parse_header(buf, n, h, err, cap);
}

static void expect_header_error(const char *dict, const char *needle) {
    sl_npy_header h;
    char err[256] = "";
    ck_assert_int_eq(parse_dict(dict, &h, err, sizeof err), -1);
    ck_assert_msg(strstr(err, needle), "for %s expected '%s' in: %s", dict, needle, err);
}

static char tmp_root[256];

static void make_tmp(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/sluice_test_io_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp_root));
}

static void remove_tmp(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    ck_assert_int_eq(system(cmd), 0);
}

static char *tmp_path(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_root, name);
    return path;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* ---- .npy ------------------------------------------------------------------------------ */

START_TEST(npy_parses_what_numpy_writes) {
    static const struct {
        const char *descr;
        sluice_type type;
    } cases[] = {
        {"|b1", SLUICE_BOOL}, {"|i1", SLUICE_I8},  {"<i2", SLUICE_I16}, {"<i4", SLUICE_I32},
        {"<i8", SLUICE_I64},  {"|u1", SLUICE_U8},  {"<u2", SLUICE_U16}, {"<u4", SLUICE_U32},
        {"<u8", SLUICE_U64},  {"<f2", SLUICE_F16}, {"<f4", SLUICE_F32}, {"<f8", SLUICE_F64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (7,), }",
                 cases[i].descr);
        sl_npy_header h;
        char err[256];
        ck_assert_msg(parse_dict(dict, &h, err, sizeof err) == 0, "%s: %s", dict, err);
        ck_assert_int_eq(h.type, cases[i].type);
        ck_assert_int_eq(h.length, 7);
        ck_assert_uint_eq(h.data_offset % 64, 0);
        ck_assert_str_eq(sl_npy_descr(cases[i].type), cases[i].descr);
    }
    /* Key order, double quotes and no trailing comma are all legal Python. */
    sl_npy_header h;
    char err[256];
    ck_assert_int_eq(parse_dict("{\"shape\": (0,), \"fortran_order\": False, \"descr\": \"<f8\"}",
                                &h, err, sizeof err), 0);
    ck_assert_int_eq(h.length, 0);
    ck_assert_int_eq(h.type, SLUICE_F64);
}
END_TEST

START_TEST(npy_version_2_header) {
    unsigned char buf[128];
    const char *dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
    size_t dlen = strlen(dict);
    memcpy(buf, "\x93NUMPY\x02\x00", 8);
    buf[8] = (unsigned char)dlen;
    buf[9] = buf[10] = buf[11] = 0;
    memcpy(buf + 12, dict, dlen);
    sl_npy_header h;
    char err[256];
    ck_assert_int_eq(sl_npy_parse_header(buf, 12 + dlen, &h, err, sizeof err), 0);
    ck_assert_uint_eq(h.data_offset, 12 + dlen);
    ck_assert_int_eq(h.type, SLUICE_I32);
}
END_TEST

START_TEST(npy_rejects_what_a_column_cannot_be) {
    expect_header_error("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", "big-endian");
    expect_header_error("{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", "fortran_order");
    expect_header_error("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", "unsupported");
    expect_header_error("{'descr': '|O8', 'fortran_order': False, 'shape': (3,), }", "object");
    expect_header_error("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", "unsupported dtype '<c8'");
    expect_header_error("{'descr': '<U3', 'fortran_order': False, 'shape': (3,), }", "unsupported");
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", "2-D");
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "0-d");
    expect_header_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }",
                        "structured");
    expect_header_error("{'descr': '<f4', 'shape': (3,), }", "fortran_order");
    expect_header_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
                        "repeated");
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                        "too large");
    expect_header_error("not a dict", "not a dict");
    /* One-byte types may carry any byte-order mark. */
    sl_npy_header h;
    char err[256];
    ck_assert_int_eq(parse_dict("{'descr': '>u1', 'fortran_order': False, 'shape': (3,), }", &h,
                                err, sizeof err), 0);
    ck_assert_int_eq(h.type, SLUICE_U8);
}
END_TEST

START_TEST(npy_rejects_bad_magic_version_and_truncation) {
    sl_npy_header h;
    char err[256];
    ck_assert_int_eq(sl_npy_parse_header("PK\x03\x04 not numpy", 17, &h, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a .npy file"));
    unsigned char buf[512];
    size_t n = make_npy(buf, sizeof buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                        NULL, 0);
    buf[6] = 9;
    ck_assert_int_eq(sl_npy_parse_header(buf, n, &h, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "version 9"));
    buf[6] = 1;
    /* Every truncation of a valid header fails cleanly, never reads past `len`. */
    for (size_t len = 0; len < n; len++) {
        unsigned char *copy = malloc(len ? len : 1);
        memcpy(copy, buf, len);
        ck_assert_int_eq(sl_npy_parse_header(copy, len, &h, err, sizeof err), -1);
        free(copy);
    }
    ck_assert_int_eq(sl_npy_parse_header(buf, n, &h, err, sizeof err), 0);
    /* Data size against the header. */
    ck_assert_int_eq(sl_npy_check_size(&h, n + 12, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_check_size(&h, n + 8, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "truncated"));
    ck_assert_int_eq(sl_npy_check_size(&h, n + 13, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "unexpected bytes"));
}
END_TEST

START_TEST(npy_survives_random_corruption) {
    unsigned char good[512], bad[512];
    size_t n = make_npy(good, sizeof good,
                        "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }", NULL, 0);
    tu_rng rng;
    tu_rng_seed(&rng, 42);
    int accepted = 0;
    for (int trial = 0; trial < 20000; trial++) {
        memcpy(bad, good, n);
        int flips = 1 + (int)tu_rng_range(&rng, 0, 3);
        for (int f = 0; f < flips; f++)
            bad[tu_rng_range(&rng, 0, (int64_t)n - 1)] = (unsigned char)tu_rng_next(&rng);
        sl_npy_header h;
        char err[256];
        if (sl_npy_parse_header(bad, n, &h, err, sizeof err) == 0) {
            accepted++;
            ck_assert_uint_le(h.data_offset, n);
            ck_assert_int_lt(h.type, SLUICE_TYPE_COUNT_);
        } else {
            ck_assert_uint_gt(strlen(err), 0);
        }
    }
    ck_assert_int_gt(accepted, 0); /* flips in the padding are harmless */
}
END_TEST

START_TEST(npy_writer_streams_and_patches_length) {
    make_tmp();
    char err[256];
    sl_npy_writer w;
    const char *path = tmp_path("col.npy");
    ck_assert_int_eq(sl_npy_writer_open(&w, path, SLUICE_U16, err, sizeof err), 0);
    uint16_t vals[1000];
    for (int i = 0; i < 1000; i++) vals[i] = (uint16_t)(i * 7);
    ck_assert_int_eq(sl_npy_writer_append(&w, vals, 10, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_writer_append(&w, vals + 10, 0, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_writer_append(&w, vals + 10, 990, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_writer_close(&w, err, sizeof err), 0);
    size_t len;
    unsigned char *file = read_file(path, &len);
    sl_npy_header h;
    ck_assert_int_eq(sl_npy_parse_header(file, len, &h, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_check_size(&h, len, err, sizeof err), 0);
    ck_assert_int_eq(h.type, SLUICE_U16);
    ck_assert_int_eq(h.length, 1000);
    ck_assert_uint_eq(h.data_offset % 64, 0);
    ck_assert_int_eq(memcmp(file + h.data_offset, vals, sizeof vals), 0);
    free(file);
    /* Every type round-trips through write_file and the parser. */
    for (int t = 0; t < SLUICE_TYPE_COUNT_; t++) {
        unsigned char data[64];
        for (int i = 0; i < 64; i++) data[i] = (unsigned char)(i * 37 + t);
        if (t == SLUICE_BOOL)
            for (int i = 0; i < 64; i++) data[i] &= 1;
        int64_t count = (int64_t)(64 / sluice_type_size((sluice_type)t));
        ck_assert_int_eq(sl_npy_write_file(path, (sluice_type)t, data, count, err, sizeof err), 0);
        file = read_file(path, &len);
        ck_assert_int_eq(sl_npy_parse_header(file, len, &h, err, sizeof err), 0);
        ck_assert_int_eq(h.type, t);
        ck_assert_int_eq(h.length, count);
        ck_assert_int_eq(memcmp(file + h.data_offset, data, 64), 0);
        free(file);
    }
    ck_assert_int_eq(sl_npy_writer_open(&w, "/nonexistent-dir/x.npy", SLUICE_F32, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent-dir/x.npy"));
    remove_tmp();
}
END_TEST

/* ---- CSV ------------------------------------------------------------------------------- */

static sl_csv_reader *csv_from(const char *text) {
    sl_csv_reader *r = NULL;
    char err[256];
    int rc = sl_csv_open_memory(&r, text, strlen(text), "t.csv", err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    return r;
}

START_TEST(csv_reads_records) {
    sl_csv_reader *r = csv_from("\xEF\xBB\xBFx, y ,\"na,me\"\r\n1,2,\"a \"\"q\"\" b\"\r\n\n  \n3 , -4,\"multi\nline\"\n5,6,7");
    ck_assert_uint_eq(sl_csv_column_count(r), 3);
    ck_assert_str_eq(sl_csv_column_name(r, 0), "x");
    ck_assert_str_eq(sl_csv_column_name(r, 1), "y");
    ck_assert_str_eq(sl_csv_column_name(r, 2), "na,me");
    ck_assert_int_eq(sl_csv_column_index(r, "y"), 1);
    ck_assert_int_eq(sl_csv_column_index(r, "z"), -1);
    char *const *f;
    char err[256];
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), 1);
    ck_assert_str_eq(f[0], "1");
    ck_assert_str_eq(f[2], "a \"q\" b");
    ck_assert_int_eq(sl_csv_line(r), 2);
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), 1);
    ck_assert_int_eq(sl_csv_line(r), 5);
    ck_assert_str_eq(f[2], "multi\nline");
    int32_t v;
    ck_assert_int_eq(sl_csv_parse_value(f[1], SLUICE_I32, &v, err, sizeof err), 0);
    ck_assert_int_eq(v, -4);
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), 1);
    ck_assert_int_eq(sl_csv_line(r), 7);
    ck_assert_str_eq(f[2], "7");
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), 0);
    sl_csv_close(r);
}
END_TEST

START_TEST(csv_reports_bad_files_with_line) {
    char err[256];
    sl_csv_reader *r = csv_from("a,b\n1,2\n3\n");
    char *const *f;
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), 1);
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "t.csv:3:") && strstr(err, "1 fields") && strstr(err, "has 2"), "%s", err);
    sl_csv_close(r);

    r = csv_from("a,b\n1,2,3\n");
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "t.csv:2:"), "%s", err);
    sl_csv_close(r);

    r = csv_from("a,b\n1,\"open\n");
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "never closed"), "%s", err);
    sl_csv_close(r);

    r = csv_from("a,b\n\"x\"y,2\n");
    ck_assert_int_eq(sl_csv_next(r, &f, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "closing quote"), "%s", err);
    sl_csv_close(r);

    ck_assert_int_eq(sl_csv_open_memory(&r, "", 0, "e.csv", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "e.csv") && strstr(err, "empty"), "%s", err);
    ck_assert_int_eq(sl_csv_open_memory(&r, "\n\n", 2, "e.csv", err, sizeof err), -1);
    ck_assert_int_eq(sl_csv_open_memory(&r, "a,,b\n", 5, "h.csv", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "no name"), "%s", err);
    ck_assert_int_eq(sl_csv_open_memory(&r, "a,b,a\n", 6, "h.csv", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "twice"), "%s", err);
    ck_assert_int_eq(sl_csv_open_file(&r, "/nonexistent.csv", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "/nonexistent.csv"), "%s", err);
}
END_TEST

START_TEST(csv_parses_typed_fields) {
    char err[256];
    uint8_t b;
    ck_assert_int_eq(sl_csv_parse_value("true", SLUICE_BOOL, &b, err, sizeof err), 0);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(sl_csv_parse_value(" 0 ", SLUICE_BOOL, &b, err, sizeof err), 0);
    ck_assert_int_eq(b, 0);
    ck_assert_int_eq(sl_csv_parse_value("yes", SLUICE_BOOL, &b, err, sizeof err), -1);
    int8_t i8;
    ck_assert_int_eq(sl_csv_parse_value("-128", SLUICE_I8, &i8, err, sizeof err), 0);
    ck_assert_int_eq(i8, -128);
    ck_assert_int_eq(sl_csv_parse_value("128", SLUICE_I8, &i8, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "'128' is out of range for i8"), "%s", err);
    uint32_t u32;
    ck_assert_int_eq(sl_csv_parse_value("4294967295", SLUICE_U32, &u32, err, sizeof err), 0);
    ck_assert_uint_eq(u32, 4294967295u);
    ck_assert_int_eq(sl_csv_parse_value("-1", SLUICE_U32, &u32, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "'-1' is out of range for u32"), "%s", err);
    ck_assert_int_eq(sl_csv_parse_value("-0", SLUICE_U32, &u32, err, sizeof err), 0);
    ck_assert_uint_eq(u32, 0);
    ck_assert_int_eq(sl_csv_parse_value("1.5", SLUICE_U32, &u32, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot parse '1.5' as u32"), "%s", err);
    ck_assert_int_eq(sl_csv_parse_value("-x", SLUICE_U32, &u32, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot parse '-x' as u32"), "%s", err);
    int64_t i64;
    ck_assert_int_eq(sl_csv_parse_value("-9223372036854775808", SLUICE_I64, &i64, err, sizeof err), 0);
    ck_assert_int_eq(i64, INT64_MIN);
    ck_assert_int_eq(sl_csv_parse_value("9223372036854775808", SLUICE_I64, &i64, err, sizeof err), -1);
    uint64_t u64;
    ck_assert_int_eq(sl_csv_parse_value("18446744073709551615", SLUICE_U64, &u64, err, sizeof err), 0);
    ck_assert_uint_eq(u64, UINT64_MAX);
    float f;
    ck_assert_int_eq(sl_csv_parse_value("2.5e-1", SLUICE_F32, &f, err, sizeof err), 0);
    ck_assert_float_eq(f, 0.25f);
    ck_assert_int_eq(sl_csv_parse_value("nan", SLUICE_F32, &f, err, sizeof err), 0);
    ck_assert(isnan(f));
    ck_assert_int_eq(sl_csv_parse_value("-inf", SLUICE_F32, &f, err, sizeof err), 0);
    ck_assert(isinf(f) && f < 0);
    ck_assert_int_eq(sl_csv_parse_value("1e39", SLUICE_F32, &f, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "'1e39' is out of range for f32"), "%s", err);
    /* Beyond even a double's range: still a number, out of range, not "expected a number". */
    ck_assert_int_eq(sl_csv_parse_value("1e400", SLUICE_F32, &f, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "'1e400' is out of range for f32") && !strstr(err, "expected"),
                  "%s", err);
    double d64;
    ck_assert_int_eq(sl_csv_parse_value("-1e400", SLUICE_F64, &d64, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "'-1e400' is out of range for f64"), "%s", err);
    ck_assert_int_eq(sl_csv_parse_value("abc", SLUICE_F32, &f, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot parse 'abc' as f32: expected a number"), "%s", err);
    /* An empty field is a missing value: NaN in a float column (as NumPy and pandas read
     * it), an error in an integer or bool column, which have no value to stand for it. */
    f = 0;
    ck_assert_int_eq(sl_csv_parse_value("", SLUICE_F32, &f, err, sizeof err), 0);
    ck_assert(isnan(f));
    d64 = 0;
    ck_assert_int_eq(sl_csv_parse_value("  ", SLUICE_F64, &d64, err, sizeof err), 0);
    ck_assert(isnan(d64));
    uint16_t h16 = 0;
    ck_assert_int_eq(sl_csv_parse_value("", SLUICE_F16, &h16, err, sizeof err), 0);
    ck_assert(isnan(sluice_f16_to_f32(h16)));
    int32_t i32;
    ck_assert_int_eq(sl_csv_parse_value("", SLUICE_I32, &i32, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "empty field in an i32 column"), "%s", err);
    ck_assert_int_eq(sl_csv_parse_value(" ", SLUICE_BOOL, &b, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "empty field in a bool column"), "%s", err);
    ck_assert_int_eq(sl_csv_parse_value("", SLUICE_U8, &b, err, sizeof err), -1);
    ck_assert_int_eq(sl_csv_parse_value("1.0x", SLUICE_F64, &f, err, sizeof err), -1);
    uint16_t h;
    ck_assert_int_eq(sl_csv_parse_value("1.5", SLUICE_F16, &h, err, sizeof err), 0);
    ck_assert_uint_eq(h, 0x3e00);
    ck_assert_int_eq(sl_csv_parse_value("70000", SLUICE_F16, &h, err, sizeof err), -1);
}
END_TEST

START_TEST(csv_survives_random_corruption) {
    const char *good = "a,b,\"c d\"\n1,2.5,\"x,\"\"y\"\"\"\r\n-3,nan,z\n\n4,5,6\n";
    size_t n = strlen(good);
    char *bad = malloc(n);
    tu_rng rng;
    tu_rng_seed(&rng, 7);
    static const char alphabet[] = "\",\n\r 0-.9a\xEF";
    for (int trial = 0; trial < 5000; trial++) {
        memcpy(bad, good, n);
        for (int f = 0, flips = 1 + (int)tu_rng_range(&rng, 0, 4); f < flips; f++)
            bad[tu_rng_range(&rng, 0, (int64_t)n - 1)] =
                alphabet[tu_rng_range(&rng, 0, (int64_t)sizeof alphabet - 2)];
        size_t len = (size_t)tu_rng_range(&rng, 0, (int64_t)n);
        sl_csv_reader *r = NULL;
        char err[256];
        if (sl_csv_open_memory(&r, bad, len, "fz.csv", err, sizeof err) != 0) {
            ck_assert_ptr_null(r);
            ck_assert_uint_gt(strlen(err), 0);
            continue;
        }
        char *const *fields;
        int got;
        while ((got = sl_csv_next(r, &fields, err, sizeof err)) == 1) {
            for (size_t i = 0; i < sl_csv_column_count(r); i++) {
                double d;
                (void)sl_csv_parse_value(fields[i], SLUICE_F64, &d, err, sizeof err);
            }
        }
        if (got < 0) ck_assert_msg(strstr(err, "fz.csv:"), "%s", err);
        sl_csv_close(r);
    }
    free(bad);
}
END_TEST

/* ---- raw, f16, gen ----------------------------------------------------------------------- */

START_TEST(raw_sizes) {
    char err[256];
    int64_t n = -1;
    ck_assert_int_eq(sl_raw_element_count(40, SLUICE_F64, &n, err, sizeof err), 0);
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(sl_raw_element_count(0, SLUICE_U32, &n, err, sizeof err), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(sl_raw_element_count(10, SLUICE_F32, &n, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "10 bytes") && strstr(err, "f32"), "%s", err);
}
END_TEST

START_TEST(gen_is_deterministic_and_window_independent) {
    float whole[1000], part[1000], other[1000];
    sl_gen_values(SLUICE_F32, 7, 0, 0, 1000, whole);
    sl_gen_values(SLUICE_F32, 7, 0, 0, 300, part);
    sl_gen_values(SLUICE_F32, 7, 0, 300, 700, part + 300);
    ck_assert_int_eq(memcmp(whole, part, sizeof whole), 0);
    sl_gen_values(SLUICE_F32, 8, 0, 0, 1000, other);
    ck_assert_int_ne(memcmp(whole, other, sizeof whole), 0);
    int negative = 0;
    for (int i = 0; i < 1000; i++) negative += whole[i] < 0;
    ck_assert_int_gt(negative, 400);
    ck_assert_int_lt(negative, 600);
    uint8_t flags[1000];
    sl_gen_values(SLUICE_BOOL, 7, 1, 0, 1000, flags);
    int ones = 0;
    for (int i = 0; i < 1000; i++) {
        ck_assert_uint_le(flags[i], 1);
        ones += flags[i];
    }
    ck_assert_int_gt(ones, 400);
    ck_assert_int_lt(ones, 600);
    int32_t ints[1000];
    sl_gen_values(SLUICE_I32, 7, 2, 0, 1000, ints);
    for (int i = 0; i < 1000; i++) ck_assert(ints[i] >= -1000000 && ints[i] <= 1000000);

    int64_t *o, k1;
    ck_assert_int_eq(sl_gen_offsets(7, 3, 100000, &o, &k1), 0);
    ck_assert_int_eq(o[0], 0);
    ck_assert_int_eq(o[k1 - 1], 100000);
    for (int64_t i = 1; i < k1; i++) ck_assert_int_ge(o[i], o[i - 1]);
    double mean = 100000.0 / (double)(k1 - 1);
    ck_assert_msg(mean > 14 && mean < 18, "mean segment %g", mean);
    free(o);
    ck_assert_int_eq(sl_gen_offsets(7, 3, 0, &o, &k1), 0);
    ck_assert_int_eq(k1, 1);
    free(o);
}
END_TEST

/* ---- the batch source ------------------------------------------------------------------ */

static sluice_pipeline *load(sluice_context *ctx, const char *yaml) { return tu_load(ctx, yaml); }

static const char *ragged_yaml =
    "sluice: 1\n"
    "name: ragged\n"
    "input:\n"
    "  v: f32\n"
    "  rows: {type: i64, role: offsets}\n"
    "stages:\n"
    "  - segmented_scan: {of: v, op: sum, segments: rows, into: c}\n";

START_TEST(input_cuts_batches_at_segment_boundaries) {
    make_tmp();
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = load(ctx, ragged_yaml);
    char err[512];
    float v[20];
    for (int i = 0; i < 20; i++) v[i] = (float)i;
    int64_t offs[] = {0, 3, 3, 10, 11, 20}; /* segments 3, 0, 7, 1, 9 */
    ck_assert_int_eq(sl_npy_write_file(tmp_path("v.npy"), SLUICE_F32, v, 20, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_write_file(tmp_path("rows.npy"), SLUICE_I64, offs, 6, err, sizeof err), 0);
    sl_input *in = NULL;
    ck_assert_msg(sl_input_open(&in, p, tmp_root, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(sl_input_total_rows(in), 20);
    sluice_column cols[2];
    int64_t rows;
    /* Budget 4: [3,0] (3 rows), [7] (alone, over budget), [1] (9 would pass 4), [9]. */
    const int64_t want_rows[] = {3, 7, 1, 9}, want_k1[] = {3, 2, 2, 2};
    int64_t at = 0;
    for (int b = 0; b < 4; b++) {
        ck_assert_int_eq(sl_input_next(in, 4, cols, &rows, err, sizeof err), 1);
        ck_assert_int_eq(rows, want_rows[b]);
        ck_assert_str_eq(cols[1].name, "rows");
        ck_assert_int_eq(cols[1].length, want_k1[b]);
        const int64_t *o = cols[1].data;
        ck_assert_int_eq(o[0], 0);
        ck_assert_int_eq(o[cols[1].length - 1], rows);
        ck_assert_int_eq(cols[0].length, rows);
        ck_assert_float_eq(((const float *)cols[0].data)[0], (float)at);
        at += rows;
    }
    ck_assert_int_eq(sl_input_next(in, 4, cols, &rows, err, sizeof err), 0);
    sl_input_close(in);

    /* The same files with headers that leave the data misaligned (legal .npy, odd writers):
     * the batches are the same. */
    for (int pass = 0; pass < 2; pass++) {
        const char *name = pass ? "rows.npy" : "v.npy";
        const char *descr = pass ? "<i8" : "<f4";
        const void *data = pass ? (const void *)offs : (const void *)v;
        size_t bytes = pass ? sizeof offs : sizeof v;
        int64_t count = pass ? 6 : 20;
        unsigned char img[512];
        char dict[96];
        int dl = snprintf(dict, sizeof dict, "{'descr':'%s','fortran_order':False,'shape':(%lld,)}",
                          descr, (long long)count);
        size_t hl = 67 - 10; /* data at offset 67 */
        ck_assert_int_lt(dl, (int)hl);
        memcpy(img, "\x93NUMPY\x01\x00", 8);
        img[8] = (unsigned char)hl;
        img[9] = 0;
        memset(img + 10, ' ', hl);
        memcpy(img + 10, dict, (size_t)dl);
        img[10 + hl - 1] = '\n';
        memcpy(img + 67, data, bytes);
        write_bytes(tmp_path(name), img, 67 + bytes);
    }
    ck_assert_msg(sl_input_open(&in, p, tmp_root, err, sizeof err) == 0, "%s", err);
    at = 0;
    for (int b = 0; b < 4; b++) {
        ck_assert_int_eq(sl_input_next(in, 4, cols, &rows, err, sizeof err), 1);
        ck_assert_int_eq(rows, want_rows[b]);
        ck_assert_int_eq(cols[1].length, want_k1[b]);
        ck_assert_uint_eq((uintptr_t)cols[0].data % 4, 0);
        ck_assert_uint_eq((uintptr_t)cols[1].data % 8, 0);
        ck_assert_float_eq(((const float *)cols[0].data)[rows - 1], (float)(at + rows - 1));
        at += rows;
    }
    ck_assert_int_eq(sl_input_next(in, 4, cols, &rows, err, sizeof err), 0);
    sl_input_close(in);
    ck_assert_int_eq(sl_npy_write_file(tmp_path("v.npy"), SLUICE_F32, v, 20, err, sizeof err), 0);

    /* Offsets that decrease, do not start at 0 or do not end at the rows. */
    int64_t dec[] = {0, 5, 4, 20}, nonzero[] = {1, 20}, short_end[] = {0, 19};
    struct {
        int64_t *o;
        int64_t n;
        const char *needle;
    } bad[] = {{dec, 4, "decrease"}, {nonzero, 2, "start at 0"}, {short_end, 2, "last offset"}};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(sl_npy_write_file(tmp_path("rows.npy"), SLUICE_I64, bad[i].o, bad[i].n,
                                           err, sizeof err), 0);
        ck_assert_int_eq(sl_input_open(&in, p, tmp_root, err, sizeof err), -1);
        ck_assert_msg(strstr(err, bad[i].needle) && strstr(err, "rows.npy"), "%s", err);
    }
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    remove_tmp();
}
END_TEST

static const char *xy_yaml =
    "sluice: 1\n"
    "name: xy\n"
    "input:\n"
    "  x: f32\n"
    "  id: u32\n"
    "stages:\n"
    "  - map: {y: x * 2.0}\n";

START_TEST(input_reports_bad_directories) {
    make_tmp();
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = load(ctx, xy_yaml);
    char err[512];
    sl_input *in = NULL;
    float x[5] = {1, 2, 3, 4, 5};
    uint32_t id[6] = {1, 2, 3, 4, 5, 6};
    ck_assert_int_eq(sl_npy_write_file(tmp_path("x.npy"), SLUICE_F32, x, 5, err, sizeof err), 0);
    ck_assert_int_eq(sl_input_open(&in, p, tmp_root, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "'id'") && strstr(err, "id.npy"), "missing file: %s", err);

    ck_assert_int_eq(sl_npy_write_file(tmp_path("id.npy"), SLUICE_U32, id, 6, err, sizeof err), 0);
    ck_assert_int_eq(sl_input_open(&in, p, tmp_root, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "mismatched") && strstr(err, "x.npy") && strstr(err, "id.npy"), "%s", err);

    ck_assert_int_eq(sl_npy_write_file(tmp_path("id.npy"), SLUICE_I64, id, 2, err, sizeof err), 0);
    ck_assert_int_eq(sl_input_open(&in, p, tmp_root, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "id.npy") && strstr(err, "i64") && strstr(err, "u32"), "%s", err);

    /* A raw file instead: its size must be whole u32s. */
    unlink(tmp_path("id.npy"));
    write_bytes(tmp_path("id.bin"), id, 19);
    ck_assert_int_eq(sl_input_open(&in, p, tmp_root, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "id.bin") && strstr(err, "19 bytes"), "%s", err);
    write_bytes(tmp_path("id.bin"), id, 20);
    ck_assert_msg(sl_input_open(&in, p, tmp_root, err, sizeof err) == 0, "%s", err);
    sluice_column cols[2];
    int64_t rows;
    ck_assert_int_eq(sl_input_next(in, 100, cols, &rows, err, sizeof err), 1);
    ck_assert_int_eq(rows, 5);
    ck_assert_uint_eq(((const uint32_t *)cols[1].data)[4], 5);
    ck_assert_int_eq(sl_input_next(in, 100, cols, &rows, err, sizeof err), 0);
    sl_input_close(in);

    /* A truncated .npy. */
    unsigned char img[256];
    size_t n = make_npy(img, sizeof img, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", x, 12);
    write_bytes(tmp_path("x.npy"), img, n);
    ck_assert_int_eq(sl_input_open(&in, p, tmp_root, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "x.npy") && strstr(err, "truncated"), "%s", err);
    /* A column file where the directory belongs. */
    ck_assert_int_eq(sl_npy_write_file(tmp_path("x.npy"), SLUICE_F32, x, 5, err, sizeof err), 0);
    ck_assert_int_eq(sl_input_open(&in, p, tmp_path("x.npy"), err, sizeof err), -1);
    ck_assert_msg(strstr(err, "single column file") && strstr(err, "directory"), "%s", err);
    ck_assert_int_eq(sl_input_open(&in, p, tmp_path("id.bin"), err, sizeof err), -1);
    ck_assert_msg(strstr(err, "single column file"), "%s", err);
    ck_assert_int_eq(sl_input_open(&in, p, "/nonexistent-input", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "/nonexistent-input"), "%s", err);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    remove_tmp();
}
END_TEST

START_TEST(input_reads_csv_in_batches) {
    make_tmp();
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = load(ctx, xy_yaml);
    char err[512];
    const char *text = "id,extra,x\n1,a,0.5\n2,b,1.5\n3,c,2.5\n";
    write_bytes(tmp_path("in.csv"), text, strlen(text));
    sl_input *in = NULL;
    ck_assert_msg(sl_input_open(&in, p, tmp_path("in.csv"), err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(sl_input_total_rows(in), -1);
    sluice_column cols[2];
    int64_t rows;
    ck_assert_int_eq(sl_input_next(in, 2, cols, &rows, err, sizeof err), 1);
    ck_assert_int_eq(rows, 2);
    ck_assert_str_eq(cols[0].name, "x");
    ck_assert_float_eq(((const float *)cols[0].data)[1], 1.5f);
    ck_assert_uint_eq(((const uint32_t *)cols[1].data)[1], 2);
    ck_assert_int_eq(sl_input_next(in, 2, cols, &rows, err, sizeof err), 1);
    ck_assert_int_eq(rows, 1);
    ck_assert_float_eq(((const float *)cols[0].data)[0], 2.5f);
    ck_assert_int_eq(sl_input_next(in, 2, cols, &rows, err, sizeof err), 0);
    /* The progress line's share done: the file's size, and all of it read. */
    ck_assert_int_eq(sl_input_total_bytes(in), (int64_t)strlen(text));
    ck_assert_int_eq(sl_input_bytes_read(in), (int64_t)strlen(text));
    sl_input_close(in);

    text = "id,x\n1,0.5\n2,zz\n";
    write_bytes(tmp_path("bad.csv"), text, strlen(text));
    ck_assert_int_eq(sl_input_open(&in, p, tmp_path("bad.csv"), err, sizeof err), 0);
    ck_assert_int_eq(sl_input_next(in, 10, cols, &rows, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "bad.csv:3:2") && strstr(err, "'x'") && strstr(err, "zz"), "%s", err);
    sl_input_close(in);

    /* Missing values: NaN in the float column x; in the integer column id, an error that
     * names the file, line, data row and column. */
    text = "id,x\n1,\n2, 2.5\n,3.5\n";
    write_bytes(tmp_path("gaps.csv"), text, strlen(text));
    ck_assert_int_eq(sl_input_open(&in, p, tmp_path("gaps.csv"), err, sizeof err), 0);
    ck_assert_int_eq(sl_input_next(in, 2, cols, &rows, err, sizeof err), 1);
    ck_assert_int_eq(rows, 2);
    ck_assert(isnan(((const float *)cols[0].data)[0]));
    ck_assert_float_eq(((const float *)cols[0].data)[1], 2.5f);
    ck_assert_int_eq(sl_input_next(in, 2, cols, &rows, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "gaps.csv:4:1: data row 3, column 'id'") &&
                      strstr(err, "empty field in a u32 column"),
                  "%s", err);
    sl_input_close(in);

    text = "id,y\n1,0.5\n";
    write_bytes(tmp_path("nox.csv"), text, strlen(text));
    ck_assert_int_eq(sl_input_open(&in, p, tmp_path("nox.csv"), err, sizeof err), -1);
    ck_assert_msg(strstr(err, "no column 'x'") && strstr(err, "id, y"), "%s", err);

    /* An offsets input cannot come from CSV. */
    sluice_pipeline *rp = load(ctx, ragged_yaml);
    ck_assert_int_eq(sl_input_open(&in, rp, tmp_path("in.csv"), err, sizeof err), -1);
    ck_assert_msg(strstr(err, "offsets"), "%s", err);
    sluice_pipeline_free(rp);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    remove_tmp();
}
END_TEST

/* One half of a window's column read by a thread of its own, as flow.c's readers do. */
typedef struct half_read {
    const sl_input *in;
    int64_t first, count;
    float *dst;
    int rc;
} half_read;

static void *read_half(void *arg) {
    half_read *h = arg;
    char err[256];
    h->rc = sl_input_read_rows(h->in, 0, h->first, h->count, h->dst, err, sizeof err);
    return NULL;
}

START_TEST(input_windows_read_as_next_cuts) {
    make_tmp();
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = load(ctx, ragged_yaml);
    char err[512];
    float v[20];
    for (int i = 0; i < 20; i++) v[i] = (float)i * 1.5f;
    int64_t offs[] = {0, 3, 3, 10, 11, 20};
    ck_assert_int_eq(sl_npy_write_file(tmp_path("v.npy"), SLUICE_F32, v, 20, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_write_file(tmp_path("rows.npy"), SLUICE_I64, offs, 6, err, sizeof err), 0);
    sl_input *a = NULL, *b = NULL;
    ck_assert_msg(sl_input_open(&a, p, tmp_root, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(sl_input_open(&b, p, tmp_root, err, sizeof err) == 0, "%s", err);
    ck_assert(!sl_input_is_csv(b));
    ck_assert_uint_eq(sl_input_column_count(b), 2);
    ck_assert_str_eq(sl_input_column(b, 1)->name, "rows");
    ck_assert_ptr_null(sl_input_column(b, 2));
    sl_buffer vals = {NULL, 0}, cut = {NULL, 0};
    for (int k = 0;; k++) {
        sluice_column cols[2];
        int64_t rows;
        int got = sl_input_next(a, 4, cols, &rows, err, sizeof err);
        sl_input_window w;
        ck_assert_int_eq(sl_input_next_window(b, 4, &w), got);
        if (!got) break;
        ck_assert_int_eq(w.rows, rows);
        ck_assert_int_eq(w.segs + 1, cols[1].length);
        ck_assert_int_eq(sl_input_bytes_at(b, w.first_row + w.rows), sl_input_bytes_read(a));
        ck_assert_int_eq(sl_buffer_reserve(&vals, (size_t)rows * 4, 0), 0);
        ck_assert_int_eq(sl_buffer_reserve(&cut, (size_t)(w.segs + 1) * 8, 0), 0);
        ck_assert_uint_eq((uintptr_t)vals.data % 4096, 0);
        /* The window's rows in two halves, read by two threads at once. */
        int64_t half = rows / 2;
        half_read h[2] = {{b, w.first_row, half, vals.data, -1},
                          {b, w.first_row + half, rows - half, (float *)vals.data + half, -1}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, read_half, &h[i]), 0);
        for (int i = 0; i < 2; i++) {
            pthread_join(t[i], NULL);
            ck_assert_int_eq(h[i].rc, 0);
        }
        sl_input_window_offsets(b, &w, cut.data);
        ck_assert_msg(memcmp(vals.data, cols[0].data, (size_t)rows * 4) == 0, "batch %d", k);
        ck_assert_msg(memcmp(cut.data, cols[1].data, (size_t)cols[1].length * 8) == 0, "batch %d", k);
    }
    /* A buffer keeps what it held when it grows, and is never NULL. */
    sl_buffer g = {NULL, 0};
    ck_assert_int_eq(sl_buffer_reserve(&g, 0, 0), 0);
    ck_assert_ptr_nonnull(g.data);
    memcpy(g.data, "abc", 4);
    ck_assert_int_eq(sl_buffer_reserve(&g, 3 * 4096 + 1, 4), 0);
    ck_assert_uint_ge(g.cap, 3 * 4096 + 1);
    ck_assert_str_eq(g.data, "abc");
    ck_assert_int_eq(sl_buffer_reserve(&g, SIZE_MAX, 0), -1);
    ck_assert_str_eq(g.data, "abc");
    sl_buffer_free(&g);
    sl_buffer_free(&g);
    sl_buffer_free(&vals);
    sl_buffer_free(&cut);
    sl_input_close(a);
    sl_input_close(b);

    /* A file that shrinks by pages after it was opened: the read says so (in place of the
     * SIGBUS that touching the missing pages would raise). */
    float *big = calloc(16384, sizeof *big);
    int64_t one[] = {0, 16384};
    ck_assert_int_eq(sl_npy_write_file(tmp_path("v.npy"), SLUICE_F32, big, 16384, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_write_file(tmp_path("rows.npy"), SLUICE_I64, one, 2, err, sizeof err), 0);
    free(big);
    ck_assert_msg(sl_input_open(&a, p, tmp_root, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(truncate(tmp_path("v.npy"), SL_NPY_HEADER_SIZE + 2 * 4), 0);
    sluice_column cols[2];
    int64_t rows;
    ck_assert_int_eq(sl_input_next(a, 4, cols, &rows, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "v.npy: the file is shorter than the 16384 rows"),
                  "%s", err);
    sl_input_close(a);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    remove_tmp();
}
END_TEST

START_TEST(input_csv_batches_into_caller_buffers) {
    make_tmp();
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = load(ctx, "sluice: 1\nname: t\ninput: {x: f32, id: u32}\nstages:\n"
                                   "  - map: {y: x + 1}\n");
    FILE *f = fopen(tmp_path("in.csv"), "w");
    ck_assert_ptr_nonnull(f);
    fputs("id,x\n", f);
    for (int i = 0; i < 10000; i++) fprintf(f, "%d,%d.5\n", i, i);
    fclose(f);
    char err[512];
    sl_input *in = NULL;
    ck_assert_msg(sl_input_open(&in, p, tmp_path("in.csv"), err, sizeof err) == 0, "%s", err);
    ck_assert(sl_input_is_csv(in));
    sl_buffer bufs[2] = {{NULL, 0}, {NULL, 0}};
    int64_t rows = -1;
    ck_assert_int_eq(sl_input_next_csv(in, 6000, bufs, &rows, NULL, err, sizeof err), 1);
    ck_assert_int_eq(rows, 6000);
    ck_assert_uint_eq((uintptr_t)bufs[0].data % 4096, 0);
    ck_assert_float_eq(((const float *)bufs[0].data)[5999], 5999.5f);
    ck_assert_uint_eq(((const uint32_t *)bufs[1].data)[5999], 5999);
    /* Told to stop, a batch ends early, as the end of the input. */
    atomic_int cancel = 1;
    ck_assert_int_eq(sl_input_next_csv(in, 6000, bufs, &rows, &cancel, err, sizeof err), 0);
    ck_assert_int_eq(rows, 0);
    sl_buffer_free(&bufs[0]);
    sl_buffer_free(&bufs[1]);
    sl_input_close(in);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    remove_tmp();
}
END_TEST

/* Memory a device reads by DMA, as `sluice run` gives the readers for a CUDA session: here
 * aligned malloc blocks, recorded so the test can tell where each batch was read to and that
 * every block goes back, on the thread that started and stopped the readers. */
typedef struct fake_dma {
    void *blocks[16];
    size_t bytes[16];
    int nalloc, nreleased;
    pthread_t owner;
    bool foreign_thread;
} fake_dma;

static void *fake_dma_alloc(void *arg, size_t bytes) {
    fake_dma *d = arg;
    if (!pthread_equal(pthread_self(), d->owner)) d->foreign_thread = true;
    if (d->nalloc == 16) return NULL;
    void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    d->blocks[d->nalloc] = p;
    d->bytes[d->nalloc++] = bytes;
    return p;
}

static void fake_dma_release(void *arg, void *p) {
    fake_dma *d = arg;
    if (!pthread_equal(pthread_self(), d->owner)) d->foreign_thread = true;
    d->nreleased++;
    free(p);
}

/* Whether [p, p + bytes) lies in one of d's blocks. */
static bool in_fake_dma(const fake_dma *d, const void *p, size_t bytes) {
    for (int i = 0; i < d->nalloc; i++) {
        const char *b = d->blocks[i];
        if ((const char *)p >= b && (const char *)p + bytes <= b + d->bytes[i]) return true;
    }
    return false;
}

/* Readers given device memory (cli/flow.h, sl_reader_memory) read every batch that fits into
 * it, and give the same batches as sl_input_next; a batch larger than the memory (one long
 * segment) and the offsets are read as without it; every block is released by
 * sl_reader_stop, on the caller's thread. */
START_TEST(reader_reads_into_given_memory) {
    make_tmp();
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = load(ctx, ragged_yaml);
    char err[512];
    float v[20];
    for (int i = 0; i < 20; i++) v[i] = (float)i * 1.5f;
    int64_t offs[] = {0, 3, 3, 10, 11, 20}; /* the segment of 7 rows outgrows batches of 4 */
    ck_assert_int_eq(sl_npy_write_file(tmp_path("v.npy"), SLUICE_F32, v, 20, err, sizeof err), 0);
    ck_assert_int_eq(sl_npy_write_file(tmp_path("rows.npy"), SLUICE_I64, offs, 6, err, sizeof err), 0);
    for (int threads = 1; threads <= 3; threads += 2) {
        sl_input *a = NULL, *b = NULL;
        ck_assert_msg(sl_input_open(&a, p, tmp_root, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(sl_input_open(&b, p, tmp_root, err, sizeof err) == 0, "%s", err);
        fake_dma d = {.owner = pthread_self()};
        sl_reader_memory mem = {fake_dma_alloc, fake_dma_release, &d};
        sl_reader *r = NULL;
        ck_assert_msg(sl_reader_start(&r, b, 4, threads, 2, &mem, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq(d.nalloc, 2); /* a slot each, for the one data column */
        int in_dma = 0, beside = 0;
        for (;;) {
            sluice_column want[2], got[2];
            int64_t wrows, grows, bytes;
            int w = sl_input_next(a, 4, want, &wrows, err, sizeof err);
            int g = sl_reader_next(r, got, &grows, &bytes, err, sizeof err);
            ck_assert_int_eq(g, w);
            if (!g) break;
            ck_assert_int_eq(grows, wrows);
            for (int c = 0; c < 2; c++) {
                size_t n = (size_t)got[c].length * sluice_type_size(got[c].type);
                ck_assert_int_eq(got[c].length, want[c].length);
                ck_assert(memcmp(got[c].data, want[c].data, n) == 0);
            }
            bool dma = in_fake_dma(&d, got[0].data, (size_t)grows * 4);
            ck_assert_msg(dma == (grows <= 4), "a batch of %lld rows %s the given memory",
                          (long long)grows, dma ? "in" : "not in");
            ck_assert(!in_fake_dma(&d, got[1].data, 8)); /* offsets: the slot's own buffer */
            in_dma += dma;
            beside += !dma;
        }
        ck_assert_int_gt(in_dma, 0);
        ck_assert_int_gt(beside, 0);
        ck_assert(sl_reader_stop(r));
        ck_assert_int_eq(d.nreleased, d.nalloc);
        ck_assert(!d.foreign_thread);
        sl_input_close(a);
        sl_input_close(b);
    }
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    remove_tmp();
}
END_TEST

/* Result batches written by several writer threads (cli/flow.c: each batch's columns cut into
 * 4 MiB chunks, written where they were placed when queued) give the same files, byte for
 * byte, as one thread, and hold exactly the batches' rows in order: columns of several chunks
 * and of none, an empty batch, more batches than the queue holds. */
START_TEST(writer_threads_write_what_one_writes) {
    make_tmp();
    sluice_context *ctx = NULL;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = load(ctx, "sluice: 1\nname: w\ninput: {a: u64, b: f32, c: u8}\n"
                                   "stages:\n  - map: {d: a}\noutput: [a, b, c]\n");
    static const int64_t rows[] = {1500000, 0, 3, 700001, 1048576, 9};
    enum { NB = sizeof rows / sizeof rows[0] };
    int64_t total = 0;
    for (int k = 0; k < NB; k++) total += rows[k];
    uint64_t *a = malloc((size_t)total * 8);
    float *b = malloc((size_t)total * 4);
    uint8_t *c = malloc((size_t)total);
    for (int64_t i = 0; i < total; i++) {
        a[i] = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
        b[i] = (float)i * 0.25f;
        c[i] = (uint8_t)(i * 7);
    }
    char err[512];
    static const int threads[] = {1, 4};
    for (int t = 0; t < 2; t++) {
        char dir[64];
        snprintf(dir, sizeof dir, "out%d", threads[t]);
        sl_output *o = NULL;
        ck_assert_msg(sl_output_open(&o, p, tmp_path(dir), err, sizeof err) == 0, "%s", err);
        sl_writer *w = NULL;
        ck_assert_msg(sl_writer_start(&w, o, 2, threads[t], NULL, NULL, err, sizeof err) == 0,
                      "%s", err);
        int64_t at = 0;
        for (int k = 0; k < NB; k++) {
            sluice_column cols[3] = {{"a", SLUICE_U64, a + at, rows[k]},
                                     {"b", SLUICE_F32, b + at, rows[k]},
                                     {"c", SLUICE_U8, c + at, rows[k]}};
            /* No library batch to free: the writer frees what it is given, NULL is harmless. */
            ck_assert_msg(sl_writer_put(w, NULL, cols, err, sizeof err) == 0, "%s", err);
            at += rows[k];
        }
        ck_assert_msg(sl_writer_finish(w, NULL, NULL, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq(sl_output_rows(o), total);
        ck_assert_msg(sl_output_commit(o, err, sizeof err) == 0, "%s", err);
    }
    static const char *const names[] = {"a", "b", "c"};
    const void *want[] = {a, b, c};
    const size_t width[] = {8, 4, 1};
    for (int i = 0; i < 3; i++) {
        char one[64], four[64];
        snprintf(one, sizeof one, "out1/%s.npy", names[i]);
        snprintf(four, sizeof four, "out4/%s.npy", names[i]);
        size_t n1, n4;
        unsigned char *f1 = read_file(tmp_path(one), &n1);
        unsigned char *f4 = read_file(tmp_path(four), &n4);
        ck_assert_uint_eq(n1, n4);
        ck_assert_msg(memcmp(f1, f4, n1) == 0, "column %s differs with 4 writer threads", names[i]);
        sl_npy_header h;
        ck_assert_msg(sl_npy_parse_header(f4, n4, &h, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq(h.length, total);
        ck_assert_uint_eq(n4, h.data_offset + (size_t)total * width[i]);
        ck_assert(memcmp(f4 + h.data_offset, want[i], (size_t)total * width[i]) == 0);
        free(f1);
        free(f4);
    }
    free(a);
    free(b);
    free(c);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
    remove_tmp();
}
END_TEST

static Suite *io_suite(void) {
    Suite *s = suite_create("io");
    TCase *npy = tcase_create("npy");
    tcase_add_test(npy, npy_parses_what_numpy_writes);
    tcase_add_test(npy, npy_version_2_header);
    tcase_add_test(npy, npy_rejects_what_a_column_cannot_be);
    tcase_add_test(npy, npy_rejects_bad_magic_version_and_truncation);
    tcase_add_test(npy, npy_survives_random_corruption);
    tcase_add_test(npy, npy_writer_streams_and_patches_length);
    suite_add_tcase(s, npy);
    TCase *csv = tcase_create("csv");
    tcase_add_test(csv, csv_reads_records);
    tcase_add_test(csv, csv_reports_bad_files_with_line);
    tcase_add_test(csv, csv_parses_typed_fields);
    tcase_add_test(csv, csv_survives_random_corruption);
    suite_add_tcase(s, csv);
    TCase *misc = tcase_create("raw_gen");
    tcase_add_test(misc, raw_sizes);
    tcase_add_test(misc, gen_is_deterministic_and_window_independent);
    suite_add_tcase(s, misc);
    TCase *input = tcase_create("input");
    tcase_add_test(input, input_cuts_batches_at_segment_boundaries);
    tcase_add_test(input, input_reports_bad_directories);
    tcase_add_test(input, input_reads_csv_in_batches);
    tcase_add_test(input, input_windows_read_as_next_cuts);
    tcase_add_test(input, input_csv_batches_into_caller_buffers);
    suite_add_tcase(s, input);
    TCase *flow = tcase_create("flow");
    tcase_add_test(flow, reader_reads_into_given_memory);
    tcase_add_test(flow, writer_threads_write_what_one_writes);
    suite_add_tcase(s, flow);
    return s;
}

int main(void) { return tu_run_suite(io_suite()); }
