// The network loop: the client's own thread reads, writes, keeps the connection alive, reconnects with backoff,
// holds reading under back-pressure and calls Swift's dispatch function between its steps. Everything here runs on
// that loop thread except start/stop and the wake-ups, which any thread may call.

#include "shim_internal.h"


// MARK: - Network loop

static bool stopRequested(CMosquittoShim_Client *c) { return atomic_load(&c->control.stopRequested); }

/// One dispatch round on the loop thread, between loop steps: the dispatch function takes what the callbacks queued
/// and runs the work other threads queued for it. Clearing `dispatchWanted` first means a request made during the
/// round is seen by the next loop step (which then does not wait, see loopOnce).
static void runDispatch(CMosquittoShim_Client *c, CMosquittoShim_DispatchFunction dispatch, void *context) {
    atomic_store(&c->wake.dispatchWanted, false);
    if (dispatch) dispatch(context, false);
}

/// Sleeps up to `ms`, returning early when a stop is requested; dispatch rounds asked for meanwhile run at once.
static void backoffSleep(CMosquittoShim_Client *c, int ms, CMosquittoShim_DispatchFunction dispatch, void *context) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    for (;;) {
        atomic_store(&c->wake.backingOff, true);
        bool timedOut = false;
        pthread_mutex_lock(&c->control.controlLock);
        while (!stopRequested(c) && !atomic_load(&c->wake.dispatchWanted)) {
            if (pthread_cond_timedwait(&c->control.controlCond, &c->control.controlLock, &deadline) == ETIMEDOUT) {
                timedOut = true;
                break;
            }
        }
        pthread_mutex_unlock(&c->control.controlLock);
        atomic_store(&c->wake.backingOff, false);
        if (stopRequested(c) || timedOut || !atomic_load(&c->wake.dispatchWanted)) return;
        runDispatch(c, dispatch, context);
    }
}

/// Whether QoS 0 publishes are taken (see `accepting`).
static void setAccepting(CMosquittoShim_Client *c, bool accepting) {
    pthread_mutex_lock(&c->qos0.publishLock);
    c->qos0.accepting = accepting;
    pthread_mutex_unlock(&c->qos0.publishLock);
}

/// Counts the QoS 0 publishes queued but never written as unsent (loop thread; the socket is closed or about to be,
/// so what is still queued will be discarded by libmosquitto's next connect).
static void settleUnsent(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->qos0.publishLock);
    c->qos0.accepting = false;
    uint64_t lost = unwrittenQos0(c);
    if (lost > 0) {
        atomic_fetch_add(&c->qos0.unsent, lost);
        atomic_fetch_add(&c->qos0.qos0Written, lost);
    }
    pthread_mutex_unlock(&c->qos0.publishLock);
    checkDrain(c);
}

/// Messages per millisecond from which the inbound traffic counts as a stream (8 000 messages/s).
#define SHIM_STREAM_MESSAGES_PER_MS 8
/// How long after this client last wrote a packet its ACKs are never paced (see renewQuickAck).
#define SHIM_WRITE_QUIET_NS 10000000
/// While a stream arrives, TCP_QUICKACK is renewed at most this often (see renewQuickAck).
#define SHIM_QUICKACK_STREAM_INTERVAL_NS 1000000

/// Updates `streaming` once per millisecond or more from the messages received since the last update (loop thread).
static void updateRate(CMosquittoShim_Client *c, int64_t now) {
    int64_t window = now - c->loop.rateWindowStartNs;
    if (window < 1000000) return;
    int64_t messages = (int64_t)(c->loop.received - c->loop.rateWindowReceived);
    c->loop.streaming = messages * 1000000 >= SHIM_STREAM_MESSAGES_PER_MS * window;
    c->loop.rateWindowStartNs = now;
    c->loop.rateWindowReceived = c->loop.received;
}

/// Asks the kernel to acknowledge received data at once instead of delaying the ACK (Linux; the flag is not sticky).
/// A broker with Nagle's algorithm on (mosquitto's default) holds a small packet written right after another (the
/// SUBACK after an UNSUBACK, or the second of two events published back to back) until this client acknowledges the
/// first; with a delayed ACK that costs up to ~40 ms.
///
/// Renewed before every loop wait, except while this client only receives a stream: at least
/// SHIM_STREAM_MESSAGES_PER_MS messages in the last millisecond and nothing written for SHIM_WRITE_QUIET_NS (so a
/// request/response exchange is never paced). Then it is renewed at most once per SHIM_QUICKACK_STREAM_INTERVAL_NS
/// and the wait is cut to 1 ms, so a pending delayed ACK still goes out within about a millisecond. Acknowledging
/// every packet of a busy stream makes the broker write each one in its own segment; pacing the ACKs lets it batch
/// them, with fewer wake-ups on both sides. Returns the longest the next wait may block, in ms.
static int renewQuickAck(CMosquittoShim_Client *c, int64_t now, int timeoutMs) {
#ifdef TCP_QUICKACK
    if (!c->settings.quickAck) return timeoutMs;
    int sock = mosquitto_socket(c->mosq);
    if (sock < 0) return timeoutMs;
    // Packets written by publishing threads count too (qos0Queued): a client that writes is never paced.
    uint64_t queued = atomic_load(&c->wake.packetsQueued) + atomic_load(&c->qos0.qos0Queued);
    if (queued != c->loop.quickAckPacketsSeen || c->loop.answerDue) {
        c->loop.wroteSeenNs = now;
        c->loop.quickAckPacketsSeen = queued;
        c->loop.answerDue = false;
    }
    if (c->loop.streaming && now - c->loop.wroteSeenNs >= SHIM_WRITE_QUIET_NS &&
        now - c->loop.quickAckRenewedNs < SHIM_QUICKACK_STREAM_INTERVAL_NS) {
        return 1;
    }
    c->loop.quickAckRenewedNs = now;
    int one = 1;
    (void)setsockopt(sock, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
#else
    (void)c;
    (void)now;
#endif
    return timeoutMs;
}


static bool acknowledgementsHeld(CMosquittoShim_Client *c) { return CMosquittoShim_Client_acknowledgementDue(c) != 0; }

/// Whether back-pressure lets the loop read: the ring is below its capacity and Swift did not pause reading.
static bool backPressureAllowsReading(CMosquittoShim_Client *c) {
    return !atomic_load(&c->queue.readPaused) && atomic_load(&c->queue.queuedMirror) < c->settings.capacity;
}

/// Whether the loop may read from the socket: not while the ring holds its capacity (its consumer is behind) or Swift
/// paused reading (an observer is full). Holding the reads is the back-pressure: the kernel's socket buffer fills, TCP
/// flow control stops the broker, which keeps the rest under its own limits.
static bool readAllowed(CMosquittoShim_Client *c) {
    return backPressureAllowsReading(c) && !acknowledgementsHeld(c) && !atomic_load(&c->intake.intakeClosed);
}

/// Keeps the session alive while reads are held (loop thread); true when it did, so libmosquitto's keep-alive check
/// must be skipped: that check ends a session whose PINGRESP was not read within the keep-alive, and the PINGRESP waits
/// behind the unread messages. Instead a PINGREQ is written through the direct path every half keep-alive, which
/// satisfies the broker; the PINGRESPs are read (and ignored by libmosquitto) when reading resumes. Over TLS there is
/// no direct path: libmosquitto's own check runs, and a hold longer than the keep-alive ends the session, which is
/// reported as a connection loss and reconnects by itself.
static bool keepAliveWhileHeld(CMosquittoShim_Client *c, bool behindUnstarted) {
    if (!atomic_load(&c->direct.directReady) || c->settings.keepAlive <= 0) return false;
    int64_t now = nowNs();
    if (now - c->loop.pausedPingNs < (int64_t)c->settings.keepAlive * 500000000LL) return true;
    pthread_mutex_lock(&c->direct.writeLock);
    // Only between whole packets: nothing of ours or of libmosquitto's is waiting (else retry at the next step). With
    // `behindUnstarted` (durable delivery holding answers), libmosquitto's queue holds only packets not started: the
    // loop read only with that queue empty and has not written since.
    if (c->direct.directFd >= 0 && !c->direct.oursHead && (behindUnstarted || !mosquitto_want_write(c->mosq))) {
        static const uint8_t pingreq[2] = {0xC0, 0x00};
        ssize_t n;
        do {
            n = send(c->direct.directFd, pingreq, sizeof(pingreq), MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n == 1) {
            // Half a packet on the wire: the other byte goes first when the socket is writable again.
            struct OutPacket *rest = malloc(sizeof(struct OutPacket) + 1);
            if (rest) {
                rest->next = NULL;
                rest->publish = false;
                rest->length = 1;
                rest->offset = 0;
                rest->bytes[0] = pingreq[1];
                c->direct.oursHead = c->direct.oursTail = rest;
                atomic_store(&c->direct.oursNonEmpty, true);
            } else {
                shutdown(c->direct.directFd, SHUT_RDWR);  // the stream cannot go on; the client reconnects
            }
        }
        if (n > 0) c->loop.pausedPingNs = now;
    }
    pthread_mutex_unlock(&c->direct.writeLock);
    return true;
}

/// One iteration of the network loop, as `mosquitto_loop` does it (wait for the socket, read, write, keepalive),
/// but woken through our own pipe. libmosquitto wakes its loop by writing one byte to an internal socket pair for
/// every packet another thread queues, and `mosquitto_loop` reads one byte per call: a publisher woke the loop thread
/// (select, read, write) once per message. Here a burst of publications costs one wake-up; the socket pair is never
/// read, and once its buffer is full libmosquitto's one-byte writes fail without effect (it ignores their result;
/// both ends are non-blocking).
static int loopStep(CMosquittoShim_Client *c, int timeoutMs) {
    int sock = mosquitto_socket(c->mosq);
    if (sock < 0) return MOSQ_ERR_NO_CONN;
    // Durable delivery reads only with libmosquitto's queue written out: the answers a read queues then sit in front
    // of nothing partly written, so holding them (and writing our own PINGREQs meanwhile) keeps the stream whole.
    bool reading = readAllowed(c) && !(c->settings.holdAcks && mosquitto_want_write(c->mosq));
    if (reading == atomic_load(&c->intake.readingHeld)) {
        atomic_store(&c->intake.readingHeld, !reading);
        c->loop.pausedPingNs = nowNs();  // a pause starts: its first keep-alive PINGREQ is due half a keep-alive later
    }
    atomic_store(&c->wake.loopPolling, true);
    uint64_t queued = atomic_load(&c->wake.packetsQueued);
    bool others = queued != c->loop.packetsSeen;  // packets queued by other threads since the last write
    c->loop.packetsSeen = queued;
    bool dispatchDue = atomic_load(&c->wake.dispatchWanted);  // see wantDispatch
    // While acknowledgements are held only our own packets (whole, queued ahead of libmosquitto's) may be written.
    bool wantWrite = acknowledgementsHeld(c) ? atomic_load(&c->direct.oursNonEmpty)
                                             : others || mosquitto_want_write(c->mosq) || atomic_load(&c->direct.oursNonEmpty);
    struct pollfd fds[2] = {
        {.fd = sock, .events = (short)((reading ? POLLIN : 0) | (wantWrite ? POLLOUT : 0)), .revents = 0},
        {.fd = c->wake.wakeFd, .events = POLLIN, .revents = 0},
    };
    int count = poll(fds, 2, others || dispatchDue ? 0 : timeoutMs);
    atomic_store(&c->wake.loopPolling, false);
    if (count < 0) return errno == EINTR ? MOSQ_ERR_SUCCESS : MOSQ_ERR_ERRNO;
    bool woken = false;
    if (fds[1].revents & POLLIN) {
        // Read first, then clear: a waker that sets wakePending after the clear writes after this read, so its
        // write is seen by the next poll (clearing first could consume that write and leave wakePending set).
        drainWakeChannel(c);
        atomic_store(&c->wake.wakePending, false);
        woken = true;
    }
    // A held read still reads a closed or failed socket (POLLHUP, POLLERR come without asking), so the loss is seen.
    if ((reading && (fds[0].revents & POLLIN)) || (fds[0].revents & (POLLHUP | POLLERR))) {
        // mosquitto_loop_read reads one packet per call (for QoS 0). While PUBLISH packets keep completing, the next
        // one is read at once instead of after another poll: a stream costs one poll per burst, not per message
        // (and one read that finds nothing at its end). Bounded, so writes and keepalive are not held up, and it
        // stops as soon as back-pressure holds the reads.
        if (c->settings.holdAcks && reading) atomic_store(&c->intake.heldBehindWhole, true);  // read with libmosquitto's queue written out
        for (int i = 0; i < SHIM_READ_BURST; i++) {
            uint64_t before = c->loop.received;
            int rc = mosquitto_loop_read(c->mosq, 1);
            if (rc || mosquitto_socket(c->mosq) < 0) return rc;
            // Nothing complete, not a PUBLISH, or held by back-pressure. (Held acknowledgements do not end the burst:
            // the answers it queues are all unstarted, and are released together.)
            if (c->loop.received == before || !backPressureAllowsReading(c)) break;
        }
    }
    // As mosquitto_loop: write when the socket is writable, or when another thread queued a packet (libmosquitto
    // treats its socket-pair wake-up as "writable").
    bool held = acknowledgementsHeld(c);
    if (!held && ((fds[0].revents & POLLOUT) || others || woken)) {
        int rc = loopWrite(c);
        if (rc || mosquitto_socket(c->mosq) < 0) return rc;
    } else if (held && (fds[0].revents & POLLOUT)) {
        pthread_mutex_lock(&c->direct.writeLock);
        (void)flushOursLocked(c);
        pthread_mutex_unlock(&c->direct.writeLock);
    }
    // A PINGREQ may go behind libmosquitto's held packets only when they are all unstarted: the hold began with a read
    // this session made with libmosquitto's queue written out (not, e.g., one left by the connect phase).
    if (held) return keepAliveWhileHeld(c, atomic_load(&c->intake.heldBehindWhole)) ? MOSQ_ERR_SUCCESS : mosquitto_loop_misc(c->mosq);
    if (atomic_load(&c->intake.readingHeld) && keepAliveWhileHeld(c, false)) return MOSQ_ERR_SUCCESS;
    return mosquitto_loop_misc(c->mosq);
}

/// A loop step counted (see CMosquittoShim_Client_intakeSettled): begun before it decides whether to read.
static int loopOnce(CMosquittoShim_Client *c, int timeoutMs) {
    uint64_t step = atomic_fetch_add(&c->intake.stepsBegun, 1) + 1;
    int rc = loopStep(c, timeoutMs);
    atomic_store(&c->intake.stepsEnded, step);
    return rc;
}

/// How long a stopping client waits for the application to acknowledge the messages whose answers it holds.
#define SHIM_STOP_HOLD_GRACE_MS 250

/// How long a stopping client waits, after its DISCONNECT, for the broker to close the connection.
#define SHIM_STOP_CLOSE_WAIT_MS 1000

/// Ends a stopping session (loop thread). With `whole` (libmosquitto's queue holds nothing partly written), DISCONNECT
/// is written through the direct path, after what waits there and ahead of anything libmosquitto still holds: held
/// answers must not be written (their messages were not handled, so the broker keeps them for the next session). The
/// broker then publishes no will. Then it waits (up to `waitMs`) for the broker to close the connection, discarding
/// what it still sends: a socket closed with unread data resets the connection, and a broker that meets the reset
/// while it writes (a flood) drops the connection before it reads the DISCONNECT, and publishes the will. Without
/// `whole`, with a QoS 0 publication still in libmosquitto's queue (it may be the identity's Deadvertise), or when the
/// DISCONNECT cannot be written, the connection is closed without it: the broker publishes the will instead.
static void endSession(CMosquittoShim_Client *c, bool whole, int waitMs) {
    pthread_mutex_lock(&c->direct.writeLock);
    bool clean = whole && c->direct.directFd >= 0 && flushOursLocked(c) && unwrittenQos0(c) == 0;
    if (clean) {
        static const uint8_t disconnect[2] = {0xE0, 0x00};  // MQTT 3.1.1 DISCONNECT; in MQTT 5: reason 0, normal
        ssize_t n;
        do {
            n = send(c->direct.directFd, disconnect, sizeof(disconnect), MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        clean = n == (ssize_t)sizeof(disconnect);
    }
    int sock = mosquitto_socket(c->mosq);
    if (sock >= 0) shutdown(sock, clean ? SHUT_WR : SHUT_RDWR);
    pthread_mutex_unlock(&c->direct.writeLock);
    if (!clean || sock < 0) return;
    int64_t until = nowMs() + waitMs;
    char discarded[16384];
    for (;;) {
        int64_t left = until - nowMs();
        if (left <= 0) break;
        struct pollfd fd = {.fd = sock, .events = POLLIN, .revents = 0};
        int ready = poll(&fd, 1, (int)left);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) break;
        ssize_t got = recv(sock, discarded, sizeof(discarded), MSG_DONTWAIT);
        if (got == 0) break;  // the broker closed: it read the DISCONNECT
        if (got < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) break;
    }
}

static void *loopMain(void *arg) {
    CMosquittoShim_Client *c = arg;
    int delay = c->settings.reconnectDelayMs;
    c->loop.briefSessions = 0;
    // Each round of attempts starts at the primary (first start) or at the broker a session was lost on, and goes
    // through the brokers in order; only a round that ended without a session backs off.
    atomic_store(&c->loop.currentBroker, 0);
    int roundStart = 0;
    char detail[256];
    // This session's dispatch function: a later start (after this loop set loopRunning to false, below) may set
    // another one while this thread still makes its last calls.
    // Taken, not copied: each setDispatch is used by one loop at most.
    pthread_mutex_lock(&c->control.controlLock);
    CMosquittoShim_DispatchFunction dispatch = c->wake.dispatch;
    void *context = c->wake.dispatchContext;
    c->wake.dispatch = NULL;
    c->wake.dispatchContext = NULL;
    pthread_mutex_unlock(&c->control.controlLock);
    loopClientOfThisThread = c;
    runDispatch(c, dispatch, context);  // what was queued for the dispatcher before the loop started
    while (!stopRequested(c)) {
        c->loop.sessionUp = false;
        atomic_store(&c->intake.heldBehindWhole, false);
        c->loop.refusedThisAttempt = false;
        int savedErrno = 0;
        errno = 0;
        // The log callback captures the cause of a failing attempt (e.g. "certificate verify failed"). It is removed
        // once the session is up: with a callback set, libmosquitto formats a debug line (malloc + vsnprintf) for
        // every packet sent and received.
        mosquitto_log_callback_set(c->mosq, onLog);
        bool logging = true;
        // Under ackLock, which QoS 1/2 publishes, subscribes and unsubscribes hold while they queue a packet:
        // libmosquitto sets the new socket before it queues CONNECT, and a packet queued in between would go out
        // first (the broker closes such a connection: "protocol error"). A packet queued before this call is
        // discarded by it (a QoS 1/2 message stays in libmosquitto's store and is sent after the CONNACK).
        int broker = atomic_load(&c->loop.currentBroker);
        pthread_mutex_lock(&c->acks.ackLock);
        int rc = mosquitto_connect_async(c->mosq, c->settings.hosts[broker], c->settings.ports[broker], c->settings.keepAlive);
        pthread_mutex_unlock(&c->acks.ackLock);
        if (rc == MOSQ_ERR_ERRNO) savedErrno = errno;
        setAccepting(c, rc == MOSQ_ERR_SUCCESS);
        if (rc == MOSQ_ERR_SUCCESS) {
            int64_t start = nowMs();
            for (;;) {
                int64_t now = nowNs();
                updateRate(c, now);
                int timeoutMs = renewQuickAck(c, now, SHIM_LOOP_TIMEOUT_MS);
                errno = 0;
                // libmosquitto's own loop until the session is up: it drives the non-blocking connect and the TLS
                // handshake (which needs a read step when the socket turns writable); ours afterwards. (The first
                // mosquitto_loop calls after a reconnect may each consume one leftover socket-pair byte without
                // waiting: a few hundred cheap iterations at most.)
                if (c->loop.sessionUp && atomic_exchange(&c->queue.resyncNeeded, false)) {
                    rc = MOSQ_ERR_NOMEM;  // an event was lost (see pushEvent): start a new session
                    break;
                }
                rc = c->loop.sessionUp ? loopOnce(c, timeoutMs) : mosquitto_loop(c->mosq, SHIM_CONNECTING_STEP_MS, 1);
                if (rc != MOSQ_ERR_SUCCESS) {
                    if (rc == MOSQ_ERR_ERRNO) savedErrno = errno;
                    break;
                }
                runDispatch(c, dispatch, context);
                if (stopRequested(c)) break;
                if (logging && c->loop.sessionUp) {
                    openDirect(c);
                    mosquitto_log_callback_set(c->mosq, NULL);
                    logging = false;
                    char stale[8];
                    takeLastError(c, stale, sizeof(stale));  // a later loss reports its own cause
                }
                if (!c->loop.sessionUp && !c->loop.refusedThisAttempt && nowMs() - start > c->settings.connectTimeoutMs) {
                    rc = SHIM_TIMEOUT_CODE;
                    break;
                }
            }
        }
        if (stopRequested(c)) break;  // the graceful stop below still writes what is pending

        closeDirect(c);
        settleUnsent(c);
        takeLastError(c, detail, sizeof(detail));
        if (detail[0] == 0) {
            if (savedErrno) {
                snprintf(detail, sizeof(detail), "%s", strerror(savedErrno));
            } else {
                snprintf(detail, sizeof(detail), "%s", CMosquittoShim_errorString(rc));
            }
        }
        if (c->loop.sessionUp) {
            bool brief = nowMs() - c->loop.sessionStartMs < SHIM_BRIEF_SESSION_MS;
            c->loop.briefSessions = brief ? c->loop.briefSessions + 1 : 0;
            pushConnectionLost(c, rc, c->loop.briefSessions, detail);  // the Swift side names the likely cause
            // After a long session reconnect at once; after brief ones keep backing off (doubling below), so two
            // clients with one client id do not take the session from each other as fast as they can connect.
            if (c->loop.briefSessions < 2) delay = c->settings.reconnectDelayMs;
        } else if (!c->loop.refusedThisAttempt) {
            pushEvent(c, CMosquittoShim_EventConnectFailed, rc, 0, detail);
        }
        // Close a half-open attempt (e.g. after a CONNACK timeout) before waiting.
        mosquitto_disconnect(c->mosq);
        runDispatch(c, dispatch, context);
        if (c->loop.sessionUp) {
            // Retry the broker the session was lost on first (after the usual wait), then the others.
            roundStart = broker;
        } else {
            broker = (broker + 1) % c->settings.brokerCount;
            atomic_store(&c->loop.currentBroker, broker);
            if (broker != roundStart) continue;  // the next broker at once; the round is not over
        }
        backoffSleep(c, delay, dispatch, context);
        delay = delay * 2 > c->settings.maxReconnectDelayMs ? c->settings.maxReconnectDelayMs : delay * 2;
    }

    // Graceful stop: nothing more is read (what the broker sends from now on stays with it); every queued packet
    // goes out first, then DISCONNECT, bounded by stopFlushMs. A publish queued behind the DISCONNECT would never be
    // written: refuse them from here on. On plain TCP the DISCONNECT is ours (endSession: it waits for the broker to
    // close, so the broker reads it); over TLS libmosquitto's (it closes the socket once DISCONNECT is written, which
    // ends the loop). Held answers (durable delivery) are written only once the application acknowledged their
    // messages; it has SHIM_STOP_HOLD_GRACE_MS for that, then the session ends without them: the broker keeps those
    // messages for the next session.
    atomic_store(&c->intake.intakeClosed, true);
    setAccepting(c, false);
    if (c->loop.sessionUp) {
        int64_t deadline = nowMs() + c->settings.stopFlushMs;
        int grace = c->settings.stopFlushMs < SHIM_STOP_HOLD_GRACE_MS ? c->settings.stopFlushMs : SHIM_STOP_HOLD_GRACE_MS;
        int64_t holdDeadline = nowMs() + grace;
        bool disconnecting = false;
        while (nowMs() < deadline) {
            int waitMs = (int)(deadline - nowMs()) < SHIM_STOP_CLOSE_WAIT_MS ? (int)(deadline - nowMs())
                                                                             : SHIM_STOP_CLOSE_WAIT_MS;
            bool held = acknowledgementsHeld(c);
            if (!held && atomic_load(&c->direct.directReady)) {
                // Everything is written once libmosquitto's queue and ours are empty: then the DISCONNECT.
                if (!mosquitto_want_write(c->mosq) && !atomic_load(&c->direct.oursNonEmpty)) {
                    endSession(c, true, waitMs);
                    break;
                }
            } else if (!held && !disconnecting) {
                if (mosquitto_disconnect(c->mosq) != MOSQ_ERR_SUCCESS) break;
                disconnecting = true;
            } else if (held && nowMs() >= holdDeadline) {
                endSession(c, atomic_load(&c->intake.heldBehindWhole), waitMs);
                break;
            }
            if (loopOnce(c, disconnecting ? 50 : 5) != MOSQ_ERR_SUCCESS) break;
            runDispatch(c, dispatch, context);
        }
    } else {
        mosquitto_disconnect(c->mosq);
    }
    c->loop.sessionUp = false;
    closeDirect(c);
    settleUnsent(c);

    pthread_mutex_lock(&c->control.controlLock);
    c->control.loopRunning = false;
    pthread_mutex_unlock(&c->control.controlLock);
    pushEvent(c, CMosquittoShim_EventStopped, 0, 0, NULL);
    runDispatch(c, dispatch, context);
    if (dispatch) dispatch(context, true);  // the last call: the context may be released
    loopClientOfThisThread = NULL;
    CMosquittoShim_Client_release(c);
    return NULL;
}

void CMosquittoShim_Client_setDispatch(CMosquittoShim_Client *c, CMosquittoShim_DispatchFunction function,
                                       void *context) {
    pthread_mutex_lock(&c->control.controlLock);
    c->wake.dispatch = function;
    c->wake.dispatchContext = context;
    pthread_mutex_unlock(&c->control.controlLock);
}

int CMosquittoShim_Client_start(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->control.controlLock);
    if (c->control.loopRunning) {
        pthread_mutex_unlock(&c->control.controlLock);
        return MOSQ_ERR_INVAL;
    }
    atomic_store(&c->control.stopRequested, false);
    atomic_store(&c->intake.intakeClosed, false);
    c->control.loopRunning = true;
    atomic_fetch_add(&c->refCount, 1);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&thread, &attr, loopMain, c);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        c->control.loopRunning = false;
        pthread_mutex_unlock(&c->control.controlLock);
        atomic_fetch_sub(&c->refCount, 1);
        errno = err;
        return MOSQ_ERR_ERRNO;
    }
    pthread_setname_np(thread, "coaty-mqtt-net");
    pthread_mutex_unlock(&c->control.controlLock);
    return MOSQ_ERR_SUCCESS;
}

void CMosquittoShim_Client_stop(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->control.controlLock);
    atomic_store(&c->control.stopRequested, true);
    pthread_cond_broadcast(&c->control.controlCond);
    pthread_mutex_unlock(&c->control.controlLock);
    signalLoop(c);  // end the loop's wait now
}
