/* carry_bytes.h — a fused GPU group's carried records (sl_scan_carry, core/runtime/session.h)
 * to and from the bytes of its generated kernel's carry (where each state sits:
 * core/cuda/codegen.h, sl_cg_scan_carry). Host code without a CUDA call, so that the CUDA
 * backend's carry_get / carry_set (core/cuda/backend.c, which copy the bytes from and to the
 * device) and the host emulation of the generated kernels (tests/test_cuda_carry_host.c) run
 * the same mapping.
 *
 * The records of plan group gi are its scan stages' in stage order, then the values of a
 * reduce ending it (core/runtime/carry.h). The device state lacks what the CPU keeps about the
 * rows since the last seed, so decoding takes the records last encoded (`seeded`: zeros at
 * open and reset) and whether rows entered the group since (`fed`); carry_bytes.c says per
 * field what comes from where. */
#ifndef SL_CUDA_CARRY_BYTES_H
#define SL_CUDA_CARRY_BYTES_H

#include "cuda/codegen.h"
#include "runtime/session.h"

/* Whether lay[0 .. n) describes each carried record of plan group gi of p: SLUICE_OK, else
 * SLUICE_ERR_INVALID_ARGUMENT with an internal diagnostic (never a read at a wrong offset). */
sluice_status sl_cuda_carry_check(sluice_context *ctx, const sluice_pipeline *p, const sl_plan *plan,
                                  int gi, const sl_cg_scan_carry *lay, int n);

/* The records out[0 .. n) of the carry `bytes` (lay's layout, checked). */
void sl_cuda_carry_decode(const sluice_pipeline *p, const sl_plan *plan, int gi,
                          const sl_cg_scan_carry *lay, int n, const unsigned char *bytes,
                          const sl_scan_carry *seeded, bool fed, sl_scan_carry *out);

/* Writes in[0 .. n) into `bytes`, which hold the carry's identity on entry (what no record
 * sets stays the identity: a compaction's count, a reduce's per-batch count and flags). */
void sl_cuda_carry_encode(const sluice_pipeline *p, const sl_plan *plan, int gi,
                          const sl_cg_scan_carry *lay, int n, const sl_scan_carry *in,
                          unsigned char *bytes);

/* Whether the group's reduce holds its open segment at flush: the record of its first value
 * in `seeded` says the stream goes on past this session's part (sl_scan_carry.continues). No
 * device state says it; the flush is the host's call. false without a reduce. */
bool sl_cuda_carry_held(const sl_cg_scan_carry *lay, int n, const sl_scan_carry *seeded);

#endif
