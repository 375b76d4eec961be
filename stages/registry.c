/* registry.c — the table of stage kinds the loader dispatches on (see registry.h). */
#include <string.h>

#include "stages/registry.h"

static const char *const compact_keys[] = {"by", "columns"};
static const char *const scan_keys[] = {"of", "op", "kind", "into", "acc", "reset", "a", "b"};
static const char *const segmented_scan_keys[] = {"of",  "op",    "kind", "into", "acc",
                                                  "reset", "a", "b",   "segments"};
static const char *const sort_keys[] = {"key", "keys", "order", "bits", "values", "per"};
static const char *const reduce_keys[] = {"segments", "index", "values", "per"};

static const sl_stage_desc stages[] = {
    {"map", NULL, 0, sl_stage_parse_map},
    {"flag", NULL, 0, sl_stage_parse_flag},
    {"compact", compact_keys, SL_ARRAY_LEN(compact_keys), sl_stage_parse_compact},
    {"filter", NULL, 0, sl_stage_parse_filter},
    {"scan", scan_keys, SL_ARRAY_LEN(scan_keys), sl_stage_parse_scan},
    {"segmented_scan", segmented_scan_keys, SL_ARRAY_LEN(segmented_scan_keys),
     sl_stage_parse_segmented_scan},
    {"sort", sort_keys, SL_ARRAY_LEN(sort_keys), sl_stage_parse_sort},
    {"reduce", reduce_keys, SL_ARRAY_LEN(reduce_keys), sl_stage_parse_reduce},
};

static const char *const stage_names[] = {"map",  "flag",           "compact", "filter",
                                          "scan", "segmented_scan", "sort",    "reduce"};

const sl_stage_desc *sl_stage_find(const char *name) {
    for (size_t i = 0; i < SL_ARRAY_LEN(stages); i++)
        if (strcmp(stages[i].name, name) == 0) return &stages[i];
    return NULL;
}

const char *const *sl_stage_names(size_t *count) {
    *count = SL_ARRAY_LEN(stage_names);
    return stage_names;
}
