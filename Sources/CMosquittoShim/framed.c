// The framed read (loop thread): QoS 0 PUBLISH packets read from the socket in large chunks and parsed here, every
// other packet left to libmosquitto, which reads it whole, one packet per call.
//
// libmosquitto reads a packet with several small read() calls (its first byte, each byte of its remaining length,
// then the rest): four system calls for a 400-byte PUBLISH, 29 % of the network thread's CPU in a stream (the store
// benchmark's ingest, `perf record`). Here a stream costs two calls per chunk of up to SHIM_FRAME_WINDOW bytes: a
// recv(MSG_PEEK) that shows what is waiting, and a recv() that consumes the QoS 0 PUBLISH packets parsed from it.
//
// libmosquitto must never see part of a packet: it reads a packet only when the peek shows it whole at the front of
// the socket, and only while it reads exactly one packet per call (mosquitto_loop_read reads as many as it holds QoS
// 1/2 messages in flight, and the last of them could be cut). So the framed read is on only while
//   - the session is plain TCP (TLS decrypts inside libmosquitto; never bypassed), MQTT 3.1.1 (no properties),
//     without held acknowledgements (durable delivery answers QoS 1 messages), and not switched off
//     (COATY_SHIM_DISABLE=framed, see shim_internal.h);
//   - no QoS 1/2 publication is in flight and none was subscribed with QoS 1/2 (so libmosquitto holds no message):
//     a QoS 1/2 publish or subscribe turns it off (under framingLock, which the loop holds while libmosquitto
//     reads); a session starts with it on again when nothing of this client is in flight.
// Off, the loop reads through libmosquitto only, as before; it is turned off only between packets. A packet that is
// not a QoS 0 PUBLISH and is not whole in the socket (a control packet cut by TCP, or longer than the window) turns
// it off for the rest of the session, since waiting for it would poll a readable socket in a loop. A QoS 0 PUBLISH
// cut at the end of a chunk is this reader's: its first bytes are consumed and kept, the rest read next.

#include "shim_internal.h"

/// Bytes looked at per peek (the socket's receive buffer usually holds less).
#define SHIM_FRAME_WINDOW 65536
/// At most this many peeks per read step, so writes and keep-alive are not held up by a fast stream.
#define SHIM_FRAME_CHUNKS 4

/// Parses an MQTT fixed header: 1 when whole (its length and the packet's total length set), 0 when more bytes are
/// needed, -1 when the remaining length is malformed (more than four bytes).
static int fixedHeader(const uint8_t *bytes, size_t count, size_t *headerLength, size_t *totalLength) {
    size_t remaining = 0;
    for (size_t i = 1; i <= 4; i++) {
        if (i >= count) return 0;
        remaining |= (size_t)(bytes[i] & 0x7F) << (7 * (i - 1));
        if (!(bytes[i] & 0x80)) {
            *headerLength = i + 1;
            *totalLength = i + 1 + remaining;
            return 1;
        }
    }
    return -1;
}

/// A QoS 0 PUBLISH (first byte 0x30, DUP and RETAIN flags allowed, as libmosquitto reads them).
static bool isQos0Publish(uint8_t first) { return (first & 0xF6) == 0x30; }

/// Delivers one whole QoS 0 PUBLISH packet of MQTT 3.1.1 as libmosquitto's handler does (a topic of at least one
/// byte, valid UTF-8 as mosquitto_validate_utf8 checks it); a libmosquitto error code for a malformed packet.
static int deliverPublish(CMosquittoShim_Client *c, const uint8_t *packet, size_t headerLength, size_t totalLength) {
    const uint8_t *body = packet + headerLength;
    size_t length = totalLength - headerLength;
    if (length < 2) return MOSQ_ERR_MALFORMED_PACKET;
    size_t topicLength = ((size_t)body[0] << 8) | body[1];
    if (topicLength == 0) return MOSQ_ERR_PROTOCOL;
    if (topicLength > length - 2) return MOSQ_ERR_MALFORMED_PACKET;
    const char *topic = (const char *)body + 2;
    if (mosquitto_validate_utf8(topic, (int)topicLength) != MOSQ_ERR_SUCCESS) return MOSQ_ERR_MALFORMED_UTF8;
    pushMessage(c, topic, topicLength, body + 2 + topicLength, length - 2 - topicLength, 0, packet[0] & 0x01);
    atomic_fetch_add_explicit(&c->framedMessages, 1, memory_order_relaxed);
    return MOSQ_ERR_SUCCESS;
}

/// Reads up to `count` bytes, retrying on EINTR: the count read, 0 at the end of the stream, -1 with errno.
static ssize_t receive(int sock, void *buffer, size_t count, int flags) {
    ssize_t n;
    do {
        n = recv(sock, buffer, count, flags | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n;
}

/// Consumes `count` bytes the last peek showed (they are in the socket, so one call takes them all).
static int consume(CMosquittoShim_Client *c, int sock, size_t count) {
    while (count > 0) {
        ssize_t n = receive(sock, c->frameWindow, count, 0);
        if (n <= 0) return n == 0 ? MOSQ_ERR_CONN_LOST : MOSQ_ERR_ERRNO;
        count -= (size_t)n;
    }
    return MOSQ_ERR_SUCCESS;
}

/// Lets libmosquitto read the whole packet at the front of the socket (or the end of the stream), exactly that one:
/// under framingLock, while nothing of this client is in flight; otherwise the framed read ends first.
static int mosquittoReadsOne(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->framingLock);
    if (!c->framingAllowed) c->framing = false;  // between packets: libmosquitto reads on its own from here
    int rc = mosquitto_loop_read(c->mosq, 1);
    pthread_mutex_unlock(&c->framingLock);
    c->libmosquittoReadNs = nowNs();
    return rc;
}

/// Whether libmosquitto should read the next whole packet itself, though it is a QoS 0 PUBLISH: libmosquitto's
/// keep-alive counts only the packets it reads (its last_msg_in). Fed one at least every quarter keep-alive, it sends
/// no PINGREQ while a stream flows, as without framing — a PINGREQ whose PINGRESP waits behind a long backlog, or behind
/// a back-pressure hold, would end the session when its keep-alive check runs before that PINGRESP is read.
static bool keepAliveWantsLibmosquittoRead(CMosquittoShim_Client *c) {
    return c->keepAlive > 0 && nowNs() - c->libmosquittoReadNs > (int64_t)c->keepAlive * 250000000LL;
}

/// Makes room for a packet of `size` bytes in `frame`; false when out of memory.
static bool reserveFrame(CMosquittoShim_Client *c, size_t size) {
    if (size <= c->frameCapacity) return true;
    uint8_t *grown = realloc(c->frame, size);
    if (!grown) return false;
    c->frame = grown;
    c->frameCapacity = size;
    return true;
}

/// Reads up to `count` more bytes of the QoS 0 PUBLISH this reader owns; sets `*waiting` when none is there now.
static int readFrameBytes(CMosquittoShim_Client *c, int sock, size_t count, bool *waiting) {
    ssize_t n = receive(sock, c->frame + c->frameHave, count, 0);
    if (n == 0) return MOSQ_ERR_CONN_LOST;
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) return MOSQ_ERR_ERRNO;
        *waiting = true;
        return MOSQ_ERR_SUCCESS;
    }
    c->frameHave += (size_t)n;
    return MOSQ_ERR_SUCCESS;
}

/// Continues the QoS 0 PUBLISH this reader owns (its first `frameHave` bytes consumed): reads what is missing of it
/// and delivers it once whole. Sets `*waiting` when the socket has nothing more now.
static int continueFrame(CMosquittoShim_Client *c, int sock, bool *waiting) {
    size_t header = 0;
    if (c->frameTotal == 0) {
        // The fixed header is cut: read it a byte at a time (rare: a chunk ended within its first five bytes).
        int rc = readFrameBytes(c, sock, 1, waiting);
        if (rc || *waiting) return rc;
        size_t total = 0;
        int parsed = fixedHeader(c->frame, c->frameHave, &header, &total);
        if (parsed < 0) return MOSQ_ERR_MALFORMED_PACKET;
        if (parsed == 0) return MOSQ_ERR_SUCCESS;
        if (!reserveFrame(c, total)) return MOSQ_ERR_NOMEM;
        c->frameTotal = total;
    }
    while (c->frameHave < c->frameTotal) {
        int rc = readFrameBytes(c, sock, c->frameTotal - c->frameHave, waiting);
        if (rc || *waiting) return rc;
    }
    size_t total = 0;
    (void)fixedHeader(c->frame, c->frameHave, &header, &total);
    c->frameHave = 0;
    c->frameTotal = 0;
    int rc = deliverPublish(c, c->frame, header, total);
    if (c->frameCapacity > SHIM_FRAME_WINDOW) {
        // A large message's buffer is not kept.
        free(c->frame);
        c->frame = NULL;
        c->frameCapacity = 0;
    }
    return rc;
}

/// Takes ownership of the QoS 0 PUBLISH whose first `count` bytes (all that is waiting of it) lie at `bytes` of the
/// window; the caller consumes them.
static int startFrame(CMosquittoShim_Client *c, const uint8_t *bytes, size_t count) {
    size_t header = 0;
    size_t total = 0;
    int parsed = fixedHeader(bytes, count, &header, &total);
    if (parsed < 0) return MOSQ_ERR_MALFORMED_PACKET;
    if (!reserveFrame(c, parsed > 0 ? total : 5)) return MOSQ_ERR_NOMEM;  // 5: the longest fixed header
    memcpy(c->frame, bytes, count);
    c->frameHave = count;
    c->frameTotal = parsed > 0 ? total : 0;
    return MOSQ_ERR_SUCCESS;
}

SHIM_HIDDEN int readFramed(CMosquittoShim_Client *c, int sock, bool force) {
    if (!c->frameWindow) {
        c->frameWindow = malloc(SHIM_FRAME_WINDOW);
        if (!c->frameWindow) {
            c->framing = false;  // between packets: libmosquitto reads instead
            return mosquitto_loop_read(c->mosq, 1);
        }
    }
    // Like the libmosquitto burst in loopOnce: stops when back-pressure holds the reads (checked before each packet;
    // `force` reads one packet anyway, as a held read does to see a closed socket), or the socket is empty.
    int chunks = 0;
    for (bool first = true;; first = false) {
        if (!(force && first) && !backPressureAllowsReading(c)) return MOSQ_ERR_SUCCESS;
        if (c->frameHave > 0) {
            bool waiting = false;
            int rc = continueFrame(c, sock, &waiting);
            if (rc || waiting) return rc;
            continue;
        }
        if (!c->framing) return mosquitto_loop_read(c->mosq, 1);
        if (chunks++ == SHIM_FRAME_CHUNKS) return MOSQ_ERR_SUCCESS;
        ssize_t n = receive(sock, c->frameWindow, SHIM_FRAME_WINDOW, MSG_PEEK);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return MOSQ_ERR_SUCCESS;
        // The end of the stream or an error: libmosquitto sees it itself (between packets here) and ends the session.
        if (n <= 0) return mosquittoReadsOne(c);
        size_t available = (size_t)n;
        size_t offset = 0;
        int rc = MOSQ_ERR_SUCCESS;
        bool handOver = false;
        bool handOverCut = false;  // the packet handed over is not whole in the socket yet
        // Once per chunk (a chunk is read in microseconds): libmosquitto's keep-alive clock wants a packet of its own.
        bool feedKeepAlive = keepAliveWantsLibmosquittoRead(c);
        while (offset < available) {
            if (offset > 0 && !backPressureAllowsReading(c)) break;
            const uint8_t *packet = c->frameWindow + offset;
            size_t header = 0;
            size_t total = 0;
            int parsed = fixedHeader(packet, available - offset, &header, &total);
            bool whole = parsed > 0 && total <= available - offset;
            if (!isQos0Publish(packet[0]) || parsed < 0) {
                // Not ours: libmosquitto reads it once it is whole (and reports it malformed itself).
                handOver = true;
                handOverCut = parsed == 0 || (parsed > 0 && !whole);
                break;
            }
            if (!whole) {
                rc = startFrame(c, packet, available - offset);
                if (rc == MOSQ_ERR_SUCCESS) offset = available;
                break;
            }
            if (feedKeepAlive) {
                handOver = true;  // whole: libmosquitto reads exactly this one, and delivers it as any other
                break;
            }
            rc = deliverPublish(c, packet, header, total);
            if (rc) break;
            offset += total;
        }
        if (rc) return rc;
        if (offset > 0) {
            rc = consume(c, sock, offset);
            if (rc) return rc;
        }
        if (handOver) {
            uint8_t first = c->frameWindow[offset];  // still the peeked bytes: consume wrote the same ones
            if (handOverCut) {
                // Cut: waiting for the rest would find the socket readable at every poll. libmosquitto reads from here.
                c->framing = false;
                return mosquitto_loop_read(c->mosq, 1);
            }
            rc = mosquittoReadsOne(c);
            // A QoS 1/2 PUBLISH (unexpected: nothing was subscribed with QoS 1/2) may stay in libmosquitto.
            if ((first & 0xF0) == 0x30 && !isQos0Publish(first)) c->framing = false;
            if (rc || mosquitto_socket(c->mosq) < 0) return rc;
            continue;
        }
        if (c->frameHave > 0) continue;               // the cut PUBLISH: read the rest of it now
        if (available < SHIM_FRAME_WINDOW) return MOSQ_ERR_SUCCESS;  // the socket held no more than that
    }
}

SHIM_HIDDEN void startFraming(CMosquittoShim_Client *c) {
    c->frameHave = 0;
    c->frameTotal = 0;
    c->libmosquittoReadNs = nowNs();  // the CONNACK was just read
    bool eligible = c->plainTCP && !c->protocolV5 && !c->holdAcks && !shimTrickDisabled(CMosquittoShim_TrickFramed);
    pthread_mutex_lock(&c->framingLock);
    bool allowed = false;
    if (eligible && !c->subscribedAboveQos0) {
        // Nothing in flight: every tracked QoS 1/2 publication was acknowledged (so libmosquitto holds none).
        pthread_mutex_lock(&c->ackLock);
        allowed = true;
        for (size_t i = 0; i < sizeof(c->tracked); i++) {
            if (c->tracked[i]) {
                allowed = false;
                break;
            }
        }
        pthread_mutex_unlock(&c->ackLock);
    }
    c->framingAllowed = allowed;
    c->framing = allowed;
    pthread_mutex_unlock(&c->framingLock);
}

SHIM_HIDDEN void stopFraming(CMosquittoShim_Client *c) {
    c->framing = false;
    c->frameHave = 0;
    c->frameTotal = 0;
}

SHIM_HIDDEN void lockFramingOff(CMosquittoShim_Client *c, bool subscription) {
    pthread_mutex_lock(&c->framingLock);
    c->framingAllowed = false;
    if (subscription) c->subscribedAboveQos0 = true;
}
