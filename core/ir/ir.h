/* ir.h — the typed pipeline: columns, params, declared operators and stages, as the loader
 * builds them from YAML and every backend reads them. Immutable after loading. */
#ifndef SL_IR_H
#define SL_IR_H

#include "expr/expr.h"

/* ---- columns and params ---------------------------------------------------------------- */

typedef struct sl_column {
    char *name;
    sluice_type type;
    sluice_column_role role; /* OFFSETS only for an input declared {role: offsets} */
    int producer;            /* stage index that defines it; -1 for an input */
    bool hidden;             /* made by the loader (e.g. a filter's flag); never an output */
    sl_srcloc loc;
} sl_column;

typedef struct sl_param {
    char *name;
    sluice_type type;
    sl_value default_value;
    char *default_text;
    sl_srcloc loc;
} sl_param;

/* ---- scan operators as monoids --------------------------------------------------------- */

typedef enum sl_scan_op {
    SL_SCAN_SUM, SL_SCAN_PROD, SL_SCAN_MIN, SL_SCAN_MAX,
    SL_SCAN_AND, SL_SCAN_OR, SL_SCAN_XOR,
    SL_SCAN_COUNT,  /* one state field, i64, each row contributes 1 */
    SL_SCAN_LINREC, /* two fields (a, b): (a1,b1)·(a2,b2) = (a1*a2, a2*b1 + b2) */
    SL_SCAN_CUSTOM  /* a declared operator */
} sl_scan_op;

#define SL_MAX_FIELDS 8

/* An operator declared under `operators:`. combine[f] reads l.<field> (side 0) and r.<field>
 * (side 1) as SL_EXPR_FIELD nodes. */
typedef struct sl_operator {
    char *name;
    int nfields;
    char *field_names[SL_MAX_FIELDS];
    sluice_type field_types[SL_MAX_FIELDS];
    sl_value identity[SL_MAX_FIELDS];
    sl_expr *combine[SL_MAX_FIELDS];
    sl_srcloc loc;
} sl_operator;

/* Where a segmented scan's segments come from. */
typedef enum sl_segments_kind {
    SL_SEGMENTS_NONE,     /* plain scan */
    SL_SEGMENTS_OFFSETS,  /* column = an offsets input (k+1 entries per batch) */
    SL_SEGMENTS_HEADFLAG, /* column = a bool column, true at each segment's first row */
    SL_SEGMENTS_KEY       /* column = any column; a segment is a run of equal values */
} sl_segments_kind;

typedef struct sl_scan {
    sl_scan_op op;
    const sl_operator *custom;   /* for SL_SCAN_CUSTOM (owned by the pipeline) */
    int nfields;                 /* state fields: 1 for builtins, 2 for linrec */
    sluice_type acc[SL_MAX_FIELDS];   /* each field's accumulator type */
    sl_value identity[SL_MAX_FIELDS]; /* each field's identity, typed as acc */
    sl_expr *of[SL_MAX_FIELDS];  /* per row, each field's value, already cast to acc */
    int into[SL_MAX_FIELDS];     /* output column per field; -1 when the field is not kept */
    bool exclusive;
    bool reset_per_batch;        /* reset: batch */
    sl_segments_kind segments;
    int segment_column;          /* column id for OFFSETS/HEADFLAG/KEY */
} sl_scan;

/* ---- stages ---------------------------------------------------------------------------- */

typedef enum sl_stage_kind {
    SL_STAGE_MAP,     /* also flag: outputs are bool */
    SL_STAGE_COMPACT, /* filter is lowered to a MAP of one hidden bool column + COMPACT */
    SL_STAGE_SCAN,    /* scan and segmented_scan */
    SL_STAGE_SORT,
    SL_STAGE_REDUCE   /* one row per segment (stages/reduce.c: what backends read) */
} sl_stage_kind;

typedef struct sl_map {
    int count;
    int *columns;    /* defined column ids */
    sl_expr **exprs; /* typed as the column */
} sl_map;

typedef struct sl_compact {
    int by; /* bool column id */
} sl_compact;

#define SL_MAX_SORT_KEYS 8
typedef struct sl_sort {
    int nkeys;
    int keys[SL_MAX_SORT_KEYS]; /* most significant first */
    bool key_descending[SL_MAX_SORT_KEYS]; /* key k's order (`order`, one for all or one per key) */
    int bits_lo, bits_hi;       /* bit range of the (single) key's unsigned image; [0, width)
                                   when not given */
    bool per_batch;             /* per: batch */
} sl_sort;

/* A reduce: one row per segment. The note at the top of stages/reduce.c says what each
 * field means to a backend. */
typedef struct sl_reduce {
    int nvalues;
    sl_scan *values;            /* owned, nvalues: each reduction as the inclusive scan whose
                                   state at a segment's last row it keeps (the reduce's
                                   segments copied in; reset_per_batch = per_batch) */
    sl_segments_kind segments;  /* NONE: the whole stream (or batch) is one segment */
    int segment_column;         /* OFFSETS / HEADFLAG / KEY: the column; -1 for NONE */
    int key_column;             /* KEY: the key column, live after the stage with each
                                   segment's key (same column id); -1 otherwise */
    int index_column;           /* `index`: i64 segment index over the stream; -1 if none */
    bool per_batch;             /* per: batch — segments also end at each batch's end */
} sl_reduce;

typedef struct sl_stage {
    sl_stage_kind kind;
    const char *kind_name;   /* as written: "map", "flag", "filter", "scan", … (static) */
    sl_srcloc loc;
    union {
        sl_map map;
        sl_compact compact;
        sl_scan scan;
        sl_sort sort;
        sl_reduce reduce;
    };
    /* live_after[c] is true when column c exists after this stage (inputs of role OFFSETS
     * are never live: they describe the batch, not rows). Length: pipeline ncolumns. */
    bool *live_after;
} sl_stage;

typedef enum sl_determinism {
    SL_DETERMINISM_DEFAULT,
    SL_DETERMINISM_RUN_TO_RUN /* `determinism: run_to_run` */
} sl_determinism;

struct sluice_pipeline {
    sluice_context *ctx;
    sl_owned link;           /* in ctx's list once handed to the caller */
    char *name;
    char *file;              /* path or "<string>" */
    sl_determinism determinism;

    int ncolumns;
    sl_column *columns;      /* inputs first, in declaration order, then defined columns */
    int ninputs;             /* inputs are columns [0, ninputs) */

    int nparams;
    sl_param *params;

    int noperators;
    sl_operator *operators;

    int nstages;
    sl_stage *stages;

    int noutputs;
    int *outputs;            /* column ids */
};

/* Frees everything the pipeline owns (used by sluice_pipeline_free and by the loader on
 * failure, so it must cope with a partly built pipeline: NULL members, counts 0). */
void sl_pipeline_destroy(sluice_pipeline *p);

/* Live columns before stage i (i == nstages: after the last). */
const bool *sl_pipeline_live_before(const sluice_pipeline *p, int stage, const bool *inputs_live);

/* The scan operator's name for messages ("sum", "linrec", or the declared name). */
const char *sl_monoid_op_name(const sl_scan *scan);

/* Combines two states a (left) and b (right) of `scan`'s monoid: out = a ⊕ b, field by
 * field in the acc types. Left stays left. out may alias a or b. Implemented in
 * core/ir/monoid.c for every operator and type; used by the CPU backend and operator checks. */
void sl_monoid_combine(const sl_scan *scan, const sl_value *a, const sl_value *b, sl_value *out);

/* ---- the loader (core/front/loader.c) -------------------------------------------------------- */

/* Parses YAML text into a checked pipeline, recording every problem found as a diagnostic
 * (sl_diag). Returns the first problem's status. */
sluice_status ld_parse_pipeline(sluice_context *ctx, const char *text, size_t length,
                                const char *file, sluice_pipeline **out);

#endif
