/* raw.h — raw little-endian column files (COLUMN.bin): no header, the element type comes from
 * the pipeline's declaration, so the only thing a file can get wrong is its size. */
#ifndef SL_CLI_RAW_H
#define SL_CLI_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

/* Checks that a raw file of `file_size` bytes holds whole elements of `type`; *count gets the
 * number of elements. Returns 0, or -1 with the reason in err. */
int sl_raw_element_count(uint64_t file_size, sluice_type type, int64_t *count, char *err,
                         size_t errcap);

#endif
