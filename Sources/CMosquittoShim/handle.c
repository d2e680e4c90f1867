// The client's lifecycle: creating the libmosquitto handle, its options and TLS, and destroying it. Called from Swift on any thread, never concurrently for one client.

#include "shim_internal.h"

// MARK: - Lifecycle

void CMosquittoShim_Message_free(CMosquittoShim_Message *message) { free(message); }

void CMosquittoShim_Event_free(CMosquittoShim_Event *event) { free(event); }

static void destroyClient(CMosquittoShim_Client *c) {
    if (c->mosq) mosquitto_destroy(c->mosq);
    CMosquittoShim_Client_discardMessages(c);
    CMosquittoShim_Event *event = c->queue.eventHead;
    while (event) {
        CMosquittoShim_Event *next = event->next;
        free(event);
        event = next;
    }
    pthread_mutex_destroy(&c->queue.queueLock);
    pthread_mutex_destroy(&c->control.controlLock);
    pthread_cond_destroy(&c->control.controlCond);
    pthread_cond_destroy(&c->queue.consumerCond);
    pthread_mutex_destroy(&c->acks.ackLock);
    pthread_mutex_destroy(&c->error.errorLock);
    pthread_mutex_destroy(&c->qos0.publishLock);
    pthread_mutex_destroy(&c->direct.writeLock);
    if (c->direct.directFd >= 0) close(c->direct.directFd);
    dropOurs(c);
    if (c->wake.wakeWriteFd >= 0 && c->wake.wakeWriteFd != c->wake.wakeFd) close(c->wake.wakeWriteFd);
    if (c->wake.wakeFd >= 0) close(c->wake.wakeFd);
    free(c->queue.ring);
    if (c->settings.hosts) {
        for (int i = 0; i < c->settings.brokerCount; i++) free(c->settings.hosts[i]);
        free(c->settings.hosts);
    }
    free(c->settings.ports);
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
    atomic_init(&c->queue.dropped, 0);
    atomic_init(&c->control.stopRequested, false);
    pthread_mutex_init(&c->queue.queueLock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->control.controlCond, &attr);
    pthread_cond_init(&c->queue.consumerCond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&c->control.controlLock, NULL);
    pthread_mutex_init(&c->acks.ackLock, NULL);
    pthread_mutex_init(&c->error.errorLock, NULL);
    pthread_mutex_init(&c->qos0.publishLock, NULL);
    pthread_mutex_init(&c->direct.writeLock, NULL);
    c->direct.directFd = -1;
    atomic_init(&c->direct.directReady, false);
    atomic_init(&c->direct.oursNonEmpty, false);
    atomic_init(&c->direct.flushedThrough, 0);
    atomic_init(&c->direct.maxPacketSize, 0);
    atomic_init(&c->direct.directPublishes, 0);
    atomic_init(&c->qos0.qos0Queued, 0);
    atomic_init(&c->qos0.qos0Written, 0);
    atomic_init(&c->qos0.drainTargetPlusOne, 0);
    atomic_init(&c->qos0.drained, false);
    atomic_init(&c->qos0.unsent, 0);
    atomic_init(&c->queue.eventsLost, 0);
    atomic_init(&c->queue.resyncNeeded, false);
    atomic_init(&c->queue.failEventAllocations, 0);
    atomic_init(&c->wake.packetsQueued, 0);
    atomic_init(&c->wake.loopPolling, false);
    atomic_init(&c->wake.wakePending, false);
    openWakeChannel(c);
    c->settings.capacity = o->messageCapacity > 0 ? (size_t)o->messageCapacity : 1;
    c->queue.allocated = c->settings.capacity;
    c->queue.ring = calloc(c->queue.allocated, sizeof(CMosquittoShim_Message *));
    atomic_init(&c->queue.queuedMirror, 0);
    atomic_init(&c->queue.readPaused, false);
    atomic_init(&c->intake.heldBehindWhole, false);
    atomic_init(&c->intake.intakeClosed, false);
    atomic_init(&c->intake.stepsBegun, 0);
    atomic_init(&c->intake.stepsEnded, 0);
    atomic_init(&c->intake.readingHeld, false);
    int fallbackCount = o->fallbackCount > 0 && o->fallbackHosts && o->fallbackPorts ? o->fallbackCount : 0;
    c->settings.hosts = calloc((size_t)fallbackCount + 1, sizeof(char *));
    c->settings.ports = calloc((size_t)fallbackCount + 1, sizeof(int));
    bool hostsCopied = c->settings.hosts && c->settings.ports;
    if (hostsCopied) {
        c->settings.brokerCount = fallbackCount + 1;
        c->settings.hosts[0] = copyString(o->host);
        c->settings.ports[0] = o->port;
        for (int i = 0; i < fallbackCount; i++) {
            c->settings.hosts[i + 1] = copyString(o->fallbackHosts[i]);
            c->settings.ports[i + 1] = o->fallbackPorts[i];
        }
        for (int i = 0; i < c->settings.brokerCount; i++) hostsCopied = hostsCopied && c->settings.hosts[i];
    }
    atomic_init(&c->loop.currentBroker, 0);
    c->settings.keepAlive = o->keepAliveSeconds;
    c->settings.connectTimeoutMs = o->connectTimeoutMilliseconds > 0 ? o->connectTimeoutMilliseconds : 5000;
    c->settings.reconnectDelayMs = o->reconnectDelayMilliseconds > 0 ? o->reconnectDelayMilliseconds : 1000;
    c->settings.maxReconnectDelayMs = o->maxReconnectDelayMilliseconds >= c->settings.reconnectDelayMs ? o->maxReconnectDelayMilliseconds
                                                                                      : c->settings.reconnectDelayMs;
    c->settings.stopFlushMs = o->stopFlushMilliseconds >= 0 ? o->stopFlushMilliseconds : 0;
    c->settings.quickAck = o->tcpNoDelay && !shimTrickDisabled(CMosquittoShim_TrickQuickAck);
    c->settings.holdAcks = o->holdAcknowledgements;
    atomic_init(&c->intake.lastAnsweredMessage, 0);
    atomic_init(&c->intake.acknowledgedThrough, 0);
    c->settings.protocolV5 = o->protocolV5;
    c->settings.plainTCP = !o->useTLS;
    c->settings.directPublish = c->settings.plainTCP && !shimTrickDisabled(CMosquittoShim_TrickDirect);
    if (!c->queue.ring || !hostsCopied) {
        failCreate(c, MOSQ_ERR_NOMEM, "allocating the client", errorCode, errorText, errorTextSize);
        return NULL;
    }
    if (c->wake.wakeFd < 0) {
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
