/* progress.c — the progress line of `sluice run` (see progress.h). The run's thread and the
 * ticker both print under one lock; the ticker only prints during a phase, when the run's
 * thread is blocked in the library and cannot. */
#include "progress.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

struct sl_progress {
    bool tty;                 /* rewrite one line in place */
    double start, last_print;
    double first_delay;       /* nothing before this many seconds (a short run stays quiet) */
    double interval;          /* between two prints */
    int64_t total_rows, total_bytes;
    int64_t rows_in, bytes_in, rows_out;
    const char *phase;
    double phase_start;
    int64_t phase_out0, phase_out_total; /* rows out at the phase's start, and when it ends
                                            (-1: unknown) */
    size_t last_len;          /* of the line on screen, to blank what a shorter one leaves */
    bool shown;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop, ticker_started;
    pthread_t ticker;
};

void sl_format_count(char *buf, size_t cap, double v, const char *unit) {
    static const char *const prefix[] = {"", " k", " M", " G", " T", " P"};
    int k = 0;
    while (v >= 999.5 && k < 5) {
        v /= 1000;
        k++;
    }
    /* Bytes join their prefix ("12.3 MB"), other units stand apart ("12.3 M rows/s"). */
    const char *gap = *unit && (k == 0 || strcmp(unit, "B") != 0) ? " " : "";
    if (k == 0)
        snprintf(buf, cap, "%.0f%s%s", v, gap, unit);
    else
        snprintf(buf, cap, "%.3g%s%s%s", v, prefix[k], gap, unit);
}

static void fmt_duration(char *buf, size_t cap, double s) {
    if (s < 60)
        snprintf(buf, cap, "%.0f s", s);
    else if (s < 3600)
        snprintf(buf, cap, "%d min %02d s", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, cap, "%d h %02d min", (int)(s / 3600), (int)(s / 60) % 60);
}

/* Prints the line; the caller holds the lock. */
static void print_locked(sl_progress *pg, bool force) {
    double now = sl_now();
    if (!force && (now - pg->start < pg->first_delay || now - pg->last_print < pg->interval))
        return;
    pg->last_print = now;
    double elapsed = now - pg->start;
    char line[320], rows[32], bytes[32], rate[32], out[32];
    sl_format_count(rows, sizeof rows, (double)pg->rows_in, "");
    sl_format_count(out, sizeof out, (double)pg->rows_out, "");
    int n = snprintf(line, sizeof line, "sluice run: %s rows in", rows);
    if (pg->bytes_in >= 0) {
        sl_format_count(bytes, sizeof bytes, (double)pg->bytes_in, "B");
        n += snprintf(line + n, sizeof line - (size_t)n, " (%s)", bytes);
    }
    if (pg->phase && pg->phase_out_total > pg->phase_out0) {
        /* A phase that writes a known number of rows: its share done and an ETA. */
        char t[32], total[32];
        double phase_time = now - pg->phase_start;
        double done = (double)(pg->rows_out - pg->phase_out0) /
                      (double)(pg->phase_out_total - pg->phase_out0);
        fmt_duration(t, sizeof t, phase_time);
        sl_format_count(total, sizeof total, (double)pg->phase_out_total, "");
        n += snprintf(line + n, sizeof line - (size_t)n, ", %s of %s rows out; %s... %s", out,
                      total, pg->phase, t);
        if (done > 0 && done < 1) {
            char eta[32];
            fmt_duration(eta, sizeof eta, phase_time * (1 - done) / done);
            n += snprintf(line + n, sizeof line - (size_t)n, ", %.0f%%, ETA %s", done * 100, eta);
        }
    } else if (pg->phase) {
        char t[32];
        fmt_duration(t, sizeof t, now - pg->phase_start);
        n += snprintf(line + n, sizeof line - (size_t)n, ", %s rows out; %s... %s", out,
                      pg->phase, t);
    } else {
        sl_format_count(rate, sizeof rate, elapsed > 0 ? (double)pg->rows_in / elapsed : 0, "rows/s");
        n += snprintf(line + n, sizeof line - (size_t)n, ", %s, %s rows out", rate, out);
        /* The share done, by rows when the input's rows are known, else by bytes (CSV). */
        double done = -1;
        if (pg->total_rows > 0) done = (double)pg->rows_in / (double)pg->total_rows;
        else if (pg->total_bytes > 0 && pg->bytes_in >= 0)
            done = (double)pg->bytes_in / (double)pg->total_bytes;
        if (done >= 0 && done <= 1) {
            n += snprintf(line + n, sizeof line - (size_t)n, ", %.0f%%", done * 100);
            if (done > 0 && done < 1) {
                char eta[32];
                fmt_duration(eta, sizeof eta, elapsed * (1 - done) / done);
                n += snprintf(line + n, sizeof line - (size_t)n, ", ETA %s", eta);
            }
        }
    }
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof line ? sizeof line - 1 : (size_t)n;
    if (pg->tty) {
        /* Blanks over what a longer previous line left. */
        int pad = pg->last_len > len ? (int)(pg->last_len - len) : 0;
        fprintf(stderr, "\r%s%*s", line, pad, "");
        pg->last_len = len;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
    pg->shown = true;
}

static void *ticker_main(void *arg) {
    sl_progress *pg = arg;
    pthread_mutex_lock(&pg->lock);
    while (!pg->stop) {
        struct timespec until = sl_deadline_in(250);
        pthread_cond_timedwait(&pg->wake, &pg->lock, &until);
        if (!pg->stop && pg->phase) print_locked(pg, false);
    }
    pthread_mutex_unlock(&pg->lock);
    return NULL;
}

sl_progress *sl_progress_start(sl_progress_mode mode, int64_t total_rows, int64_t total_bytes) {
    bool tty = isatty(STDERR_FILENO) != 0;
    if (mode == SL_PROGRESS_NEVER || (mode == SL_PROGRESS_AUTO && !tty)) return NULL;
    sl_progress *pg = calloc(1, sizeof *pg);
    if (!pg) return NULL;
    pg->tty = tty;
    pg->start = sl_now();
    pg->first_delay = mode == SL_PROGRESS_ALWAYS ? 0 : 1.0;
    pg->interval = tty ? 0.25 : 1.0;
    pg->last_print = -1e9;
    pg->total_rows = total_rows;
    pg->total_bytes = total_bytes;
    pg->bytes_in = -1;
    pthread_mutex_init(&pg->lock, NULL);
    pthread_cond_init(&pg->wake, NULL);
    /* The ticker never takes the run's signals: their handler belongs on the run's thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pg->ticker_started = pthread_create(&pg->ticker, NULL, ticker_main, pg) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return pg;
}

void sl_progress_update(sl_progress *pg, int64_t rows_in, int64_t bytes_in, int64_t rows_out) {
    if (!pg) return;
    pthread_mutex_lock(&pg->lock);
    pg->rows_in = rows_in;
    pg->bytes_in = bytes_in;
    pg->rows_out = rows_out;
    print_locked(pg, false);
    pthread_mutex_unlock(&pg->lock);
}

void sl_progress_phase_rows(sl_progress *pg, const char *what, int64_t rows_out_total) {
    if (!pg) return;
    pthread_mutex_lock(&pg->lock);
    pg->phase = what;
    pg->phase_start = sl_now();
    pg->phase_out0 = pg->rows_out;
    pg->phase_out_total = rows_out_total;
    /* A phase is news: shown at once, once the line is showing at all. */
    if (what && pg->phase_start - pg->start >= pg->first_delay) print_locked(pg, true);
    pthread_mutex_unlock(&pg->lock);
}

void sl_progress_phase(sl_progress *pg, const char *what) { sl_progress_phase_rows(pg, what, -1); }

void sl_progress_finish(sl_progress *pg) {
    if (!pg) return;
    pthread_mutex_lock(&pg->lock);
    pg->stop = true;
    pthread_cond_signal(&pg->wake);
    pthread_mutex_unlock(&pg->lock);
    if (pg->ticker_started) pthread_join(pg->ticker, NULL);
    if (pg->tty && pg->shown) fputc('\n', stderr);
    pthread_mutex_destroy(&pg->lock);
    pthread_cond_destroy(&pg->wake);
    free(pg);
}
