/* segmented_scan.c — the `segmented_scan` stage: a scan (all of scan's keys and operators)
 * that restarts at each segment's first row. `segments` is an offsets input (valid only
 * before any stage that changes the rows), a bool head-flag column, or {key: COLUMN} where a
 * segment is a run of equal values. The shared parser is in stages/scan.c. */
#include "stages/registry.h"

void sl_stage_parse_segmented_scan(sl_loader *L, const ld_node *body, sl_srcloc kind_loc) {
    sl_stage_parse_any_scan(L, body, kind_loc, true);
}
