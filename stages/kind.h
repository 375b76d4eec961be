/* kind.h — a stage kind as one unit: what generic code (the planner, explain, freeing the IR)
 * asks of a stage is answered by its kind's descriptor, whose pieces sit in the kind's own
 * file under stages/ (map.c, compact.c, scan.c, sort.c, reduce.c) and whose table is
 * stages/kinds.c. The loader's side of a kind (its YAML names, keys and parsers) is
 * stages/registry.h. */
#ifndef SL_STAGE_KIND_H
#define SL_STAGE_KIND_H

#include "ir/ir.h"

/* How a stage moves rows, which decides how the planner groups it. */
typedef enum sl_stage_shape {
    SL_SHAPE_ELEMENTWISE, /* each row in gives that row out, with new columns (map) */
    SL_SHAPE_COMPACT,     /* each row in gives that row or nothing (compact) */
    SL_SHAPE_SCAN,        /* each row out depends on every row before it: carried state */
    SL_SHAPE_BARRIER,     /* needs every row (of a batch or the stream) before any leaves:
                             a fused group ends before it, and it is a group of its own */
    SL_SHAPE_REDUCE       /* one row per segment: the rows change, so it ends its fused
                             group (fused with the stages before it; those after it are a
                             new group); its rows out are bounded by rows_out */
} sl_stage_shape;

/* The planner's forward walk over a fused group for carry levels (core/plan/plan.h: a value's
 * level is 0 when it is known within its tile, n when it needs the n-th chained carry). */
typedef struct sl_level_walk {
    int *level;            /* [column]: level of each column made so far in the group */
    bool *read;            /* [column]: set for every column the group reads */
    bool *made;            /* [column]: set for every column the group makes */
    const bool *def_live;  /* the stage's per-definition liveness (need_before), or NULL */
    int alive;             /* level of "the row is still alive": the compactions' flags */
    bool compacts;         /* set by a compaction */
} sl_level_walk;

/* The highest level among the columns e reads (0 for NULL), marking them read. */
int sl_stage_level_of_expr(sl_level_walk *w, const sl_expr *e);

typedef struct sl_stage_kind_desc {
    const char *name; /* the IR kind's name (the stage's own kind_name is as written) */
    sl_stage_shape shape;
    /* Backward liveness over one stage: need[c] is true on entry when column c is needed
     * after the stage, and on return when it is needed before it (the stage's definitions
     * cleared, what it reads set). A kind with several definitions of which only the needed
     * ones are computed allocates *def_live (one entry per definition, plus one) and marks
     * them; others leave it NULL. Errors: SLUICE_ERR_NO_MEMORY (nothing allocated). */
    sluice_status (*need_before)(sluice_context *ctx, const sl_stage *s, bool *need,
                                 bool **def_live);
    /* One step of the carry-level walk inside a fused group: marks what the stage reads and
     * makes, sets the levels of what it makes, and returns the highest level it reads. A
     * stage that carries state sets *phase to the look-back phase its state joins (its
     * outputs' level, >= 1); others leave it 0. Not called for BARRIER stages. */
    int (*carry_levels)(const sl_stage *s, sl_level_walk *w, int *phase);
    /* The offsets input column whose segments the stage follows, -1 if none. */
    int (*offsets_column)(const sl_stage *s);
    /* True when the stage's result depends on where batches begin (state reset per batch,
     * a sort per batch): its group must never be cut into smaller batches. */
    bool (*batch_bound)(const sl_stage *s);
    /* Appends the stage's explain text after its kind and line (no newline). */
    void (*explain)(sl_strbuf *sb, const sluice_pipeline *p, const sl_stage *s);
    /* Frees what the stage owns (not live_after); the stage may be partly built. */
    void (*free)(sluice_context *ctx, sl_stage *s);
    /* NULL for a stage that gives at most one row per row in and holds none back. Otherwise
     * the most rows the stage gives for a piece of `rows` rows (and `nsegments` segments of
     * the offsets input, -1 when none), or, with end_of_stream, at flush from the rows it
     * holds back (a reduce's open segment); > 0 there makes the executor run the group at
     * flush (sl_group.emits_at_flush). */
    int64_t (*rows_out)(const sl_stage *s, int64_t rows, int64_t nsegments, bool end_of_stream);
} sl_stage_kind_desc;

/* The descriptor of a stage's kind; never NULL for a stage of the IR. */
const sl_stage_kind_desc *sl_stage_kind_desc_of(const sl_stage *s);

/* Each kind's descriptor, defined in its stage file. */
extern const sl_stage_kind_desc sl_stage_kind_map, sl_stage_kind_compact, sl_stage_kind_scan,
    sl_stage_kind_sort, sl_stage_kind_reduce;

#endif
