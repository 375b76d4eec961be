/* carry_bytes.c — a fused GPU group's carried records to and from its kernel's carry bytes
 * (carry_bytes.h). What the device state holds is codegen.h's sl_cg_scan_carry and
 * sl_cg_reduce_carry; what it does not hold comes from the last seed and `fed`, per field
 * below. */
#include "cuda/carry_bytes.h"

#include <string.h>

#include "common/context.h"

/* A segment key's bits as the CPU backend keeps them (core/cpu/fused.c): the stored bits,
 * zero-extended, a bool key its truth value. */
static uint64_t key_bits(const unsigned char *at, sluice_type t) {
    uint64_t b = 0;
    memcpy(&b, at, sluice_type_size(t)); /* little-endian, like the device */
    return t == SLUICE_BOOL ? b != 0 : b;
}

static void store_key(unsigned char *at, sluice_type t, uint64_t bits) {
    if (t == SLUICE_BOOL) bits = bits != 0;
    memcpy(at, &bits, sluice_type_size(t));
}

/* Record k of plan group gi: a scan stage's, or a value of the reduce ending the group
 * (*reduce is then that reduce, else NULL); NULL past the last. */
static const sl_scan *group_scan(const sluice_pipeline *p, const sl_plan *plan, int gi, int k,
                                 const sl_reduce **reduce) {
    const sl_group *pg = &plan->groups[gi];
    *reduce = NULL;
    for (int st = pg->first; st < pg->last; st++) {
        const sl_stage *stage = &p->stages[st];
        if (stage->kind == SL_STAGE_SCAN && k-- == 0) return &stage->scan;
        if (stage->kind != SL_STAGE_REDUCE) continue;
        if (k < stage->reduce.nvalues) {
            *reduce = &stage->reduce;
            return &stage->reduce.values[k];
        }
        k -= stage->reduce.nvalues;
    }
    return NULL;
}

sluice_status sl_cuda_carry_check(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                                  int gi, const sl_cg_scan_carry *lay, int n) {
    const sl_reduce *rd = NULL;
    bool ok = gi >= 0 && gi < plan->ngroups && n >= 0 && (n == 0 || lay) &&
              !group_scan(p, plan, gi, n, &rd);
    for (int k = 0; ok && k < n; k++) {
        const sl_scan *sc = group_scan(p, plan, gi, k, &rd);
        if (!sc || (rd != NULL) != (lay[k].reduce_value >= 0)) ok = false;
        else if (rd) ok = lay[k].reduce.seen != SIZE_MAX && lay[k].reduce.total != SIZE_MAX &&
                          (rd->segments != SL_SEGMENTS_KEY ||
                           (lay[k].reduce.first != SIZE_MAX && lay[k].reduce.last != SIZE_MAX));
        else if (sc->segments == SL_SEGMENTS_KEY)
            ok = lay[k].flag != SIZE_MAX && lay[k].interior != SIZE_MAX &&
                 lay[k].first != SIZE_MAX && lay[k].last != SIZE_MAX;
        else if (sc->segments != SL_SEGMENTS_NONE)
            ok = lay[k].flag != SIZE_MAX;
        for (int f = 0; ok && sc && f < sc->nfields; f++) ok = lay[k].value[f] != SIZE_MAX;
    }
    if (ok) return SLUICE_OK;
    return sl_error(ctx, SLUICE_ERR_INVALID_ARGUMENT,
                    "internal: the GPU kernel's carry layout of plan group %d does not match its "
                    "carried scans (%d described)", gi, n);
}

/* A reduce's value record (value lay->reduce_value of reduce rd). The reduce's own state is
 * one for all its values, as on the CPU, where every value sees the same rows and segments;
 * the reduce's fields proper (segments, open) are the first value's record's, and the other
 * records keep what was seeded there, as on the CPU. `seen` is the open segment, cleared
 * when the close kernel emits it; so:
 * - has_first: seeded without an open segment, `seen` is exactly whether a row reached the
 *   reduce since (also behind a compaction that kept none) until a flush emits the segment
 *   (a distributed session reads it after a pass whose flush holds the segment); seeded with
 *   one, or `per: batch` / offsets (which restart every batch), whether rows entered the
 *   group since, as for a scan;
 * - headed: `restart` (a head flag, or a key unlike the one before it, since the seed:
 *   sl_cuda_carry_encode writes it 0);
 * - keys: has_key is `seen`, last_key the span's last key (kept after an emitted segment, as
 *   the CPU keeps it); first_key is the first row's since a seed without an open segment, else
 *   the seeded key (right whenever headed is false), as for a key scan. Offsets segments
 *   report no key, as for a scan. */
static void reduce_record_get(const sluice_pipeline *p, const sl_reduce *rd,
                              const sl_cg_scan_carry *lay, const unsigned char *bytes,
                              const sl_scan_carry *in, bool fed, sl_scan_carry *o) {
    const sl_cg_reduce_carry *R = &lay->reduce;
    bool seen = bytes[R->seen] != 0;
    bool restart = R->restart != SIZE_MAX && bytes[R->restart] != 0;
    bool carried = !rd->per_batch && rd->segments != SL_SEGMENTS_OFFSETS;
    o->has_first = in->has_first || (carried && !in->open ? seen : fed);
    o->headed = in->headed || restart;
    o->first_key = in->first_key;
    o->has_key = in->has_key;
    o->last_key = in->last_key;
    if (rd->segments == SL_SEGMENTS_KEY) {
        sluice_type kt = p->columns[rd->segment_column].type;
        o->has_key = seen;
        o->last_key = key_bits(bytes + R->last, kt);
        if (!in->open) {
            if (!in->has_first && seen) o->first_key = key_bits(bytes + R->first, kt);
        } else if (!in->has_first && o->has_first) {
            o->first_key = in->last_key;
        }
    } else if (rd->segments == SL_SEGMENTS_OFFSETS) {
        o->has_key = false;
        o->last_key = 0;
    }
    o->segments = in->segments;
    o->open = in->open;
    o->continues = in->continues;
    if (lay->reduce_value == 0) {
        int64_t total = 0;
        memcpy(&total, bytes + R->total, sizeof total);
        o->segments = total;
        o->open = rd->segments != SL_SEGMENTS_OFFSETS && seen;
    }
}

/* The reduce's own state from its first value's record: the open segment (`seen`; offsets
 * segments never hold one), the next index, the last key as the span's first and last (so a
 * first row of another key closes the segment, and the segment's row gets that key). The
 * batch's count and the restart and head flags stay the identity (0): they flow out of the
 * carry into the kernel's prefixes, and nothing reads them there but as the right operand,
 * which the carry never is. `continues` has no place in the device state
 * (sl_cuda_carry_held). */
static void reduce_record_set(const sluice_pipeline *p, const sl_reduce *rd,
                              const sl_cg_scan_carry *lay, const sl_scan_carry *in,
                              unsigned char *bytes) {
    const sl_cg_reduce_carry *R = &lay->reduce;
    bytes[R->seen] = rd->segments != SL_SEGMENTS_OFFSETS && in->open;
    memcpy(bytes + R->total, &in->segments, sizeof in->segments);
    if (rd->segments == SL_SEGMENTS_KEY) {
        sluice_type kt = p->columns[rd->segment_column].type;
        store_key(bytes + R->first, kt, in->last_key);
        store_key(bytes + R->last, kt, in->last_key);
    }
}

/* Each scan's record from its device state. What the state does not hold comes from the
 * last seed:
 * - a key-segmented scan seeded without a key starts from has = 0, so its `has` and `first`
 *   fields are exactly has_first and first_key since the seed, `interior` exactly headed;
 *   seeded with a key, its span starts at that key: `interior` is still exactly headed
 *   (a row whose key differs from the seeded one makes a boundary), and first_key reads as
 *   the seeded key, which is the first row's key whenever headed is false (a distributed
 *   session reads first_key only then, and only of scans it seeded without a key);
 * - has_first of the other scans, and of key scans seeded with a key, is whether rows
 *   entered the group since the seed (a compaction earlier in the group may have kept none
 *   of them: the state is then the seed's, and folding it in is the combine with the
 *   identity the device's own empty tiles make too);
 * - offsets segments restart every batch and carry no key out of it: none is reported;
 * - a reduce's values: reduce_record_get. */
void sl_cuda_carry_decode(const sluice_pipeline *p, const sl_plan *plan, int gi,
                          const sl_cg_scan_carry *lay, int n, const unsigned char *bytes,
                          const sl_scan_carry *seeded, bool fed, sl_scan_carry *out) {
    for (int k = 0; k < n; k++) {
        const sl_reduce *rd = NULL;
        const sl_scan *sc = group_scan(p, plan, gi, k, &rd);
        const sl_scan_carry *in = &seeded[k];
        sl_scan_carry *o = &out[k];
        *o = (sl_scan_carry){0};
        for (int f = 0; f < sc->nfields; f++)
            o->v[f] = sl_value_load(sc->acc[f], bytes + lay[k].value[f], 0);
        if (rd) {
            reduce_record_get(p, rd, &lay[k], bytes, in, fed, o);
            continue;
        }
        o->has_first = in->has_first || fed;
        o->first_key = in->first_key;
        switch (sc->segments) {
        case SL_SEGMENTS_KEY: {
            sluice_type kt = p->columns[sc->segment_column].type;
            bool has = bytes[lay[k].flag] != 0, interior = bytes[lay[k].interior] != 0;
            o->has_key = has;
            o->last_key = has ? key_bits(bytes + lay[k].last, kt) : 0;
            if (!in->has_key) {
                o->has_first = in->has_first || has;
                if (!in->has_first && has) o->first_key = key_bits(bytes + lay[k].first, kt);
            } else if (!in->has_first && o->has_first) {
                o->first_key = in->last_key;
            }
            o->headed = in->headed || interior;
            break;
        }
        case SL_SEGMENTS_OFFSETS:
            o->headed = in->headed || bytes[lay[k].flag] != 0;
            break;
        default: /* no key of its own: what was seeded stays, as on the CPU */
            o->headed = in->headed ||
                        (sc->segments == SL_SEGMENTS_HEADFLAG && bytes[lay[k].flag] != 0);
            o->has_key = in->has_key;
            o->last_key = in->last_key;
            break;
        }
    }
}

/* A key scan with a key starts a span of that key (has, first = last = the key, interior =
 * headed); a head-flag scan's flag is headed; a reduce's values, and its state from the first
 * one's record: reduce_record_set. */
void sl_cuda_carry_encode(const sluice_pipeline *p, const sl_plan *plan, int gi,
                          const sl_cg_scan_carry *lay, int n, const sl_scan_carry *in,
                          unsigned char *bytes) {
    for (int k = 0; k < n; k++) {
        const sl_reduce *rd = NULL;
        const sl_scan *sc = group_scan(p, plan, gi, k, &rd);
        /* a widened field takes the whole extension: its combines read the upper bytes */
        for (int f = 0; f < sc->nfields; f++)
            sl_value_store(lay[k].held[f], bytes + lay[k].value[f], 0,
                           sl_value_cast(in[k].v[f], sc->acc[f]));
        if (rd) {
            if (lay[k].reduce_value == 0) reduce_record_set(p, rd, &lay[k], &in[k], bytes);
        } else if (sc->segments == SL_SEGMENTS_KEY) {
            sluice_type kt = p->columns[sc->segment_column].type;
            bytes[lay[k].flag] = in[k].has_key;
            bytes[lay[k].interior] = in[k].has_key && in[k].headed;
            store_key(bytes + lay[k].first, kt, in[k].has_key ? in[k].last_key : 0);
            store_key(bytes + lay[k].last, kt, in[k].has_key ? in[k].last_key : 0);
        } else if (sc->segments != SL_SEGMENTS_NONE) {
            bytes[lay[k].flag] = in[k].headed;
        }
    }
}

bool sl_cuda_carry_held(const sl_cg_scan_carry *lay, int n, const sl_scan_carry *seeded) {
    for (int k = 0; k < n; k++)
        if (lay[k].reduce_value == 0) return seeded[k].continues;
    return false;
}
