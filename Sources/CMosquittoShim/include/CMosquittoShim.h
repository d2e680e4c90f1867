#ifndef CMOSQUITTOSHIM_H
#define CMOSQUITTOSHIM_H

// The C side of CoatyMQTT. It owns every libmosquitto callback and its own network-loop thread,
// and hands messages, connection events and acknowledgements to Swift through queues with a
// wake-up, so no Swift code ever runs on a libmosquitto thread. Raw pointers stay between this
// file and the thin Swift wrapper in CoatyMQTT.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Returns the libmosquitto library version as major*1000000 + minor*1000 + revision.
int CMosquittoShim_libraryVersion(void);

/// Calls mosquitto_lib_init exactly once per process (thread-safe). Returns its result.
int CMosquittoShim_libraryInit(void);

/// Returns libmosquitto's description of an error code (never NULL).
const char *CMosquittoShim_errorString(int code);

/// Returns a description of a CONNACK / MQTT 5 reason code (never NULL).
const char *CMosquittoShim_reasonString(int code, bool v5);

/// An incoming message: one allocation holding the header, the topic (NUL-terminated), the payload and the MQTT 5
/// user properties.
typedef struct CMosquittoShim_Message {
    uint32_t topicLength;
    uint32_t payloadLength;
    int32_t qos;
    int32_t retain;
    /// The bytes of the MQTT 5 user properties after the payload (0 without any): for each property in order, the
    /// name's length (2 bytes, host order), the name, the value's length (2 bytes, host order), the value.
    uint32_t userPropertiesLength;
} CMosquittoShim_Message;

/// The topic bytes of a message (topicLength bytes, followed by a NUL).
static inline const uint8_t *CMosquittoShim_Message_topic(const CMosquittoShim_Message *message) {
    return (const uint8_t *)(message + 1);
}

/// The payload bytes of a message (payloadLength bytes).
static inline const uint8_t *CMosquittoShim_Message_payload(const CMosquittoShim_Message *message) {
    return (const uint8_t *)(message + 1) + message->topicLength + 1;
}

/// The user property bytes of a message (userPropertiesLength bytes; see CMosquittoShim_Message).
static inline const uint8_t *CMosquittoShim_Message_userProperties(const CMosquittoShim_Message *message) {
    return CMosquittoShim_Message_payload(message) + message->payloadLength;
}

/// Frees a message taken from the ring.
void CMosquittoShim_Message_free(CMosquittoShim_Message *message);

/// Kinds of events handed to Swift. Events are never dropped.
typedef enum CMosquittoShim_EventKind {
    /// A CONNACK with reason code 0 arrived: the session is up.
    CMosquittoShim_EventConnected = 1,
    /// A CONNACK refused the connection (`code` is the CONNACK / reason code).
    CMosquittoShim_EventConnectionRefused = 2,
    /// A connection attempt failed before a CONNACK (`code` is a MOSQ_ERR_* code, or -1000 for a CONNACK timeout).
    CMosquittoShim_EventConnectFailed = 3,
    /// An established connection was lost (`code` is a MOSQ_ERR_* code).
    CMosquittoShim_EventConnectionLost = 4,
    /// A tracked QoS 1/2 publish was acknowledged (`mid`, `code` = v5 reason code, 0 on success).
    CMosquittoShim_EventPublished = 5,
    /// A SUBACK arrived (`mid`; `code` = index of the first refused filter, or -1 when all were granted).
    CMosquittoShim_EventSubscribed = 6,
    /// An UNSUBACK arrived (`mid`).
    CMosquittoShim_EventUnsubscribed = 7,
    /// The network loop thread has stopped after a stop request.
    CMosquittoShim_EventStopped = 8,
    /// The QoS 0 publications queued but unwritten fell to the target armed with CMosquittoShim_Client_armDrain.
    CMosquittoShim_EventDrained = 9,
} CMosquittoShim_EventKind;

/// A session the broker ends within this many milliseconds of its CONNACK is brief; brief sessions in a row mean
/// another client with the same client id most of the time (each connect takes the session from the other one), and
/// the loop keeps backing off across them.
enum { CMosquittoShim_BriefSessionMilliseconds = 2000 };

/// An event; `detail` holds the last error line libmosquitto logged, when relevant.
typedef struct CMosquittoShim_Event {
    int32_t kind;
    int32_t code;
    int32_t mid;
    /// The index of the broker the loop was connecting or connected to (0: the primary, then the fallbacks).
    int32_t broker;
    /// ConnectionLost: how many sessions in a row the broker ended within CMosquittoShim_BriefSessionMilliseconds
    /// of its CONNACK (the signature of another client with the same client id); 0 for other events.
    int32_t briefSessions;
    /// How many messages had been put into the ring when the event was queued.
    uint64_t afterMessages;
    char detail[256];
    struct CMosquittoShim_Event *next;
} CMosquittoShim_Event;

/// Frees an event taken with CMosquittoShim_Client_popEvent.
void CMosquittoShim_Event_free(CMosquittoShim_Event *event);

/// Options for a client; strings are copied by CMosquittoShim_Client_create.
typedef struct CMosquittoShim_Options {
    const char *clientId;
    const char *host;
    int32_t port;
    /// Fallback brokers tried in order after `host`/`port` (same TLS setting and credentials); may be NULL when
    /// fallbackCount is 0. A failed attempt moves to the next broker at once; a full round without a session backs
    /// off. After a lost session the lost broker is retried first.
    const char *const *fallbackHosts;
    const int32_t *fallbackPorts;
    int32_t fallbackCount;
    int32_t keepAliveSeconds;
    bool cleanSession;
    bool protocolV5;
    const char *username;   // may be NULL
    const char *password;   // may be NULL
    bool useTLS;
    const char *caFile;     // may be NULL (system CAs)
    const char *certificateFile;  // may be NULL
    const char *privateKeyFile;   // may be NULL
    bool verifyServer;
    bool hasWill;
    const char *willTopic;
    const void *willPayload;
    int32_t willPayloadLength;
    int32_t willQoS;
    bool willRetain;
    int32_t connectTimeoutMilliseconds;
    int32_t reconnectDelayMilliseconds;
    int32_t maxReconnectDelayMilliseconds;
    int32_t messageCapacity;
    int32_t stopFlushMilliseconds;  // how long a graceful stop may take to write what is queued
    bool tcpNoDelay;                // set TCP_NODELAY on the socket (disable Nagle's algorithm)
    bool holdAcknowledgements;      // durable delivery: see CMosquittoShim_Client_acknowledgeThrough
} CMosquittoShim_Options;

typedef struct CMosquittoShim_Client CMosquittoShim_Client;

/// Creates a client (no thread yet). Returns NULL and sets *errorCode (MOSQ_ERR_*) and errorText on failure.
CMosquittoShim_Client *CMosquittoShim_Client_create(const CMosquittoShim_Options *options, int *errorCode,
                                                    char *errorText, size_t errorTextSize);

/// Drops the caller's reference; the client is destroyed when its loop thread has ended too.
void CMosquittoShim_Client_release(CMosquittoShim_Client *client);

/// The dispatch function: called on the network loop thread between its steps (never inside a libmosquitto callback,
/// so no libmosquitto lock is held; it may publish, subscribe and stop), to take the messages and events the step
/// queued and run work queued for it (CMosquittoShim_Client_wakeDispatcher). It must return promptly: the loop reads
/// and writes nothing while it runs. `final` is true once, for the loop's last call, after the Stopped event was
/// queued and taken; the context may be released then.
typedef void (*CMosquittoShim_DispatchFunction)(void *context, bool final);

/// Sets the dispatch function and its context for the next CMosquittoShim_Client_start, which takes them (a running
/// loop keeps the one it started with; a later start without a new setDispatch runs without one).
void CMosquittoShim_Client_setDispatch(CMosquittoShim_Client *client, CMosquittoShim_DispatchFunction function,
                                       void *context);

/// Starts the network loop thread, which connects and reconnects with backoff until stopped.
/// Returns MOSQ_ERR_SUCCESS, or an error when a loop is already running or the thread cannot start.
int CMosquittoShim_Client_start(CMosquittoShim_Client *client);

/// Asks the loop thread to flush (up to stopFlushMilliseconds), send DISCONNECT and end; never blocks.
/// A Stopped event follows; QoS 0 messages still unsent then are counted (CMosquittoShim_Client_unsentCount).
void CMosquittoShim_Client_stop(CMosquittoShim_Client *client);

/// Publishes. For QoS 1/2 the acknowledgement is reported as a Published event for *mid.
int CMosquittoShim_Client_publish(CMosquittoShim_Client *client, int *mid, const char *topic, const void *payload,
                                  int payloadLength, int qos, bool retain);

/// Publishes with MQTT 5 user properties (`count` name/value pairs, UTF-8, NUL-terminated), always through
/// libmosquitto's queue (never the direct path). A client speaking MQTT 3.1.1 returns MOSQ_ERR_NOT_SUPPORTED.
int CMosquittoShim_Client_publishWithUserProperties(CMosquittoShim_Client *client, int *mid, const char *topic,
                                                   const void *payload, int payloadLength, int qos, bool retain,
                                                   const char *const *names, const char *const *values, int count);

/// Subscribes to `count` filters with one QoS in one SUBSCRIBE packet; the SUBACK is a Subscribed event, taken in
/// the dispatch round after the loop step that read it.
int CMosquittoShim_Client_subscribe(CMosquittoShim_Client *client, int *mid, const char *const *filters, int count,
                                    int qos);

/// Unsubscribes from one filter; the UNSUBACK is an Unsubscribed event.
int CMosquittoShim_Client_unsubscribe(CMosquittoShim_Client *client, int *mid, const char *filter);

/// Dispatch reasons (bit mask) of CMosquittoShim_Client_dispatchReasons.
enum {
    CMosquittoShim_WakeMessages = 1,
    CMosquittoShim_WakeEvents = 2,
    CMosquittoShim_WakeClosed = 8,
};

/// What the dispatch function has to do besides its every-round work (running queued jobs, reporting drops); never
/// blocks: a waiting message consumer can be served, events are queued, or the dispatcher was closed. Returns a mask
/// of the reasons and clears the one-shot one (messages).
int CMosquittoShim_Client_dispatchReasons(CMosquittoShim_Client *client);

/// Asks the loop thread for a dispatch round soon: work was queued for it outside the shim.
void CMosquittoShim_Client_wakeDispatcher(CMosquittoShim_Client *client);

/// Makes CMosquittoShim_Client_dispatchReasons return WakeClosed from now on (the session was abandoned), and ends a
/// consumer's wait in CMosquittoShim_Client_takeMessagesWaiting.
void CMosquittoShim_Client_closeDispatcher(CMosquittoShim_Client *client);

/// Re-opens the dispatcher after CMosquittoShim_Client_closeDispatcher (for a new session).
void CMosquittoShim_Client_openDispatcher(CMosquittoShim_Client *client);

/// Removes and returns the oldest event, or NULL.
CMosquittoShim_Event *CMosquittoShim_Client_popEvent(CMosquittoShim_Client *client);

/// Takes the oldest queued event once every message queued before it has been taken from the ring (so handling it
/// cannot overtake those messages), or NULL; a stopped event only with `includeStopped`.
CMosquittoShim_Event *CMosquittoShim_Client_popDueEvent(CMosquittoShim_Client *client, bool includeStopped);

/// Takes up to `max` messages (ownership passes to the caller). When none is queued and `arm` is true,
/// the dispatch round after the next incoming message reports WakeMessages. Returns the number taken.
size_t CMosquittoShim_Client_takeMessages(CMosquittoShim_Client *client, CMosquittoShim_Message **out, size_t max,
                                          bool arm);

/// Takes up to `max` messages, first blocking the calling thread up to `timeoutMicroseconds` while none is queued
/// (a short bounded wait that saves two thread hand-offs when messages follow each other closely).
size_t CMosquittoShim_Client_takeMessagesWaiting(CMosquittoShim_Client *client, CMosquittoShim_Message **out,
                                                 size_t max, int timeoutMicroseconds);

/// Frees every queued message.
void CMosquittoShim_Client_discardMessages(CMosquittoShim_Client *client);

/// Holds (true) or resumes (false) reading from the socket, from any thread: the consumer-side back-pressure (an
/// observer downstream is full). Reads are also held while the ring holds `messageCapacity` messages. While reads are
/// held on plain TCP the loop keeps the session alive with its own PINGREQs (see keepAliveWhileHeld in loop.c).
void CMosquittoShim_Client_setReadPaused(CMosquittoShim_Client *client, bool paused);

/// Durable delivery (`holdAcknowledgements`): libmosquitto answers a QoS 1/2 PUBLISH when it reads it, before the
/// application has it; with this option the loop holds its writes (which carry those answers) and its reads after a
/// read step that brought a QoS > 0 message, until the application says every message through that one is handled
/// (committed) with this call. So the broker keeps (and redelivers to a persistent session) everything not yet
/// handled. `through` counts messages as CMosquittoShim_Client_acknowledgementDue does.
void CMosquittoShim_Client_acknowledgeThrough(CMosquittoShim_Client *client, uint64_t through);

/// With `holdAcknowledgements`: the number (1-based, counting every message put into the ring) of the last QoS > 0
/// message received and not acknowledged yet, or 0 when none waits.
uint64_t CMosquittoShim_Client_acknowledgementDue(CMosquittoShim_Client *client);

/// Closes the intake until the next start: the loop reads nothing more from the broker (a connection loss is still
/// seen), so messages sent from then on stay with the broker, and with `holdAcknowledgements` the count through which
/// the application must acknowledge stops growing. A stopping client closes its intake by itself. Returns the loop
/// step through which a read may still be under way (see CMosquittoShim_Client_intakeSettled).
uint64_t CMosquittoShim_Client_closeIntake(CMosquittoShim_Client *client);

/// Whether the loop ended step `step` (returned by CMosquittoShim_Client_closeIntake): nothing more is read after it, so
/// CMosquittoShim_Client_acknowledgementDue is final. (A client that is connecting, not in a session, reads in
/// libmosquitto's own loop: it does not end steps.)
bool CMosquittoShim_Client_intakeSettled(CMosquittoShim_Client *client, uint64_t step);

/// Whether the loop held its reads in its last step (back-pressure, for tests and statistics).
bool CMosquittoShim_Client_readingHeld(CMosquittoShim_Client *client);

/// The number of incoming messages dropped because no memory was left for them (monotonic; the ring itself never
/// drops: back-pressure holds the reads instead).
uint64_t CMosquittoShim_Client_droppedCount(CMosquittoShim_Client *client);

/// Shim events (acknowledgements, state changes) lost because their allocation failed; each also ends the session
/// so that the client reconnects and re-synchronizes.
uint64_t CMosquittoShim_Client_eventsLostCount(CMosquittoShim_Client *client);

/// Tests only: makes the next `count` event allocations fail, as when memory runs out.
void CMosquittoShim_Client_failEventAllocations(CMosquittoShim_Client *client, int count);
/// The number of QoS 0 publications queued but never written to the socket (monotonic): lost with a connection,
/// or still queued when the graceful stop's flush time ran out. Updated before the ConnectionLost / Stopped event.
uint64_t CMosquittoShim_Client_unsentCount(CMosquittoShim_Client *client);

/// The shim's tricks, as bits of CMosquittoShim_disabledTricks (see the shim's private header for each one).
enum {
    CMosquittoShim_TrickDirect = 1,
    CMosquittoShim_TrickQuickAck = 4,
};

/// The tricks switched off for this process by the environment variable COATY_SHIM_DISABLE (read once; for
/// measurements and for testing the fallbacks), as CMosquittoShim_Trick* bits.
int CMosquittoShim_disabledTricks(void);

/// How many QoS 0 publishes took the direct path (written by the publishing thread on the session's socket); tests
/// use it to see which path ran (never over TLS).
uint64_t CMosquittoShim_Client_directPublishCount(CMosquittoShim_Client *client);

/// QoS 0 publishes queued in libmosquitto whose PUBLISH packet is not written yet (for back-pressure).
uint64_t CMosquittoShim_Client_outstandingPublishes(CMosquittoShim_Client *client);

/// Asks for one CMosquittoShim_EventDrained once the QoS 0 publications queued but unwritten are at most `target`
/// (written, or settled as unsent when the connection ends). Returns true when they already are.
bool CMosquittoShim_Client_armDrain(CMosquittoShim_Client *client, uint64_t target);

/// Whether a drain event fired since the last call (lets a dispatcher busy with messages resume waiters early).
bool CMosquittoShim_Client_takeDrained(CMosquittoShim_Client *client);

#endif
