/* sort.c — a stream-wide sort over ranks: a sample sort whose exchange runs inside the local
 * session's flush (the hook of core/runtime/carry.h), before the local sort.
 *
 * The order. A stable sort of the global stream orders rows by (key image, global position):
 * equal keys keep their order of arrival, and arrival is rank order, then each rank's own
 * order. That pair is unique per row, so splitters drawn from it cut the sorted stream at
 * exact places even when most keys are equal, and rank r receives the r-th part.
 *
 * The steps. Each rank computes its rows' key images (the images both backends sort by,
 * `bits:` applied, as the executor's spilled runs do), sorts its row indices by them (the CPU
 * backend's stable radix sort),
 * draws evenly spaced samples with a weight (its rows per sample), and every rank gathers all
 * samples and picks the same p-1 splitters where the cumulative weight crosses each p-th of
 * the rows. A rank's sorted rows then fall into p contiguous ranges, one per destination;
 * counts go by MPI_Alltoall and the columns point to point (messages of at most 1 GiB).
 * The receiver concatenates what it got in source-rank order: among equal keys that is
 * stream order, so the local stable sort that follows (the backend's own) gives exactly the
 * rank's part of the global order. The exchange moves every column the sort takes; key
 * images are not sent (the receiver's sort recomputes them). Device columns (CUDA) are
 * read to host memory (the backend's to_host), where the order is worked out and the rows
 * packed; they reach the receiver either over MPI and into its device (from_host), or, where
 * the session's transport is NCCL (dist/nccl.c), from a device copy of the packed rows
 * straight into the receiver's device buffer. */
#include <stdlib.h>
#include <string.h>

#include "cpu/sort.h"
#include "dist.h"
#include "runtime/sortkey.h"

#define CHUNK ((size_t)1 << 30)
#define SAMPLES_PER_RANK 64
#define TAG_ROWS 0x51

static int add_req(MPI_Request **reqs, int *nreqs, int *cap) {
    if (*nreqs < *cap) return 0;
    int ncap = *cap ? *cap * 2 : 64;
    MPI_Request *r = realloc(*reqs, (size_t)ncap * sizeof *r);
    if (!r) return -1;
    *reqs = r;
    *cap = ncap;
    return 0;
}

int sl_dist_isend(const void *buf, size_t bytes, int peer, int tag, MPI_Comm comm,
                  MPI_Request **reqs, int *nreqs, int *cap) {
    for (size_t at = 0; at < bytes; at += CHUNK) {
        size_t n = bytes - at < CHUNK ? bytes - at : CHUNK;
        if (add_req(reqs, nreqs, cap) != 0) return -1;
        if (MPI_Isend((const char *)buf + at, (int)n, MPI_BYTE, peer, tag, comm,
                      &(*reqs)[(*nreqs)++]) != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

int sl_dist_irecv(void *buf, size_t bytes, int peer, int tag, MPI_Comm comm, MPI_Request **reqs,
                  int *nreqs, int *cap) {
    for (size_t at = 0; at < bytes; at += CHUNK) {
        size_t n = bytes - at < CHUNK ? bytes - at : CHUNK;
        if (add_req(reqs, nreqs, cap) != 0) return -1;
        if (MPI_Irecv((char *)buf + at, (int)n, MPI_BYTE, peer, tag, comm,
                      &(*reqs)[(*nreqs)++]) != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

/* A row's place in the global order: its key images, then its global position. */
static int compare_rows(const uint64_t *ia, int64_t ga, const uint64_t *ib, int64_t gb, int nk) {
    for (int k = 0; k < nk; k++)
        if (ia[k] != ib[k]) return ia[k] < ib[k] ? -1 : 1;
    return ga < gb ? -1 : ga > gb;
}

/* idx[0, n) := the rows in the order of their images, ties in index order (a stable LSD
 * radix sort, key by key from the least significant: the CPU backend's own, on one thread). */
static sluice_status sort_indices(sluice_context *ctx, int64_t *idx, int64_t n,
                                  const uint64_t *img, int nk) {
    uint64_t *keys = sl_alloc(ctx, (size_t)n * 8), *ktmp = sl_alloc(ctx, (size_t)n * 8);
    uint64_t *ptmp = sl_alloc(ctx, (size_t)n * 8);
    int64_t *counts = sl_calloc(ctx, sl_cpu_radix_counts(NULL), sizeof(int64_t));
    sluice_status st = SLUICE_OK;
    if (!keys || !ktmp || !ptmp || !counts)
        st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: a distributed stream-wide sort");
    for (int64_t i = 0; st == SLUICE_OK && i < n; i++) idx[i] = i;
    for (int k = nk - 1; st == SLUICE_OK && k >= 0; k--) {
        for (int64_t i = 0; i < n; i++) keys[i] = img[idx[i] * nk + k];
        if (sl_cpu_radix_sort(NULL, counts, keys, ktmp, true, idx, ptmp, true, n, 0, 64))
            memcpy(idx, ptmp, (size_t)n * 8);
    }
    sl_free(ctx, keys);
    sl_free(ctx, ktmp);
    sl_free(ctx, ptmp);
    sl_free(ctx, counts);
    return st;
}

/* A sample: nk images, the global position, and how many rows it stands for. Records of
 * SAMPLE_WORDS(nk) words. */
#define SAMPLE_WORDS(nk) ((size_t)(nk) + 2)

static int g_sample_nk; /* qsort has no context argument; set just before sorting samples */
static int compare_samples(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return compare_rows(x, (int64_t)x[g_sample_nk], y, (int64_t)y[g_sample_nk], g_sample_nk);
}

typedef struct xstate {
    sluice_context *ctx;
    void **host;       /* per column id: the rows in host memory */
    void **owned;      /* per column id: host copies this file made */
    uint64_t *img;
    int64_t *idx;
    uint64_t *samples, *all_samples;
    int *sample_counts, *sample_displs;
    int64_t *send_counts, *recv_counts;
    unsigned char *send;
    void **recv_host;  /* CUDA: received rows before they go to the device */
    MPI_Request *reqs;
    int nreqs, cap;
} xstate;

static void xstate_free(xstate *x, const sluice_pipeline *p) {
    for (int c = 0; c <= p->ncolumns; c++) {
        if (x->owned) sl_free(x->ctx, x->owned[c]);
        if (x->recv_host) sl_free(x->ctx, x->recv_host[c]);
    }
    sl_free(x->ctx, x->host);
    sl_free(x->ctx, x->owned);
    sl_free(x->ctx, x->recv_host);
    sl_free(x->ctx, x->img);
    sl_free(x->ctx, x->idx);
    sl_free(x->ctx, x->samples);
    sl_free(x->ctx, x->all_samples);
    sl_free(x->ctx, x->sample_counts);
    sl_free(x->ctx, x->sample_displs);
    sl_free(x->ctx, x->send_counts);
    sl_free(x->ctx, x->recv_counts);
    sl_free(x->ctx, x->send);
    free(x->reqs);
}

static sluice_status oom(sluice_context *ctx) {
    return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory: a distributed stream-wide sort");
}

/* Host copies of the columns, the key images and this rank's stable order. */
static sluice_status prepare(xstate *x, sluice_session *s, const sl_group *g, const sl_sort *so,
                             void *const *cols, int64_t n) {
    sluice_context *ctx = x->ctx;
    const sluice_pipeline *p = s->pipeline;
    const sl_backend_ops *be = s->backend;
    int nk = so->nkeys;
    size_t nc = (size_t)p->ncolumns + 1;
    x->host = sl_calloc(ctx, nc, sizeof(void *));
    x->owned = sl_calloc(ctx, nc, sizeof(void *));
    x->recv_host = sl_calloc(ctx, nc, sizeof(void *));
    if (!x->host || !x->owned || !x->recv_host) return oom(ctx);
    if (n == 0) return SLUICE_OK;
    for (int j = 0; j < g->nin; j++) {
        int c = g->in[j];
        size_t bytes = (size_t)n * sluice_type_size(p->columns[c].type);
        if (!be->to_host) {
            x->host[c] = cols[c];
            continue;
        }
        x->owned[c] = sl_alloc(ctx, bytes);
        if (!x->owned[c]) return oom(ctx);
        SL_TRY(be->to_host(s, x->owned[c], cols[c], bytes));
        x->host[c] = x->owned[c];
    }
    x->img = sl_calloc(ctx, (size_t)n * (size_t)nk, sizeof(uint64_t));
    void *kimg = sl_calloc(ctx, (size_t)n, sizeof(uint64_t));
    x->idx = sl_calloc(ctx, (size_t)n, sizeof(int64_t));
    if (!x->img || !kimg || !x->idx) {
        sl_free(ctx, kimg);
        return oom(ctx);
    }
    for (int k = 0; k < nk; k++) {
        sluice_type t = p->columns[so->keys[k]].type;
        sl_sortkey_images(t, x->host[so->keys[k]], NULL, false, n, so->key_descending[k], kimg);
        bool wide = sl_sortkey_is_wide(t);
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = wide ? ((const uint64_t *)kimg)[i] : ((const uint32_t *)kimg)[i];
            if (nk == 1) v = (v >> so->bits_lo) & sl_sortkey_mask(so->bits_hi - so->bits_lo);
            x->img[i * nk + k] = v;
        }
    }
    sl_free(ctx, kimg);
    return sort_indices(ctx, x->idx, n, x->img, nk);
}

/* dst[i] = src[idx[i]] for rows of w bytes (a loop per width: a memcpy call per row costs
 * more than the copy). */
static void gather_rows(unsigned char *dst, const void *src, const int64_t *idx, int64_t n,
                        size_t w) {
    switch (w) {
    case 1: for (int64_t i = 0; i < n; i++) dst[i] = ((const uint8_t *)src)[idx[i]]; break;
    case 2: for (int64_t i = 0; i < n; i++) ((uint16_t *)(void *)dst)[i] = ((const uint16_t *)src)[idx[i]]; break;
    case 4: for (int64_t i = 0; i < n; i++) ((uint32_t *)(void *)dst)[i] = ((const uint32_t *)src)[idx[i]]; break;
    case 8: for (int64_t i = 0; i < n; i++) ((uint64_t *)(void *)dst)[i] = ((const uint64_t *)src)[idx[i]]; break;
    default:
        for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * w, (const char *)src + (size_t)idx[i] * w, w);
    }
}

sluice_status sl_dist_sort_exchange(void *arg, sluice_session *s, int gi, void *const *cols,
                                    int64_t rows, void **out_cols, int64_t *out_rows) {
    sluice_mpi_session *ds = arg;
    const sluice_pipeline *p = s->pipeline;
    const sl_group *g = &s->plan.groups[gi];
    const sl_sort *so = &p->stages[g->first].sort;
    const sl_backend_ops *be = s->backend;
    int nk = so->nkeys, P = ds->size;
    size_t sw = SAMPLE_WORDS(nk);
    *out_rows = 0;
    xstate x = {0};
    x.ctx = s->ctx;
    sluice_status st = prepare(&x, s, g, so, cols, rows);

    /* This rank's first global position, and its samples. */
    int64_t base = 0, total = 0;
    int nsamples = 0;
    if (st == SLUICE_OK) {
        nsamples = rows < SAMPLES_PER_RANK ? (int)rows : SAMPLES_PER_RANK;
        x.samples = sl_calloc(x.ctx, (size_t)nsamples * sw + 1, sizeof(uint64_t));
        x.sample_counts = sl_calloc(x.ctx, (size_t)P, sizeof(int));
        x.sample_displs = sl_calloc(x.ctx, (size_t)P, sizeof(int));
        x.send_counts = sl_calloc(x.ctx, (size_t)P, sizeof(int64_t));
        x.recv_counts = sl_calloc(x.ctx, (size_t)P, sizeof(int64_t));
        if (!x.samples || !x.sample_counts || !x.sample_displs || !x.send_counts || !x.recv_counts)
            st = oom(x.ctx);
    }
    st = sl_dist_agree(ds, st);
    if (st != SLUICE_OK) {
        xstate_free(&x, p);
        return st;
    }
    MPI_Exscan(&rows, &base, 1, MPI_INT64_T, MPI_SUM, ds->comm); /* sum: order is irrelevant */
    if (ds->rank == 0) base = 0;
    MPI_Allreduce(&rows, &total, 1, MPI_INT64_T, MPI_SUM, ds->comm);
    double weight = nsamples ? (double)rows / nsamples : 0.0;
    for (int k = 0; k < nsamples; k++) {
        int64_t i = (int64_t)(((double)k + 0.5) * (double)rows / nsamples);
        int64_t r = x.idx[i];
        uint64_t *rec = x.samples + (size_t)k * sw;
        memcpy(rec, x.img + r * nk, (size_t)nk * sizeof(uint64_t));
        rec[nk] = (uint64_t)(base + r);
        memcpy(&rec[nk + 1], &weight, sizeof weight);
    }
    int words = nsamples * (int)sw;
    MPI_Allgather(&words, 1, MPI_INT, x.sample_counts, 1, MPI_INT, ds->comm);
    int all_words = 0;
    for (int r = 0; r < P; r++) {
        x.sample_displs[r] = all_words;
        all_words += x.sample_counts[r];
    }
    x.all_samples = sl_calloc(x.ctx, (size_t)all_words + 1, sizeof(uint64_t));
    st = sl_dist_agree(ds, x.all_samples ? SLUICE_OK : oom(x.ctx));
    if (st != SLUICE_OK) {
        xstate_free(&x, p);
        return st;
    }
    MPI_Allgatherv(x.samples, words, MPI_UINT64_T, x.all_samples, x.sample_counts,
                   x.sample_displs, MPI_UINT64_T, ds->comm);

    /* Splitters: the same on every rank (same samples, same deterministic choice). Splitter
     * j (1 <= j < P) is the first sample whose cumulative weight reaches j/P of the rows;
     * rows ordered before it go to ranks < j. */
    int64_t nall = all_words / (int64_t)sw;
    g_sample_nk = nk;
    if (nall > 1) qsort(x.all_samples, (size_t)nall, sw * sizeof(uint64_t), compare_samples);
    int64_t cut_prev = 0;
    double cum = 0.0;
    int64_t si = 0;
    for (int j = 1; j <= P; j++) {
        int64_t cut = rows; /* rank j-1 takes this rank's sorted rows [cut_prev, cut) */
        if (j < P && total > 0) {
            double want = (double)total * j / P;
            while (si < nall) {
                double w;
                memcpy(&w, &x.all_samples[(size_t)si * sw + (size_t)nk + 1], sizeof w);
                if (cum + w >= want) break;
                cum += w;
                si++;
            }
            if (si < nall) {
                const uint64_t *sp = x.all_samples + (size_t)si * sw;
                int64_t lo = cut_prev, hi = rows; /* first sorted row not before the splitter */
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2, r = x.idx[mid];
                    if (compare_rows(x.img + r * nk, base + r, sp, (int64_t)sp[nk], nk) < 0) lo = mid + 1;
                    else hi = mid;
                }
                cut = lo;
            }
        }
        x.send_counts[j - 1] = cut - cut_prev;
        cut_prev = cut;
    }
    MPI_Alltoall(x.send_counts, 1, MPI_INT64_T, x.recv_counts, 1, MPI_INT64_T, ds->comm);
    int64_t recv_rows = 0;
    for (int r = 0; r < P; r++) recv_rows += x.recv_counts[r];

    /* Room for what arrives, in backend memory (or host memory first, for a device). */
    size_t max_w = 0;
    for (int j = 0; j < g->nin; j++) {
        size_t w = sluice_type_size(p->columns[g->in[j]].type);
        if (w > max_w) max_w = w;
    }
    st = SLUICE_OK;
    for (int j = 0; st == SLUICE_OK && j < g->nin; j++) {
        int c = g->in[j];
        size_t bytes = (size_t)(recv_rows > 0 ? recv_rows : 1) * sluice_type_size(p->columns[c].type);
        st = be->alloc(s, bytes, &out_cols[c]);
        if (st == SLUICE_OK && be->from_host && !ds->nccl) {
            x.recv_host[c] = sl_alloc(x.ctx, bytes);
            if (!x.recv_host[c]) st = oom(x.ctx);
        }
    }
    if (st == SLUICE_OK && rows > 0) {
        x.send = sl_alloc(x.ctx, (size_t)rows * max_w);
        if (!x.send) st = oom(x.ctx);
    }
    st = sl_dist_agree(ds, st);
    /* Column by column: pack in sorted order, post every send and receive, wait. */
    for (int j = 0; st == SLUICE_OK && j < g->nin; j++) {
        int c = g->in[j];
        size_t w = sluice_type_size(p->columns[c].type);
        gather_rows(x.send, x.host[c], x.idx, rows, w);
        if (ds->nccl) { /* device to device: out_cols[c] is the session's device memory */
            st = sl_dist_nccl_exchange(ds, x.send, x.send_counts, x.recv_counts, w, out_cols[c]);
            continue;
        }
        unsigned char *dst = be->from_host ? x.recv_host[c] : out_cols[c];
        x.nreqs = 0;
        int64_t sat = 0, rat = 0;
        int bad = 0;
        for (int r = 0; r < P && !bad; r++) {
            bad |= sl_dist_irecv(dst + (size_t)rat * w, (size_t)x.recv_counts[r] * w, r, TAG_ROWS,
                                 ds->comm, &x.reqs, &x.nreqs, &x.cap);
            rat += x.recv_counts[r];
        }
        for (int r = 0; r < P && !bad; r++) {
            bad |= sl_dist_isend(x.send + (size_t)sat * w, (size_t)x.send_counts[r] * w, r,
                                 TAG_ROWS, ds->comm, &x.reqs, &x.nreqs, &x.cap);
            sat += x.send_counts[r];
        }
        if (!bad && MPI_Waitall(x.nreqs, x.reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS) bad = 1;
        if (bad) st = sl_error(x.ctx, SLUICE_ERR_IO, "the rows exchange of a distributed sort failed");
        if (st == SLUICE_OK && be->from_host && recv_rows > 0)
            st = be->from_host(s, out_cols[c], x.recv_host[c], (size_t)recv_rows * w);
    }
    st = sl_dist_agree(ds, st);
    xstate_free(&x, p);
    if (st != SLUICE_OK) {
        for (int j = 0; j < g->nin; j++)
            if (out_cols[g->in[j]]) {
                be->free(s, out_cols[g->in[j]]);
                out_cols[g->in[j]] = NULL;
            }
        return st;
    }
    *out_rows = recv_rows;
    return SLUICE_OK;
}
