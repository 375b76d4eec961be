/* kinds.c — the table from IR stage kinds to their descriptors (see kind.h). */
#include "stages/kind.h"

static const sl_stage_kind_desc *const kinds[] = {
    [SL_STAGE_MAP] = &sl_stage_kind_map,
    [SL_STAGE_COMPACT] = &sl_stage_kind_compact,
    [SL_STAGE_SCAN] = &sl_stage_kind_scan,
    [SL_STAGE_SORT] = &sl_stage_kind_sort,
};

const sl_stage_kind_desc *sl_stage_kind_desc_of(const sl_stage *s) { return kinds[s->kind]; }
