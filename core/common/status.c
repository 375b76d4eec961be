/* status.c — names and messages of statuses, generated from SLUICE_STATUS_LIST; version. */
#include <string.h>

#include "common/base.h"
#include "common/types.h"

static const char *const status_names[] = {
#define SL_STATUS_NAME_(name, msg) "SLUICE_" #name,
    SLUICE_STATUS_LIST(SL_STATUS_NAME_)
#undef SL_STATUS_NAME_
};
static const char *const status_messages[] = {
#define SL_STATUS_MSG_(name, msg) msg,
    SLUICE_STATUS_LIST(SL_STATUS_MSG_)
#undef SL_STATUS_MSG_
};

SLUICE_API const char *sluice_status_name(sluice_status status) {
    if ((unsigned)status >= SL_ARRAY_LEN(status_names)) return "SLUICE_UNKNOWN_STATUS";
    return status_names[status];
}

SLUICE_API const char *sluice_strerror(sluice_status status) {
    if ((unsigned)status >= SL_ARRAY_LEN(status_messages)) return "unknown status";
    return status_messages[status];
}

SLUICE_API int sluice_version_number(void) { return SLUICE_VERSION_NUMBER; }
SLUICE_API const char *sluice_version_string(void) { return SLUICE_VERSION_STRING; }

/* Type names and sizes: the type list's table (types.h). */
SLUICE_API const char *sluice_type_name(sluice_type type) {
    if ((unsigned)type >= SLUICE_TYPE_COUNT_) return NULL;
    return sl_type_infos[type].name;
}

SLUICE_API size_t sluice_type_size(sluice_type type) {
    if ((unsigned)type >= SLUICE_TYPE_COUNT_) return 0;
    return sl_type_infos[type].size;
}

SLUICE_API sluice_status sluice_type_from_name(const char *name, sluice_type *out) {
    if (!name || !out) return SLUICE_ERR_INVALID_ARGUMENT;
    for (int t = 0; t < SLUICE_TYPE_COUNT_; t++) {
        if (strcmp(sl_type_infos[t].name, name) == 0) {
            *out = (sluice_type)t;
            return SLUICE_OK;
        }
    }
    return SLUICE_ERR_INVALID_ARGUMENT;
}

SLUICE_API const char *sluice_backend_name(sluice_backend backend) {
    switch (backend) {
    case SLUICE_BACKEND_AUTO: return "auto";
    case SLUICE_BACKEND_CPU: return "cpu";
    case SLUICE_BACKEND_CUDA: return "cuda";
    }
    return NULL;
}
