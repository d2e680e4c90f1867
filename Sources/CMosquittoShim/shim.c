// The CoatyMQTT C shim: owns the libmosquitto callbacks and a network-loop thread. The callbacks (C only) copy
// messages into a ring and events into a list, neither ever dropped. The ring is bounded by back-pressure: the loop
// reads no more from the socket while the ring holds its capacity or Swift paused reading (see readAllowed), so TCP
// flow control holds the rest in the kernel and the broker; a read step already under way may overshoot the capacity
// by the packets it completes (the ring grows for them);
// the loop thread calls the Swift dispatch function between its steps (outside every libmosquitto callback and
// lock), which takes them from there (see CMosquittoShim_Client_setDispatch).

#define _GNU_SOURCE
#include "CMosquittoShim.h"

#include <errno.h>
#include <fcntl.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <time.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/uio.h>

// Linux-only speed-ups (an eventfd to wake the loop, a seccomp filter that spares libmosquitto's wake-up socket
// pair) behind SHIM_LINUX; elsewhere, or built with -DCOATY_SHIM_PORTABLE (CI builds and tests that fallback on
// Linux), the loop is woken through a pipe and the handle keeps its pair. Same behaviour, a few system calls more.
#if defined(__linux__) && !defined(COATY_SHIM_PORTABLE)
#define SHIM_LINUX 1
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#endif

// Writes on the dup'd socket must not raise SIGPIPE: MSG_NOSIGNAL per call where it exists, SO_NOSIGPIPE on the
// socket elsewhere (see directFd).
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

#define SHIM_TIMEOUT_CODE (-1000)
#define SHIM_LOOP_TIMEOUT_MS 100
/// At most this many packets are read after one poll (see loopOnce).
#define SHIM_READ_BURST 64
/// A session the broker ends within this long of its CONNACK is brief; brief sessions in a row mean another client
/// with the same client id most of the time (each connect takes the session from the other one).
#define SHIM_BRIEF_SESSION_MS 2000
/// The wait of one mosquitto_loop step until CONNACK: it cannot watch the wake-up eventfd, so short steps bound how
/// long a stop waits for a pending connect (100 wake-ups per second, only until the session is up).
#define SHIM_CONNECTING_STEP_MS 10

/// A QoS 0 PUBLISH packet of the direct path waiting to be written (see publishDirect).
struct OutPacket {
    struct OutPacket *next;
    bool publish;   // a QoS 0 PUBLISH, counted in qos0Queued/qos0Written (else the rest of a keep-alive PINGREQ)
    size_t length;
    size_t offset;  // bytes already written
    uint8_t bytes[];
};

struct CMosquittoShim_Client {
    struct mosquitto *mosq;
    atomic_int refCount;

    // Settings (immutable after create). Broker 0 is the primary, the others its fallbacks, tried in order.
    char **hosts;
    int *ports;
    int brokerCount;
    // The broker of the current (or next) attempt: written by the loop thread only, read by pushEvent on any thread.
    atomic_int currentBroker;
    int keepAlive;
    int connectTimeoutMs;
    int reconnectDelayMs;
    int maxReconnectDelayMs;
    // Loop thread only: when the current session's CONNACK came, and how many sessions in a row were brief.
    int64_t sessionStartMs;
    int briefSessions;
    int stopFlushMs;
    bool quickAck;
    bool withoutWakePair;  // libmosquitto was created without its wake-up socket pair (see newMosquitto)
    bool protocolV5;
    bool plainTCP;  // no TLS: QoS 0 PUBLISH packets may be written directly (see publishDirect)

    // Direct QoS 0 writes (see publishDirect), guarded by writeLock, which the loop thread also holds while it writes.
    pthread_mutex_t writeLock;
    int directFd;                        // a duplicate of the session's socket; -1 outside a session
    struct OutPacket *oursHead;          // direct packets not (fully) written yet, oldest first
    struct OutPacket *oursTail;
    atomic_bool directReady;             // directFd is open (set and cleared under writeLock)
    atomic_bool oursNonEmpty;            // oursHead != NULL, for the loop's poll
    atomic_uint_fast64_t flushedThrough; // every packet counted in packetsQueued up to this was written
    atomic_uint_fast32_t maxPacketSize;  // the broker's Maximum Packet Size (MQTT 5 CONNACK); 0: none
    // TCP_QUICKACK pacing (loop thread only; see renewQuickAck).
    int64_t quickAckRenewedNs;
    int64_t rateWindowStartNs;
    uint64_t received;        // PUBLISH packets received
    uint64_t rateWindowReceived;
    bool streaming;           // the last rate window saw at least SHIM_STREAM_MESSAGES_PER_MS messages
    int64_t wroteSeenNs;      // when the loop last saw this client write (a packet queued, or a QoS > 0 answer due)
    uint64_t quickAckPacketsSeen;  // `packetsQueued` when wroteSeenNs was last updated
    bool answerDue;           // a QoS > 0 message arrived, which libmosquitto answers (PUBACK / PUBREC)

    // The network loop's own wait (see loopOnce): other threads that queue a packet count it in `packetsQueued` and,
    // while the loop thread polls, wake it through `wakeFd` (at most one write per wait): an eventfd on Linux, where
    // `wakeWriteFd` is the same descriptor; elsewhere the read end of a pipe whose write end is `wakeWriteFd`.
    int wakeFd;
    int wakeWriteFd;
    atomic_uint_fast64_t packetsQueued;
    uint64_t packetsSeen;     // loop thread only
    atomic_bool loopPolling;
    atomic_bool wakePending;

    // The dispatch function the loop thread calls between its steps (set before start, under controlLock; the loop
    // copies it when it starts), and whether another thread asked for a dispatch round (see wantDispatch).
    CMosquittoShim_DispatchFunction dispatch;
    void *dispatchContext;
    atomic_bool dispatchWanted;
    atomic_bool backingOff;  // the loop thread sleeps in backoffSleep (wantDispatch then signals controlCond)

    // Queue state, guarded by queueLock.
    pthread_mutex_t queueLock;
    CMosquittoShim_Message **ring;
    size_t capacity;       // the soft limit: reading pauses at it (see readAllowed)
    size_t allocated;      // slots in `ring` (>= capacity; grows for a read step's overshoot)
    size_t head;
    size_t count;
    atomic_size_t queuedMirror;  // `count`, for the loop's read decision without queueLock
    atomic_bool readPaused;      // Swift asked the loop to stop reading (CMosquittoShim_Client_setReadPaused)
    // Durable delivery (see CMosquittoShim_Client_acknowledgeThrough): the ring number of the last QoS > 0 message
    // (written by onMessage on the loop thread), and the number through which the application handled every message.
    bool holdAcks;
    atomic_uint_fast64_t lastAnsweredMessage;
    atomic_uint_fast64_t acknowledgedThrough;
    bool heldBehindWhole;  // loop thread: this session's held answers followed a read with nothing else queued
    int64_t pausedPingNs;        // loop thread: when the last keep-alive PINGREQ of a pause was written
    atomic_bool readingHeld;     // the loop's last step did not read because of back-pressure (written by the loop)
    bool armed;          // a consumer waits for the next message
    bool consumerBlocked; // a consumer thread waits on consumerCond (briefly, see takeMessagesWaiting)
    pthread_cond_t consumerCond;
    bool wakeMessages;   // for the dispatcher: a waiting consumer can be served
    bool dispatcherClosed;
    CMosquittoShim_Event *eventHead;
    CMosquittoShim_Event *eventTail;
    uint64_t pushedMessages; // messages ever put into the ring (stamps events, see CMosquittoShim_Client_popDueEvent)
    uint64_t takenMessages;  // messages ever taken from the ring
    atomic_uint_fast64_t dropped;
    // Events lost because their allocation failed (see pushEvent), and whether the loop must end the session for it.
    atomic_uint_fast64_t eventsLost;
    atomic_bool resyncNeeded;
    // Tests only (CMosquittoShim_Client_failEventAllocations): event allocations to fail on purpose.
    atomic_int failEventAllocations;

    // Loop control, guarded by controlLock.
    pthread_mutex_t controlLock;
    pthread_cond_t controlCond;
    bool loopRunning;
    atomic_bool stopRequested;

    // Loop-thread-only state (written in callbacks, which run on the loop thread).
    bool sessionUp;
    bool refusedThisAttempt;

    // Tracked QoS 1/2 publish message ids, guarded by ackLock. ackLock also keeps QoS 1/2 publishes, subscribes and
    // unsubscribes out of mosquitto_connect_async (see loopMain).
    pthread_mutex_t ackLock;
    uint8_t tracked[65536 / 8];

    // QoS 0 accounting: publishes queued in libmosquitto (guarded by publishLock, so a settle never sees a publish
    // half done) versus PUBLISH packets written to the socket (on_publish, loop thread). What is queued but never
    // written when a connection ends (or the graceful stop's flush deadline passes) is counted in `unsent`.
    // `qos0Queued` changes only under publishLock; it is atomic so the loop thread can read it without the lock.
    pthread_mutex_t publishLock;
    atomic_uint_fast64_t qos0Queued;
    // QoS 0 publishes are taken from a connect until the settle that ends it (guarded by publishLock). Defensive:
    // a publish taken in between would be discarded by libmosquitto's next connect without ever being counted
    // (libmosquitto 2.0.11 itself refuses them after a timed-out attempt, but that is not part of its API).
    bool accepting;
    atomic_uint_fast64_t qos0Written;
    atomic_uint_fast64_t unsent;
    // A back-pressure waiter's target plus one (0: none); see CMosquittoShim_Client_armDrain and checkDrain.
    atomic_uint_fast64_t drainTargetPlusOne;
    atomic_bool drained;  // set with each drain event, taken by the dispatcher

    // The last error/warning line libmosquitto logged, guarded by errorLock.
    pthread_mutex_t errorLock;
    char lastError[256];
};

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

// MARK: - Helpers

static int64_t nowMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t nowNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static char *copyString(const char *s) { return s ? strdup(s) : NULL; }

/// Opens the loop's wake-up channel (see wakeFd); both descriptors stay -1 when that fails.
static void openWakeChannel(CMosquittoShim_Client *c) {
#ifdef SHIM_LINUX
    c->wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    c->wakeWriteFd = c->wakeFd;
#else
    int ends[2];
    c->wakeFd = -1;
    c->wakeWriteFd = -1;
    if (pipe(ends) != 0) return;
    for (int i = 0; i < 2; i++) {
        (void)fcntl(ends[i], F_SETFL, fcntl(ends[i], F_GETFL) | O_NONBLOCK);
        (void)fcntl(ends[i], F_SETFD, FD_CLOEXEC);
    }
    c->wakeFd = ends[0];
    c->wakeWriteFd = ends[1];
#endif
}

static void wantDispatch(CMosquittoShim_Client *c);
static void wakeLoopIfPolling(CMosquittoShim_Client *c);

/// The client whose network loop runs on this thread, if any (see CMosquittoShim_Client_takeMessagesWaiting).
static _Thread_local CMosquittoShim_Client *loopClientOfThisThread;

/// Queues an event for the dispatcher and asks for a dispatch round (on the loop thread during a step, the round after
/// the step takes it anyway; elsewhere, or during a round, the request makes the next loop step not wait).
static void pushEvent(CMosquittoShim_Client *c, int kind, int code, int mid, const char *detail) {
    CMosquittoShim_Event *event = NULL;
    if (atomic_load(&c->failEventAllocations) > 0) {
        atomic_fetch_sub(&c->failEventAllocations, 1);
    } else {
        event = calloc(1, sizeof(CMosquittoShim_Event));
    }
    if (!event) {
        // Out of memory: the event is lost. Never silently: it is counted (the dispatch round logs it), and the loop
        // ends the session, so the client reconnects and re-synchronizes what the event would have told (an
        // acknowledgement, a subscription) instead of waiting for it forever.
        atomic_fetch_add(&c->eventsLost, 1);
        atomic_store(&c->resyncNeeded, true);
        wantDispatch(c);
        return;
    }
    event->kind = kind;
    event->code = code;
    event->mid = mid;
    event->broker = atomic_load(&c->currentBroker);
    if (detail) snprintf(event->detail, sizeof(event->detail), "%s", detail);
    pthread_mutex_lock(&c->queueLock);
    event->afterMessages = c->pushedMessages;
    if (c->eventTail) {
        c->eventTail->next = event;
    } else {
        c->eventHead = event;
    }
    c->eventTail = event;
    pthread_mutex_unlock(&c->queueLock);
    wantDispatch(c);
}

/// Sets or clears `mid` in a message-id bitset (`tracked`); the caller holds ackLock.
static void setMidBit(uint8_t *bits, int mid, bool on) {
    if (mid < 0 || mid > 65535) return;
    if (on) {
        bits[mid >> 3] |= (uint8_t)(1u << (mid & 7));
    } else {
        bits[mid >> 3] &= (uint8_t)~(1u << (mid & 7));
    }
}

/// Whether `mid` is set in a message-id bitset; clears it (under ackLock).
static bool takeMidBit(CMosquittoShim_Client *c, uint8_t *bits, int mid) {
    if (mid < 0 || mid > 65535) return false;
    pthread_mutex_lock(&c->ackLock);
    bool set = (bits[mid >> 3] >> (mid & 7)) & 1;
    setMidBit(bits, mid, false);
    pthread_mutex_unlock(&c->ackLock);
    return set;
}

static void takeLastError(CMosquittoShim_Client *c, char *out, size_t size) {
    pthread_mutex_lock(&c->errorLock);
    snprintf(out, size, "%s", c->lastError);
    c->lastError[0] = 0;
    pthread_mutex_unlock(&c->errorLock);
}

// MARK: - Callbacks (run on the loop thread under libmosquitto's callback mutex; never set callbacks here)

static void onConnect(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props) {
    (void)mosq; (void)flags;
    CMosquittoShim_Client *c = obj;
    if (rc == 0) {
        // What libmosquitto enforces on publish from the CONNACK, the direct writes enforce too (see publishDirect).
        uint32_t maxPacketSize = 0;
        if (props) (void)mosquitto_property_read_int32(props, MQTT_PROP_MAXIMUM_PACKET_SIZE, &maxPacketSize, false);
        atomic_store(&c->maxPacketSize, maxPacketSize);
        c->sessionUp = true;
        c->sessionStartMs = nowMs();
        pushEvent(c, CMosquittoShim_EventConnected, 0, 0, NULL);
    } else {
        c->refusedThisAttempt = true;
        pushEvent(c, CMosquittoShim_EventConnectionRefused, rc, 0, NULL);
    }
}

/// Doubles the ring (queueLock held), keeping the queued messages in order; false when out of memory. Only a read step
/// that completes several packets after the ring reached its capacity gets here (see readAllowed).
static bool growRingLocked(CMosquittoShim_Client *c) {
    size_t grown = c->allocated * 2;
    CMosquittoShim_Message **ring = calloc(grown, sizeof(CMosquittoShim_Message *));
    if (!ring) return false;
    for (size_t i = 0; i < c->count; i++) ring[i] = c->ring[(c->head + i) % c->allocated];
    free(c->ring);
    c->ring = ring;
    c->allocated = grown;
    c->head = 0;
    return true;
}

static void onMessage(struct mosquitto *mosq, void *obj, const struct mosquitto_message *msg,
                      const mosquitto_property *props) {
    (void)mosq; (void)props;
    CMosquittoShim_Client *c = obj;
    c->received++;
    if (msg->qos > 0) c->answerDue = true;
    // Durable delivery: the message's number in the ring (pushedMessages changes only on this thread), stored before
    // the allocation that can fail, so a message lost here (no memory) is not acknowledged either: holding through its
    // number holds its answer until the application acknowledges what came before.
    if (msg->qos > 0) atomic_store(&c->lastAnsweredMessage, c->pushedMessages + 1);
    size_t topicLength = msg->topic ? strlen(msg->topic) : 0;
    size_t payloadLength = msg->payloadlen > 0 ? (size_t)msg->payloadlen : 0;
    CMosquittoShim_Message *m = malloc(sizeof(CMosquittoShim_Message) + topicLength + 1 + payloadLength);
    if (!m) {
        atomic_fetch_add(&c->dropped, 1);
        return;
    }
    m->topicLength = (uint32_t)topicLength;
    m->payloadLength = (uint32_t)payloadLength;
    m->qos = msg->qos;
    m->retain = msg->retain ? 1 : 0;
    uint8_t *bytes = (uint8_t *)(m + 1);
    if (topicLength) memcpy(bytes, msg->topic, topicLength);
    bytes[topicLength] = 0;
    if (payloadLength) memcpy(bytes + topicLength + 1, msg->payload, payloadLength);

    pthread_mutex_lock(&c->queueLock);
    if (c->count == c->allocated && !growRingLocked(c)) {
        atomic_fetch_add(&c->dropped, 1);  // out of memory only; reported by the dispatch round after this step
        pthread_mutex_unlock(&c->queueLock);
        free(m);
        return;
    }
    c->ring[(c->head + c->count) % c->allocated] = m;
    c->count += 1;
    atomic_store(&c->queuedMirror, c->count);
    c->pushedMessages += 1;
    bool wakeConsumer = c->consumerBlocked;
    if (c->armed) {
        c->armed = false;
        c->wakeMessages = true;
    }
    pthread_mutex_unlock(&c->queueLock);
    // Signalled after unlocking (the predicate is set under the lock), so the woken thread does not block at once on
    // the lock this thread still holds: one futex wake per message instead of three. A waiting consumer that is not
    // blocked is served by the dispatch round after this loop step.
    if (wakeConsumer) pthread_cond_signal(&c->consumerCond);
}

/// QoS 0 publishes queued but not written yet. Without publishLock the count can be low by the publishes in flight at
/// this instant (each is queued before it is counted in qos0Queued, and may be written in between).
static uint64_t unwrittenQos0(CMosquittoShim_Client *c) {
    uint64_t written = atomic_load(&c->qos0Written);
    uint64_t queued = atomic_load(&c->qos0Queued);
    return queued > written ? queued - written : 0;
}

/// Fires the armed drain event once the unwritten QoS 0 publications are at most the target (loop thread); read
/// without publishLock, the count may be low, and the waiter re-checks under the lock.
static void checkDrain(CMosquittoShim_Client *c) {
    uint_fast64_t armed = atomic_load(&c->drainTargetPlusOne);
    if (armed == 0) return;
    if (unwrittenQos0(c) > armed - 1) return;
    if (atomic_compare_exchange_strong(&c->drainTargetPlusOne, &armed, 0)) {
        atomic_store(&c->drained, true);  // for a dispatch round busy with messages (CMosquittoShim_Client_takeDrained)
        pushEvent(c, CMosquittoShim_EventDrained, 0, 0, NULL);
    }
}

static void onPublish(struct mosquitto *mosq, void *obj, int mid, int reasonCode, const mosquitto_property *props) {
    (void)mosq; (void)props;
    CMosquittoShim_Client *c = obj;
    if (mid < 0 || mid > 65535) return;
    if (takeMidBit(c, c->tracked, mid)) {
        pushEvent(c, CMosquittoShim_EventPublished, reasonCode, mid, NULL);
    } else {
        // libmosquitto calls on_publish for a QoS 0 message once its PUBLISH packet is written.
        atomic_fetch_add(&c->qos0Written, 1);
        checkDrain(c);
    }
}

static void onSubscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted,
                        const mosquitto_property *props) {
    (void)mosq; (void)props;
    CMosquittoShim_Client *c = obj;
    int firstRefused = -1;
    for (int i = 0; i < count; i++) {
        if (granted[i] >= 0x80) {
            firstRefused = i;
            break;
        }
    }
    pushEvent(c, CMosquittoShim_EventSubscribed, firstRefused, mid, NULL);
}

static void onUnsubscribe(struct mosquitto *mosq, void *obj, int mid, const mosquitto_property *props) {
    (void)mosq; (void)props;
    CMosquittoShim_Client *c = obj;
    pushEvent(c, CMosquittoShim_EventUnsubscribed, 0, mid, NULL);
}

static void onLog(struct mosquitto *mosq, void *obj, int level, const char *line) {
    (void)mosq;
    if (!(level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING)) || !line) return;
    CMosquittoShim_Client *c = obj;
    pthread_mutex_lock(&c->errorLock);
    // Keep the first error of an attempt: it names the cause (e.g. "certificate verify failed").
    if (c->lastError[0] == 0) snprintf(c->lastError, sizeof(c->lastError), "%s", line);
    pthread_mutex_unlock(&c->errorLock);
}

// MARK: - Lifecycle

void CMosquittoShim_Message_free(CMosquittoShim_Message *message) { free(message); }

void CMosquittoShim_Event_free(CMosquittoShim_Event *event) { free(event); }

/// Frees the direct packets waiting to be written (writeLock held, or the client no longer shared).
static void dropOurs(CMosquittoShim_Client *c) {
    while (c->oursHead) {
        struct OutPacket *next = c->oursHead->next;
        free(c->oursHead);
        c->oursHead = next;
    }
    c->oursTail = NULL;
    atomic_store(&c->oursNonEmpty, false);
}

static void destroyClient(CMosquittoShim_Client *c) {
    if (c->mosq) mosquitto_destroy(c->mosq);
    CMosquittoShim_Client_discardMessages(c);
    CMosquittoShim_Event *event = c->eventHead;
    while (event) {
        CMosquittoShim_Event *next = event->next;
        free(event);
        event = next;
    }
    pthread_mutex_destroy(&c->queueLock);
    pthread_mutex_destroy(&c->controlLock);
    pthread_cond_destroy(&c->controlCond);
    pthread_cond_destroy(&c->consumerCond);
    pthread_mutex_destroy(&c->ackLock);
    pthread_mutex_destroy(&c->errorLock);
    pthread_mutex_destroy(&c->publishLock);
    pthread_mutex_destroy(&c->writeLock);
    if (c->directFd >= 0) close(c->directFd);
    dropOurs(c);
    if (c->wakeWriteFd >= 0 && c->wakeWriteFd != c->wakeFd) close(c->wakeWriteFd);
    if (c->wakeFd >= 0) close(c->wakeFd);
    free(c->ring);
    if (c->hosts) {
        for (int i = 0; i < c->brokerCount; i++) free(c->hosts[i]);
        free(c->hosts);
    }
    free(c->ports);
    free(c);
}

static int failCreate(CMosquittoShim_Client *c, int rc, const char *what, int *errorCode, char *errorText,
                      size_t errorTextSize) {
    if (errorCode) *errorCode = rc;
    if (errorText && errorTextSize) {
        snprintf(errorText, errorTextSize, "%s: %s", what, CMosquittoShim_errorString(rc));
    }
    destroyClient(c);
    return rc;
}
// ---- creating the libmosquitto handle without its wake-up socket pair ----
//
// mosquitto_new opens a socket pair through which other threads wake libmosquitto's own loop: every packet queued
// from another thread (each publish) writes one byte to it, one write() system call per publish. Our loop never
// waits on that pair (it has its own eventfd, see loopOnce), so those writes are pure cost: about 1.4 µs each, a
// sixth of a publisher's CPU in the agent benchmark. libmosquitto works without the pair when socketpair() fails
// (it logs a warning and skips the writes), so the handle is created on a short-lived thread that a seccomp filter
// denies socketpair() alone. The filter applies to that one thread only (no TSYNC) and ends with it; where seccomp
// is unavailable, the handle is created as usual, with the pair.

#if defined(SHIM_LINUX) && defined(__x86_64__)
#define SHIM_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(SHIM_LINUX) && defined(__aarch64__)
#define SHIM_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

struct NewMosquittoCall {
    const char *clientId;
    bool cleanSession;
    void *userData;
    struct mosquitto *result;
    int savedErrno;
    bool withoutPair;
};

/// Denies socketpair() (EMFILE) to the calling thread; false where seccomp cannot be used.
static bool denySocketPairToThisThread(void) {
#if defined(SHIM_LINUX) && defined(SHIM_AUDIT_ARCH) && defined(__NR_socketpair) && defined(SECCOMP_SET_MODE_FILTER)
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SHIM_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socketpair, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EMFILE & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = (unsigned short)(sizeof(filter) / sizeof(filter[0])), .filter = filter};
    // Required for an unprivileged filter; like the filter, it stays with this thread.
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) == 0;
#else
    return false;
#endif
}

static void *newMosquittoThread(void *arg) {
    struct NewMosquittoCall *call = arg;
    call->withoutPair = denySocketPairToThisThread();
    if (call->withoutPair) {
        call->result = mosquitto_new(call->clientId, call->cleanSession, call->userData);
        call->savedErrno = errno;
    }
    return NULL;
}

/// mosquitto_new, without the wake-up socket pair where possible (see above); `withoutPair` tells which.
static struct mosquitto *newMosquitto(const char *clientId, bool cleanSession, void *userData, bool *withoutPair) {
    struct NewMosquittoCall call = {.clientId = clientId, .cleanSession = cleanSession, .userData = userData};
    pthread_t thread;
    *withoutPair = false;
    if (pthread_create(&thread, NULL, newMosquittoThread, &call) == 0) {
        pthread_join(thread, NULL);
        if (call.withoutPair) {
            *withoutPair = call.result != NULL;
            errno = call.savedErrno;
            return call.result;
        }
    }
    return mosquitto_new(clientId, cleanSession, userData);
}


CMosquittoShim_Client *CMosquittoShim_Client_create(const CMosquittoShim_Options *o, int *errorCode,
                                                    char *errorText, size_t errorTextSize) {
    CMosquittoShim_libraryInit();
    CMosquittoShim_Client *c = calloc(1, sizeof(CMosquittoShim_Client));
    if (!c) {
        if (errorCode) *errorCode = MOSQ_ERR_NOMEM;
        return NULL;
    }
    atomic_init(&c->refCount, 1);
    atomic_init(&c->dropped, 0);
    atomic_init(&c->stopRequested, false);
    pthread_mutex_init(&c->queueLock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->controlCond, &attr);
    pthread_cond_init(&c->consumerCond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&c->controlLock, NULL);
    pthread_mutex_init(&c->ackLock, NULL);
    pthread_mutex_init(&c->errorLock, NULL);
    pthread_mutex_init(&c->publishLock, NULL);
    pthread_mutex_init(&c->writeLock, NULL);
    c->directFd = -1;
    atomic_init(&c->directReady, false);
    atomic_init(&c->oursNonEmpty, false);
    atomic_init(&c->flushedThrough, 0);
    atomic_init(&c->maxPacketSize, 0);
    atomic_init(&c->qos0Queued, 0);
    atomic_init(&c->qos0Written, 0);
    atomic_init(&c->drainTargetPlusOne, 0);
    atomic_init(&c->drained, false);
    atomic_init(&c->unsent, 0);
    atomic_init(&c->eventsLost, 0);
    atomic_init(&c->resyncNeeded, false);
    atomic_init(&c->failEventAllocations, 0);
    atomic_init(&c->packetsQueued, 0);
    atomic_init(&c->loopPolling, false);
    atomic_init(&c->wakePending, false);
    openWakeChannel(c);
    c->capacity = o->messageCapacity > 0 ? (size_t)o->messageCapacity : 1;
    c->allocated = c->capacity;
    c->ring = calloc(c->allocated, sizeof(CMosquittoShim_Message *));
    atomic_init(&c->queuedMirror, 0);
    atomic_init(&c->readPaused, false);
    atomic_init(&c->readingHeld, false);
    int fallbackCount = o->fallbackCount > 0 && o->fallbackHosts && o->fallbackPorts ? o->fallbackCount : 0;
    c->hosts = calloc((size_t)fallbackCount + 1, sizeof(char *));
    c->ports = calloc((size_t)fallbackCount + 1, sizeof(int));
    bool hostsCopied = c->hosts && c->ports;
    if (hostsCopied) {
        c->brokerCount = fallbackCount + 1;
        c->hosts[0] = copyString(o->host);
        c->ports[0] = o->port;
        for (int i = 0; i < fallbackCount; i++) {
            c->hosts[i + 1] = copyString(o->fallbackHosts[i]);
            c->ports[i + 1] = o->fallbackPorts[i];
        }
        for (int i = 0; i < c->brokerCount; i++) hostsCopied = hostsCopied && c->hosts[i];
    }
    atomic_init(&c->currentBroker, 0);
    c->keepAlive = o->keepAliveSeconds;
    c->connectTimeoutMs = o->connectTimeoutMilliseconds > 0 ? o->connectTimeoutMilliseconds : 5000;
    c->reconnectDelayMs = o->reconnectDelayMilliseconds > 0 ? o->reconnectDelayMilliseconds : 1000;
    c->maxReconnectDelayMs = o->maxReconnectDelayMilliseconds >= c->reconnectDelayMs ? o->maxReconnectDelayMilliseconds
                                                                                      : c->reconnectDelayMs;
    c->stopFlushMs = o->stopFlushMilliseconds >= 0 ? o->stopFlushMilliseconds : 0;
    c->quickAck = o->tcpNoDelay;
    c->holdAcks = o->holdAcknowledgements;
    atomic_init(&c->lastAnsweredMessage, 0);
    atomic_init(&c->acknowledgedThrough, 0);
    c->protocolV5 = o->protocolV5;
    c->plainTCP = !o->useTLS;
    if (!c->ring || !hostsCopied) {
        failCreate(c, MOSQ_ERR_NOMEM, "allocating the client", errorCode, errorText, errorTextSize);
        return NULL;
    }
    if (c->wakeFd < 0) {
        failCreate(c, MOSQ_ERR_ERRNO, "creating the loop's wake-up channel", errorCode, errorText, errorTextSize);
        return NULL;
    }

    c->mosq = newMosquitto(o->clientId, o->cleanSession, c, &c->withoutWakePair);
    if (!c->mosq) {
        failCreate(c, errno == EINVAL ? MOSQ_ERR_INVAL : MOSQ_ERR_NOMEM, "mosquitto_new", errorCode, errorText,
                   errorTextSize);
        return NULL;
    }
    int rc;
    // All socket I/O happens on our loop thread; other threads only queue packets.
    mosquitto_threaded_set(c->mosq, true);
    rc = mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, o->protocolV5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311);
    if (rc) { failCreate(c, rc, "setting the protocol version", errorCode, errorText, errorTextSize); return NULL; }

    if (o->tcpNoDelay) {
        // Without it, a small packet written right after another (SUBSCRIBE then PUBLISH of a request) waits for
        // the broker's delayed ACK (~40 ms on Linux) under Nagle's algorithm.
        rc = mosquitto_int_option(c->mosq, MOSQ_OPT_TCP_NODELAY, 1);
        if (rc) { failCreate(c, rc, "setting TCP_NODELAY", errorCode, errorText, errorTextSize); return NULL; }
    }
    if (o->username || o->password) {
        rc = mosquitto_username_pw_set(c->mosq, o->username, o->password);
        if (rc) { failCreate(c, rc, "setting username/password", errorCode, errorText, errorTextSize); return NULL; }
    }
    if (o->useTLS) {
        const char *capath = o->caFile ? NULL : "/etc/ssl/certs";
        rc = mosquitto_tls_set(c->mosq, o->caFile, capath, o->certificateFile, o->privateKeyFile, NULL);
        if (rc) { failCreate(c, rc, "configuring TLS", errorCode, errorText, errorTextSize); return NULL; }
        if (!o->caFile) mosquitto_int_option(c->mosq, MOSQ_OPT_TLS_USE_OS_CERTS, 1);
        rc = mosquitto_tls_opts_set(c->mosq, o->verifyServer ? 1 : 0, NULL, NULL);
        if (rc) { failCreate(c, rc, "configuring TLS options", errorCode, errorText, errorTextSize); return NULL; }
        rc = mosquitto_tls_insecure_set(c->mosq, !o->verifyServer);
        if (rc) { failCreate(c, rc, "configuring TLS hostname checks", errorCode, errorText, errorTextSize); return NULL; }
    }
    if (o->hasWill) {
        rc = mosquitto_will_set_v5(c->mosq, o->willTopic, o->willPayloadLength, o->willPayload, o->willQoS,
                                   o->willRetain, NULL);
        if (rc) { failCreate(c, rc, "setting the will", errorCode, errorText, errorTextSize); return NULL; }
    }
    mosquitto_connect_v5_callback_set(c->mosq, onConnect);
    mosquitto_message_v5_callback_set(c->mosq, onMessage);
    mosquitto_publish_v5_callback_set(c->mosq, onPublish);
    mosquitto_subscribe_v5_callback_set(c->mosq, onSubscribe);
    mosquitto_unsubscribe_v5_callback_set(c->mosq, onUnsubscribe);
    return c;
}

void CMosquittoShim_Client_release(CMosquittoShim_Client *client) {
    if (!client) return;
    if (atomic_fetch_sub(&client->refCount, 1) == 1) destroyClient(client);
}

// MARK: - Network loop

static bool stopRequested(CMosquittoShim_Client *c) { return atomic_load(&c->stopRequested); }

/// One dispatch round on the loop thread, between loop steps: the dispatch function takes what the callbacks queued
/// and runs the work other threads queued for it. Clearing `dispatchWanted` first means a request made during the
/// round is seen by the next loop step (which then does not wait, see loopOnce).
static void runDispatch(CMosquittoShim_Client *c, CMosquittoShim_DispatchFunction dispatch, void *context) {
    atomic_store(&c->dispatchWanted, false);
    if (dispatch) dispatch(context, false);
}

/// Asks the loop thread for a dispatch round soon (any thread): a loop step that is waiting ends (its poll through the
/// eventfd, a backoff sleep through controlCond), and the next one does not wait. `dispatchWanted` is set before
/// `loopPolling` and `backingOff` are read, and the loop sets those before it reads `dispatchWanted` (all
/// sequentially consistent), so either the loop sees the request or this call wakes it. While the loop connects
/// (libmosquitto's own loop, SHIM_CONNECTING_STEP_MS steps) the round comes after the current step.
static void wantDispatch(CMosquittoShim_Client *c) {
    atomic_store(&c->dispatchWanted, true);
    wakeLoopIfPolling(c);
    if (atomic_load(&c->backingOff)) {
        pthread_mutex_lock(&c->controlLock);
        pthread_cond_broadcast(&c->controlCond);
        pthread_mutex_unlock(&c->controlLock);
    }
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
        atomic_store(&c->backingOff, true);
        bool timedOut = false;
        pthread_mutex_lock(&c->controlLock);
        while (!stopRequested(c) && !atomic_load(&c->dispatchWanted)) {
            if (pthread_cond_timedwait(&c->controlCond, &c->controlLock, &deadline) == ETIMEDOUT) {
                timedOut = true;
                break;
            }
        }
        pthread_mutex_unlock(&c->controlLock);
        atomic_store(&c->backingOff, false);
        if (stopRequested(c) || timedOut || !atomic_load(&c->dispatchWanted)) return;
        runDispatch(c, dispatch, context);
    }
}

/// Whether QoS 0 publishes are taken (see `accepting`).
static void setAccepting(CMosquittoShim_Client *c, bool accepting) {
    pthread_mutex_lock(&c->publishLock);
    c->accepting = accepting;
    pthread_mutex_unlock(&c->publishLock);
}

/// Counts the QoS 0 publishes queued but never written as unsent (loop thread; the socket is closed or about to be,
/// so what is still queued will be discarded by libmosquitto's next connect).
static void settleUnsent(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->publishLock);
    c->accepting = false;
    uint64_t lost = unwrittenQos0(c);
    if (lost > 0) {
        atomic_fetch_add(&c->unsent, lost);
        atomic_fetch_add(&c->qos0Written, lost);
    }
    pthread_mutex_unlock(&c->publishLock);
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
    int64_t window = now - c->rateWindowStartNs;
    if (window < 1000000) return;
    int64_t messages = (int64_t)(c->received - c->rateWindowReceived);
    c->streaming = messages * 1000000 >= SHIM_STREAM_MESSAGES_PER_MS * window;
    c->rateWindowStartNs = now;
    c->rateWindowReceived = c->received;
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
    if (!c->quickAck) return timeoutMs;
    int sock = mosquitto_socket(c->mosq);
    if (sock < 0) return timeoutMs;
    // Packets written by publishing threads count too (qos0Queued): a client that writes is never paced.
    uint64_t queued = atomic_load(&c->packetsQueued) + atomic_load(&c->qos0Queued);
    if (queued != c->quickAckPacketsSeen || c->answerDue) {
        c->wroteSeenNs = now;
        c->quickAckPacketsSeen = queued;
        c->answerDue = false;
    }
    if (c->streaming && now - c->wroteSeenNs >= SHIM_WRITE_QUIET_NS &&
        now - c->quickAckRenewedNs < SHIM_QUICKACK_STREAM_INTERVAL_NS) {
        return 1;
    }
    c->quickAckRenewedNs = now;
    int one = 1;
    (void)setsockopt(sock, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
#else
    (void)c;
    (void)now;
#endif
    return timeoutMs;
}

/// Ends the network loop's current (or next) poll.
static void signalLoop(CMosquittoShim_Client *c) {
#ifdef SHIM_LINUX
    uint64_t one = 1;
    (void)!write(c->wakeWriteFd, &one, sizeof(one));
#else
    char one = 1;
    (void)!write(c->wakeWriteFd, &one, 1);
#endif
}

/// Empties the wake-up channel after a poll saw it readable.
static void drainWakeChannel(CMosquittoShim_Client *c) {
#ifdef SHIM_LINUX
    uint64_t value;
    (void)!read(c->wakeFd, &value, sizeof(value));
#else
    char bytes[64];
    (void)!read(c->wakeFd, bytes, sizeof(bytes));  // more than one byte waiting only wakes the next poll early
#endif
}

/// Ends the loop thread's poll if it is in one (at most one eventfd write per wait). Callers first publish what the
/// loop must see (a counter, a flag it reads before polling), sequentially consistent, so either the loop sees it or
/// this call wakes it.
static void wakeLoopIfPolling(CMosquittoShim_Client *c) {
    if (atomic_load(&c->loopPolling) && !atomic_exchange(&c->wakePending, true)) signalLoop(c);
}

/// Called by any thread after it queued a packet in libmosquitto: counts it and wakes the loop thread if it polls.
/// `packetsQueued` is incremented before `loopPolling` is read, and loopOnce sets `loopPolling` before it reads
/// `packetsQueued` (both sequentially consistent), so either the loop sees the packet or this call wakes it.
static void wakeLoop(CMosquittoShim_Client *c) {
    atomic_fetch_add(&c->packetsQueued, 1);
    wakeLoopIfPolling(c);
}


// ---- direct QoS 0 writes ----
//
// libmosquitto queues every packet and writes it on the network thread: a QoS 0 publish from another thread costs a
// packet allocation, a wake-up of that thread (an eventfd write, a context switch, a poll) and the write there. A
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

/// Opens the duplicate socket for direct writes once a plain TCP session is up (loop thread).
static void openDirect(CMosquittoShim_Client *c) {
    if (!c->plainTCP) return;
    int sock = mosquitto_socket(c->mosq);
    if (sock < 0) return;
    pthread_mutex_lock(&c->writeLock);
    c->directFd = fcntl(sock, F_DUPFD_CLOEXEC, 0);
#ifdef SO_NOSIGPIPE
    if (c->directFd >= 0) {
        int one = 1;
        (void)setsockopt(c->directFd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
    }
#endif
    atomic_store(&c->directReady, c->directFd >= 0);
    pthread_mutex_unlock(&c->writeLock);
}

/// Ends direct writes with the session (loop thread). Packets still waiting in `ours` are dropped; they were counted
/// as queued, not as written, so settleUnsent counts them as unsent.
static void closeDirect(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->writeLock);
    atomic_store(&c->directReady, false);
    if (c->directFd >= 0) close(c->directFd);
    c->directFd = -1;
    dropOurs(c);
    pthread_mutex_unlock(&c->writeLock);
}

/// Writes the waiting direct packets, oldest first (writeLock held); true when none is left. Wakes a back-pressure
/// waiter when some were written.
static bool flushOursLocked(CMosquittoShim_Client *c) {
    bool wrote = false;
    while (c->oursHead) {
        // Up to 64 packets per system call.
        struct iovec parts[64];
        int count = 0;
        for (struct OutPacket *packet = c->oursHead; packet && count < 64; packet = packet->next) {
            parts[count].iov_base = packet->bytes + packet->offset;
            parts[count].iov_len = packet->length - packet->offset;
            count++;
        }
        struct msghdr message = {.msg_iov = parts, .msg_iovlen = (size_t)count};
        ssize_t n = sendmsg(c->directFd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        // Full (EAGAIN), or broken: the loop thread's next read ends the session and closeDirect drops the rest.
        if (n <= 0) break;
        size_t left = (size_t)n;
        while (left > 0 && c->oursHead) {
            struct OutPacket *packet = c->oursHead;
            size_t rest = packet->length - packet->offset;
            if (left < rest) {
                packet->offset += left;
                left = 0;
                break;
            }
            left -= rest;
            c->oursHead = packet->next;
            if (!c->oursHead) c->oursTail = NULL;
            if (packet->publish) {
                atomic_fetch_add(&c->qos0Written, 1);
                wrote = true;
            }
            free(packet);
        }
        if (c->oursHead && c->oursHead->offset > 0) break;  // a partial write: the socket is full
    }
    bool empty = c->oursHead == NULL;
    atomic_store(&c->oursNonEmpty, !empty);
    if (wrote) checkDrain(c);
    return empty;
}

/// The loop thread's write step: the waiting direct packets first, then libmosquitto's queue (as
/// mosquitto_loop_write). Records when every packet queued through this client is written, for publishDirect.
static int loopWrite(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->writeLock);
    if (!flushOursLocked(c)) {
        pthread_mutex_unlock(&c->writeLock);
        return MOSQ_ERR_SUCCESS;  // the rest waits for POLLOUT; nothing libmosquitto queued may overtake it
    }
    int rc = mosquitto_loop_write(c->mosq, 1);
    // Every packet counted by now was queued before it was counted, so before the check below: when libmosquitto has
    // nothing left to write, all of them are written.
    uint64_t queued = atomic_load(&c->packetsQueued);
    if (rc == MOSQ_ERR_SUCCESS && mosquitto_socket(c->mosq) >= 0 && !mosquitto_want_write(c->mosq)) {
        atomic_store(&c->flushedThrough, queued);
    }
    pthread_mutex_unlock(&c->writeLock);
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
    if (!atomic_load(&c->directReady) || !topic || payloadLength < 0 || payloadLength > 1024 * 1024) return -1;
    size_t topicLength = strlen(topic);
    if (topicLength == 0 || topicLength > 65535) return -1;  // libmosquitto reports the error
    pthread_mutex_lock(&c->writeLock);
    // Behind a packet queued in libmosquitto (or with the session over): queued there too, in order. That includes
    // packets its loop queues itself (PINGREQ, PUBACK, a QoS 1 publish released from the in-flight window), which
    // `packetsQueued` does not count: a direct packet must never land inside one partly written, and they must not
    // wait behind an ever-growing `ours`. (The loop thread writes only under writeLock, so what mosquitto_want_write
    // reads is not being written now.)
    if (c->directFd < 0 || atomic_load(&c->flushedThrough) != atomic_load(&c->packetsQueued) ||
        mosquitto_want_write(c->mosq)) {
        pthread_mutex_unlock(&c->writeLock);
        return -1;
    }
    int rc = mosquitto_pub_topic_check2(topic, topicLength);
    if (rc == MOSQ_ERR_SUCCESS) rc = mosquitto_validate_utf8(topic, (int)topicLength);
    if (rc != MOSQ_ERR_SUCCESS) {
        pthread_mutex_unlock(&c->writeLock);
        return rc;
    }
    uint32_t remaining = (uint32_t)(2 + topicLength + (c->protocolV5 ? 1 : 0) + (size_t)payloadLength);
    uint8_t header[8];
    size_t headerLength = 0;
    header[headerLength++] = 0x30;  // PUBLISH, QoS 0, no DUP, no RETAIN
    headerLength += putVarInt(header + headerLength, remaining);
    uint32_t maxPacketSize = atomic_load(&c->maxPacketSize);
    if (maxPacketSize > 0 && headerLength + remaining > maxPacketSize) {
        pthread_mutex_unlock(&c->writeLock);
        return MOSQ_ERR_OVERSIZE_PACKET;
    }
    header[headerLength++] = (uint8_t)(topicLength >> 8);
    header[headerLength++] = (uint8_t)(topicLength & 0xff);
    uint8_t properties = 0;  // MQTT 5: no properties
    struct iovec parts[4] = {
        {.iov_base = header, .iov_len = headerLength},
        {.iov_base = (void *)topic, .iov_len = topicLength},
        {.iov_base = &properties, .iov_len = c->protocolV5 ? 1 : 0},
        {.iov_base = (void *)payload, .iov_len = (size_t)payloadLength},
    };
    size_t total = headerLength + topicLength + (c->protocolV5 ? 1 : 0) + (size_t)payloadLength;
    ssize_t n = -1;
    errno = EAGAIN;
    // Behind waiting packets (the socket was full), this one waits too: the loop thread writes them all once the
    // socket is writable (trying here would mostly fail again).
    if (!c->oursHead) {
        struct msghdr message = {.msg_iov = parts, .msg_iovlen = 4};
        do {
            n = sendmsg(c->directFd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
    }
    atomic_fetch_add(&c->qos0Queued, 1);
    bool wake = false;
    if (n == (ssize_t)total) {
        atomic_fetch_add(&c->qos0Written, 1);
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
            if (c->oursTail) {
                c->oursTail->next = packet;
            } else {
                c->oursHead = packet;
            }
            c->oursTail = packet;
            // The loop's poll asks for POLLOUT while `ours` is not empty: a wake-up is needed only to start that.
            wake = !atomic_exchange(&c->oursNonEmpty, true);
        } else if (written > 0) {
            // Part of a packet on the wire and no memory for the rest: the stream cannot go on. Ending the connection
            // makes the client reconnect; the packet counts as unsent when the session is settled.
            shutdown(c->directFd, SHUT_RDWR);
        } else {
            atomic_fetch_add(&c->unsent, 1);
            atomic_fetch_add(&c->qos0Written, 1);
        }
    } else {
        // The connection is broken: the loop thread's next read ends the session. Lost like a queued publish.
        atomic_fetch_add(&c->unsent, 1);
        atomic_fetch_add(&c->qos0Written, 1);
    }
    pthread_mutex_unlock(&c->writeLock);
    if (wake) wakeLoopIfPolling(c);  // the loop sees `oursNonEmpty` or is woken (see wakeLoopIfPolling)
    return MOSQ_ERR_SUCCESS;
}

/// Durable delivery: whether answers to QoS > 0 messages the application has not handled yet are queued in
/// libmosquitto. Then the loop neither writes (the answers would go out) nor reads (their answers would join them).
static bool acknowledgementsHeld(CMosquittoShim_Client *c) { return CMosquittoShim_Client_acknowledgementDue(c) != 0; }

/// Whether back-pressure lets the loop read: the ring is below its capacity and Swift did not pause reading.
static bool backPressureAllowsReading(CMosquittoShim_Client *c) {
    return !atomic_load(&c->readPaused) && atomic_load(&c->queuedMirror) < c->capacity;
}

/// Whether the loop may read from the socket: not while the ring holds its capacity (its consumer is behind) or Swift
/// paused reading (an observer is full). Holding the reads is the back-pressure: the kernel's socket buffer fills, TCP
/// flow control stops the broker, which keeps the rest under its own limits.
static bool readAllowed(CMosquittoShim_Client *c) {
    return backPressureAllowsReading(c) && !acknowledgementsHeld(c);
}

/// Keeps the session alive while reads are held (loop thread); true when it did, so libmosquitto's keep-alive check
/// must be skipped: that check ends a session whose PINGRESP was not read within the keep-alive, and the PINGRESP waits
/// behind the unread messages. Instead a PINGREQ is written through the direct path every half keep-alive, which
/// satisfies the broker; the PINGRESPs are read (and ignored by libmosquitto) when reading resumes. Over TLS there is
/// no direct path: libmosquitto's own check runs, and a hold longer than the keep-alive ends the session, which is
/// reported as a connection loss and reconnects by itself.
static bool keepAliveWhileHeld(CMosquittoShim_Client *c, bool behindUnstarted) {
    if (!atomic_load(&c->directReady) || c->keepAlive <= 0) return false;
    int64_t now = nowNs();
    if (now - c->pausedPingNs < (int64_t)c->keepAlive * 500000000LL) return true;
    pthread_mutex_lock(&c->writeLock);
    // Only between whole packets: nothing of ours or of libmosquitto's is waiting (else retry at the next step). With
    // `behindUnstarted` (durable delivery holding answers), libmosquitto's queue holds only packets not started: the
    // loop read only with that queue empty and has not written since.
    if (c->directFd >= 0 && !c->oursHead && (behindUnstarted || !mosquitto_want_write(c->mosq))) {
        static const uint8_t pingreq[2] = {0xC0, 0x00};
        ssize_t n;
        do {
            n = send(c->directFd, pingreq, sizeof(pingreq), MSG_NOSIGNAL | MSG_DONTWAIT);
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
                c->oursHead = c->oursTail = rest;
                atomic_store(&c->oursNonEmpty, true);
            } else {
                shutdown(c->directFd, SHUT_RDWR);  // the stream cannot go on; the client reconnects
            }
        }
        if (n > 0) c->pausedPingNs = now;
    }
    pthread_mutex_unlock(&c->writeLock);
    return true;
}

/// One iteration of the network loop, as `mosquitto_loop` does it (wait for the socket, read, write, keepalive),
/// but woken through our own eventfd. libmosquitto wakes its loop by writing one byte to an internal socket pair for
/// every packet another thread queues, and `mosquitto_loop` reads one byte per call: a publisher woke the loop thread
/// (select, read, write) once per message. Here a burst of publications costs one wake-up; the socket pair is never
/// read, and once its buffer is full libmosquitto's one-byte writes fail without effect (it ignores their result;
/// both ends are non-blocking).
static int loopOnce(CMosquittoShim_Client *c, int timeoutMs) {
    int sock = mosquitto_socket(c->mosq);
    if (sock < 0) return MOSQ_ERR_NO_CONN;
    // Durable delivery reads only with libmosquitto's queue written out: the answers a read queues then sit in front
    // of nothing partly written, so holding them (and writing our own PINGREQs meanwhile) keeps the stream whole.
    bool reading = readAllowed(c) && !(c->holdAcks && mosquitto_want_write(c->mosq));
    if (reading == atomic_load(&c->readingHeld)) {
        atomic_store(&c->readingHeld, !reading);
        c->pausedPingNs = nowNs();  // a pause starts: its first keep-alive PINGREQ is due half a keep-alive later
    }
    atomic_store(&c->loopPolling, true);
    uint64_t queued = atomic_load(&c->packetsQueued);
    bool others = queued != c->packetsSeen;  // packets queued by other threads since the last write
    c->packetsSeen = queued;
    bool dispatchDue = atomic_load(&c->dispatchWanted);  // see wantDispatch
    // While acknowledgements are held only our own packets (whole, queued ahead of libmosquitto's) may be written.
    bool wantWrite = acknowledgementsHeld(c) ? atomic_load(&c->oursNonEmpty)
                                             : others || mosquitto_want_write(c->mosq) || atomic_load(&c->oursNonEmpty);
    struct pollfd fds[2] = {
        {.fd = sock, .events = (short)((reading ? POLLIN : 0) | (wantWrite ? POLLOUT : 0)), .revents = 0},
        {.fd = c->wakeFd, .events = POLLIN, .revents = 0},
    };
    int count = poll(fds, 2, others || dispatchDue ? 0 : timeoutMs);
    atomic_store(&c->loopPolling, false);
    if (count < 0) return errno == EINTR ? MOSQ_ERR_SUCCESS : MOSQ_ERR_ERRNO;
    bool woken = false;
    if (fds[1].revents & POLLIN) {
        // Read first, then clear: a waker that sets wakePending after the clear writes after this read, so its
        // write is seen by the next poll (clearing first could consume that write and leave wakePending set).
        drainWakeChannel(c);
        atomic_store(&c->wakePending, false);
        woken = true;
    }
    // A held read still reads a closed or failed socket (POLLHUP, POLLERR come without asking), so the loss is seen.
    if ((reading && (fds[0].revents & POLLIN)) || (fds[0].revents & (POLLHUP | POLLERR))) {
        // mosquitto_loop_read reads one packet per call (for QoS 0). While PUBLISH packets keep completing, the next
        // one is read at once instead of after another poll: a stream costs one poll per burst, not per message
        // (and one read that finds nothing at its end). Bounded, so writes and keepalive are not held up, and it
        // stops as soon as back-pressure holds the reads.
        if (c->holdAcks && reading) c->heldBehindWhole = true;  // read with libmosquitto's queue written out
        for (int i = 0; i < SHIM_READ_BURST; i++) {
            uint64_t before = c->received;
            int rc = mosquitto_loop_read(c->mosq, 1);
            if (rc || mosquitto_socket(c->mosq) < 0) return rc;
            // Nothing complete, not a PUBLISH, or held by back-pressure. (Held acknowledgements do not end the burst:
            // the answers it queues are all unstarted, and are released together.)
            if (c->received == before || !backPressureAllowsReading(c)) break;
        }
    }
    // As mosquitto_loop: write when the socket is writable, or when another thread queued a packet (libmosquitto
    // treats its socket-pair wake-up as "writable").
    bool held = acknowledgementsHeld(c);
    if (!held && ((fds[0].revents & POLLOUT) || others || woken)) {
        int rc = loopWrite(c);
        if (rc || mosquitto_socket(c->mosq) < 0) return rc;
    } else if (held && (fds[0].revents & POLLOUT)) {
        pthread_mutex_lock(&c->writeLock);
        (void)flushOursLocked(c);
        pthread_mutex_unlock(&c->writeLock);
    }
    // A PINGREQ may go behind libmosquitto's held packets only when they are all unstarted: the hold began with a read
    // this session made with libmosquitto's queue written out (not, e.g., one left by the connect phase).
    if (held) return keepAliveWhileHeld(c, c->heldBehindWhole) ? MOSQ_ERR_SUCCESS : mosquitto_loop_misc(c->mosq);
    if (atomic_load(&c->readingHeld) && keepAliveWhileHeld(c, false)) return MOSQ_ERR_SUCCESS;
    return mosquitto_loop_misc(c->mosq);
}

static void *loopMain(void *arg) {
    CMosquittoShim_Client *c = arg;
    int delay = c->reconnectDelayMs;
    c->briefSessions = 0;
    // Each round of attempts starts at the primary (first start) or at the broker a session was lost on, and goes
    // through the brokers in order; only a round that ended without a session backs off.
    atomic_store(&c->currentBroker, 0);
    int roundStart = 0;
    char detail[256];
    // This session's dispatch function: a later start (after this loop set loopRunning to false, below) may set
    // another one while this thread still makes its last calls.
    // Taken, not copied: each setDispatch is used by one loop at most.
    pthread_mutex_lock(&c->controlLock);
    CMosquittoShim_DispatchFunction dispatch = c->dispatch;
    void *context = c->dispatchContext;
    c->dispatch = NULL;
    c->dispatchContext = NULL;
    pthread_mutex_unlock(&c->controlLock);
    loopClientOfThisThread = c;
    runDispatch(c, dispatch, context);  // what was queued for the dispatcher before the loop started
    while (!stopRequested(c)) {
        c->sessionUp = false;
        c->heldBehindWhole = false;
        c->refusedThisAttempt = false;
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
        int broker = atomic_load(&c->currentBroker);
        pthread_mutex_lock(&c->ackLock);
        int rc = mosquitto_connect_async(c->mosq, c->hosts[broker], c->ports[broker], c->keepAlive);
        pthread_mutex_unlock(&c->ackLock);
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
                if (c->sessionUp && atomic_exchange(&c->resyncNeeded, false)) {
                    rc = MOSQ_ERR_NOMEM;  // an event was lost (see pushEvent): start a new session
                    break;
                }
                rc = c->sessionUp ? loopOnce(c, timeoutMs) : mosquitto_loop(c->mosq, SHIM_CONNECTING_STEP_MS, 1);
                if (rc != MOSQ_ERR_SUCCESS) {
                    if (rc == MOSQ_ERR_ERRNO) savedErrno = errno;
                    break;
                }
                runDispatch(c, dispatch, context);
                if (stopRequested(c)) break;
                if (logging && c->sessionUp) {
                    openDirect(c);
                    mosquitto_log_callback_set(c->mosq, NULL);
                    logging = false;
                    char stale[8];
                    takeLastError(c, stale, sizeof(stale));  // a later loss reports its own cause
                }
                if (!c->sessionUp && !c->refusedThisAttempt && nowMs() - start > c->connectTimeoutMs) {
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
        if (c->sessionUp) {
            bool brief = nowMs() - c->sessionStartMs < SHIM_BRIEF_SESSION_MS;
            c->briefSessions = brief ? c->briefSessions + 1 : 0;
            // The event's mid carries the brief sessions in a row (the Swift side names the likely cause).
            pushEvent(c, CMosquittoShim_EventConnectionLost, rc, c->briefSessions, detail);
            // After a long session reconnect at once; after brief ones keep backing off (doubling below), so two
            // clients with one client id do not take the session from each other as fast as they can connect.
            if (c->briefSessions < 2) delay = c->reconnectDelayMs;
        } else if (!c->refusedThisAttempt) {
            pushEvent(c, CMosquittoShim_EventConnectFailed, rc, 0, detail);
        }
        // Close a half-open attempt (e.g. after a CONNACK timeout) before waiting.
        mosquitto_disconnect(c->mosq);
        runDispatch(c, dispatch, context);
        if (c->sessionUp) {
            // Retry the broker the session was lost on first (after the usual wait), then the others.
            roundStart = broker;
        } else {
            broker = (broker + 1) % c->brokerCount;
            atomic_store(&c->currentBroker, broker);
            if (broker != roundStart) continue;  // the next broker at once; the round is not over
        }
        backoffSleep(c, delay, dispatch, context);
        delay = delay * 2 > c->maxReconnectDelayMs ? c->maxReconnectDelayMs : delay * 2;
    }

    // Graceful stop: every queued packet goes out first, then DISCONNECT (packets are sent in order, and
    // libmosquitto closes the socket once DISCONNECT is written, which ends the loop), bounded by stopFlushMs.
    // A publish queued behind the DISCONNECT would never be written: refuse them from here on.
    setAccepting(c, false);
    if (c->sessionUp && mosquitto_disconnect(c->mosq) == MOSQ_ERR_SUCCESS) {
        int64_t deadline = nowMs() + c->stopFlushMs;
        while (nowMs() < deadline) {
            if (loopOnce(c, 50) != MOSQ_ERR_SUCCESS) break;
            runDispatch(c, dispatch, context);
        }
    } else {
        mosquitto_disconnect(c->mosq);
    }
    c->sessionUp = false;
    closeDirect(c);
    settleUnsent(c);

    pthread_mutex_lock(&c->controlLock);
    c->loopRunning = false;
    pthread_mutex_unlock(&c->controlLock);
    pushEvent(c, CMosquittoShim_EventStopped, 0, 0, NULL);
    runDispatch(c, dispatch, context);
    if (dispatch) dispatch(context, true);  // the last call: the context may be released
    loopClientOfThisThread = NULL;
    CMosquittoShim_Client_release(c);
    return NULL;
}

void CMosquittoShim_Client_setDispatch(CMosquittoShim_Client *c, CMosquittoShim_DispatchFunction function,
                                       void *context) {
    pthread_mutex_lock(&c->controlLock);
    c->dispatch = function;
    c->dispatchContext = context;
    pthread_mutex_unlock(&c->controlLock);
}

int CMosquittoShim_Client_start(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->controlLock);
    if (c->loopRunning) {
        pthread_mutex_unlock(&c->controlLock);
        return MOSQ_ERR_INVAL;
    }
    atomic_store(&c->stopRequested, false);
    c->loopRunning = true;
    atomic_fetch_add(&c->refCount, 1);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&thread, &attr, loopMain, c);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        c->loopRunning = false;
        pthread_mutex_unlock(&c->controlLock);
        atomic_fetch_sub(&c->refCount, 1);
        errno = err;
        return MOSQ_ERR_ERRNO;
    }
    pthread_setname_np(thread, "coaty-mqtt-net");
    pthread_mutex_unlock(&c->controlLock);
    return MOSQ_ERR_SUCCESS;
}

void CMosquittoShim_Client_stop(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->controlLock);
    atomic_store(&c->stopRequested, true);
    pthread_cond_broadcast(&c->controlCond);
    pthread_mutex_unlock(&c->controlLock);
    signalLoop(c);  // end the loop's wait now
}

// MARK: - Operations (any thread)

int CMosquittoShim_Client_publish(CMosquittoShim_Client *c, int *mid, const char *topic, const void *payload,
                                  int payloadLength, int qos, bool retain) {
    if (qos == 0) {
        pthread_mutex_lock(&c->publishLock);
        if (!c->accepting) {
            pthread_mutex_unlock(&c->publishLock);
            return MOSQ_ERR_NO_CONN;
        }
        if (!retain) {
            int rc = publishDirect(c, topic, payload, payloadLength);
            if (rc >= 0) {
                pthread_mutex_unlock(&c->publishLock);
                if (mid) *mid = 0;
                return rc;
            }
        }
        int rc = mosquitto_publish_v5(c->mosq, mid, topic, payloadLength, payload, 0, retain, NULL);
        if (rc == MOSQ_ERR_SUCCESS) atomic_fetch_add(&c->qos0Queued, 1);
        pthread_mutex_unlock(&c->publishLock);
        if (rc == MOSQ_ERR_SUCCESS) wakeLoop(c);
        return rc;
    }
    int localMid = 0;
    // Holding ackLock while publishing means the acknowledgement callback cannot run before the mid is tracked.
    pthread_mutex_lock(&c->ackLock);
    int rc = mosquitto_publish_v5(c->mosq, &localMid, topic, payloadLength, payload, qos, retain, NULL);
    if (rc == MOSQ_ERR_SUCCESS) setMidBit(c->tracked, localMid, true);
    pthread_mutex_unlock(&c->ackLock);
    if (rc == MOSQ_ERR_SUCCESS) wakeLoop(c);
    if (mid) *mid = localMid;
    return rc;
}

int CMosquittoShim_Client_subscribe(CMosquittoShim_Client *c, int *mid, const char *const *filters, int count,
                                    int qos) {
    int localMid = 0;
    pthread_mutex_lock(&c->ackLock);  // not between the new socket and its CONNECT (see loopMain)
    int rc = mosquitto_subscribe_multiple(c->mosq, &localMid, count, (char *const *const)filters, qos, 0, NULL);
    pthread_mutex_unlock(&c->ackLock);
    if (rc == MOSQ_ERR_SUCCESS) wakeLoop(c);
    if (mid) *mid = localMid;
    return rc;
}

int CMosquittoShim_Client_unsubscribe(CMosquittoShim_Client *c, int *mid, const char *filter) {
    int localMid = 0;
    pthread_mutex_lock(&c->ackLock);  // not between the new socket and its CONNECT (see loopMain)
    int rc = mosquitto_unsubscribe(c->mosq, &localMid, filter);
    pthread_mutex_unlock(&c->ackLock);
    if (rc == MOSQ_ERR_SUCCESS) wakeLoop(c);
    if (mid) *mid = localMid;
    return rc;
}

// MARK: - Dispatcher side

int CMosquittoShim_Client_dispatchReasons(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queueLock);
    int mask = 0;
    if (c->wakeMessages) mask |= CMosquittoShim_WakeMessages;
    if (c->eventHead) mask |= CMosquittoShim_WakeEvents;
    if (c->dispatcherClosed) mask |= CMosquittoShim_WakeClosed;
    c->wakeMessages = false;
    pthread_mutex_unlock(&c->queueLock);
    return mask;
}

void CMosquittoShim_Client_wakeDispatcher(CMosquittoShim_Client *c) { wantDispatch(c); }

void CMosquittoShim_Client_closeDispatcher(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queueLock);
    c->dispatcherClosed = true;
    pthread_cond_broadcast(&c->consumerCond);
    pthread_mutex_unlock(&c->queueLock);
}

void CMosquittoShim_Client_openDispatcher(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queueLock);
    c->dispatcherClosed = false;
    pthread_mutex_unlock(&c->queueLock);
}

/// Unlinks the oldest event (queueLock held); NULL when there is none.
static CMosquittoShim_Event *unlinkEventLocked(CMosquittoShim_Client *c) {
    CMosquittoShim_Event *event = c->eventHead;
    if (event) {
        c->eventHead = event->next;
        if (!c->eventHead) c->eventTail = NULL;
        event->next = NULL;
    }
    return event;
}

CMosquittoShim_Event *CMosquittoShim_Client_popEvent(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queueLock);
    CMosquittoShim_Event *event = unlinkEventLocked(c);
    pthread_mutex_unlock(&c->queueLock);
    return event;
}

CMosquittoShim_Event *CMosquittoShim_Client_popDueEvent(CMosquittoShim_Client *c, bool includeStopped) {
    pthread_mutex_lock(&c->queueLock);
    CMosquittoShim_Event *head = c->eventHead;
    bool due = head && head->afterMessages <= c->takenMessages &&
               (includeStopped || head->kind != CMosquittoShim_EventStopped);
    CMosquittoShim_Event *event = due ? unlinkEventLocked(c) : NULL;
    pthread_mutex_unlock(&c->queueLock);
    return event;
}

/// Moves up to `max` queued messages to `out` (queueLock held); taking any disarms the wake-up.
/// `roomAgain` tells the caller to wake the loop after unlocking: it may hold its reads for a full ring.
static size_t dequeueLocked(CMosquittoShim_Client *c, CMosquittoShim_Message **out, size_t max, bool *roomAgain) {
    size_t n = c->count < max ? c->count : max;
    for (size_t i = 0; i < n; i++) {
        out[i] = c->ring[c->head];
        c->ring[c->head] = NULL;
        c->head = (c->head + 1) % c->allocated;
    }
    // Room again after the ring held its capacity: the loop may be holding its reads (see readAllowed).
    bool wasFull = c->count >= c->capacity;
    c->count -= n;
    atomic_store(&c->queuedMirror, c->count);
    c->takenMessages += n;
    if (n > 0) c->armed = false;
    *roomAgain = wasFull && n > 0 && loopClientOfThisThread != c;
    return n;
}

size_t CMosquittoShim_Client_takeMessages(CMosquittoShim_Client *c, CMosquittoShim_Message **out, size_t max,
                                          bool arm) {
    bool roomAgain = false;
    pthread_mutex_lock(&c->queueLock);
    size_t n = dequeueLocked(c, out, max, &roomAgain);
    if (n == 0 && arm) c->armed = true;
    pthread_mutex_unlock(&c->queueLock);
    if (roomAgain) wantDispatch(c);
    return n;
}

size_t CMosquittoShim_Client_takeMessagesWaiting(CMosquittoShim_Client *c, CMosquittoShim_Message **out, size_t max,
                                                 int timeoutMicroseconds) {
    // On the loop thread (a consumer running on the delivery executor) nothing can arrive while it waits.
    if (loopClientOfThisThread == c) timeoutMicroseconds = 0;
    pthread_mutex_lock(&c->queueLock);
    if (c->count == 0 && timeoutMicroseconds > 0 && !c->dispatcherClosed) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_nsec += (long)timeoutMicroseconds * 1000L;
        while (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec += 1;
            deadline.tv_nsec -= 1000000000L;
        }
        c->consumerBlocked = true;
        while (c->count == 0 && !c->dispatcherClosed) {
            if (pthread_cond_timedwait(&c->consumerCond, &c->queueLock, &deadline) == ETIMEDOUT) break;
        }
        c->consumerBlocked = false;
    }
    bool roomAgain = false;
    size_t n = dequeueLocked(c, out, max, &roomAgain);
    pthread_mutex_unlock(&c->queueLock);
    if (roomAgain) wantDispatch(c);
    return n;
}

void CMosquittoShim_Client_discardMessages(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queueLock);
    while (c->count > 0) {
        free(c->ring[c->head]);
        c->ring[c->head] = NULL;
        c->head = (c->head + 1) % c->allocated;
        c->count -= 1;
        atomic_store(&c->queuedMirror, c->count);
        c->takenMessages += 1;  // gone, as if taken: events queued behind them are due
    }
    pthread_mutex_unlock(&c->queueLock);
}

void CMosquittoShim_Client_acknowledgeThrough(CMosquittoShim_Client *c, uint64_t through) {
    uint64_t current = atomic_load(&c->acknowledgedThrough);
    while (through > current && !atomic_compare_exchange_weak(&c->acknowledgedThrough, &current, through)) {
    }
    wantDispatch(c);  // the loop may wait in a poll that watches neither reads nor writes
}

uint64_t CMosquittoShim_Client_acknowledgementDue(CMosquittoShim_Client *c) {
    uint64_t last = atomic_load(&c->lastAnsweredMessage);
    return c->holdAcks && last > atomic_load(&c->acknowledgedThrough) ? last : 0;
}

void CMosquittoShim_Client_setReadPaused(CMosquittoShim_Client *c, bool paused) {
    bool was = atomic_exchange(&c->readPaused, paused);
    if (was && !paused) wantDispatch(c);  // the loop may wait in a poll that does not watch the socket's input
}

bool CMosquittoShim_Client_readingHeld(CMosquittoShim_Client *c) { return atomic_load(&c->readingHeld); }

uint64_t CMosquittoShim_Client_droppedCount(CMosquittoShim_Client *c) { return atomic_load(&c->dropped); }

uint64_t CMosquittoShim_Client_eventsLostCount(CMosquittoShim_Client *c) { return atomic_load(&c->eventsLost); }

void CMosquittoShim_Client_failEventAllocations(CMosquittoShim_Client *c, int count) {
    atomic_store(&c->failEventAllocations, count);
}

uint64_t CMosquittoShim_Client_unsentCount(CMosquittoShim_Client *c) { return atomic_load(&c->unsent); }

bool CMosquittoShim_Client_withoutWakePair(CMosquittoShim_Client *c) { return c->withoutWakePair; }

bool CMosquittoShim_hasLinuxSpeedUps(void) {
#ifdef SHIM_LINUX
    return true;
#else
    return false;
#endif
}

uint64_t CMosquittoShim_Client_outstandingPublishes(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->publishLock);
    uint64_t outstanding = unwrittenQos0(c);
    pthread_mutex_unlock(&c->publishLock);
    return outstanding;
}

bool CMosquittoShim_Client_armDrain(CMosquittoShim_Client *c, uint64_t target) {
    atomic_store(&c->drainTargetPlusOne, target + 1);
    // Already drained: the caller goes on. The arming stays (all waiters share one target, and disarming here could
    // take away the event another waiter is owed); a stale arming costs one spurious event at most.
    return CMosquittoShim_Client_outstandingPublishes(c) <= target;
}

bool CMosquittoShim_Client_takeDrained(CMosquittoShim_Client *c) { return atomic_exchange(&c->drained, false); }
