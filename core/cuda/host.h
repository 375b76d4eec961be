/* host.h — decisions the CUDA backend's host side (core/cuda/backend.c) takes from a plan,
 * exposed so tests can check them against the fused groups' layouts without a GPU. */
#ifndef SL_CUDA_HOST_H
#define SL_CUDA_HOST_H

#include "../ir.h"

/* Sets moved[c] (length p->ncolumns) for every column the sort stage `stage` moves: its keys
 * and each column alive at the sort that a later stage or the output needs — the liveness
 * the fused groups use (sl_cuda_columns_needed_from), so a sort never reads a column the
 * group before it did not write. Offsets inputs never move. */
void sl_cuda_sort_moves(const sluice_pipeline *p, int stage, bool *moved);

#endif
