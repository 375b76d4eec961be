/* errbuf.h — the command line's way of reporting a failure upwards: a caller-provided buffer
 * that receives one line saying what went wrong and what to change. Readers take
 * (char *err, size_t errcap) so they need no allocator and can be fuzzed in isolation. */
#ifndef SL_CLI_ERRBUF_H
#define SL_CLI_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Formats into err (when err is non-NULL and errcap > 0) and returns -1, so that a failing
 * path reads `return sl_errf(err, errcap, "…", …);`. */
static inline int sl_errf(char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int sl_errf(char *err, size_t errcap, const char *fmt, ...) {
    if (err && errcap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#endif
