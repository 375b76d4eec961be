/* sort.c — the `sort` stage: a stable LSD radix sort by one key (`key`) or several (`keys`,
 * most significant first) of any integer or float type, each ascending or descending
 * (`order`: one order for every key, or a list of one per key), optionally on a bit range
 * `bits: [lo, hi]` of a single key's unsigned image. `values` lists the live columns kept
 * after the sort besides the keys (default: every live column); `per: batch` sorts each
 * batch alone instead of the whole stream. */
#include "stages/kind.h"
#include "stages/registry.h"

static int parse_key(sl_loader *L, const ld_node *n, const bool *taken) {
    int c = ld_live_column(L, n, "sort key");
    if (c < 0) return c;
    sluice_type t = L->p->columns[c].type;
    if (!sl_type_is_integer(t) && !sl_type_is_float(t)) {
        ld_error(L, SLUICE_ERR_TYPE, n->loc,
                 "sort keys must be integer or float columns; '%s' is %s (make a u8 key with a "
                 "map: `u8(%s)`)", L->p->columns[c].name, sluice_type_name(t),
                 L->p->columns[c].name);
        return -1;
    }
    if (taken[c]) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, n->loc, "sort key '%s' is given twice",
                 L->p->columns[c].name);
        return -1;
    }
    return c;
}

static void parse_bits(sl_loader *L, const ld_node *bits, sl_sort *sort, bool keys_ok) {
    if (bits->kind != LD_SEQUENCE || bits->count != 2) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, bits->loc,
                 "bits must be a list [lo, hi] of two bit positions, not %s", ld_shape(bits));
        return;
    }
    int64_t lo, hi;
    bool ok = ld_int(L, bits->items[0], "bits' lo", 0, 1024, &lo);
    ok = ld_int(L, bits->items[1], "bits' hi", 0, 1024, &hi) && ok;
    if (!ok || !keys_ok) return;
    if (sort->nkeys != 1) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, bits->loc,
                 "bits applies to a single key; this sort has %d keys", sort->nkeys);
        return;
    }
    const sl_column *key = &L->p->columns[sort->keys[0]];
    int width = sl_type_bits(key->type);
    if (hi > width) {
        ld_error(L, SLUICE_ERR_TYPE, bits->items[1]->loc,
                 "bits [%lld, %lld] go past the %d bits of key '%s' (%s); hi can be at most %d",
                 (long long)lo, (long long)hi, width, key->name, sluice_type_name(key->type),
                 width);
        return;
    }
    if (lo >= hi) {
        ld_error(L, SLUICE_ERR_TYPE, bits->loc,
                 "bits [%lld, %lld] is an empty range: lo must be below hi", (long long)lo,
                 (long long)hi);
        return;
    }
    sort->bits_lo = (int)lo;
    sort->bits_hi = (int)hi;
}

/* `order`: one order for every key, or a list of one per key, most significant first. A
 * list of the wrong length is an error (when the keys themselves were understood), never
 * cycled or padded: a sort by keys [a, b] with order [descending] is more likely a mistake
 * than a wish for b ascending. */
static void parse_order(sl_loader *L, const ld_node *order, sl_sort *sort, bool keys_ok) {
    static const char *const orders[] = {"ascending", "descending"};
    if (order->kind == LD_MAPPING) {
        ld_error(L, SLUICE_ERR_BAD_VALUE, order->loc,
                 "order must be ascending, descending or a list of them (one per key), not %s",
                 ld_shape(order));
        return;
    }
    if (order->kind != LD_SEQUENCE) {
        int o = ld_enum(L, order, "order", orders, 2);
        for (int k = 0; o >= 0 && k < SL_MAX_SORT_KEYS; k++) sort->key_descending[k] = o == 1;
        return;
    }
    for (int i = 0; i < order->count; i++) {
        int o = ld_enum(L, order->items[i], "order", orders, 2);
        if (o >= 0 && i < SL_MAX_SORT_KEYS) sort->key_descending[i] = o == 1;
    }
    if (keys_ok && order->count != sort->nkeys)
        ld_error(L, SLUICE_ERR_BAD_VALUE, order->loc,
                 "order has %d entr%s but the sort has %d key%s: give one order per key (most "
                 "significant first), or a single order for every key",
                 order->count, order->count == 1 ? "y" : "ies", sort->nkeys,
                 sort->nkeys == 1 ? "" : "s");
}

void sl_stage_parse_sort(sl_loader *L, const ld_node *body, sl_srcloc kind_loc) {
    static const char *const pers[] = {"stream", "batch"};
    if (!ld_add_stage(L, SL_STAGE_SORT, "sort", kind_loc)) return;
    int si = L->p->nstages - 1;
    sl_sort *sort = &L->p->stages[si].sort;
    L->rows_changed_stage = si;

    bool *taken = sl_calloc(L->ctx, (size_t)(L->p->ncolumns ? L->p->ncolumns : 1), 1);
    if (!taken) {
        ld_oom(L);
        return;
    }
    const ld_node *key = ld_get(body, "key"), *keys = ld_get(body, "keys");
    bool keys_ok = true;
    if (key && keys) {
        keys_ok = ld_error(L, SLUICE_ERR_BAD_VALUE, keys->loc,
                           "give either key (one key) or keys (a list), not both");
    } else if (!key && !keys) {
        keys_ok = ld_error(L, SLUICE_ERR_MISSING_KEY, kind_loc,
                           "the sort stage needs 'key' (or 'keys', a list)");
    } else if (key) {
        int c = parse_key(L, key, taken);
        if (c >= 0) sort->keys[sort->nkeys++] = c;
        keys_ok = c >= 0;
    } else if (keys->kind != LD_SEQUENCE || keys->count == 0 || keys->count > SL_MAX_SORT_KEYS) {
        keys_ok = ld_error(L, SLUICE_ERR_BAD_VALUE, keys->loc,
                           "keys must be a list of 1 to %d column names, most significant "
                           "first", SL_MAX_SORT_KEYS);
    } else {
        for (int i = 0; i < keys->count; i++) {
            int c = parse_key(L, keys->items[i], taken);
            if (c < 0) {
                keys_ok = false;
                continue;
            }
            taken[c] = true;
            sort->keys[sort->nkeys++] = c;
        }
    }
    const ld_node *order = ld_get(body, "order");
    if (order) parse_order(L, order, sort, keys_ok);
    const ld_node *per = ld_get(body, "per");
    if (per) sort->per_batch = ld_enum(L, per, "per", pers, 2) == 1;
    if (keys_ok && sort->nkeys == 1) {
        sort->bits_lo = 0;
        sort->bits_hi = sl_type_bits(L->p->columns[sort->keys[0]].type);
    }
    const ld_node *bits = ld_get(body, "bits");
    if (bits) parse_bits(L, bits, sort, keys_ok);

    const ld_node *values = ld_get(body, "values");
    if (values) {
        bool *keep = sl_calloc(L->ctx, (size_t)(L->p->ncolumns ? L->p->ncolumns : 1), 1);
        if (!keep) {
            sl_free(L->ctx, taken);
            ld_oom(L);
            return;
        }
        bool ok = values->kind == LD_SEQUENCE;
        if (!ok)
            ld_error(L, SLUICE_ERR_BAD_VALUE, values->loc,
                     "values must be a list of the columns to keep besides the keys, not %s",
                     ld_shape(values));
        for (int i = 0; ok && i < values->count; i++) {
            int c = ld_live_column(L, values->items[i], "sort's values");
            if (c < 0) {
                ok = false;
                continue;
            }
            keep[c] = true;
        }
        if (ok) {
            sort = &L->p->stages[si].sort;
            for (int k = 0; k < sort->nkeys; k++) keep[sort->keys[k]] = true;
            for (int c = 0; c < L->p->ncolumns; c++)
                if (!keep[c]) ld_drop_column(L, c, kind_loc);
        }
        sl_free(L->ctx, keep);
    }
    sl_free(L->ctx, taken);
}

/* ---- the kind's descriptor (stages/kind.h) ---------------------------------------------- */

static sluice_status sort_need_before(sluice_context *ctx, const sl_stage *s, bool *need,
                                      bool **def_live) {
    (void)ctx;
    (void)def_live;
    for (int k = 0; k < s->sort.nkeys; k++) need[s->sort.keys[k]] = true;
    return SLUICE_OK;
}

/* A barrier: never inside a fused group, so never walked. */
static int sort_carry_levels(const sl_stage *s, sl_level_walk *w, int *phase) {
    (void)s;
    (void)w;
    (void)phase;
    return 0;
}

static int sort_offsets_column(const sl_stage *s) {
    (void)s;
    return -1;
}

static bool sort_batch_bound(const sl_stage *s) { return s->sort.per_batch; }

static void sort_explain(sl_strbuf *sb, const sluice_pipeline *p, const sl_stage *s) {
    const sl_column *cols = p->columns;
    const sl_sort *so = &s->sort;
    bool mixed = false; /* keys of different orders: each key's order after its name */
    for (int k = 1; k < so->nkeys; k++) mixed |= so->key_descending[k] != so->key_descending[0];
    sl_strbuf_append(sb, "by ");
    for (int k = 0; k < so->nkeys; k++)
        sl_strbuf_printf(sb, "%s%s%s", k ? ", " : "", cols[so->keys[k]].name,
                         !mixed ? "" : so->key_descending[k] ? " descending" : " ascending");
    if (!mixed) sl_strbuf_printf(sb, " %s", so->key_descending[0] ? "descending" : "ascending");
    sl_strbuf_printf(sb, ", %s",
                     so->per_batch ? "per batch" : "whole stream (rows leave at flush)");
}

static void sort_free(sluice_context *ctx, sl_stage *s) {
    (void)ctx;
    (void)s;
}

const sl_stage_kind_desc sl_stage_kind_sort = {
    "sort", SL_SHAPE_BARRIER, sort_need_before, sort_carry_levels, sort_offsets_column,
    sort_batch_bound, sort_explain, sort_free, NULL,
};
