// The publish path: QoS 0 PUBLISH packets written by the publishing thread itself on a duplicate of the session's
// socket (the direct path), and the operations any thread calls (publish, subscribe, unsubscribe).

#include "shim_internal.h"

// ---- direct QoS 0 writes ----
//
// libmosquitto queues every packet and writes it on the network thread: a QoS 0 publish from another thread costs a
// packet allocation, a wake-up of that thread (a pipe write, a context switch, a poll) and the write there. A
// QoS 0 PUBLISH without retain on a plain TCP session is instead written by the publishing thread itself, with one
// sendmsg() on a duplicate of the session's socket. The order of everything this client sends stays the order of
// the calls:
// - Packets of the direct path that cannot be written at once (the socket buffer is full) wait in `ours`, in order.
//   They are always older than anything libmosquitto has queued: the loop thread writes `ours` first, and a publish
//   goes to `ours` or the socket only while no packet queued in libmosquitto through this client is unwritten
//   (`flushedThrough` equals `packetsQueued`). After a SUBSCRIBE, UNSUBSCRIBE or QoS 1/2 publish, QoS 0 publishes are
//   queued in libmosquitto behind it until the loop thread has written them all.
// - The socket: the duplicate (`directFd`) is opened once the session is up and closed by the loop thread when the
//   session ends, under writeLock, so a direct write never reaches a descriptor number libmosquitto closed and the
//   process reused. Packets still in `ours` then are dropped and counted as unsent, as libmosquitto's queue is.
// - A broken connection is left to the loop thread to notice (its next read); a direct publish that meets it counts
//   as unsent.
// - The packet is the one libmosquitto would write (MQTT 3.1.1, or 5 without properties), after the same checks of
//   the topic (mosquitto_pub_topic_check2, mosquitto_validate_utf8) and of the broker's Maximum Packet Size.

/// Opens the duplicate socket for direct writes once a plain TCP session is up (loop thread). Never over TLS: a
/// direct write would put plaintext into the TLS stream.
SHIM_HIDDEN void openDirect(CMosquittoShim_Client *c) {
    if (!c->settings.plainTCP) return;
    int sock = mosquitto_socket(c->mosq);
    if (sock < 0) return;
    pthread_mutex_lock(&c->direct.writeLock);
    c->direct.directFd = fcntl(sock, F_DUPFD_CLOEXEC, 0);
#ifdef SO_NOSIGPIPE
    if (c->direct.directFd >= 0) {
        int one = 1;
        (void)setsockopt(c->direct.directFd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
    }
#endif
    atomic_store(&c->direct.directReady, c->direct.directFd >= 0);
    pthread_mutex_unlock(&c->direct.writeLock);
}

/// Frees the direct packets waiting to be written (writeLock held, or the client no longer shared).
SHIM_HIDDEN void dropOurs(CMosquittoShim_Client *c) {
    while (c->direct.oursHead) {
        struct OutPacket *next = c->direct.oursHead->next;
        free(c->direct.oursHead);
        c->direct.oursHead = next;
    }
    c->direct.oursTail = NULL;
    atomic_store(&c->direct.oursNonEmpty, false);
}

/// Ends direct writes with the session (loop thread). Packets still waiting in `ours` are dropped; they were counted
/// as queued, not as written, so settleUnsent counts them as unsent.
SHIM_HIDDEN void closeDirect(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->direct.writeLock);
    atomic_store(&c->direct.directReady, false);
    if (c->direct.directFd >= 0) close(c->direct.directFd);
    c->direct.directFd = -1;
    dropOurs(c);
    pthread_mutex_unlock(&c->direct.writeLock);
}

/// Writes the waiting direct packets, oldest first (writeLock held); true when none is left. Wakes a back-pressure
/// waiter when some were written.
SHIM_HIDDEN bool flushOursLocked(CMosquittoShim_Client *c) {
    bool wrote = false;
    while (c->direct.oursHead) {
        // Up to 64 packets per system call.
        struct iovec parts[64];
        int count = 0;
        for (struct OutPacket *packet = c->direct.oursHead; packet && count < 64; packet = packet->next) {
            parts[count].iov_base = packet->bytes + packet->offset;
            parts[count].iov_len = packet->length - packet->offset;
            count++;
        }
        struct msghdr message = {.msg_iov = parts, .msg_iovlen = (size_t)count};
        ssize_t n = sendmsg(c->direct.directFd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        // Full (EAGAIN), or broken: the loop thread's next read ends the session and closeDirect drops the rest.
        if (n <= 0) break;
        size_t left = (size_t)n;
        while (left > 0 && c->direct.oursHead) {
            struct OutPacket *packet = c->direct.oursHead;
            size_t rest = packet->length - packet->offset;
            if (left < rest) {
                packet->offset += left;
                left = 0;
                break;
            }
            left -= rest;
            c->direct.oursHead = packet->next;
            if (!c->direct.oursHead) c->direct.oursTail = NULL;
            if (packet->publish) {
                atomic_fetch_add(&c->qos0.qos0Written, 1);
                wrote = true;
            }
            free(packet);
        }
        if (c->direct.oursHead && c->direct.oursHead->offset > 0) break;  // a partial write: the socket is full
    }
    bool empty = c->direct.oursHead == NULL;
    atomic_store(&c->direct.oursNonEmpty, !empty);
    if (wrote) checkDrain(c);
    return empty;
}

/// The loop thread's write step: the waiting direct packets first, then libmosquitto's queue (as
/// mosquitto_loop_write). Records when every packet queued through this client is written, for publishDirect.
SHIM_HIDDEN int loopWrite(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->direct.writeLock);
    if (!flushOursLocked(c)) {
        pthread_mutex_unlock(&c->direct.writeLock);
        return MOSQ_ERR_SUCCESS;  // the rest waits for POLLOUT; nothing libmosquitto queued may overtake it
    }
    int rc = mosquitto_loop_write(c->mosq, 1);
    // Every packet counted by now was queued before it was counted, so before the check below: when libmosquitto has
    // nothing left to write, all of them are written.
    uint64_t queued = atomic_load(&c->wake.packetsQueued);
    if (rc == MOSQ_ERR_SUCCESS && mosquitto_socket(c->mosq) >= 0 && !mosquitto_want_write(c->mosq)) {
        atomic_store(&c->direct.flushedThrough, queued);
    }
    pthread_mutex_unlock(&c->direct.writeLock);
    checkDrain(c);
    return rc;
}

/// Appends the MQTT variable byte integer `value` to `out`; returns the bytes written.
static size_t putVarInt(uint8_t *out, uint32_t value) {
    size_t n = 0;
    do {
        uint8_t byte = value % 128;
        value /= 128;
        if (value > 0) byte |= 128;
        out[n++] = byte;
    } while (value > 0);
    return n;
}

/// Writes a QoS 0 PUBLISH through the direct path (publishLock held, `accepting`, no retain); returns -1 when the
/// publish must be queued in libmosquitto instead, else a MOSQ_ERR_* code.
static int publishDirect(CMosquittoShim_Client *c, const char *topic, const void *payload, int payloadLength) {
    if (!c->settings.directPublish || !atomic_load(&c->direct.directReady)) return -1;
    if (!topic || payloadLength < 0 || payloadLength > 1024 * 1024) return -1;
    size_t topicLength = strlen(topic);
    if (topicLength == 0 || topicLength > 65535) return -1;  // libmosquitto reports the error
    pthread_mutex_lock(&c->direct.writeLock);
    // Behind a packet queued in libmosquitto (or with the session over): queued there too, in order. That includes
    // packets its loop queues itself (PINGREQ, PUBACK, a QoS 1 publish released from the in-flight window), which
    // `packetsQueued` does not count: a direct packet must never land inside one partly written, and they must not
    // wait behind an ever-growing `ours`. (The loop thread writes only under writeLock, so what mosquitto_want_write
    // reads is not being written now.)
    // While durable delivery holds the answers of a read made with that queue written out, the queue holds only
    // those unstarted answers (and no packet of this client's publishers): a whole packet may go ahead of them, as
    // keepAliveWhileHeld's PINGREQs do, so a publication (the identity's Deadvertise at stop) is not held with them.
    bool behindHeldAnswers =
        CMosquittoShim_Client_acknowledgementDue(c) != 0 && atomic_load(&c->intake.heldBehindWhole);
    if (c->direct.directFd < 0 || atomic_load(&c->direct.flushedThrough) != atomic_load(&c->wake.packetsQueued) ||
        (mosquitto_want_write(c->mosq) && !behindHeldAnswers)) {
        pthread_mutex_unlock(&c->direct.writeLock);
        return -1;
    }
    int rc = mosquitto_pub_topic_check2(topic, topicLength);
    if (rc == MOSQ_ERR_SUCCESS) rc = mosquitto_validate_utf8(topic, (int)topicLength);
    if (rc != MOSQ_ERR_SUCCESS) {
        pthread_mutex_unlock(&c->direct.writeLock);
        return rc;
    }
    uint32_t remaining = (uint32_t)(2 + topicLength + (c->settings.protocolV5 ? 1 : 0) + (size_t)payloadLength);
    uint8_t header[8];
    size_t headerLength = 0;
    header[headerLength++] = 0x30;  // PUBLISH, QoS 0, no DUP, no RETAIN
    headerLength += putVarInt(header + headerLength, remaining);
    uint32_t maxPacketSize = atomic_load(&c->direct.maxPacketSize);
    if (maxPacketSize > 0 && headerLength + remaining > maxPacketSize) {
        pthread_mutex_unlock(&c->direct.writeLock);
        return MOSQ_ERR_OVERSIZE_PACKET;
    }
    header[headerLength++] = (uint8_t)(topicLength >> 8);
    header[headerLength++] = (uint8_t)(topicLength & 0xff);
    uint8_t properties = 0;  // MQTT 5: no properties
    struct iovec parts[4] = {
        {.iov_base = header, .iov_len = headerLength},
        {.iov_base = (void *)topic, .iov_len = topicLength},
        {.iov_base = &properties, .iov_len = c->settings.protocolV5 ? 1 : 0},
        {.iov_base = (void *)payload, .iov_len = (size_t)payloadLength},
    };
    size_t total = headerLength + topicLength + (c->settings.protocolV5 ? 1 : 0) + (size_t)payloadLength;
    ssize_t n = -1;
    errno = EAGAIN;
    // Behind waiting packets (the socket was full), this one waits too: the loop thread writes them all once the
    // socket is writable (trying here would mostly fail again).
    if (!c->direct.oursHead) {
        struct msghdr message = {.msg_iov = parts, .msg_iovlen = 4};
        do {
            n = sendmsg(c->direct.directFd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
    }
    atomic_fetch_add(&c->qos0.qos0Queued, 1);
    atomic_fetch_add(&c->direct.directPublishes, 1);
    bool wake = false;
    if (n == (ssize_t)total) {
        atomic_fetch_add(&c->qos0.qos0Written, 1);
    } else if (n >= 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
        // The rest waits in `ours`; the loop thread writes it once the socket is writable, before anything else.
        size_t written = n > 0 ? (size_t)n : 0;
        struct OutPacket *packet = malloc(sizeof(struct OutPacket) + total);
        if (packet) {
            size_t at = 0;
            for (int i = 0; i < 4; i++) {
                if (parts[i].iov_len) memcpy(packet->bytes + at, parts[i].iov_base, parts[i].iov_len);
                at += parts[i].iov_len;
            }
            packet->next = NULL;
            packet->publish = true;
            packet->length = total;
            packet->offset = written;
            if (c->direct.oursTail) {
                c->direct.oursTail->next = packet;
            } else {
                c->direct.oursHead = packet;
            }
            c->direct.oursTail = packet;
            // The loop's poll asks for POLLOUT while `ours` is not empty: a wake-up is needed only to start that.
            wake = !atomic_exchange(&c->direct.oursNonEmpty, true);
        } else if (written > 0) {
            // Part of a packet on the wire and no memory for the rest: the stream cannot go on. Ending the connection
            // makes the client reconnect; the packet counts as unsent when the session is settled.
            shutdown(c->direct.directFd, SHUT_RDWR);
        } else {
            atomic_fetch_add(&c->qos0.unsent, 1);
            atomic_fetch_add(&c->qos0.qos0Written, 1);
        }
    } else {
        // The connection is broken: the loop thread's next read ends the session. Lost like a queued publish.
        atomic_fetch_add(&c->qos0.unsent, 1);
        atomic_fetch_add(&c->qos0.qos0Written, 1);
    }
    pthread_mutex_unlock(&c->direct.writeLock);
    if (wake) wakeLoopIfPolling(c);  // the loop sees `oursNonEmpty` or is woken (see wakeLoopIfPolling)
    return MOSQ_ERR_SUCCESS;
}

/// Durable delivery: whether answers to QoS > 0 messages the application has not handled yet are queued in
/// libmosquitto. Then the loop neither writes (the answers would go out) nor reads (their answers would join them).
// MARK: - Operations (any thread)

/// A publication through libmosquitto (or, for a plain QoS 0 one without properties, the direct path).
static int publishMessage(CMosquittoShim_Client *c, int *mid, const char *topic, const void *payload,
                          int payloadLength, int qos, bool retain, const mosquitto_property *props) {
    if (qos == 0) {
        pthread_mutex_lock(&c->qos0.publishLock);
        if (!c->qos0.accepting) {
            pthread_mutex_unlock(&c->qos0.publishLock);
            return MOSQ_ERR_NO_CONN;
        }
        if (!retain && !props) {
            int rc = publishDirect(c, topic, payload, payloadLength);
            if (rc >= 0) {
                pthread_mutex_unlock(&c->qos0.publishLock);
                if (mid) *mid = 0;
                return rc;
            }
        }
        int rc = mosquitto_publish_v5(c->mosq, mid, topic, payloadLength, payload, 0, retain, props);
        if (rc == MOSQ_ERR_SUCCESS) atomic_fetch_add(&c->qos0.qos0Queued, 1);
        pthread_mutex_unlock(&c->qos0.publishLock);
        if (rc == MOSQ_ERR_SUCCESS) wakeLoop(c);
        return rc;
    }
    int localMid = 0;
    // Holding ackLock while publishing means the acknowledgement callback cannot run before the mid is tracked.
    pthread_mutex_lock(&c->acks.ackLock);
    int rc = mosquitto_publish_v5(c->mosq, &localMid, topic, payloadLength, payload, qos, retain, props);
    if (rc == MOSQ_ERR_SUCCESS) setMidBit(c->acks.tracked, localMid, true);
    pthread_mutex_unlock(&c->acks.ackLock);
    if (rc == MOSQ_ERR_SUCCESS) wakeLoop(c);
    if (mid) *mid = localMid;
    return rc;
}

int CMosquittoShim_Client_publish(CMosquittoShim_Client *c, int *mid, const char *topic, const void *payload,
                                  int payloadLength, int qos, bool retain) {
    return publishMessage(c, mid, topic, payload, payloadLength, qos, retain, NULL);
}

int CMosquittoShim_Client_publishWithUserProperties(CMosquittoShim_Client *c, int *mid, const char *topic,
                                                   const void *payload, int payloadLength, int qos, bool retain,
                                                   const char *const *names, const char *const *values, int count) {
    if (!c->settings.protocolV5) return MOSQ_ERR_NOT_SUPPORTED;
    mosquitto_property *props = NULL;
    for (int i = 0; i < count; i++) {
        int rc = mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, names[i], values[i]);
        if (rc != MOSQ_ERR_SUCCESS) {
            mosquitto_property_free_all(&props);
            return rc;
        }
    }
    int rc = publishMessage(c, mid, topic, payload, payloadLength, qos, retain, props);
    mosquitto_property_free_all(&props);
    return rc;
}

int CMosquittoShim_Client_subscribe(CMosquittoShim_Client *c, int *mid, const char *const *filters, int count,
                                    int qos) {
    int localMid = 0;
    pthread_mutex_lock(&c->acks.ackLock);  // not between the new socket and its CONNECT (see loopMain)
    int rc = mosquitto_subscribe_multiple(c->mosq, &localMid, count, (char *const *const)filters, qos, 0, NULL);
    pthread_mutex_unlock(&c->acks.ackLock);
    if (rc == MOSQ_ERR_SUCCESS) wakeLoop(c);
    if (mid) *mid = localMid;
    return rc;
}

int CMosquittoShim_Client_unsubscribe(CMosquittoShim_Client *c, int *mid, const char *filter) {
    int localMid = 0;
    pthread_mutex_lock(&c->acks.ackLock);  // not between the new socket and its CONNECT (see loopMain)
    int rc = mosquitto_unsubscribe(c->mosq, &localMid, filter);
    pthread_mutex_unlock(&c->acks.ackLock);
    if (rc == MOSQ_ERR_SUCCESS) wakeLoop(c);
    if (mid) *mid = localMid;
    return rc;
}
