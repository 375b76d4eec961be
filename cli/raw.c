/* raw.c — size validation of raw column files (see raw.h). */
#include "raw.h"

#include <inttypes.h>

#include "errbuf.h"

int sl_raw_element_count(uint64_t file_size, sluice_type type, int64_t *count, char *err,
                         size_t errcap) {
    size_t elem = sluice_type_size(type);
    if (elem == 0) return sl_errf(err, errcap, "unknown column type");
    if (file_size % elem != 0)
        return sl_errf(err, errcap,
                       "%" PRIu64 " bytes is not a whole number of %s elements (%zu bytes "
                       "each): the file is truncated or not of this type",
                       file_size, sluice_type_name(type), elem);
    if (file_size / elem > (uint64_t)INT64_MAX) return sl_errf(err, errcap, "file too large");
    *count = (int64_t)(file_size / elem);
    return 0;
}
