/* input.c — batches from a directory of .npy/.bin column files or from a CSV file (see
 * input.h). Column files are memory-mapped read-only: a batch is a window into the mapping,
 * its pages read in ahead (MADV_POPULATE_READ) and handed back behind, so inputs larger than
 * memory stream through the page cache; data a .npy header leaves misaligned for its type
 * are read (pread) into a buffer instead. */
#define _GNU_SOURCE
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csv.h"
#include "errbuf.h"
#include "npy.h"
#include "raw.h"

/* What a zero-length column points at: never NULL, suitably aligned for every type. */
static const uint64_t empty_column_data[1];

typedef struct input_column {
    sluice_column_info info;
    char *path;                 /* the file (column files) */
    void *map;                  /* the whole file mapped, or NULL when empty */
    size_t map_len;
    const unsigned char *base;  /* the first element */
    int64_t length;             /* elements in the file */
    int fd;                     /* the file, open for pread (column files); -1 otherwise */
    uint64_t data_offset;       /* bytes from the file's start to the first element */
    sl_buffer buf;              /* sl_input_next's batch: CSV values, rows read, offsets */
    long csv_index;             /* the CSV header column feeding this input */
    size_t released;            /* bytes of the mapping already handed back (page multiple) */
} input_column;

struct sl_input {
    bool csv_source;
    size_t ncols;
    input_column *cols;
    int64_t rows;     /* data rows in the input (column files) */
    int64_t pos;      /* next data row */
    long offsets_col; /* the offsets input, or -1 */
    const int64_t *offsets; /* its k+1 entries: in the mapping, or offsets_copy */
    int64_t *offsets_copy;  /* an aligned copy when the file misaligns them */
    int64_t segments; /* k: the offsets file has k+1 entries */
    int64_t seg_pos;  /* next segment */
    sl_csv_reader *csv;
    bool csv_done;
    int64_t total_bytes; /* -1 when unknown */
};

/* Page-aligned, so that a transfer engine can read it whole and no two buffers share a
 * page. */
#define BUFFER_ALIGN 4096

int sl_buffer_reserve(sl_buffer *b, size_t bytes, size_t keep) {
    if (bytes <= b->cap && b->data) return 0;
    if (bytes > SIZE_MAX - BUFFER_ALIGN) return -1;
    size_t cap = (bytes + BUFFER_ALIGN - 1) / BUFFER_ALIGN * BUFFER_ALIGN;
    if (cap == 0) cap = BUFFER_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, BUFFER_ALIGN, cap) != 0) return -1;
    if (keep > b->cap) keep = b->cap;
    if (keep) memcpy(p, b->data, keep);
    free(b->data);
    b->data = p;
    b->cap = cap;
    return 0;
}

void sl_buffer_free(sl_buffer *b) {
    free(b->data);
    b->data = NULL;
    b->cap = 0;
}

/* Room for `bytes` in a buffer filled row by row: doubles, keeping what it holds. */
static int grow_buf(sl_buffer *b, size_t bytes) {
    if (bytes <= b->cap && b->data) return 0;
    size_t cap = b->cap ? b->cap : BUFFER_ALIGN;
    while (cap < bytes) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    return sl_buffer_reserve(b, cap, b->cap);
}

static char *join_path(const char *dir, const char *name, const char *ext) {
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, name, ext);
    return p;
}

/* Maps a column file and checks its header (npy) or size (raw) against the declaration. The
 * file stays open too, for pread (sl_input_read_rows) where a window of the mapping cannot be
 * pushed as it is. */
static int map_column(input_column *c, bool is_npy, char *err, size_t errcap) {
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sl_errf(err, errcap, "%s: cannot open: %s", c->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sl_errf(err, errcap, "%s: not a regular file", c->path);
    }
    size_t size = (size_t)st.st_size;
    if (size > 0) {
        c->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (c->map == MAP_FAILED) {
            c->map = NULL;
            close(fd);
            return sl_errf(err, errcap, "%s: cannot map: %s", c->path, strerror(errno));
        }
        c->map_len = size;
    }
    c->fd = fd;
    char why[256];
    const char *tname = sluice_type_name(c->info.type);
    if (is_npy) {
        sl_npy_header h;
        if (sl_npy_parse_header(c->map, size, &h, why, sizeof why) != 0 ||
            sl_npy_check_size(&h, size, why, sizeof why) != 0)
            return sl_errf(err, errcap, "%s: %s", c->path, why);
        if (h.type != c->info.type)
            return sl_errf(err, errcap,
                           "%s holds %s ('%s') but the pipeline declares %s: %s; convert it, "
                           "e.g. arr.astype('%s')",
                           c->path, sluice_type_name(h.type), sl_npy_descr(h.type),
                           c->info.name, tname, sl_npy_descr(c->info.type));
        c->base = (const unsigned char *)c->map + h.data_offset;
        c->data_offset = h.data_offset;
        c->length = h.length;
    } else {
        if (sl_raw_element_count(size, c->info.type, &c->length, why, sizeof why) != 0)
            return sl_errf(err, errcap, "%s: %s", c->path, why);
        c->base = c->map;
    }
    if (c->length == 0) c->base = (const unsigned char *)empty_column_data;
    return 0;
}

/* Hands back the mapped pages wholly before `ptr`: earlier batches were read during their
 * push only, so the resident set stays about one batch however large the file is. */
static void release_before(input_column *c, const void *ptr) {
    if (!c->map || (const unsigned char *)ptr < (const unsigned char *)c->map) return;
    static size_t page;
    if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
    size_t upto = (size_t)((const unsigned char *)ptr - (const unsigned char *)c->map) / page * page;
    if (upto > c->map_len) upto = c->map_len / page * page;
    if (upto <= c->released) return;
    madvise((unsigned char *)c->map + c->released, upto - c->released, MADV_DONTNEED);
    c->released = upto;
}

static int open_directory(sl_input *in, const char *dir, char *err, size_t errcap) {
    int64_t rows = -1;
    const char *rows_from = NULL;
    for (size_t i = 0; i < in->ncols; i++) {
        input_column *c = &in->cols[i];
        bool is_npy = true;
        c->path = join_path(dir, c->info.name, ".npy");
        if (!c->path) return sl_errf(err, errcap, "out of memory");
        if (access(c->path, F_OK) != 0) {
            free(c->path);
            c->path = join_path(dir, c->info.name, ".bin");
            if (!c->path) return sl_errf(err, errcap, "out of memory");
            is_npy = false;
            if (access(c->path, F_OK) != 0)
                return sl_errf(err, errcap,
                               "%s: no file for input column '%s': expected %s.npy (or raw %s.bin "
                               "of %s)",
                               dir, c->info.name, c->info.name, c->info.name,
                               sluice_type_name(c->info.type));
        }
        if (map_column(c, is_npy, err, errcap) != 0) return -1;
        if (c->info.role == SLUICE_ROLE_OFFSETS) continue;
        if (rows < 0) {
            rows = c->length;
            rows_from = c->path;
        } else if (c->length != rows) {
            return sl_errf(err, errcap,
                           "mismatched column lengths: %s has %" PRId64 " rows but %s has %" PRId64,
                           rows_from, rows, c->path, c->length);
        }
    }
    if (in->offsets_col >= 0) {
        input_column *o = &in->cols[in->offsets_col];
        if (o->length < 1)
            return sl_errf(err, errcap,
                           "%s: an offsets column needs k+1 entries (at least the leading 0)",
                           o->path);
        if ((uintptr_t)o->base % sizeof(int64_t) == 0) {
            in->offsets = (const int64_t *)(const void *)o->base;
        } else { /* a .npy with an unusual header length: read them from an aligned copy */
            in->offsets_copy = malloc((size_t)o->length * sizeof(int64_t));
            if (!in->offsets_copy) return sl_errf(err, errcap, "out of memory");
            memcpy(in->offsets_copy, o->base, (size_t)o->length * sizeof(int64_t));
            in->offsets = in->offsets_copy;
        }
        const int64_t *off = in->offsets;
        int64_t first = off[0], last = off[o->length - 1];
        if (first != 0)
            return sl_errf(err, errcap, "%s: offsets must start at 0, not %" PRId64, o->path,
                           first);
        if (rows >= 0 && last != rows)
            return sl_errf(err, errcap,
                           "%s: the last offset is %" PRId64 " but %s has %" PRId64
                           " rows; they must be equal",
                           o->path, last, rows_from, rows);
        for (int64_t i = 1; i < o->length; i++) {
            if (off[i] < off[i - 1])
                return sl_errf(err, errcap,
                               "%s: offsets decrease at entry %" PRId64 " (%" PRId64
                               " after %" PRId64 "); they must be non-decreasing",
                               o->path, i, off[i], off[i - 1]);
        }
        if (rows < 0) rows = last;
        in->segments = o->length - 1;
    }
    in->rows = rows < 0 ? 0 : rows;
    return 0;
}

static int open_csv(sl_input *in, const char *path, char *err, size_t errcap) {
    if (in->offsets_col >= 0) {
        const char *name = in->cols[in->offsets_col].info.name;
        return sl_errf(err, errcap,
                       "%s: the pipeline's offsets input '%s' (k+1 entries, not one per row) "
                       "cannot come from a CSV file: use a directory with %s.npy",
                       path, name, name);
    }
    if (sl_csv_open_file(&in->csv, path, err, errcap) != 0) return -1;
    for (size_t i = 0; i < in->ncols; i++) {
        input_column *c = &in->cols[i];
        c->csv_index = sl_csv_column_index(in->csv, c->info.name);
        if (c->csv_index < 0) {
            char names[512] = "";
            size_t used = 0;
            for (size_t j = 0; j < sl_csv_column_count(in->csv) && used < sizeof names; j++)
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                         j ? ", " : "", sl_csv_column_name(in->csv, j));
            return sl_errf(err, errcap, "%s: no column '%s' in the header (it has: %s)", path,
                           c->info.name, names);
        }
    }
    in->rows = -1;
    return 0;
}

/* A .npy (by its magic) or raw .bin (by its name) given where a directory belongs. Only a
 * regular file is peeked at: reading a pipe would take its first bytes from the CSV. */
static bool is_column_file(const char *path, const struct stat *st) {
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".bin") == 0) return true;
    if (!S_ISREG(st->st_mode)) return false;
    unsigned char head[6] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    return got == sizeof head && memcmp(head, "\x93NUMPY", 6) == 0;
}

int sl_input_open(sl_input **out, const sluice_pipeline *pipeline, const char *path, char *err,
                  size_t errcap) {
    *out = NULL;
    sl_input *in = calloc(1, sizeof *in);
    if (!in) return sl_errf(err, errcap, "out of memory");
    in->offsets_col = -1;
    in->ncols = sluice_pipeline_input_count(pipeline);
    in->cols = calloc(in->ncols ? in->ncols : 1, sizeof *in->cols);
    if (!in->cols) {
        free(in);
        return sl_errf(err, errcap, "out of memory");
    }
    for (size_t i = 0; i < in->ncols; i++) in->cols[i].fd = -1;
    int rc = 0;
    for (size_t i = 0; i < in->ncols && rc == 0; i++) {
        if (sluice_pipeline_input(pipeline, i, &in->cols[i].info) != SLUICE_OK) {
            rc = sl_errf(err, errcap, "cannot read the pipeline's input %zu", i);
        } else if (in->cols[i].info.role == SLUICE_ROLE_OFFSETS) {
            if (in->offsets_col >= 0)
                rc = sl_errf(err, errcap,
                             "the pipeline declares two offsets inputs ('%s' and '%s'); the "
                             "command line can cut batches for one only",
                             in->cols[in->offsets_col].info.name, in->cols[i].info.name);
            in->offsets_col = (long)i;
        }
    }
    struct stat st;
    if (rc == 0 && stat(path, &st) != 0)
        rc = sl_errf(err, errcap, "%s: %s", path, strerror(errno));
    if (rc == 0) {
        if (S_ISDIR(st.st_mode)) {
            rc = open_directory(in, path, err, errcap);
            in->total_bytes = 0;
            for (size_t i = 0; i < in->ncols; i++) in->total_bytes += (int64_t)in->cols[i].map_len;
        } else if (is_column_file(path, &st)) {
            rc = sl_errf(err, errcap,
                         "%s is a single column file; --in takes the directory holding one "
                         "COLUMN.npy (or COLUMN.bin) per input column, or a CSV file", path);
        } else {
            in->csv_source = true;
            in->total_bytes = S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
            rc = open_csv(in, path, err, errcap);
        }
    }
    if (rc != 0) {
        sl_input_close(in);
        return -1;
    }
    *out = in;
    return 0;
}

void sl_input_close(sl_input *in) {
    if (!in) return;
    for (size_t i = 0; i < in->ncols; i++) {
        input_column *c = &in->cols[i];
        if (c->map) munmap(c->map, c->map_len);
        if (c->fd >= 0) close(c->fd);
        free(c->path);
        sl_buffer_free(&c->buf);
    }
    free(in->cols);
    free(in->offsets_copy);
    sl_csv_close(in->csv);
    free(in);
}

int64_t sl_next_segment_cut(const int64_t *offsets, int64_t segments, int64_t first,
                            int64_t max_rows) {
    /* Whole segments up to the budget; the first one is taken whatever its length. */
    int64_t e = first + 1;
    while (e < segments && offsets[e + 1] - offsets[first] <= max_rows) e++;
    return e;
}

int64_t sl_input_total_rows(const sl_input *in) { return in->csv_source ? -1 : in->rows; }

int64_t sl_input_total_bytes(const sl_input *in) { return in->total_bytes; }

int64_t sl_input_bytes_at(const sl_input *in, int64_t row_end) {
    if (in->total_bytes < 0) return -1;
    if (in->csv_source) return sl_csv_bytes_read(in->csv);
    /* Column files are read in step, so the share of rows is the share of bytes. */
    if (in->rows <= 0) return 0;
    return (int64_t)((double)in->total_bytes * (double)row_end / (double)in->rows);
}

int64_t sl_input_bytes_read(const sl_input *in) { return sl_input_bytes_at(in, in->pos); }

bool sl_input_is_csv(const sl_input *in) { return in->csv_source; }

size_t sl_input_column_count(const sl_input *in) { return in->ncols; }

const sluice_column_info *sl_input_column(const sl_input *in, size_t index) {
    return index < in->ncols ? &in->cols[index].info : NULL;
}

int sl_input_next_window(sl_input *in, int64_t max_rows, sl_input_window *w) {
    if (max_rows < 1) max_rows = 1;
    *w = (sl_input_window){0, 0, 0, 0};
    if (in->offsets_col >= 0) {
        if (in->seg_pos >= in->segments) return 0;
        /* The offsets were checked non-decreasing and within the rows when opened. */
        const int64_t *off = in->offsets;
        int64_t s = in->seg_pos;
        int64_t e = sl_next_segment_cut(off, in->segments, s, max_rows);
        if (!in->offsets_copy) release_before(&in->cols[in->offsets_col], off + s);
        *w = (sl_input_window){off[s], off[e] - off[s], s, e - s};
        in->seg_pos = e;
    } else {
        if (in->pos >= in->rows) return 0;
        int64_t n = in->rows - in->pos < max_rows ? in->rows - in->pos : max_rows;
        *w = (sl_input_window){in->pos, n, 0, 0};
    }
    in->pos = w->first_row + w->rows;
    return 1;
}

void sl_input_window_offsets(const sl_input *in, const sl_input_window *w, int64_t *dst) {
    const int64_t *off = in->offsets + w->first_seg;
    for (int64_t i = 0; i <= w->segs; i++) dst[i] = off[i] - off[0];
}

const void *sl_input_mapped(const sl_input *in, size_t col, int64_t first) {
    const input_column *c = &in->cols[col];
    size_t elem = sluice_type_size(c->info.type);
    if (c->length == 0 || !c->map) return empty_column_data;
    const unsigned char *p = c->base + (size_t)first * elem;
    return (uintptr_t)p % elem == 0 ? p : NULL;
}

int sl_input_populate(const sl_input *in, size_t col, int64_t first, int64_t count, char *err,
                      size_t errcap) {
    const input_column *c = &in->cols[col];
    if (!c->map || count <= 0) return 0;
    size_t elem = sluice_type_size(c->info.type), page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = (uintptr_t)(c->base + (size_t)first * elem) / page * page;
    uintptr_t to = (uintptr_t)(c->base + (size_t)(first + count) * elem);
    /* MADV_POPULATE_READ (Linux 5.14) reports a page past the end of the file as EFAULT,
     * where touching it would raise SIGBUS. */
#ifdef MADV_POPULATE_READ
    if (madvise((void *)from, to - from, MADV_POPULATE_READ) == 0) return 0;
    if (errno == EFAULT)
        return sl_errf(err, errcap, "%s: the file is shorter than the %" PRId64 " rows it held "
                       "when the run began (did it change while being read?)", c->path,
                       c->length);
#endif
    volatile unsigned char sink = 0;
    for (uintptr_t p = from; p < to; p += page) sink ^= *(const volatile unsigned char *)p;
    (void)sink;
    return 0;
}

void sl_input_release(sl_input *in, int64_t row) {
    for (size_t i = 0; i < in->ncols; i++) {
        input_column *c = &in->cols[i];
        if ((long)i == in->offsets_col || c->length == 0) continue;
        int64_t upto = row < c->length ? row : c->length;
        release_before(c, c->base + (size_t)upto * sluice_type_size(c->info.type));
    }
}

int sl_input_read_rows(const sl_input *in, size_t col, int64_t first, int64_t count, void *dst,
                       char *err, size_t errcap) {
    const input_column *c = &in->cols[col];
    size_t elem = sluice_type_size(c->info.type);
    size_t want = (size_t)count * elem, done = 0;
    uint64_t at = c->data_offset + (uint64_t)first * elem;
    while (done < want) {
        ssize_t got = pread(c->fd, (unsigned char *)dst + done, want - done, (off_t)(at + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return sl_errf(err, errcap, "%s: read error: %s", c->path, strerror(errno));
        if (got == 0)
            return sl_errf(err, errcap, "%s: the file is shorter than the %" PRId64 " rows it "
                           "held when the run began (did it change while being read?)",
                           c->path, c->length);
        done += (size_t)got;
    }
    return 0;
}

int sl_input_next_csv(sl_input *in, int64_t max_rows, sl_buffer *bufs, int64_t *rows,
                      const atomic_int *cancel, char *err, size_t errcap) {
    if (max_rows < 1) max_rows = 1;
    *rows = 0;
    if (in->csv_done) return 0;
    int64_t n = 0;
    char why[256];
    while (n < max_rows) {
        /* Checked now and then: a reader told to stop leaves a long batch early. */
        if (cancel && (n & 4095) == 0 && atomic_load(cancel)) return 0;
        char *const *fields;
        int got = sl_csv_next(in->csv, &fields, err, errcap);
        if (got < 0) return -1;
        if (got == 0) {
            in->csv_done = true;
            break;
        }
        for (size_t i = 0; i < in->ncols; i++) {
            input_column *c = &in->cols[i];
            size_t elem = sluice_type_size(c->info.type);
            if (grow_buf(&bufs[i], (size_t)(n + 1) * elem) != 0)
                return sl_errf(err, errcap, "out of memory");
            if (sl_csv_parse_value(fields[c->csv_index], c->info.type,
                                   (unsigned char *)bufs[i].data + (size_t)n * elem, why,
                                   sizeof why) != 0)
                return sl_errf(err, errcap, "%s:%" PRId64 ":%ld: data row %" PRId64
                               ", column '%s': %s",
                               sl_csv_name(in->csv), sl_csv_line(in->csv), c->csv_index + 1,
                               in->pos + n + 1, c->info.name, why);
        }
        n++;
    }
    in->pos += n;
    *rows = n;
    return n > 0;
}

/* sl_input_next over column files: the window of the mapping (its pages read in first), or
 * read into the input's own buffer where the file misaligns the data for its type. */
static int next_from_files(sl_input *in, int64_t max_rows, sluice_column *cols, int64_t *rows,
                           char *err, size_t errcap) {
    sl_input_window w;
    if (sl_input_next_window(in, max_rows, &w) == 0) return 0;
    sl_input_release(in, w.first_row);
    for (size_t i = 0; i < in->ncols; i++) {
        input_column *c = &in->cols[i];
        bool offsets = (long)i == in->offsets_col;
        int64_t n = offsets ? w.segs + 1 : w.rows;
        size_t elem = sluice_type_size(c->info.type);
        const void *data = offsets ? NULL : sl_input_mapped(in, i, w.first_row);
        if (data) {
            if (sl_input_populate(in, i, w.first_row, n, err, errcap) != 0) return -1;
        } else {
            if (sl_buffer_reserve(&c->buf, (size_t)n * elem, 0) != 0)
                return sl_errf(err, errcap, "out of memory");
            if (offsets)
                sl_input_window_offsets(in, &w, c->buf.data);
            else if (sl_input_read_rows(in, i, w.first_row, n, c->buf.data, err, errcap) != 0)
                return -1;
            data = c->buf.data;
        }
        cols[i] = (sluice_column){c->info.name, c->info.type, data, n};
    }
    *rows = w.rows;
    return 1;
}

int sl_input_next(sl_input *in, int64_t max_rows, sluice_column *cols, int64_t *rows,
                  char *err, size_t errcap) {
    if (max_rows < 1) max_rows = 1;
    if (!in->csv_source) return next_from_files(in, max_rows, cols, rows, err, errcap);
    sl_buffer *bufs = calloc(in->ncols ? in->ncols : 1, sizeof *bufs);
    if (!bufs) return sl_errf(err, errcap, "out of memory");
    for (size_t i = 0; i < in->ncols; i++) bufs[i] = in->cols[i].buf;
    int got = sl_input_next_csv(in, max_rows, bufs, rows, NULL, err, errcap);
    for (size_t i = 0; i < in->ncols; i++) {
        input_column *c = &in->cols[i];
        c->buf = bufs[i];
        if (got == 1) cols[i] = (sluice_column){c->info.name, c->info.type, c->buf.data, *rows};
    }
    free(bufs);
    return got;
}
