#ifndef CMOSQUITTOSHIM_H
#define CMOSQUITTOSHIM_H
/// Returns the libmosquitto library version as major*1000000 + minor*1000 + revision.
int CMosquittoShim_libraryVersion(void);
#endif
