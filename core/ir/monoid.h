/* monoid.h — the scan operators as monoids: accumulator type rules (pipelines/SCHEMA.md), identities,
 * and the combine of two states (sl_monoid_combine, declared in ir.h). The loader uses the
 * rules to type scans; backends use identities and combine to run them. */
#ifndef SL_MONOID_H
#define SL_MONOID_H

#include "ir/ir.h"

/* The builtin operator called `name` ("sum" … "linrec"); false for any other name. */
bool sl_monoid_op_from_name(const char *name, sl_scan_op *out);
/* Every builtin operator name, for did-you-mean. */
const char *const *sl_monoid_op_names(size_t *count);

/* The default accumulator of a builtin operator over values of type `input` (for linrec,
 * `input` is the wider of a's and b's types as sl_monoid_linrec_input gives it). Returns false
 * when the operator does not apply to the type (and/or/xor on floats, linrec of bool); `why`
 * then holds the reason. */
bool sl_monoid_default_acc(sl_scan_op op, sluice_type input, sluice_type *acc, char *why,
                           size_t cap);
/* The type linrec accumulates a and b in by default: f64 if either is f64, else f32 if
 * either is a float, else i64. */
sluice_type sl_monoid_linrec_input(sluice_type a, sluice_type b);
/* Whether `acc` may override the default accumulator of `op` over `input`: never narrower
 * than f32, never narrower than the input, a float input never in an integer, an integer
 * input in a float only when the float represents every input value exactly, bitwise ops
 * only in integers or bool, count only in i64/u64. false with the reason in `why`. */
bool sl_monoid_acc_allowed(sl_scan_op op, sluice_type input, sluice_type acc, char *why,
                           size_t cap);
/* The identity of a builtin operator's state field `field` in accumulator type `acc`. */
sl_value sl_monoid_identity(sl_scan_op op, int field, sluice_type acc);
/* v brought to type t exactly as an accumulator of type t holds it (integers wrapped to the
 * width, floats rounded to the format, bool 0/1). */
sl_value sl_monoid_normalize(sluice_type t, sl_value v);

#endif
