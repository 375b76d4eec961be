/* loader_operators.h — the `operators:` section: declared scan operators, parsed and checked
 * by core/front/loader_operators.c and looked up by the scan and reduce stages. */
#ifndef SL_LOADER_OPERATORS_H
#define SL_LOADER_OPERATORS_H

#include "front/loader_scope.h"

/* Hostile-input limit (documented in pipelines/SCHEMA.md). */
#define SL_MAX_OPERATORS 64

void ld_parse_operators(sl_loader *L, const ld_node *operators);
const sl_operator *ld_find_operator(const sl_loader *L, const char *name);
/* The index of state field `name` of op, -1 when it has none. */
int ld_operator_field(const sl_operator *op, const char *name);
/* Reports each key of mapping m (`what`: "of", "the identity" …) that is not a state field
 * of op (UNKNOWN_KEY, with did-you-mean) and, with require_all, each field m lacks
 * (MISSING_KEY). */
bool ld_check_fields(sl_loader *L, const sl_operator *op, const ld_node *m, const char *what,
                     bool require_all);

#endif
