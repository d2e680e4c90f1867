#include "CMosquittoShim.h"
#include <mosquitto.h>
int CMosquittoShim_libraryVersion(void) {
    int major = 0, minor = 0, revision = 0;
    mosquitto_lib_version(&major, &minor, &revision);
    return major * 1000000 + minor * 1000 + revision;
}
