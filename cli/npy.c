/* npy.c — the .npy format: a strict parser of the header (a Python dict literal after a magic
 * string and a length), and a streaming column writer. Format reference:
 * numpy/lib/format.py (versions 1.0, 2.0 and 3.0 differ only in the header length field). */
#include "npy.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errbuf.h"

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* dtype strings numpy writes for each sluice type; one-byte types use '|' (no byte order). */
static const char *const npy_descrs[SLUICE_TYPE_COUNT_] = {
    [SLUICE_BOOL] = "|b1", [SLUICE_I8] = "|i1",  [SLUICE_I16] = "<i2", [SLUICE_I32] = "<i4",
    [SLUICE_I64] = "<i8",  [SLUICE_U8] = "|u1",  [SLUICE_U16] = "<u2", [SLUICE_U32] = "<u4",
    [SLUICE_U64] = "<u8",  [SLUICE_F16] = "<f2", [SLUICE_F32] = "<f4", [SLUICE_F64] = "<f8",
};

const char *sl_npy_descr(sluice_type type) {
    if ((unsigned)type >= SLUICE_TYPE_COUNT_) return NULL;
    return npy_descrs[type];
}

/* ---- the header dict ------------------------------------------------------------------- */

/* A cursor over the header text; `end` is one past its last byte. */
typedef struct dict_cursor {
    const char *p, *end;
} dict_cursor;

static void skip_space(dict_cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool take_char(dict_cursor *c, char ch) {
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes (the only kind numpy writes for these keys and
 * dtypes). Copies at most cap-1 bytes; longer strings are refused. */
static int take_string(dict_cursor *c, char *buf, size_t cap) {
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return -1;
    char quote = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != quote) {
        if (*c->p == '\\' || n + 1 >= cap) return -1;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return -1;
    c->p++;
    buf[n] = '\0';
    return 0;
}

static bool take_word(dict_cursor *c, const char *word) {
    skip_space(c);
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

/* Maps a dtype string to a sluice type, or explains why it cannot be a column. */
static int descr_to_type(const char *descr, sluice_type *out, char *err, size_t errcap) {
    const char *hint = "sluice columns are bool, int8..int64, uint8..uint64 or float16/32/64";
    size_t n = strlen(descr);
    if (n < 3) return sl_errf(err, errcap, "unsupported dtype '%s': %s", descr, hint);
    char order = descr[0], kind = descr[1];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return sl_errf(err, errcap, "unsupported dtype '%s': %s", descr, hint);
    char *endp = NULL;
    errno = 0;
    long size = strtol(descr + 2, &endp, 10);
    if (errno || *endp != '\0' || size <= 0)
        return sl_errf(err, errcap, "unsupported dtype '%s': %s", descr, hint);
    sluice_type t = SLUICE_TYPE_COUNT_;
    switch (kind) {
    case 'b': t = size == 1 ? SLUICE_BOOL : t; break;
    case 'i':
        t = size == 1 ? SLUICE_I8 : size == 2 ? SLUICE_I16 : size == 4 ? SLUICE_I32
          : size == 8 ? SLUICE_I64 : t;
        break;
    case 'u':
        t = size == 1 ? SLUICE_U8 : size == 2 ? SLUICE_U16 : size == 4 ? SLUICE_U32
          : size == 8 ? SLUICE_U64 : t;
        break;
    case 'f':
        t = size == 2 ? SLUICE_F16 : size == 4 ? SLUICE_F32 : size == 8 ? SLUICE_F64 : t;
        break;
    case 'O':
        return sl_errf(err, errcap, "object arrays ('%s') cannot be read: %s", descr, hint);
    default: break;
    }
    if (t == SLUICE_TYPE_COUNT_)
        return sl_errf(err, errcap, "unsupported dtype '%s': %s", descr, hint);
    if (order == '>' && size > 1)
        return sl_errf(err, errcap,
                       "big-endian dtype '%s': save the array little-endian, e.g. "
                       "arr.astype('<%c%ld')", descr, kind, size);
    *out = t;
    return 0;
}

/* Parses "(N,)" — sluice columns are 1-D. */
static int take_shape(dict_cursor *c, int64_t *length, char *err, size_t errcap) {
    if (!take_char(c, '(')) return sl_errf(err, errcap, "'shape' is not a tuple");
    int64_t dims[8];
    int ndim = 0;
    for (;;) {
        skip_space(c);
        if (take_char(c, ')')) break;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return sl_errf(err, errcap, "'shape' holds something other than integers");
        uint64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            v = v * 10 + (uint64_t)(*c->p++ - '0');
            if (v > (uint64_t)INT64_MAX) return sl_errf(err, errcap, "'shape' is too large");
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 long suffix */
        if (ndim == (int)(sizeof dims / sizeof dims[0]))
            return sl_errf(err, errcap, "'shape' has too many dimensions");
        dims[ndim++] = (int64_t)v;
        if (take_char(c, ')')) break;
        if (!take_char(c, ',')) return sl_errf(err, errcap, "'shape' tuple is malformed");
    }
    if (ndim != 1) {
        if (ndim == 0)
            return sl_errf(err, errcap,
                           "the array is 0-d (a scalar); a column must be 1-D, e.g. "
                           "np.atleast_1d(arr)");
        return sl_errf(err, errcap,
                       "the array is %d-D; a column must be 1-D: save arr.ravel() or one "
                       "column per file", ndim);
    }
    *length = dims[0];
    return 0;
}

int sl_npy_parse_header(const void *data, size_t len, sl_npy_header *out, char *err,
                        size_t errcap) {
    const unsigned char *b = data;
    if (!b || !out) return sl_errf(err, errcap, "no data");
    if (len < 10 || memcmp(b, npy_magic, sizeof npy_magic) != 0)
        return sl_errf(err, errcap, "not a .npy file (the magic string \\x93NUMPY is missing)");
    unsigned major = b[6];
    size_t header_len, prefix;
    if (major == 1) {
        header_len = (size_t)b[8] | (size_t)b[9] << 8;
        prefix = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return sl_errf(err, errcap, "the .npy header is truncated");
        header_len = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
                     (size_t)b[11] << 24;
        prefix = 12;
    } else {
        return sl_errf(err, errcap, "unsupported .npy format version %u.%u", major, b[7]);
    }
    if (header_len > len - prefix)
        return sl_errf(err, errcap, "the .npy header is truncated (%zu bytes announced, %zu present)",
                       header_len, len - prefix);

    dict_cursor c = {(const char *)b + prefix, (const char *)b + prefix + header_len};
    bool have_descr = false, have_order = false, have_shape = false;
    sluice_type type = SLUICE_TYPE_COUNT_;
    int64_t length = 0;
    if (!take_char(&c, '{')) return sl_errf(err, errcap, "the .npy header is not a dict");
    for (;;) {
        if (take_char(&c, '}')) break;
        char key[32];
        if (take_string(&c, key, sizeof key) != 0 || !take_char(&c, ':'))
            return sl_errf(err, errcap, "the .npy header dict is malformed");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            skip_space(&c);
            if (c.p < c.end && *c.p == '[')
                return sl_errf(err, errcap,
                               "structured dtypes cannot be read: save one field per file");
            char descr[32];
            if (take_string(&c, descr, sizeof descr) != 0)
                return sl_errf(err, errcap, "'descr' in the .npy header is malformed");
            if (descr_to_type(descr, &type, err, errcap) != 0) return -1;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (take_word(&c, "True"))
                return sl_errf(err, errcap,
                               "fortran_order is True: save a C-ordered 1-D array "
                               "(np.ascontiguousarray)");
            if (!take_word(&c, "False"))
                return sl_errf(err, errcap, "'fortran_order' is neither True nor False");
            have_order = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (take_shape(&c, &length, err, errcap) != 0) return -1;
            have_shape = true;
        } else {
            return sl_errf(err, errcap, "unexpected or repeated key '%s' in the .npy header",
                           key);
        }
        if (take_char(&c, '}')) break;
        if (!take_char(&c, ',')) return sl_errf(err, errcap, "the .npy header dict is malformed");
    }
    if (!have_descr || !have_order || !have_shape)
        return sl_errf(err, errcap, "the .npy header lacks '%s'",
                       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    out->type = type;
    out->length = length;
    out->data_offset = prefix + header_len;
    return 0;
}

int sl_npy_check_size(const sl_npy_header *h, uint64_t file_size, char *err, size_t errcap) {
    uint64_t elem = sluice_type_size(h->type), want;
    if (__builtin_mul_overflow((uint64_t)h->length, elem, &want) ||
        __builtin_add_overflow(want, (uint64_t)h->data_offset, &want))
        return sl_errf(err, errcap, "the shape (%" PRId64 ",) is too large", h->length);
    if (file_size < want)
        return sl_errf(err, errcap,
                       "truncated: the header announces %" PRId64 " elements (%" PRIu64
                       " bytes) but the file has %" PRIu64 " bytes",
                       h->length, want, file_size);
    if (file_size > want)
        return sl_errf(err, errcap,
                       "%" PRIu64 " unexpected bytes after the %" PRId64
                       " elements the header announces",
                       file_size - want, h->length);
    return 0;
}

/* ---- writing --------------------------------------------------------------------------- */

int sl_npy_format_header(void *buf, size_t cap, sluice_type type, int64_t length) {
    const char *descr = sl_npy_descr(type);
    if (!buf || cap < SL_NPY_HEADER_SIZE || !descr || length < 0) return -1;
    unsigned char *b = buf;
    const size_t dict_len = SL_NPY_HEADER_SIZE - 10;
    memcpy(b, npy_magic, sizeof npy_magic);
    b[6] = 1;
    b[7] = 0;
    b[8] = (unsigned char)(dict_len & 0xff);
    b[9] = (unsigned char)(dict_len >> 8);
    char dict[SL_NPY_HEADER_SIZE];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%" PRId64 ",), }",
                     descr, length);
    if (n < 0 || (size_t)n >= dict_len) return -1;
    /* numpy pads with spaces and ends the header with a newline. */
    memset(b + 10, ' ', dict_len);
    memcpy(b + 10, dict, (size_t)n);
    b[SL_NPY_HEADER_SIZE - 1] = '\n';
    return 0;
}

int sl_npy_writer_open(sl_npy_writer *w, const char *path, sluice_type type, char *err,
                       size_t errcap) {
    memset(w, 0, sizeof *w);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return sl_errf(err, errcap, "%s: cannot create: %s", path, strerror(errno));
    return sl_npy_writer_open_fd(w, fd, path, type, err, errcap);
}

int sl_npy_writer_open_fd(sl_npy_writer *w, int fd, const char *path, sluice_type type,
                          char *err, size_t errcap) {
    memset(w, 0, sizeof *w);
    unsigned char header[SL_NPY_HEADER_SIZE];
    if (sl_npy_format_header(header, sizeof header, type, 0) != 0) {
        close(fd);
        return sl_errf(err, errcap, "%s: cannot write a column of this type", path);
    }
    w->path = strdup(path);
    w->file = w->path ? fdopen(fd, "wb") : NULL;
    if (!w->file) {
        int e = w->path ? errno : ENOMEM;
        close(fd);
        free(w->path);
        w->path = NULL;
        return sl_errf(err, errcap, "%s: cannot open for writing: %s", path, strerror(e));
    }
    w->type = type;
    if (fwrite(header, 1, sizeof header, w->file) != sizeof header) {
        int e = errno;
        sl_npy_writer_close(w, NULL, 0);
        return sl_errf(err, errcap, "%s: write failed: %s", path, strerror(e));
    }
    return 0;
}

int sl_npy_writer_append(sl_npy_writer *w, const void *data, int64_t count, char *err,
                         size_t errcap) {
    if (!w->file) return sl_errf(err, errcap, "column writer is not open");
    if (count <= 0) return 0;
    size_t bytes = (size_t)count * sluice_type_size(w->type);
    if (fwrite(data, 1, bytes, w->file) != bytes)
        return sl_errf(err, errcap, "%s: write failed: %s", w->path, strerror(errno));
    w->length += count;
    return 0;
}

uint64_t sl_npy_writer_place(sl_npy_writer *w, int64_t count) {
    /* The header leaves the stream's buffer first, so the data written beside it with pwrite
     * never race a buffered write. */
    if (w->length == 0 && w->file) fflush(w->file);
    uint64_t pos = SL_NPY_HEADER_SIZE + (uint64_t)w->length * sluice_type_size(w->type);
    if (count > 0) w->length += count;
    return pos;
}

int sl_npy_writer_write_at(const sl_npy_writer *w, uint64_t pos, const void *data, size_t bytes,
                           char *err, size_t errcap) {
    if (!w->file) return sl_errf(err, errcap, "column writer is not open");
    int fd = fileno(w->file);
    const char *p = data;
    while (bytes > 0) {
        ssize_t n = pwrite(fd, p, bytes, (off_t)pos);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return sl_errf(err, errcap, "%s: write failed: %s", w->path,
                           strerror(n < 0 ? errno : ENOSPC));
        p += n;
        pos += (uint64_t)n;
        bytes -= (size_t)n;
    }
    return 0;
}

int sl_npy_writer_close(sl_npy_writer *w, char *err, size_t errcap) {
    if (!w->file) {
        free(w->path);
        w->path = NULL;
        return 0;
    }
    int rc = 0;
    unsigned char header[SL_NPY_HEADER_SIZE];
    if (sl_npy_format_header(header, sizeof header, w->type, w->length) != 0 ||
        fseek(w->file, 0, SEEK_SET) != 0 ||
        fwrite(header, 1, sizeof header, w->file) != sizeof header)
        rc = sl_errf(err, errcap, "%s: cannot finish the header: %s", w->path, strerror(errno));
    /* The buffered tail is written here: a full disk often shows first at this point. */
    if (fflush(w->file) != 0 && rc == 0)
        rc = sl_errf(err, errcap, "%s: write failed: %s", w->path, strerror(errno));
    if (w->sync && rc == 0 && fsync(fileno(w->file)) != 0 && errno != EINVAL)
        rc = sl_errf(err, errcap, "%s: cannot write to disk: %s", w->path, strerror(errno));
    if (fclose(w->file) != 0 && rc == 0)
        rc = sl_errf(err, errcap, "%s: write failed: %s", w->path, strerror(errno));
    w->file = NULL;
    free(w->path);
    w->path = NULL;
    return rc;
}

int sl_npy_write_file(const char *path, sluice_type type, const void *data, int64_t length,
                      char *err, size_t errcap) {
    sl_npy_writer w;
    if (sl_npy_writer_open(&w, path, type, err, errcap) != 0) return -1;
    if (sl_npy_writer_append(&w, data, length, err, errcap) != 0) {
        sl_npy_writer_close(&w, NULL, 0);
        return -1;
    }
    return sl_npy_writer_close(&w, err, errcap);
}
