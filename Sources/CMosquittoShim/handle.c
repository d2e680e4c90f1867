// The client's lifecycle: creating the libmosquitto handle, its options and TLS, and destroying it. Called from Swift on any thread, never concurrently for one client.

#include "shim_internal.h"

// MARK: - Lifecycle

void CMosquittoShim_Message_free(CMosquittoShim_Message *message) { free(message); }

void CMosquittoShim_Event_free(CMosquittoShim_Event *event) { free(event); }

/// Frees the direct packets waiting to be written (writeLock held, or the client no longer shared).
SHIM_HIDDEN void dropOurs(CMosquittoShim_Client *c) {
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
    atomic_init(&c->directPublishes, 0);
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
    atomic_init(&c->heldBehindWhole, false);
    atomic_init(&c->intakeClosed, false);
    atomic_init(&c->stepsBegun, 0);
    atomic_init(&c->stepsEnded, 0);
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
    c->quickAck = o->tcpNoDelay && !shimTrickDisabled(CMosquittoShim_TrickQuickAck);
    c->holdAcks = o->holdAcknowledgements;
    atomic_init(&c->lastAnsweredMessage, 0);
    atomic_init(&c->acknowledgedThrough, 0);
    c->protocolV5 = o->protocolV5;
    c->plainTCP = !o->useTLS;
    c->directPublish = c->plainTCP && !shimTrickDisabled(CMosquittoShim_TrickDirect);
    if (!c->ring || !hostsCopied) {
        failCreate(c, MOSQ_ERR_NOMEM, "allocating the client", errorCode, errorText, errorTextSize);
        return NULL;
    }
    if (c->wakeFd < 0) {
        failCreate(c, MOSQ_ERR_ERRNO, "creating the loop's wake-up channel", errorCode, errorText, errorTextSize);
        return NULL;
    }

    c->mosq = mosquitto_new(o->clientId, o->cleanSession, c);
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
