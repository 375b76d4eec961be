/* registry.h — the static table of stage kinds: for each, its name in YAML, the keys it
 * accepts, and the parser that checks its body and appends its typed stage(s) to the IR.
 * One file per stage kind under stages/ holds that kind's parser and type rules. */
#ifndef SL_STAGE_REGISTRY_H
#define SL_STAGE_REGISTRY_H

#include "front/loader_operators.h"

/* Parses the body of one stage (the value under its kind key). `kind_loc` is where the
 * stage's kind is written; problems are recorded as diagnostics, and the parser defines the
 * stage's new columns (poisoned when their definition failed) so later stages can go on. */
typedef void (*sl_stage_parse_fn)(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);

typedef struct sl_stage_desc {
    const char *name;
    /* Keys of the stage's mapping; NULL when the keys are new column names (map, flag) or
     * the body is a single expression (filter). */
    const char *const *keys;
    size_t nkeys;
    sl_stage_parse_fn parse;
} sl_stage_desc;

/* The descriptor for a kind name, NULL when unknown. */
const sl_stage_desc *sl_stage_find(const char *name);
/* Every kind name (for did-you-mean). */
const char *const *sl_stage_names(size_t *count);

void sl_stage_parse_map(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);
void sl_stage_parse_flag(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);
void sl_stage_parse_compact(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);
void sl_stage_parse_filter(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);
void sl_stage_parse_scan(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);
void sl_stage_parse_segmented_scan(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);
void sl_stage_parse_sort(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);
void sl_stage_parse_reduce(sl_loader *L, const ld_node *body, sl_srcloc kind_loc);

/* Shared by scan and segmented_scan (stages/scan.c): parses a scan body; `segmented` adds
 * the `segments` key. */
void sl_stage_parse_any_scan(sl_loader *L, const ld_node *body, sl_srcloc kind_loc,
                             bool segmented);
/* Shared by scan and reduce (stages/scan.c): parses a scan body's op, of, a, b, acc and
 * into (not kind, reset or segments) into *scan, defining the into column(s) (poisoned when
 * the value failed). Returns false after diagnostics. */
bool sl_stage_parse_scan_value(sl_loader *L, const ld_node *body, sl_srcloc loc, sl_scan *scan);
/* Shared by segmented_scan and reduce (stages/scan.c): `segments` (an offsets input valid
 * before any stage that changes the rows, a bool head-flag column, or {key: COLUMN}) into
 * scan->segments and scan->segment_column. Returns false after a diagnostic. */
bool sl_stage_parse_segments(sl_loader *L, const ld_node *seg, sl_scan *scan);
/* Shared by compact and filter (stages/compact.c): appends a COMPACT stage keeping the rows
 * where column `by` is true and, of the live columns, those in keep (NULL: all). */
void sl_stage_add_compact(sl_loader *L, const char *kind_name, sl_srcloc loc, int by,
                          const bool *keep);
/* Shared by map, flag and filter (stages/map.c): parses `NAME: EXPR` pairs into a MAP
 * stage; `predicates` requires bool expressions (flag). */
void sl_stage_parse_definitions(sl_loader *L, const ld_node *body, sl_srcloc kind_loc,
                                const char *kind_name, bool predicates);

#endif
