/* loader_yaml.h — the YAML node tree with source positions that core/front/loader_yaml.c reads
 * from text with libyaml, and its accessors. The rest of the loader walks this tree. */
#ifndef SL_LOADER_YAML_H
#define SL_LOADER_YAML_H

#include "ir/ir.h"

/* Hostile-input limit (documented in pipelines/SCHEMA.md). */
#define SL_MAX_YAML_DEPTH 32

typedef enum ld_kind { LD_SCALAR, LD_SEQUENCE, LD_MAPPING } ld_kind;

typedef struct ld_node {
    ld_kind kind;
    sl_srcloc loc;          /* where the node starts (1-based) */
    char *text;             /* scalar: its value, NUL-terminated */
    size_t len;
    bool quoted;            /* scalar written quoted or as a block: not plain */
    sl_srcloc text_loc;     /* scalar: where its first character of text is in the file
                               (after an opening quote; a block's first content line) */
    int count;              /* sequence: items; mapping: pairs */
    struct ld_node **items; /* sequence: count items; mapping: key, value, key, value … */
} ld_node;

/* Reads YAML text into a tree (core/front/loader_yaml.c). Rejects syntax errors, documents other
 * than exactly one, anchors/aliases, non-scalar mapping keys, nesting deeper than
 * SL_MAX_YAML_DEPTH and duplicate keys (the later one is reported and dropped), recording a
 * diagnostic for each. On success *root is the document's root node, NULL for a text with
 * no document. On failure *root is NULL and the diagnostics say why. Duplicate keys are
 * reported without failing: the tree stays usable so later checks can run. */
sluice_status ld_yaml_read(sluice_context *ctx, const char *text, size_t length, ld_node **root);
void ld_node_free(sluice_context *ctx, ld_node *n);

static inline const ld_node *ld_key(const ld_node *map, int i) { return map->items[2 * i]; }
static inline const ld_node *ld_val(const ld_node *map, int i) { return map->items[2 * i + 1]; }
/* The value of key `name` in a mapping, NULL when absent. */
const ld_node *ld_get(const ld_node *map, const char *name);
/* A plain empty scalar, `~` or `null`. */
bool ld_is_null(const ld_node *n);
/* "a mapping", "a list", "a text \"…\"" for messages. */
const char *ld_shape(const ld_node *n);

#endif
