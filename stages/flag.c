/* flag.c — the `flag` stage: bool columns from predicates (a map whose expressions must be
 * bool), typically the `by` of a later compact. */
#include "stages/registry.h"

void sl_stage_parse_flag(sl_loader *L, const ld_node *body, sl_srcloc kind_loc) {
    sl_stage_parse_definitions(L, body, kind_loc, "flag", true);
}
