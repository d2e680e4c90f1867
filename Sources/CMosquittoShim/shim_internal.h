// Private to the C shim (not part of the module's public header): the client structure, the platform switches and
// the functions one file of the shim calls in another. The shim, by file:
//   library.c  process-wide libmosquitto setup and error texts (any thread)
//   handle.c   creating and destroying a client: the libmosquitto handle, options, TLS (Swift, any thread)
//   wake.c     waking the network loop and asking it for a dispatch round (any thread)
//   loop.c     the network loop (the client's own thread)
//   events.c   libmosquitto's callbacks filling the message ring and event list (loop thread), and the dispatcher
//              side taking them out (Swift's dispatch function on the loop thread; counters from any thread)
//   publish.c  the direct QoS 0 publish path and the operations (publishing threads, any thread)
//
// The CoatyMQTT C shim: owns the libmosquitto callbacks and a network-loop thread. The callbacks (C only) copy
// messages into a ring and events into a list, neither ever dropped. The ring is bounded by back-pressure: the loop
// reads no more from the socket while the ring holds its capacity or Swift paused reading (see readAllowed), so TCP
// flow control holds the rest in the kernel and the broker; a read step already under way may overshoot the capacity
// by the packets it completes (the ring grows for them);
// the loop thread calls the Swift dispatch function between its steps (outside every libmosquitto callback and
// lock), which takes them from there (see CMosquittoShim_Client_setDispatch).

// The locks: six, one per kind of shared state. None of them is taken while another of ours is held, except
// writeLock inside publishLock (a QoS 0 publish taking the direct path); libmosquitto's own locks are taken inside
// ackLock and publishLock (its publish and subscribe calls), and ours inside its callbacks (loop thread). The
// ThreadSanitizer job (Scripts/tsan-test) watches these orders.
//   writeLock    the duplicate socket and the direct packets waiting on it: publishing threads and the loop thread
//   queueLock    the message ring and the event list: the loop thread (producer) and Swift's dispatch (consumer)
//   controlLock  starting, stopping and the loop's back-off sleep: Swift's calls and the loop thread
//   ackLock      QoS 1/2 message ids in flight, and keeping publishes and subscribes out of mosquitto_connect_async
//   publishLock  QoS 0 accounting (queued versus written), so a settle never sees a publish half done
//   errorLock    the last line libmosquitto logged, written by its log callback, read when an event is made
// Everything else shared is an atomic read by one side and written by the other (see each field).

#ifndef CMOSQUITTOSHIM_INTERNAL_H
#define CMOSQUITTOSHIM_INTERNAL_H

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

// Measurement switches: COATY_SHIM_DISABLE, read once per process (a comma-separated list, e.g.
// COATY_SHIM_DISABLE=direct,quickack), turns tricks off so one binary measures each against its fallback (the
// benchmark does, Benchmarks/MQTTBenchmark; the tests run with any of them off too). Not a configuration: unset, every
// trick the build has is on. The names (CMosquittoShim_Trick* in the public header, see shimTrickDisabled):
//   direct    QoS 0 PUBLISH written by the publishing thread on a dup'd socket (publishDirect); off: queued in
//             libmosquitto with mosquitto_publish_v5 and written by the loop thread, as QoS 1/2 and TLS always are.
//             The loop's own PINGREQs while reads are held (keepAliveWhileHeld) still use the duplicate.
//   quickack  TCP_QUICKACK renewed before each loop wait, paced while a stream arrives (renewQuickAck); off: never set
//   all       every one of them
//
// What each trick buys, measured in one run against plain libmosquitto, and why each stays: Benchmarks/README.md
// ("The shim's tricks"). A trick stays only where such a run shows a user-visible gain of at least 10 %.

// Writes on the dup'd socket must not raise SIGPIPE: MSG_NOSIGNAL per call where it exists, SO_NOSIGPIPE on the
// socket elsewhere (see directFd).
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

// Functions shared between the shim's files stay out of the library's exported symbols.
#define SHIM_HIDDEN __attribute__((visibility("hidden")))


#define SHIM_TIMEOUT_CODE (-1000)
#define SHIM_LOOP_TIMEOUT_MS 100
/// At most this many packets are read after one poll (see loopOnce).
#define SHIM_READ_BURST 64
/// See CMosquittoShim_BriefSessionMilliseconds (public: the Swift side names it in its warning).
#define SHIM_BRIEF_SESSION_MS CMosquittoShim_BriefSessionMilliseconds
/// The wait of one mosquitto_loop step until CONNACK: it cannot watch the wake-up pipe, so short steps bound how
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

/// Settings, written by CMosquittoShim_Client_create and read-only after (any thread). Broker 0 is the primary,
/// the others its fallbacks, tried in order.
struct ShimSettings {
    char **hosts;
    int *ports;
    int brokerCount;
    int keepAlive;
    int connectTimeoutMs;
    int reconnectDelayMs;
    int maxReconnectDelayMs;
    int stopFlushMs;
    bool quickAck;
    bool protocolV5;
    bool plainTCP;       // no TLS: the session's socket is duplicated for direct writes (see openDirect)
    bool directPublish;  // plain TCP and not switched off: QoS 0 PUBLISH packets may be written directly
    size_t capacity;     // of the message ring: the soft limit, reading pauses at it (see readAllowed)
    bool holdAcks;       // durable delivery: QoS > 0 answers wait for CMosquittoShim_Client_acknowledgeThrough
};

/// The loop thread's own state (loop.c, and the callbacks in events.c, which run on that thread); only
/// `currentBroker` is read elsewhere (pushEvent, any thread).
struct ShimLoopState {
    atomic_int currentBroker;  // the broker of the current (or next) attempt
    // When the current session's CONNACK came, and how many sessions in a row were brief.
    int64_t sessionStartMs;
    int briefSessions;
    // TCP_QUICKACK pacing (see renewQuickAck).
    int64_t quickAckRenewedNs;
    int64_t rateWindowStartNs;
    uint64_t received;        // PUBLISH packets received
    uint64_t rateWindowReceived;
    bool streaming;           // the last rate window saw at least SHIM_STREAM_MESSAGES_PER_MS messages
    int64_t wroteSeenNs;      // when the loop last saw this client write (a packet queued, or a QoS > 0 answer due)
    uint64_t quickAckPacketsSeen;  // `packetsQueued` when wroteSeenNs was last updated
    bool answerDue;           // a QoS > 0 message arrived, which libmosquitto answers (PUBACK / PUBREC)
    uint64_t packetsSeen;     // `packetsQueued` when the loop last looked
    int64_t pausedPingNs;     // when the last keep-alive PINGREQ of a pause was written
    bool sessionUp;           // a CONNACK accepted the current session
    bool refusedThisAttempt;  // the broker refused the current attempt (its CONNACK said so)
};

/// The direct QoS 0 writes (publish.c, see publishDirect): guarded by writeLock, which the loop thread also
/// holds while it writes.
struct ShimDirect {
    pthread_mutex_t writeLock;
    int directFd;                        // a duplicate of the session's socket; -1 outside a session
    struct OutPacket *oursHead;          // direct packets not (fully) written yet, oldest first
    struct OutPacket *oursTail;
    atomic_bool directReady;             // directFd is open (set and cleared under writeLock)
    atomic_bool oursNonEmpty;            // oursHead != NULL, for the loop's poll
    atomic_uint_fast64_t flushedThrough; // every packet counted in packetsQueued up to this was written
    atomic_uint_fast32_t maxPacketSize;  // the broker's Maximum Packet Size (MQTT 5 CONNACK); 0: none
    atomic_uint_fast64_t directPublishes; // QoS 0 publishes that took the direct path (for tests)
};

/// Waking the loop (wake.c): other threads that queue a packet count it in `packetsQueued` and, while the
/// loop thread polls, wake it through `wakeFd` (at most one write per wait): the read end of a pipe whose write
/// end is `wakeWriteFd`. The dispatch function the loop calls between its steps (set before start, under
/// controlLock; the loop copies it when it starts), and whether another thread asked for a round (wantDispatch).
struct ShimWake {
    int wakeFd;
    int wakeWriteFd;
    atomic_uint_fast64_t packetsQueued;
    atomic_bool loopPolling;
    atomic_bool wakePending;
    CMosquittoShim_DispatchFunction dispatch;
    void *dispatchContext;
    atomic_bool dispatchWanted;
    atomic_bool backingOff;  // the loop thread sleeps in backoffSleep (wantDispatch then signals controlCond)
};

/// What the callbacks hand to Swift (events.c): the message ring and the event list, guarded by queueLock;
/// the loop thread produces, Swift's dispatch consumes.
struct ShimQueue {
    pthread_mutex_t queueLock;
    CMosquittoShim_Message **ring;
    size_t allocated;      // slots in `ring` (>= capacity; grows for a read step's overshoot)
    size_t head;
    size_t count;
    atomic_size_t queuedMirror;  // `count`, for the loop's read decision without queueLock
    atomic_bool readPaused;      // Swift asked the loop to stop reading (CMosquittoShim_Client_setReadPaused)
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
};

/// Durable delivery and the intake (see CMosquittoShim_Client_acknowledgeThrough, closeIntake): atomics
/// written by one side and read by the other.
struct ShimIntake {
    // The ring number of the last QoS > 0 message (written by onMessage on the loop thread), and the number through
    // which the application handled every message.
    atomic_uint_fast64_t lastAnsweredMessage;
    atomic_uint_fast64_t acknowledgedThrough;
    // This session's held answers followed a read with nothing else queued (written by the loop thread; read by
    // publishDirect under writeLock: while answers are held, a QoS 0 publish may then go ahead of them).
    atomic_bool heldBehindWhole;
    // The application closed the intake (CMosquittoShim_Client_closeIntake) or the client is stopping: the loop reads
    // nothing more, so what the broker sends from then on stays with it (and with a persistent session).
    atomic_bool intakeClosed;
    // Loop steps (loopOnce) begun and ended: a step begun after the intake closed reads nothing (see
    // CMosquittoShim_Client_intakeSettled).
    atomic_uint_fast64_t stepsBegun;
    atomic_uint_fast64_t stepsEnded;
    atomic_bool readingHeld;     // the loop's last step did not read because of back-pressure (written by the loop)
};

/// Starting and stopping the loop, guarded by controlLock: Swift's calls and the loop thread.
struct ShimControl {
    pthread_mutex_t controlLock;
    pthread_cond_t controlCond;
    bool loopRunning;
    atomic_bool stopRequested;
};

/// QoS 1/2 publish message ids in flight, guarded by ackLock. ackLock also keeps QoS 1/2 publishes, subscribes
/// and unsubscribes out of mosquitto_connect_async (see loopMain).
struct ShimTracked {
    pthread_mutex_t ackLock;
    uint8_t tracked[65536 / 8];
};

/// QoS 0 accounting: publishes queued in libmosquitto (guarded by publishLock, so a settle never sees a publish
/// half done) versus PUBLISH packets written to the socket (on_publish, loop thread). What is queued but never
/// written when a connection ends (or the graceful stop's flush deadline passes) is counted in `unsent`.
struct ShimQos0 {
    pthread_mutex_t publishLock;
    // `qos0Queued` changes only under publishLock; it is atomic so the loop thread can read it without the lock.
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
};

/// The last error/warning line libmosquitto logged, guarded by errorLock (its log callback writes, an event
/// reads).
struct ShimError {
    pthread_mutex_t errorLock;
    char lastError[256];
};

/// A client: its libmosquitto handle, a reference count (Swift's and the loop thread's), and its state in parts,
/// each named for the file or thread that owns it and the lock (if any) that guards it.
struct CMosquittoShim_Client {
    struct mosquitto *mosq;
    atomic_int refCount;
    struct ShimSettings settings;
    struct ShimLoopState loop;
    struct ShimDirect direct;
    struct ShimWake wake;
    struct ShimQueue queue;
    struct ShimIntake intake;
    struct ShimControl control;
    struct ShimTracked acks;
    struct ShimQos0 qos0;
    struct ShimError error;
};

// MARK: - Helpers (every file)

static inline int64_t nowMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t nowNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline char *copyString(const char *s) { return s ? strdup(s) : NULL; }

// MARK: - Shared between files

// The client whose loop runs on this thread, or NULL (set by loop.c, read by events.c).
extern SHIM_HIDDEN _Thread_local CMosquittoShim_Client *loopClientOfThisThread;
// The files in the order of their calls: each calls only files to its left (none calls back to the right).
//   library.c  <- wake.c <- events.c <- publish.c <- handle.c <- loop.c

// wake.c
SHIM_HIDDEN void openWakeChannel(CMosquittoShim_Client *c);
SHIM_HIDDEN void signalLoop(CMosquittoShim_Client *c);
SHIM_HIDDEN void drainWakeChannel(CMosquittoShim_Client *c);
SHIM_HIDDEN void wakeLoop(CMosquittoShim_Client *c);
SHIM_HIDDEN void wakeLoopIfPolling(CMosquittoShim_Client *c);
SHIM_HIDDEN void wantDispatch(CMosquittoShim_Client *c);
// events.c
SHIM_HIDDEN void onConnect(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props);
SHIM_HIDDEN void onMessage(struct mosquitto *mosq, void *obj, const struct mosquitto_message *msg, const mosquitto_property *props);
SHIM_HIDDEN void onPublish(struct mosquitto *mosq, void *obj, int mid, int reasonCode, const mosquitto_property *props);
SHIM_HIDDEN void onSubscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted, const mosquitto_property *props);
SHIM_HIDDEN void onUnsubscribe(struct mosquitto *mosq, void *obj, int mid, const mosquitto_property *props);
SHIM_HIDDEN void onLog(struct mosquitto *mosq, void *obj, int level, const char *line);
SHIM_HIDDEN void checkDrain(CMosquittoShim_Client *c);
SHIM_HIDDEN void pushEvent(CMosquittoShim_Client *c, int kind, int code, int mid, const char *detail);
/// pushEvent for a ConnectionLost, with the brief sessions in a row (loop thread).
SHIM_HIDDEN void pushConnectionLost(CMosquittoShim_Client *c, int code, int briefSessions, const char *detail);
SHIM_HIDDEN void setMidBit(uint8_t *bits, int mid, bool on);
SHIM_HIDDEN void takeLastError(CMosquittoShim_Client *c, char *out, size_t size);
SHIM_HIDDEN uint64_t unwrittenQos0(CMosquittoShim_Client *c);
// library.c
SHIM_HIDDEN bool shimTrickDisabled(int trick);  // a CMosquittoShim_Trick* bit
// publish.c
SHIM_HIDDEN void dropOurs(CMosquittoShim_Client *c);
SHIM_HIDDEN void closeDirect(CMosquittoShim_Client *c);
SHIM_HIDDEN bool flushOursLocked(CMosquittoShim_Client *c);
SHIM_HIDDEN int loopWrite(CMosquittoShim_Client *c);
SHIM_HIDDEN void openDirect(CMosquittoShim_Client *c);

#endif
