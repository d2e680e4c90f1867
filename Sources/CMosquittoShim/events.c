// What the loop thread hands to Swift: libmosquitto's callbacks (loop thread, under libmosquitto's callback
// mutex) copy messages into the ring and events into the list; the dispatcher side (Swift's dispatch function on
// the loop thread, or any thread for the counters) takes them out.

#include "shim_internal.h"

// MARK: - Events

/// The client whose network loop runs on this thread, if any (see CMosquittoShim_Client_takeMessagesWaiting).
SHIM_HIDDEN _Thread_local CMosquittoShim_Client *loopClientOfThisThread;

/// Queues an event for the dispatcher and asks for a dispatch round (on the loop thread during a step, the round after
/// the step takes it anyway; elsewhere, or during a round, the request makes the next loop step not wait).
static void queueEvent(CMosquittoShim_Client *c, int kind, int code, int mid, int briefSessions, const char *detail) {
    CMosquittoShim_Event *event = NULL;
    if (atomic_load(&c->queue.failEventAllocations) > 0) {
        atomic_fetch_sub(&c->queue.failEventAllocations, 1);
    } else {
        event = calloc(1, sizeof(CMosquittoShim_Event));
    }
    if (!event) {
        // Out of memory: the event is lost. Never silently: it is counted (the dispatch round logs it), and the loop
        // ends the session, so the client reconnects and re-synchronizes what the event would have told (an
        // acknowledgement, a subscription) instead of waiting for it forever.
        atomic_fetch_add(&c->queue.eventsLost, 1);
        atomic_store(&c->queue.resyncNeeded, true);
        wantDispatch(c);
        return;
    }
    event->kind = kind;
    event->code = code;
    event->mid = mid;
    event->briefSessions = briefSessions;
    event->broker = atomic_load(&c->loop.currentBroker);
    if (detail) snprintf(event->detail, sizeof(event->detail), "%s", detail);
    pthread_mutex_lock(&c->queue.queueLock);
    event->afterMessages = c->queue.pushedMessages;
    if (c->queue.eventTail) {
        c->queue.eventTail->next = event;
    } else {
        c->queue.eventHead = event;
    }
    c->queue.eventTail = event;
    pthread_mutex_unlock(&c->queue.queueLock);
    wantDispatch(c);
}

SHIM_HIDDEN void pushEvent(CMosquittoShim_Client *c, int kind, int code, int mid, const char *detail) {
    queueEvent(c, kind, code, mid, 0, detail);
}

SHIM_HIDDEN void pushConnectionLost(CMosquittoShim_Client *c, int code, int briefSessions, const char *detail) {
    queueEvent(c, CMosquittoShim_EventConnectionLost, code, 0, briefSessions, detail);
}

/// Sets or clears `mid` in a message-id bitset (`tracked`); the caller holds ackLock.
SHIM_HIDDEN void setMidBit(uint8_t *bits, int mid, bool on) {
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
    pthread_mutex_lock(&c->acks.ackLock);
    bool set = (bits[mid >> 3] >> (mid & 7)) & 1;
    setMidBit(bits, mid, false);
    pthread_mutex_unlock(&c->acks.ackLock);
    return set;
}

SHIM_HIDDEN void takeLastError(CMosquittoShim_Client *c, char *out, size_t size) {
    pthread_mutex_lock(&c->error.errorLock);
    snprintf(out, size, "%s", c->error.lastError);
    c->error.lastError[0] = 0;
    pthread_mutex_unlock(&c->error.errorLock);
}

// MARK: - Callbacks (run on the loop thread under libmosquitto's callback mutex; never set callbacks here)

SHIM_HIDDEN void onConnect(struct mosquitto *mosq, void *obj, int rc, int flags, const mosquitto_property *props) {
    (void)mosq; (void)flags;
    CMosquittoShim_Client *c = obj;
    if (rc == 0) {
        // What libmosquitto enforces on publish from the CONNACK, the direct writes enforce too (see publishDirect).
        uint32_t maxPacketSize = 0;
        if (props) (void)mosquitto_property_read_int32(props, MQTT_PROP_MAXIMUM_PACKET_SIZE, &maxPacketSize, false);
        atomic_store(&c->direct.maxPacketSize, maxPacketSize);
        c->loop.sessionUp = true;
        c->loop.sessionStartMs = nowMs();
        pushEvent(c, CMosquittoShim_EventConnected, 0, 0, NULL);
    } else {
        c->loop.refusedThisAttempt = true;
        pushEvent(c, CMosquittoShim_EventConnectionRefused, rc, 0, NULL);
    }
}

/// Doubles the ring (queueLock held), keeping the queued messages in order; false when out of memory. Only a read step
/// that completes several packets after the ring reached its capacity gets here (see readAllowed).
static bool growRingLocked(CMosquittoShim_Client *c) {
    size_t grown = c->queue.allocated * 2;
    CMosquittoShim_Message **ring = calloc(grown, sizeof(CMosquittoShim_Message *));
    if (!ring) return false;
    for (size_t i = 0; i < c->queue.count; i++) ring[i] = c->queue.ring[(c->queue.head + i) % c->queue.allocated];
    free(c->queue.ring);
    c->queue.ring = ring;
    c->queue.allocated = grown;
    c->queue.head = 0;
    return true;
}

/// The most user properties one received message keeps (more are left out: a trace context needs two).
enum { MaxUserProperties = 32 };

/// The user properties of a received message, read once: libmosquitto's copies of their strings, freed by
/// freeUserProperties.
typedef struct UserProperties {
    int count;
    size_t size;  // the bytes they take in a message (see CMosquittoShim_Message)
    char *names[MaxUserProperties];
    char *values[MaxUserProperties];
    uint16_t nameLengths[MaxUserProperties];
    uint16_t valueLengths[MaxUserProperties];
} UserProperties;

/// Reads the user properties of `props` (at most MaxUserProperties; one that cannot be read, for lack of memory, is
/// left out). MQTT caps each string at 65535 bytes and forbids NUL in it (libmosquitto checks), so strlen is its
/// length.
static void readUserProperties(const mosquitto_property *props, UserProperties *out) {
    out->count = 0;
    out->size = 0;
    for (const mosquitto_property *p = props; p && out->count < MaxUserProperties; p = mosquitto_property_next(p)) {
        if (mosquitto_property_identifier(p) != MQTT_PROP_USER_PROPERTY) continue;
        char *name = NULL, *value = NULL;
        if (!mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &value, false) || !name ||
            !value) {
            free(name);
            free(value);
            continue;
        }
        size_t nameLength = strlen(name), valueLength = strlen(value);
        if (nameLength > UINT16_MAX || valueLength > UINT16_MAX) {
            free(name);
            free(value);
            continue;
        }
        int i = out->count++;
        out->names[i] = name;
        out->values[i] = value;
        out->nameLengths[i] = (uint16_t)nameLength;
        out->valueLengths[i] = (uint16_t)valueLength;
        out->size += 4 + nameLength + valueLength;
    }
}

/// Writes what readUserProperties read as CMosquittoShim_Message describes (exactly `properties->size` bytes).
static void copyUserProperties(const UserProperties *properties, uint8_t *out) {
    for (int i = 0; i < properties->count; i++) {
        memcpy(out, &properties->nameLengths[i], 2);
        memcpy(out + 2, properties->names[i], properties->nameLengths[i]);
        out += 2 + properties->nameLengths[i];
        memcpy(out, &properties->valueLengths[i], 2);
        memcpy(out + 2, properties->values[i], properties->valueLengths[i]);
        out += 2 + properties->valueLengths[i];
    }
}

static void freeUserProperties(UserProperties *properties) {
    for (int i = 0; i < properties->count; i++) {
        free(properties->names[i]);
        free(properties->values[i]);
    }
    properties->count = 0;
}

/// Puts a received message into the ring (loop thread, from libmosquitto's on_message).
static void pushMessage(CMosquittoShim_Client *c, const char *topic, size_t topicLength, const void *payload,
                        size_t payloadLength, int qos, bool retain, const mosquitto_property *props) {
    c->loop.received++;
    if (qos > 0) c->loop.answerDue = true;
    // Durable delivery: the message's number in the ring (pushedMessages changes only on this thread), stored before
    // the allocation that can fail, so a message lost here (no memory) is not acknowledged either: holding through its
    // number holds its answer until the application acknowledges what came before.
    if (qos > 0) atomic_store(&c->intake.lastAnsweredMessage, c->queue.pushedMessages + 1);
    UserProperties properties;  // not zeroed: only count and size are read before they are set
    properties.count = 0;
    properties.size = 0;
    if (props) readUserProperties(props, &properties);
    size_t propertiesLength = properties.size;
    CMosquittoShim_Message *m =
        malloc(sizeof(CMosquittoShim_Message) + topicLength + 1 + payloadLength + propertiesLength);
    if (!m) {
        freeUserProperties(&properties);
        atomic_fetch_add(&c->queue.dropped, 1);
        return;
    }
    m->topicLength = (uint32_t)topicLength;
    m->payloadLength = (uint32_t)payloadLength;
    m->qos = qos;
    m->retain = retain ? 1 : 0;
    m->userPropertiesLength = (uint32_t)propertiesLength;
    uint8_t *bytes = (uint8_t *)(m + 1);
    if (topicLength) memcpy(bytes, topic, topicLength);
    bytes[topicLength] = 0;
    if (payloadLength) memcpy(bytes + topicLength + 1, payload, payloadLength);
    if (propertiesLength) copyUserProperties(&properties, bytes + topicLength + 1 + payloadLength);
    freeUserProperties(&properties);

    pthread_mutex_lock(&c->queue.queueLock);
    if (c->queue.count == c->queue.allocated && !growRingLocked(c)) {
        atomic_fetch_add(&c->queue.dropped, 1);  // out of memory only; reported by the dispatch round after this step
        pthread_mutex_unlock(&c->queue.queueLock);
        free(m);
        return;
    }
    c->queue.ring[(c->queue.head + c->queue.count) % c->queue.allocated] = m;
    c->queue.count += 1;
    atomic_store(&c->queue.queuedMirror, c->queue.count);
    c->queue.pushedMessages += 1;
    bool wakeConsumer = c->queue.consumerBlocked;
    if (c->queue.armed) {
        c->queue.armed = false;
        c->queue.wakeMessages = true;
    }
    pthread_mutex_unlock(&c->queue.queueLock);
    // Signalled after unlocking (the predicate is set under the lock), so the woken thread does not block at once on
    // the lock this thread still holds: one futex wake per message instead of three. A waiting consumer that is not
    // blocked is served by the dispatch round after this loop step.
    if (wakeConsumer) pthread_cond_signal(&c->queue.consumerCond);
}

SHIM_HIDDEN void onMessage(struct mosquitto *mosq, void *obj, const struct mosquitto_message *msg,
                      const mosquitto_property *props) {
    (void)mosq;
    size_t topicLength = msg->topic ? strlen(msg->topic) : 0;
    size_t payloadLength = msg->payloadlen > 0 ? (size_t)msg->payloadlen : 0;
    pushMessage(obj, msg->topic, topicLength, msg->payload, payloadLength, msg->qos, msg->retain, props);
}

/// QoS 0 publishes queued but not written yet. Without publishLock the count can be low by the publishes in flight at
/// this instant (each is queued before it is counted in qos0Queued, and may be written in between).
SHIM_HIDDEN uint64_t unwrittenQos0(CMosquittoShim_Client *c) {
    uint64_t written = atomic_load(&c->qos0.qos0Written);
    uint64_t queued = atomic_load(&c->qos0.qos0Queued);
    return queued > written ? queued - written : 0;
}

/// Fires the armed drain event once the unwritten QoS 0 publications are at most the target (loop thread); read
/// without publishLock, the count may be low, and the waiter re-checks under the lock.
SHIM_HIDDEN void checkDrain(CMosquittoShim_Client *c) {
    uint_fast64_t armed = atomic_load(&c->qos0.drainTargetPlusOne);
    if (armed == 0) return;
    if (unwrittenQos0(c) > armed - 1) return;
    if (atomic_compare_exchange_strong(&c->qos0.drainTargetPlusOne, &armed, 0)) {
        atomic_store(&c->qos0.drained, true);  // for a dispatch round busy with messages (CMosquittoShim_Client_takeDrained)
        pushEvent(c, CMosquittoShim_EventDrained, 0, 0, NULL);
    }
}

SHIM_HIDDEN void onPublish(struct mosquitto *mosq, void *obj, int mid, int reasonCode, const mosquitto_property *props) {
    (void)mosq; (void)props;
    CMosquittoShim_Client *c = obj;
    if (mid < 0 || mid > 65535) return;
    if (takeMidBit(c, c->acks.tracked, mid)) {
        pushEvent(c, CMosquittoShim_EventPublished, reasonCode, mid, NULL);
    } else {
        // libmosquitto calls on_publish for a QoS 0 message once its PUBLISH packet is written.
        atomic_fetch_add(&c->qos0.qos0Written, 1);
        checkDrain(c);
    }
}

SHIM_HIDDEN void onSubscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted,
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

SHIM_HIDDEN void onUnsubscribe(struct mosquitto *mosq, void *obj, int mid, const mosquitto_property *props) {
    (void)mosq; (void)props;
    CMosquittoShim_Client *c = obj;
    pushEvent(c, CMosquittoShim_EventUnsubscribed, 0, mid, NULL);
}

SHIM_HIDDEN void onLog(struct mosquitto *mosq, void *obj, int level, const char *line) {
    (void)mosq;
    if (!(level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING)) || !line) return;
    CMosquittoShim_Client *c = obj;
    pthread_mutex_lock(&c->error.errorLock);
    // Keep the first error of an attempt: it names the cause (e.g. "certificate verify failed").
    if (c->error.lastError[0] == 0) snprintf(c->error.lastError, sizeof(c->error.lastError), "%s", line);
    pthread_mutex_unlock(&c->error.errorLock);
}

// MARK: - Dispatcher side

int CMosquittoShim_Client_dispatchReasons(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queue.queueLock);
    int mask = 0;
    if (c->queue.wakeMessages) mask |= CMosquittoShim_WakeMessages;
    if (c->queue.eventHead) mask |= CMosquittoShim_WakeEvents;
    if (c->queue.dispatcherClosed) mask |= CMosquittoShim_WakeClosed;
    c->queue.wakeMessages = false;
    pthread_mutex_unlock(&c->queue.queueLock);
    return mask;
}

void CMosquittoShim_Client_wakeDispatcher(CMosquittoShim_Client *c) { wantDispatch(c); }

void CMosquittoShim_Client_closeDispatcher(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queue.queueLock);
    c->queue.dispatcherClosed = true;
    pthread_cond_broadcast(&c->queue.consumerCond);
    pthread_mutex_unlock(&c->queue.queueLock);
}

void CMosquittoShim_Client_openDispatcher(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queue.queueLock);
    c->queue.dispatcherClosed = false;
    pthread_mutex_unlock(&c->queue.queueLock);
}

/// Unlinks the oldest event (queueLock held); NULL when there is none.
static CMosquittoShim_Event *unlinkEventLocked(CMosquittoShim_Client *c) {
    CMosquittoShim_Event *event = c->queue.eventHead;
    if (event) {
        c->queue.eventHead = event->next;
        if (!c->queue.eventHead) c->queue.eventTail = NULL;
        event->next = NULL;
    }
    return event;
}

CMosquittoShim_Event *CMosquittoShim_Client_popEvent(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queue.queueLock);
    CMosquittoShim_Event *event = unlinkEventLocked(c);
    pthread_mutex_unlock(&c->queue.queueLock);
    return event;
}

CMosquittoShim_Event *CMosquittoShim_Client_popDueEvent(CMosquittoShim_Client *c, bool includeStopped) {
    pthread_mutex_lock(&c->queue.queueLock);
    CMosquittoShim_Event *head = c->queue.eventHead;
    bool due = head && head->afterMessages <= c->queue.takenMessages &&
               (includeStopped || head->kind != CMosquittoShim_EventStopped);
    CMosquittoShim_Event *event = due ? unlinkEventLocked(c) : NULL;
    pthread_mutex_unlock(&c->queue.queueLock);
    return event;
}

/// Moves up to `max` queued messages to `out` (queueLock held); taking any disarms the wake-up.
/// `roomAgain` tells the caller to wake the loop after unlocking: it may hold its reads for a full ring.
static size_t dequeueLocked(CMosquittoShim_Client *c, CMosquittoShim_Message **out, size_t max, bool *roomAgain) {
    size_t n = c->queue.count < max ? c->queue.count : max;
    for (size_t i = 0; i < n; i++) {
        out[i] = c->queue.ring[c->queue.head];
        c->queue.ring[c->queue.head] = NULL;
        c->queue.head = (c->queue.head + 1) % c->queue.allocated;
    }
    // Room again after the ring held its capacity: the loop may be holding its reads (see readAllowed).
    bool wasFull = c->queue.count >= c->settings.capacity;
    c->queue.count -= n;
    atomic_store(&c->queue.queuedMirror, c->queue.count);
    c->queue.takenMessages += n;
    if (n > 0) c->queue.armed = false;
    *roomAgain = wasFull && n > 0 && loopClientOfThisThread != c;
    return n;
}

size_t CMosquittoShim_Client_takeMessages(CMosquittoShim_Client *c, CMosquittoShim_Message **out, size_t max,
                                          bool arm) {
    bool roomAgain = false;
    pthread_mutex_lock(&c->queue.queueLock);
    size_t n = dequeueLocked(c, out, max, &roomAgain);
    if (n == 0 && arm) c->queue.armed = true;
    pthread_mutex_unlock(&c->queue.queueLock);
    if (roomAgain) wantDispatch(c);
    return n;
}

size_t CMosquittoShim_Client_takeMessagesWaiting(CMosquittoShim_Client *c, CMosquittoShim_Message **out, size_t max,
                                                 int timeoutMicroseconds) {
    // On the loop thread (a consumer running on the delivery executor) nothing can arrive while it waits.
    if (loopClientOfThisThread == c) timeoutMicroseconds = 0;
    pthread_mutex_lock(&c->queue.queueLock);
    if (c->queue.count == 0 && timeoutMicroseconds > 0 && !c->queue.dispatcherClosed) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_nsec += (long)timeoutMicroseconds * 1000L;
        while (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec += 1;
            deadline.tv_nsec -= 1000000000L;
        }
        c->queue.consumerBlocked = true;
        while (c->queue.count == 0 && !c->queue.dispatcherClosed) {
            if (pthread_cond_timedwait(&c->queue.consumerCond, &c->queue.queueLock, &deadline) == ETIMEDOUT) break;
        }
        c->queue.consumerBlocked = false;
    }
    bool roomAgain = false;
    size_t n = dequeueLocked(c, out, max, &roomAgain);
    pthread_mutex_unlock(&c->queue.queueLock);
    if (roomAgain) wantDispatch(c);
    return n;
}

void CMosquittoShim_Client_discardMessages(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->queue.queueLock);
    while (c->queue.count > 0) {
        free(c->queue.ring[c->queue.head]);
        c->queue.ring[c->queue.head] = NULL;
        c->queue.head = (c->queue.head + 1) % c->queue.allocated;
        c->queue.count -= 1;
        atomic_store(&c->queue.queuedMirror, c->queue.count);
        c->queue.takenMessages += 1;  // gone, as if taken: events queued behind them are due
    }
    pthread_mutex_unlock(&c->queue.queueLock);
}

void CMosquittoShim_Client_acknowledgeThrough(CMosquittoShim_Client *c, uint64_t through) {
    uint64_t current = atomic_load(&c->intake.acknowledgedThrough);
    while (through > current && !atomic_compare_exchange_weak(&c->intake.acknowledgedThrough, &current, through)) {
    }
    wantDispatch(c);  // the loop may wait in a poll that watches neither reads nor writes
}

uint64_t CMosquittoShim_Client_acknowledgementDue(CMosquittoShim_Client *c) {
    uint64_t last = atomic_load(&c->intake.lastAnsweredMessage);
    return c->settings.holdAcks && last > atomic_load(&c->intake.acknowledgedThrough) ? last : 0;
}

void CMosquittoShim_Client_setReadPaused(CMosquittoShim_Client *c, bool paused) {
    bool was = atomic_exchange(&c->queue.readPaused, paused);
    if (was && !paused) wantDispatch(c);  // the loop may wait in a poll that does not watch the socket's input
}

uint64_t CMosquittoShim_Client_closeIntake(CMosquittoShim_Client *c) {
    atomic_store(&c->intake.intakeClosed, true);
    // Steps begun after this load see the intake closed (both sequentially consistent): only those through it may read.
    uint64_t step = atomic_load(&c->intake.stepsBegun);
    wantDispatch(c);  // the loop's next step stops watching the socket's input
    return step;
}

bool CMosquittoShim_Client_intakeSettled(CMosquittoShim_Client *c, uint64_t step) {
    return atomic_load(&c->intake.stepsEnded) >= step;
}

bool CMosquittoShim_Client_readingHeld(CMosquittoShim_Client *c) { return atomic_load(&c->intake.readingHeld); }

uint64_t CMosquittoShim_Client_droppedCount(CMosquittoShim_Client *c) { return atomic_load(&c->queue.dropped); }

uint64_t CMosquittoShim_Client_eventsLostCount(CMosquittoShim_Client *c) { return atomic_load(&c->queue.eventsLost); }

void CMosquittoShim_Client_failEventAllocations(CMosquittoShim_Client *c, int count) {
    atomic_store(&c->queue.failEventAllocations, count);
}

uint64_t CMosquittoShim_Client_unsentCount(CMosquittoShim_Client *c) { return atomic_load(&c->qos0.unsent); }

uint64_t CMosquittoShim_Client_directPublishCount(CMosquittoShim_Client *c) {
    return atomic_load(&c->direct.directPublishes);
}

uint64_t CMosquittoShim_Client_outstandingPublishes(CMosquittoShim_Client *c) {
    pthread_mutex_lock(&c->qos0.publishLock);
    uint64_t outstanding = unwrittenQos0(c);
    pthread_mutex_unlock(&c->qos0.publishLock);
    return outstanding;
}

bool CMosquittoShim_Client_armDrain(CMosquittoShim_Client *c, uint64_t target) {
    atomic_store(&c->qos0.drainTargetPlusOne, target + 1);
    // Already drained: the caller goes on. The arming stays (all waiters share one target, and disarming here could
    // take away the event another waiter is owed); a stale arming costs one spurious event at most.
    return CMosquittoShim_Client_outstandingPublishes(c) <= target;
}

bool CMosquittoShim_Client_takeDrained(CMosquittoShim_Client *c) { return atomic_exchange(&c->qos0.drained, false); }
