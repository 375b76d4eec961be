/* fuzz_util.h — what the libFuzzer harnesses share: a reader that turns the fuzzer's bytes
 * into decisions (FuzzedDataProvider in C), deterministic column data, and the check that a
 * failed call left a well-formed diagnostic behind.
 *
 * A harness is a .c file defining `int sl_fuzz_<name>(const uint8_t *data, size_t size)`
 * plus LLVMFuzzerTestOneInput calling it unless SL_FUZZ_NO_MAIN is defined: the regression
 * test (tests/test_fuzz_regressions.c) includes every harness with SL_FUZZ_NO_MAIN and
 * replays the committed corpora and crash files through the same code under gcc. A failed
 * invariant calls sl_fuzz_fail, which aborts: libFuzzer records the input as a crash. */
#ifndef SL_FUZZ_UTIL_H
#define SL_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

/* An invariant does not hold: say which and abort, so the input becomes a finding. */
#define sl_fuzz_fail(...)                                                                  \
    do {                                                                                   \
        fprintf(stderr, "fuzz invariant failed at %s:%d: ", __FILE__, __LINE__);         \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fputc('\n', stderr);                                                               \
        abort();                                                                           \
    } while (0)

#define sl_fuzz_check(cond, ...)                                                           \
    do {                                                                                   \
        if (!(cond)) sl_fuzz_fail(__VA_ARGS__);                                            \
    } while (0)

#define FZ_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Consumes the fuzzer's bytes front to back; past the end every read yields zeros, so a
 * short input is simply a short program. */
typedef struct fz_reader {
    const uint8_t *p;
    size_t left;
} fz_reader;

static inline uint8_t fz_u8(fz_reader *r) {
    if (!r->left) return 0;
    r->left--;
    return *r->p++;
}
static inline uint32_t fz_u32(fz_reader *r) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)fz_u8(r) << (8 * i);
    return v;
}
static inline uint64_t fz_u64(fz_reader *r) {
    return (uint64_t)fz_u32(r) | (uint64_t)fz_u32(r) << 32;
}
/* A value in [0, n) (n >= 1). */
static inline uint32_t fz_below(fz_reader *r, uint32_t n) { return n ? fz_u8(r) % n : 0; }
/* Up to n bytes; *len receives how many were available. */
static inline const uint8_t *fz_bytes(fz_reader *r, size_t n, size_t *len) {
    if (n > r->left) n = r->left;
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    *len = n;
    return p;
}

/* splitmix64: column data derived from a seed, the same on every run of an input. */
static inline uint64_t fz_mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fills `rows` elements of `type` at dst. Values are biased towards the edges that break
 * arithmetic (0, -1, minimum, maximum, NaN, infinities, subnormals) half of the time. */
static inline void fz_fill_column(sluice_type type, void *dst, int64_t rows, uint64_t seed) {
    size_t w = sluice_type_size(type);
    uint8_t *out = dst;
    for (int64_t i = 0; i < rows; i++) {
        uint64_t v = fz_mix(&seed);
        uint64_t pick = fz_mix(&seed);
        if (pick & 1) {
            static const uint64_t edges[] = {0, 1, ~0ull, 0x80ull, 0x7Full, 0x8000ull, 0x7FFFull,
                                             0x80000000ull, 0x7FFFFFFFull,
                                             0x8000000000000000ull, 0x7FFFFFFFFFFFFFFFull,
                                             0x7C00ull /* f16 inf */, 0x7E00ull /* f16 nan */,
                                             0x7F800000ull /* f32 inf */,
                                             0x7FC00000ull /* f32 nan */,
                                             0xFF800000ull /* f32 -inf */,
                                             0x7FF0000000000000ull /* f64 inf */,
                                             0x7FF8000000000000ull /* f64 nan */,
                                             0x0000000000000001ull /* subnormal */};
            v = edges[(pick >> 1) % (sizeof edges / sizeof edges[0])];
        }
        if (type == SLUICE_BOOL) v &= 1;
        memcpy(out + (size_t)i * w, &v, w); /* little-endian: the low bytes */
    }
}

/* Every failed call leaves at least one diagnostic whose fields are usable, and formatting
 * it works at any buffer size. */
static inline void fz_check_diagnostics(const sluice_context *ctx, sluice_status st) {
    sl_fuzz_check(st > SLUICE_OK && st < SLUICE_STATUS_COUNT_, "status %d out of range",
                  (int)st);
    size_t n = sluice_context_diagnostic_count(ctx);
    sl_fuzz_check(n >= 1, "failed call (%s) left no diagnostic", sluice_status_name(st));
    sl_fuzz_check(sluice_context_diagnostic(ctx, 0)->status == st,
                  "call returned %s but its first diagnostic says %s", sluice_status_name(st),
                  sluice_status_name(sluice_context_diagnostic(ctx, 0)->status));
    for (size_t i = 0; i < n; i++) {
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, i);
        sl_fuzz_check(d != NULL, "diagnostic %zu of %zu is NULL", i, n);
        sl_fuzz_check(d->message != NULL && d->message[0] != '\0', "empty diagnostic message");
        sl_fuzz_check(d->status > SLUICE_OK && d->status < SLUICE_STATUS_COUNT_,
                      "diagnostic status %d out of range", (int)d->status);
        sl_fuzz_check(d->line >= 0 && d->column >= 0, "negative diagnostic position");
        char small[7], big[4096];
        size_t need = sluice_diagnostic_format(d, small, sizeof small);
        sl_fuzz_check(strlen(small) < sizeof small, "format overran a small buffer");
        size_t got = sluice_diagnostic_format(d, big, sizeof big);
        sl_fuzz_check(need == got, "format length differs by buffer size (%zu vs %zu)", need,
                      got);
        if (got < sizeof big) sl_fuzz_check(strlen(big) == got, "format length is wrong");
    }
    sl_fuzz_check(sluice_context_diagnostic(ctx, n) == NULL, "diagnostic past the count");
}

#endif
