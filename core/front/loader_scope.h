/* loader_scope.h — the loader's state while it builds a sluice_pipeline, and the checks every
 * part of the schema uses (known keys, values, live columns, types, expressions), each of which
 * records its own diagnostic. Shared by the loader (core/front/loader*.c) and the stage
 * parsers in stages/; defined in core/front/loader_scope.c. */
#ifndef SL_LOADER_SCOPE_H
#define SL_LOADER_SCOPE_H

#include "front/loader_yaml.h"

/* Hostile-input limits (documented in pipelines/SCHEMA.md). The file-size limit lives in
 * core/front/pipeline.c, which refuses oversized text before it reaches the loader. */
#define SL_MAX_COLUMNS 1024
#define SL_MAX_STAGES 256
#define SL_MAX_PARAMS 256
/* The context keeps this many diagnostics (core/common/diag.c); a load stops checking past it. */
#define SL_MAX_LOAD_DIAGNOSTICS 100

/* ---- the loader's state --------------------------------------------------------------- */

typedef struct sl_loader {
    sluice_context *ctx;
    sluice_pipeline *p;
    bool oom;               /* an allocation failed: one diagnostic, then stop */
    bool stop;              /* stop checking: out of memory, a size limit was hit, or
                               SL_MAX_LOAD_DIAGNOSTICS problems are reported already */
    size_t diag_mark;       /* diagnostics in the context before this load */

    int columns_cap;
    bool *live;             /* columns live at the current point of the pipeline */
    bool *poisoned;         /* defined by a definition that failed: users stay silent */
    sl_srcloc *dropped_at;  /* where a column stopped being live (line 0: never) */

    int stages_cap;
    /* The last stage that changed which rows exist (compact, filter, sort); offsets inputs
     * describe the input rows, so segments from them are only valid before it. */
    int rows_changed_stage;
    int filters;            /* hidden filter columns made so far (for their names) */

    /* expression scope state */
    bool scope_hit_poison;
    int scope_dropped;      /* a no-longer-live column an expression named, or -1 */
    const sl_operator *scope_operator; /* non-NULL: resolve l./r. fields only */
    char scope_field_text[2 * SL_MAX_FIELDS][72];       /* "l.a", "r.a", … of that operator */
    const char *scope_field_names[2 * SL_MAX_FIELDS];
    const char **scope_names;          /* did-you-mean candidates, rebuilt per parse */
    size_t scope_names_cap;
} sl_loader;

/* Records a diagnostic at loc; returns false so callers can `return ld_error(...)`. A problem
 * found past SL_MAX_LOAD_DIAGNOSTICS (which the context notes as "more problems") and any
 * SLUICE_ERR_LIMIT diagnostic set L->stop: nothing further is checked. */
bool ld_error(sl_loader *L, sluice_status status, sl_srcloc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Records the (single) out-of-memory diagnostic; returns false. */
bool ld_oom(sl_loader *L);
/* "; did you mean 'x'?" when `word` is a likely typo of one of `names`, else "" — written
 * into buf, which is returned. */
const char *ld_did_you_mean(char *buf, size_t cap, const char *word, const char *const *names,
                            size_t count);

/* Reports every key of `map` not in `allowed` (UNKNOWN_KEY, with did-you-mean); `where`
 * names the mapping in messages ("the scan stage"). Returns true when all are known. */
bool ld_check_keys(sl_loader *L, const ld_node *map, const char *const *allowed, size_t n,
                   const char *where);
/* Requires a key; reports MISSING_KEY at `at` when absent. */
const ld_node *ld_require(sl_loader *L, const ld_node *map, sl_srcloc at, const char *name,
                          const char *where);
/* Requires a scalar (BAD_VALUE otherwise); returns its text or NULL. */
const char *ld_scalar(sl_loader *L, const ld_node *n, const char *what);
/* Index of the scalar's value in `options`, or -1 after a BAD_VALUE diagnostic. */
int ld_enum(sl_loader *L, const ld_node *n, const char *what, const char *const *options,
            size_t count);
/* A type name (TYPE error with did-you-mean otherwise). */
bool ld_type(sl_loader *L, const ld_node *n, sluice_type *out);
/* A small non-negative integer scalar (BAD_VALUE otherwise). */
bool ld_int(sl_loader *L, const ld_node *n, const char *what, int64_t lo, int64_t hi,
            int64_t *out);
/* True when text is a valid name: [A-Za-z_][A-Za-z0-9_]*, at most 64 characters. */
bool ld_is_identifier(const char *text);

/* ---- columns -------------------------------------------------------------------------- */

/* Fills L->scope_names with the names a did-you-mean may offer (the live visible columns,
 * plus the params when with_params) and returns how many. */
size_t ld_candidate_names(sl_loader *L, bool with_params);
/* Column id of `name` (live or not), -1 when never defined. */
int ld_find_column(const sl_loader *L, const char *name);
/* Resolves a scalar naming a live column. Returns its id; -1 after an UNKNOWN_COLUMN
 * diagnostic (with did-you-mean, or where the column was dropped); -2 when the column is
 * poisoned (its definition already failed: no further diagnostic). */
int ld_live_column(sl_loader *L, const ld_node *n, const char *what);
/* Defines a new column named by scalar `name_node` and makes it live. Reports a bad name,
 * a column (or param) of that name defined before, and the column limit. Returns the id or
 * -1. A poisoned column is one whose definition failed: later uses are silent. */
int ld_define_column(sl_loader *L, const ld_node *name_node, const char *name, sluice_type type,
                     bool hidden, bool poisoned);
/* Makes column c dead from stage `stage_loc` on. */
void ld_drop_column(sl_loader *L, int c, sl_srcloc stage_loc);

/* ---- stages and expressions ----------------------------------------------------------- */

/* Appends a zeroed stage (STAGE limit checked); NULL on failure. The stage's live_after is
 * filled by the loader after the stage's parser returns. */
sl_stage *ld_add_stage(sl_loader *L, sl_stage_kind kind, const char *kind_name, sl_srcloc loc);

/* Records the current live set as live_after of every stage added so far that lacks one. The
 * loader calls it after each stage; a stage kind that adds several stages (filter) calls it
 * between them. */
void ld_snapshot_live(sl_loader *L);

/* Parses the scalar n as an expression over the live columns and params (or, inside an
 * operator's combine, its l./r. fields). Returns NULL on failure; *poisoned (may be NULL) is
 * set when the failure came only from a poisoned column, whose diagnostics are withdrawn. */
sl_expr *ld_expr(sl_loader *L, const ld_node *n, bool *poisoned);

#endif
