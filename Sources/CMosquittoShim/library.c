// Process-wide libmosquitto setup and its error texts. Any thread.

#include "shim_internal.h"

// MARK: - Library

static pthread_once_t libraryOnce = PTHREAD_ONCE_INIT;
static int libraryInitResult = 0;

static void libraryInitOnce(void) { libraryInitResult = mosquitto_lib_init(); }

int CMosquittoShim_libraryInit(void) {
    pthread_once(&libraryOnce, libraryInitOnce);
    return libraryInitResult;
}

int CMosquittoShim_libraryVersion(void) {
    int major = 0, minor = 0, revision = 0;
    mosquitto_lib_version(&major, &minor, &revision);
    return major * 1000000 + minor * 1000 + revision;
}

const char *CMosquittoShim_errorString(int code) {
    if (code == SHIM_TIMEOUT_CODE) return "timed out waiting for CONNACK";
    const char *text = mosquitto_strerror(code);
    return text ? text : "unknown error";
}

const char *CMosquittoShim_reasonString(int code, bool v5) {
    const char *text = v5 ? mosquitto_reason_string(code) : mosquitto_connack_string(code);
    return text ? text : "unknown reason";
}

// MARK: - Measurement switches (COATY_SHIM_DISABLE, see shim_internal.h)

static pthread_once_t disabledOnce = PTHREAD_ONCE_INIT;
static int disabledTricks = 0;

static void readDisabledTricks(void) {
    static const struct {
        const char *name;
        int bits;
    } names[] = {
        {"direct", CMosquittoShim_TrickDirect},
        {"quickack", CMosquittoShim_TrickQuickAck},
        {"all", CMosquittoShim_TrickDirect | CMosquittoShim_TrickQuickAck},
    };
    const char *list = getenv("COATY_SHIM_DISABLE");
    while (list && *list) {
        size_t length = strcspn(list, ",");
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (strlen(names[i].name) == length && strncmp(list, names[i].name, length) == 0) {
                disabledTricks |= names[i].bits;
            }
        }
        list += length + (list[length] == ',' ? 1 : 0);
    }
}

int CMosquittoShim_disabledTricks(void) {
    pthread_once(&disabledOnce, readDisabledTricks);
    return disabledTricks;
}

SHIM_HIDDEN bool shimTrickDisabled(int trick) { return (CMosquittoShim_disabledTricks() & trick) != 0; }
