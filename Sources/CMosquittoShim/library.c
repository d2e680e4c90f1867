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
