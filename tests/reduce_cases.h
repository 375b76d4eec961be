/* reduce_cases.h — the reduce of twelve values (every builtin operator, count, linrec and a
 * declared affine map, over columns x: f32, i: i32, u: u16 and a scan's `run`) that
 * tests/gpu_reduce.c runs against the CPU on the GPU and tests/test_cuda_codegen.c compiles
 * to check that its kernel keeps the state in registers: one text, so the kernel checked for
 * spills is the one whose rows are checked. String literals, spliced into each test's YAML. */
#ifndef SLUICE_TESTS_REDUCE_CASES_H
#define SLUICE_TESTS_REDUCE_CASES_H

/* The declared operator the twelfth value uses (a pipeline's `operators:` section). */
#define SL_TEST_AFFINE_OPERATOR                                                              \
    "operators:\n  affine:\n    state: {a: f64, b: f64}\n"                                   \
    "    identity: {a: 1.0, b: 0.0}\n"                                                       \
    "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\n"

/* The reduce stage's `values:` (indented for a stage under `stages:`). */
#define SL_TEST_TWELVE_REDUCE_VALUES                                                         \
    "      values:\n"                                                                        \
    "        - {op: sum, of: x, into: total}\n"                                              \
    "        - {op: sum, of: i, into: isum}\n"                                               \
    "        - {op: prod, of: x * 0.01 + 1.0, into: p, acc: f64}\n"                          \
    "        - {op: min, of: i, into: lo}\n"                                                 \
    "        - {op: max, of: x, into: hi}\n"                                                 \
    "        - {op: and, of: u, into: band}\n"                                               \
    "        - {op: or, of: u, into: bor}\n"                                                 \
    "        - {op: xor, of: i, into: bxor}\n"                                               \
    "        - {op: count, into: n}\n"                                                       \
    "        - {op: max, of: run, into: top}\n"                                              \
    "        - {op: linrec, a: x * 0.1, b: x, into: h_last}\n"                               \
    "        - {op: affine, of: {a: f64(x) * 0.1, b: f64(x)}, into: {a: pa, b: pb}}\n"

#endif
