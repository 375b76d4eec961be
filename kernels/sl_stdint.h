/* sl_stdint.h — the fixed-width integer types for every kernel header: <stdint.h> where the
 * compiler has it (the C side, nvcc), typedefs of the same types under NVRTC, which has no
 * standard headers. Plain C; included by sl_ops.h and sl_device.cuh. */
#ifndef SL_STDINT_H
#define SL_STDINT_H

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
#else
#include <stdint.h>
#endif

#endif
