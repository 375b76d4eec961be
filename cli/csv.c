/* csv.c — the incremental CSV reader and the typed field parser (see csv.h). A record is read
 * with getline (continuing while a quote is open), then split in place: unquoting only ever
 * shortens a field, so the split needs no second buffer. */
#define _GNU_SOURCE /* fmemopen, getline */
#include "csv.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"

struct sl_csv_reader {
    FILE *file;
    char *name;
    char *record;     /* the current record's text, split in place into fields */
    size_t record_cap;
    char *line;       /* getline's buffer */
    size_t line_cap;
    int64_t next_line;   /* 1-based number of the next physical line to read */
    int64_t record_line; /* line on which the last record started */
    size_t ncols;
    char **names;     /* the header's column names (owned copies) */
    char **fields;    /* ncols pointers into record */
};

/* Reads one logical record (physical lines joined while a quote is open) into r->record,
 * without its line terminator. Returns 1, 0 at end of file, -1 on error. */
static int read_record(sl_csv_reader *r, size_t *len_out, char *err, size_t errcap) {
    size_t len = 0;
    bool in_quote = false;
    r->record_line = r->next_line;
    for (;;) {
        errno = 0;
        ssize_t n = getline(&r->line, &r->line_cap, r->file);
        if (n < 0) {
            if (ferror(r->file))
                return sl_errf(err, errcap, "%s:%" PRId64 ": read error: %s", r->name,
                               r->next_line, strerror(errno));
            if (in_quote)
                return sl_errf(err, errcap, "%s:%" PRId64 ": a quoted field is never closed",
                               r->name, r->record_line);
            if (len == 0) return 0;
            break;
        }
        r->next_line++;
        for (ssize_t i = 0; i < n; i++)
            if (r->line[i] == '"') in_quote = !in_quote;
        if (len + (size_t)n + 1 > r->record_cap) {
            size_t cap = (len + (size_t)n + 1) * 2;
            char *grown = realloc(r->record, cap);
            if (!grown) return sl_errf(err, errcap, "%s: out of memory", r->name);
            r->record = grown;
            r->record_cap = cap;
        }
        memcpy(r->record + len, r->line, (size_t)n);
        len += (size_t)n;
        if (!in_quote) break;
    }
    while (len > 0 && (r->record[len - 1] == '\n' || r->record[len - 1] == '\r')) len--;
    r->record[len] = '\0';
    *len_out = len;
    return 1;
}

static bool is_blank(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t') return false;
    return true;
}

/* Splits r->record (len bytes) into at most `max` fields stored in out[]. Returns the number
 * of fields found (which may exceed max: the extra ones are counted, not stored), or -1 for
 * text after a closing quote. */
static long split_record(sl_csv_reader *r, size_t len, char **out, size_t max) {
    char *p = r->record, *end = r->record + len;
    long count = 0;
    for (;;) {
        char *w = p, *start = p;
        while (p < end && *p == ' ') p++;
        if (p < end && *p == '"') {
            p++;
            w = start;
            for (;;) {
                if (p >= end) break; /* read_record guarantees quotes balance */
                if (*p == '"') {
                    if (p + 1 < end && p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            while (p < end && *p == ' ') p++;
            if (p < end && *p != ',') return -1;
        } else {
            p = start;
            while (p < end && *p != ',') p++;
            w = p;
        }
        bool more = p < end && *p == ',';
        *w = '\0';
        if ((size_t)count < max) out[count] = start;
        count++;
        if (!more) break;
        p++;
    }
    return count;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    return s;
}

static int read_header(sl_csv_reader *r, char *err, size_t errcap) {
    size_t len = 0;
    int got;
    do {
        got = read_record(r, &len, err, errcap);
        if (got < 0) return -1;
        if (got == 0)
            return sl_errf(err, errcap, "%s: the file is empty: a header row of column names "
                           "is expected first", r->name);
    } while (is_blank(r->record, len));
    /* A UTF-8 byte-order mark is not part of the first name. */
    if (len >= 3 && memcmp(r->record, "\xEF\xBB\xBF", 3) == 0) {
        memmove(r->record, r->record + 3, len - 2);
        len -= 3;
    }
    /* Every field ends at a comma or the end, so commas + 1 bounds the column count. */
    size_t bound = 1;
    for (size_t i = 0; i < len; i++) bound += r->record[i] == ',';
    r->fields = calloc(bound, sizeof *r->fields);
    if (!r->fields) return sl_errf(err, errcap, "%s: out of memory", r->name);
    long n = split_record(r, len, r->fields, bound);
    if (n < 0)
        return sl_errf(err, errcap, "%s:%" PRId64 ": text after a closing quote in the header",
                       r->name, r->record_line);
    r->ncols = (size_t)n;
    r->names = calloc(r->ncols, sizeof *r->names);
    if (!r->names) return sl_errf(err, errcap, "%s: out of memory", r->name);
    for (size_t i = 0; i < r->ncols; i++) {
        char *name = trim(r->fields[i]);
        if (*name == '\0')
            return sl_errf(err, errcap, "%s:%" PRId64 ": header column %zu has no name",
                           r->name, r->record_line, i + 1);
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->names[j], name) == 0)
                return sl_errf(err, errcap, "%s:%" PRId64 ": header names column '%s' twice",
                               r->name, r->record_line, name);
        r->names[i] = strdup(name);
        if (!r->names[i]) return sl_errf(err, errcap, "%s: out of memory", r->name);
    }
    return 0;
}

static int open_stream(sl_csv_reader **out, FILE *f, const char *name, char *err,
                       size_t errcap) {
    *out = NULL;
    sl_csv_reader *r = calloc(1, sizeof *r);
    if (!r) {
        fclose(f);
        return sl_errf(err, errcap, "out of memory");
    }
    r->file = f;
    r->next_line = 1;
    r->name = strdup(name);
    if (!r->name || read_header(r, err, errcap) != 0) {
        if (!r->name) sl_errf(err, errcap, "out of memory");
        sl_csv_close(r);
        return -1;
    }
    *out = r;
    return 0;
}

int sl_csv_open_file(sl_csv_reader **out, const char *path, char *err, size_t errcap) {
    FILE *f = fopen(path, "rb");
    if (!f) return sl_errf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
    return open_stream(out, f, path, err, errcap);
}

int sl_csv_open_memory(sl_csv_reader **out, const void *data, size_t len, const char *name,
                       char *err, size_t errcap) {
    *out = NULL;
    if (!name) name = "<memory>";
    if (len == 0)
        return sl_errf(err, errcap, "%s: the file is empty: a header row of column names is "
                       "expected first", name);
    FILE *f = fmemopen((void *)data, len, "r");
    if (!f) return sl_errf(err, errcap, "%s: cannot read: %s", name, strerror(errno));
    return open_stream(out, f, name, err, errcap);
}

void sl_csv_close(sl_csv_reader *r) {
    if (!r) return;
    if (r->file) fclose(r->file);
    if (r->names)
        for (size_t i = 0; i < r->ncols; i++) free(r->names[i]);
    free(r->names);
    free(r->fields);
    free(r->record);
    free(r->line);
    free(r->name);
    free(r);
}

size_t sl_csv_column_count(const sl_csv_reader *r) { return r->ncols; }
const char *sl_csv_column_name(const sl_csv_reader *r, size_t index) {
    return index < r->ncols ? r->names[index] : NULL;
}
long sl_csv_column_index(const sl_csv_reader *r, const char *name) {
    for (size_t i = 0; i < r->ncols; i++)
        if (strcmp(r->names[i], name) == 0) return (long)i;
    return -1;
}
const char *sl_csv_name(const sl_csv_reader *r) { return r->name; }
int64_t sl_csv_line(const sl_csv_reader *r) { return r->record_line; }
int64_t sl_csv_bytes_read(const sl_csv_reader *r) { return (int64_t)ftello(r->file); }

int sl_csv_next(sl_csv_reader *r, char *const **fields, char *err, size_t errcap) {
    size_t len = 0;
    for (;;) {
        int got = read_record(r, &len, err, errcap);
        if (got <= 0) return got;
        if (!is_blank(r->record, len)) break;
    }
    long n = split_record(r, len, r->fields, r->ncols);
    if (n < 0)
        return sl_errf(err, errcap, "%s:%" PRId64 ": text after a closing quote", r->name,
                       r->record_line);
    if ((size_t)n != r->ncols)
        return sl_errf(err, errcap,
                       "%s:%" PRId64 ": this row has %ld fields but the header has %zu",
                       r->name, r->record_line, n, r->ncols);
    *fields = r->fields;
    return 1;
}

/* ---- typed fields ---------------------------------------------------------------------- */

/* Integer fields: 0, -1 for text that is not an integer, 1 for one out of the range. */
static int parse_signed(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (*s == '\0') return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') return -1;
    if (errno == ERANGE || v < lo || v > hi) return 1;
    *out = v;
    return 0;
}

static int parse_unsigned(const char *s, uint64_t hi, uint64_t *out) {
    if (*s == '\0') return -1;
    char *end = NULL;
    errno = 0;
    if (*s == '-') { /* a negative integer is out of an unsigned range; other text is not one */
        long long v = strtoll(s, &end, 10);
        if (end == s || *end != '\0') return -1;
        if (v != 0 || errno == ERANGE) return 1;
        *out = 0; /* "-0" */
        return 0;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0') return -1;
    if (errno == ERANGE || v > hi) return 1;
    *out = v;
    return 0;
}

/* strtod, but only finite numbers, inf and nan spelled out (no hex floats, no "infinity"
 * prefixes of other words). *explicit_nonfinite says the text itself was inf/nan. Returns 0,
 * -1 for text that is not a number, 1 for a number beyond even a double's range. */
static int parse_double(const char *s, double *out, bool *explicit_nonfinite) {
    if (*s == '\0') return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0' || end == s) return -1;
    if (errno == ERANGE && isinf(v)) return 1;
    *explicit_nonfinite = !isfinite(v);
    *out = v;
    return 0;
}

int sl_csv_parse_value(const char *text, sluice_type type, void *dst, char *err,
                       size_t errcap) {
    char buf[128];
    size_t n = strlen(text);
    if (n >= sizeof buf)
        return sl_errf(err, errcap, "field of %zu characters is too long for a number", n);
    memcpy(buf, text, n + 1);
    char *s = trim(buf);
    const char *tname = sluice_type_name(type);
    if (!tname) return sl_errf(err, errcap, "unknown column type");
    if (*s == '\0') {
        /* A missing value: NaN in a float column, as NumPy and pandas read it. Integer and
         * bool columns have no value to stand for it. */
        if (type == SLUICE_F16 || type == SLUICE_F32 || type == SLUICE_F64) {
            if (type == SLUICE_F64) {
                double v = NAN;
                memcpy(dst, &v, sizeof v);
            } else if (type == SLUICE_F32) {
                float v = NAN;
                memcpy(dst, &v, sizeof v);
            } else {
                uint16_t h = sluice_f32_to_f16(NAN);
                memcpy(dst, &h, sizeof h);
            }
            return 0;
        }
        return sl_errf(err, errcap,
                       "empty field in %s %s column: only float columns read an empty field "
                       "(as NaN); fill in a value or declare the column f32/f64",
                       tname[0] == 'u' || tname[0] == 'b' ? "a" : "an", tname);
    }
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    bool nonfinite = false;
    int bad = 0;
    switch (type) {
    case SLUICE_BOOL: {
        uint8_t b;
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE") || !strcmp(s, "1"))
            b = 1;
        else if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE") ||
                 !strcmp(s, "0"))
            b = 0;
        else
            return sl_errf(err, errcap, "cannot parse '%s' as bool: write true/false or 1/0", s);
        memcpy(dst, &b, 1);
        return 0;
    }
    case SLUICE_I8: bad = parse_signed(s, INT8_MIN, INT8_MAX, &i); if (!bad) { int8_t v = (int8_t)i; memcpy(dst, &v, sizeof v); } break;
    case SLUICE_I16: bad = parse_signed(s, INT16_MIN, INT16_MAX, &i); if (!bad) { int16_t v = (int16_t)i; memcpy(dst, &v, sizeof v); } break;
    case SLUICE_I32: bad = parse_signed(s, INT32_MIN, INT32_MAX, &i); if (!bad) { int32_t v = (int32_t)i; memcpy(dst, &v, sizeof v); } break;
    case SLUICE_I64: bad = parse_signed(s, INT64_MIN, INT64_MAX, &i); if (!bad) memcpy(dst, &i, sizeof i); break;
    case SLUICE_U8: bad = parse_unsigned(s, UINT8_MAX, &u); if (!bad) { uint8_t v = (uint8_t)u; memcpy(dst, &v, sizeof v); } break;
    case SLUICE_U16: bad = parse_unsigned(s, UINT16_MAX, &u); if (!bad) { uint16_t v = (uint16_t)u; memcpy(dst, &v, sizeof v); } break;
    case SLUICE_U32: bad = parse_unsigned(s, UINT32_MAX, &u); if (!bad) { uint32_t v = (uint32_t)u; memcpy(dst, &v, sizeof v); } break;
    case SLUICE_U64: bad = parse_unsigned(s, UINT64_MAX, &u); if (!bad) memcpy(dst, &u, sizeof u); break;
    case SLUICE_F16:
    case SLUICE_F32:
    case SLUICE_F64: {
        bad = parse_double(s, &d, &nonfinite);
        if (bad > 0) return sl_errf(err, errcap, "'%s' is out of range for %s", s, tname);
        if (bad) break;
        /* Out of range means "rounds to infinity in the column's type": a bound on the
         * double itself would reject the printed forms of the largest values, e.g. numpy's
         * 3.4028235e+38 for float32 max, which lies a little above FLT_MAX. Past this bound
         * the float conversion would not be defined. */
        const double f32_rounds_to_inf = 0x1.ffffffp+127; /* FLT_MAX + half an ulp */
        if (!nonfinite && type != SLUICE_F64 && fabs(d) >= f32_rounds_to_inf)
            return sl_errf(err, errcap, "'%s' is out of range for %s", s, tname);
        if (type == SLUICE_F64) {
            memcpy(dst, &d, sizeof d);
        } else if (type == SLUICE_F32) {
            float f = (float)d;
            memcpy(dst, &f, sizeof f);
        } else {
            uint16_t h = sluice_f32_to_f16((float)d);
            if (!nonfinite && (h & 0x7fff) == 0x7c00)
                return sl_errf(err, errcap, "'%s' is out of range for %s", s, tname);
            memcpy(dst, &h, sizeof h);
        }
        break;
    }
    default: return sl_errf(err, errcap, "unknown column type");
    }
    if (bad > 0) return sl_errf(err, errcap, "'%s' is out of range for %s", s, tname);
    if (bad) {
        bool is_float = type == SLUICE_F16 || type == SLUICE_F32 || type == SLUICE_F64;
        return sl_errf(err, errcap, "cannot parse '%s' as %s: expected %s", s, tname,
                       is_float ? "a number" : "an integer in its range");
    }
    return 0;
}
