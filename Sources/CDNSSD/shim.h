#ifndef CDNSSD_SHIM_H
#define CDNSSD_SHIM_H
// The DNS Service Discovery API (dns_sd.h): Apple's mDNSResponder on Apple systems, Avahi's
// Bonjour compatibility library on Linux (Debian: libavahi-compat-libdnssd-dev; at run time it
// talks to avahi-daemon over the D-Bus system bus).
#if defined(__APPLE__)
#include <dns_sd.h>
#else
#include <avahi-compat-libdns_sd/dns_sd.h>
#endif
#endif
