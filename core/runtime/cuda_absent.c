/* cuda_absent.c — the CUDA backend's entry point in builds without CUDA: there is none. */
#include "runtime/session.h"

const sl_backend_ops *sl_cuda_backend(void) { return NULL; }
