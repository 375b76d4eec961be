/* half.h — IEEE binary16 <-> binary32 for the command line (CSV fields and generated data of
 * f16 columns). The command line is built on the public API only, which stores f16 as raw
 * 16-bit patterns, so it carries its own conversion: round to nearest even, inf and NaN kept. */
#ifndef SL_CLI_HALF_H
#define SL_CLI_HALF_H

#include <stdint.h>

uint16_t sl_cli_f32_to_f16(float f);
float sl_cli_f16_to_f32(uint16_t h);

#endif
