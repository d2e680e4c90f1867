import CMosquittoShim
import CoatySync
import Foundation
import Logging
import Metrics
import Synchronization

extension ClientCore {
    // MARK: Dispatch rounds

    /// One dispatch round, on the network loop thread between two of its steps (see `SessionDispatch`): serves
    /// message consumers, applies events, runs the delivery executor's jobs, reports drops. Returns whether the
    /// session ended (stopped, or abandoned by `disconnect()`).
    func dispatchRound(_ handle: MosquittoHandle, _ executor: MQTTDeliveryExecutor?) -> Bool {
        let mask = handle.dispatchReasons()
        // With a handler, an event waits until the messages received before it were handed over. So the handler
        // takes what is queued in every round (also the first after a handler was set mid-session), and due events
        // are looked for every time.
        let ordered = messageHandler.withLock { $0 } != nil
        if ordered {
            deliverToHandler(handle, executor)
        } else if mask & Int32(CMosquittoShim_WakeMessages) != 0 {
            serveMessageWaiter(handle)
        }
        var stopped = false
        if ordered || mask & Int32(CMosquittoShim_WakeEvents) != 0 {
            while let event = ordered ? handle.popDueEvent(includeStopped: true) : handle.popEvent() {
                // What arrived before the end goes to a handler before disconnect() can return.
                if event.kind == .stopped { deliverToHandler(handle, executor) }
                apply(event, handle)
                // What follows belongs to the next session (a connect() right after disconnect() returned).
                if event.kind == .stopped {
                    stopped = true
                    break
                }
            }
        }
        reportDrops(handle)
        reportUnsent(handle)
        reportLostEvents(handle)
        // Ended: the jobs still queued move to the executor's fallback queue when the session detaches it.
        if stopped || mask & Int32(CMosquittoShim_WakeClosed) != 0 { return true }
        // Tasks resumed otherwise (by an event, a timer, another thread) run now, on this thread.
        executor?.runJobs()
        return false
    }

    /// Hands every queued message to the message handler, if one is set, until the queue is empty (which arms the
    /// wake-up for the next message), and applies the events that became due between batches.
    /// The tasks the batch resumed on `executor` run right after it, before the next batch.
    func deliverToHandler(_ handle: MosquittoHandle, _ executor: MQTTDeliveryExecutor?) {
        guard let handler = messageHandler.withLock({ $0 }) else { return }
        while true {
            let batch = handle.takeMessages(arm: true)
            if batch.isEmpty { return }
            handler.deliver(batch)
            // A steady inbound stream can keep this loop from the event queue for good, so the events that are due
            // are applied between batches: those received before the last message delivered (an acknowledgement
            // must not overtake the messages received before it, which the Coaty manager's copy counting relies
            // on). The end of the session is left to `dispatchRound`. A publisher waiting for the QoS 0 queue to
            // drain is resumed through its own flag, before the event itself is due.
            if handle.takeDrained() { resumeDrainWaiters() }
            executor?.runJobs()
            while let event = handle.popDueEvent(includeStopped: false) { apply(event, handle) }
        }
    }

    /// Resumes the publishers waiting for the QoS 0 queue to drain; each checks the queue again.
    func resumeDrainWaiters() {
        var resumptions = Resumptions()
        state.withLock { resolveDrainWaiters(&$0, &resumptions) }
        resumptions.resume()
    }

    func resolveDrainWaiters(_ state: inout ClientState, _ resumptions: inout Resumptions) {
        for token in state.drainTokens { resumptions.resolve(token, .success(()), in: &state) }
        state.drainTokens = []
    }

    func apply(_ event: ShimEvent, _ handle: MosquittoHandle) {
        if event.kind == .stopped {
            finishSession(reason: "disconnect() was called")
            return
        }
        switch event.kind {
        case .connected, .connectionRefused, .connectFailed, .connectionLost:
            currentBroker.store(event.broker, ordering: .relaxed)
        default:
            break
        }
        var resumptions = Resumptions()
        var stopAfterInitialFailure = false
        state.withLock { state in
            guard state.running else { return }
            switch event.kind {
            case .connected:
                state.transportUp = true
                resubscribe(&state, handle, &resumptions)
            case .connectionRefused, .connectFailed:
                let error =
                    event.kind == .connectionRefused
                    ? refusedError(code: event.code) : connectFailedError(code: event.code, detail: event.detail)
                if state.initialPhase, event.broker + 1 < brokerURLs.count {
                    // The shim tries the next broker at once; connect() fails only when every one failed.
                    logger.info(
                        "Connection attempt failed; trying the next broker",
                        metadata: ["mqtt.broker": .string(url), "mqtt.reason": .string(error.message)]
                    )
                    return
                }
                let initialError =
                    brokerURLs.count > 1
                    ? MQTTError(
                        error.kind,
                        "No MQTT broker accepted the connection (tried \(brokerURLs.joined(separator: ", ")));"
                            + " the last one said: \(error.message)"
                    ) : error
                stopAfterInitialFailure = failInitial(initialError, &state, &resumptions)
                if !stopAfterInitialFailure { logReconnectProblem(error.message, &state) }
            case .connectionLost:
                connectionLost(event, &state, &resumptions)
            case .published:
                guard let token = state.publishMids.removeValue(forKey: event.mid) else { return }
                if event.code >= 0x80 {
                    let reason = MosquittoHandle.reasonString(event.code, v5: true)
                    resumptions.resolve(
                        token,
                        .failure(MQTTError(.publishRefused, "The broker at \(url) refused a publication: \(reason).")),
                        in: &state
                    )
                } else {
                    resumptions.resolve(token, .success(()), in: &state)
                }
            case .subscribed:
                subscribed(event, &state, &resumptions)
            case .unsubscribed:
                if let token = state.unsubscribeMids.removeValue(forKey: event.mid) {
                    resumptions.resolve(token, .success(()), in: &state)
                }
            case .drained:
                _ = handle.takeDrained()
                resolveDrainWaiters(&state, &resumptions)
            case .stopped:
                break
            }
        }
        resumptions.resume()
        if stopAfterInitialFailure { handle.stop() }
    }

    /// Fails the pending `connect()` when the first attempt failed; returns whether it did.
    func failInitial(_ error: MQTTError, _ state: inout ClientState, _ resumptions: inout Resumptions) -> Bool {
        guard state.initialPhase else { return false }
        state.initialPhase = false
        if let token = state.initialToken {
            state.initialToken = nil
            resumptions.resolve(token, .failure(error), in: &state)
        } else {
            state.initialResult = .failure(error)
        }
        return true
    }

    func logReconnectProblem(_ message: String, _ state: inout ClientState) {
        state.reconnectAttempts += 1
        state.setConnection(.reconnecting)
        logger.info(
            "Reconnect attempt failed; retrying with backoff",
            metadata: [
                "mqtt.broker": .string(url), "mqtt.reason": .string(message),
                "mqtt.attempt": .stringConvertible(state.reconnectAttempts),
            ]
        )
    }

    func resubscribe(_ state: inout ClientState, _ handle: MosquittoHandle, _ resumptions: inout Resumptions) {
        state.resubscribeMids = []
        let filters = state.subscriptions.map { ($0.key, $0.value) }
        for (qos, group) in Self.groupByQoS(filters) {
            for start in stride(from: 0, to: group.count, by: Self.resubscribeChunk) {
                let chunk = Array(group[start..<min(start + Self.resubscribeChunk, group.count)])
                let (rc, mid) = handle.subscribe(chunk, qos: qos)
                if rc == MosquittoCode.success {
                    state.resubscribeMids.insert(mid)
                } else {
                    logger.error(
                        "Re-subscribing failed",
                        metadata: [
                            "mqtt.broker": .string(url), "mqtt.filter": .string(chunk[0]),
                            "mqtt.reason": .string(MosquittoHandle.errorString(rc)),
                        ]
                    )
                }
            }
        }
        if state.resubscribeMids.isEmpty { becomeConnected(&state, &resumptions) }
    }

    func becomeConnected(_ state: inout ClientState, _ resumptions: inout Resumptions) {
        let wasReconnect = !state.initialPhase
        state.setConnection(.connected)
        if state.initialPhase {
            state.initialPhase = false
            if let token = state.initialToken {
                state.initialToken = nil
                resumptions.resolve(token, .success(()), in: &state)
            } else {
                state.initialResult = .success(())
            }
        }
        for token in state.awaitingConnected { resumptions.resolve(token, .success(()), in: &state) }
        state.awaitingConnected = []
        state.reconnectAttempts = 0
        logger.info(
            "\(wasReconnect ? "Reconnected" : "Connected") to \(url)",
            metadata: [
                "mqtt.broker": .string(url), "mqtt.subscriptions": .stringConvertible(state.subscriptions.count),
            ]
        )
    }

    func connectionLost(_ event: ShimEvent, _ state: inout ClientState, _ resumptions: inout Resumptions) {
        state.transportUp = false
        for (_, pending) in state.subscribeMids {
            state.ackGroups[pending.token] = nil
            state.awaitingConnected.insert(pending.token)
        }
        state.subscribeMids = [:]
        for token in state.unsubscribeMids.values { resumptions.resolve(token, .success(()), in: &state) }
        state.unsubscribeMids = [:]
        state.resubscribeMids = []
        if state.initialPhase {
            // Lost while re-subscribing during connect(): treat like a failed first attempt.
            _ = failInitial(connectFailedError(code: event.code, detail: event.detail), &state, &resumptions)
        }
        state.setConnection(.reconnecting)
        logger.warning(
            "Connection lost; reconnecting",
            metadata: ["mqtt.broker": .string(url), "mqtt.reason": .string(event.detail)]
        )
        // The shim counts the sessions in a row that the broker ended soon after connecting (and backs off
        // across them): the signature of two clients with one client id taking the session from each other.
        let brief = event.briefSessions
        if brief >= 3, brief == 3 || brief % 10 == 0 {
            logger.error(
                "The broker ended the session \(brief) times in a row within \(ShimEvent.briefSessionLimit) of connecting: another client probably uses the client id \"\(configuration.clientId)\"; backing off",
                metadata: ["mqtt.broker": .string(url), "mqtt.brief_sessions": .stringConvertible(brief)]
            )
        }
    }

    func subscribed(_ event: ShimEvent, _ state: inout ClientState, _ resumptions: inout Resumptions) {
        if state.resubscribeMids.remove(event.mid) != nil {
            if event.code >= 0 {
                logger.warning("The broker refused a re-subscription", metadata: ["mqtt.broker": .string(url)])
            }
            if state.resubscribeMids.isEmpty, state.transportUp { becomeConnected(&state, &resumptions) }
            return
        }
        guard let pending = state.subscribeMids.removeValue(forKey: event.mid) else { return }
        if event.code >= 0 {
            let index = Int(event.code)
            let filter = index < pending.filters.count ? pending.filters[index] : pending.filters[0]
            state.subscriptions[filter] = nil
            state.ackGroups[pending.token] = nil
            resumptions.resolve(
                pending.token,
                .failure(
                    MQTTError(
                        .subscriptionRefused,
                        "The broker at \(url) refused the subscription to \"\(filter)\" (check its ACL)."
                    )
                ),
                in: &state
            )
            return
        }
        guard let remaining = state.ackGroups[pending.token] else { return }
        if remaining <= 1 {
            state.ackGroups[pending.token] = nil
            resumptions.resolve(pending.token, .success(()), in: &state)
        } else {
            state.ackGroups[pending.token] = remaining - 1
        }
    }

    func reportDrops(_ handle: MosquittoHandle) {
        let total = handle.droppedCount
        let (delta, toLog): (UInt64, UInt64) = dropReport.withLock { report in
            let delta = total - report.counted
            report.counted = total
            var toLog: UInt64 = 0
            let now = ContinuousClock.now
            if total > report.logged, report.lastLog.map({ now - $0 >= Self.dropLogInterval }) ?? true {
                toLog = total - report.logged
                report.logged = total
                report.lastLog = now
            }
            return (delta, toLog)
        }
        if delta > 0 { droppedCounter.increment(by: delta) }
        if toLog > 0 {
            logger.warning(
                "Dropped incoming MQTT messages: no memory left to buffer them",
                metadata: [
                    "mqtt.broker": .string(url),
                    "mqtt.dropped": .stringConvertible(toLog),
                    "mqtt.dropped_total": .stringConvertible(total),
                    "mqtt.buffer_capacity": .stringConvertible(configuration.messageBufferCapacity),
                ]
            )
        }
    }

    /// How much of a count of the network thread is new since the last report; records it as reported.
    func newSinceLastReport(_ total: UInt64, _ counted: WritableKeyPath<DropReport, UInt64>) -> UInt64 {
        dropReport.withLock { report in
            let delta = total - report[keyPath: counted]
            report[keyPath: counted] = total
            return delta
        }
    }

    /// Logs the network thread's events lost to a failed allocation (an acknowledgement or a state
    /// change; the network thread ended the session for each, and the client reconnects).
    func reportLostEvents(_ handle: MosquittoHandle) {
        let total = handle.eventsLostCount
        let delta = newSinceLastReport(total, \.eventsLostCounted)
        guard delta > 0 else { return }
        logger.error(
            "MQTT events lost: no memory for them on the network thread; reconnecting to re-synchronize",
            metadata: [
                "mqtt.broker": .string(url),
                "mqtt.events_lost": .stringConvertible(delta),
                "mqtt.events_lost_total": .stringConvertible(total),
            ]
        )
        // A lost acknowledgement would leave its publication waiting for good: every publication still
        // waiting fails instead (it may have been delivered; one still unacknowledged is sent again after the
        // reconnect). Subscriptions are re-established by the reconnect itself.
        var resumptions = Resumptions()
        state.withLock { state in
            for token in state.publishMids.values {
                resumptions.resolve(
                    token,
                    .failure(
                        MQTTError(
                            .protocolError,
                            "The acknowledgement of a publication to \(url) may have been lost (no memory on the network thread): it may or may not have been delivered."
                        )
                    ),
                    in: &state
                )
            }
            state.publishMids = [:]
        }
        resumptions.resume()
    }

    /// Counts and logs QoS 0 publications the network thread reported as never written.
    func reportUnsent(_ handle: MosquittoHandle) {
        let total = handle.unsentCount
        let delta = newSinceLastReport(total, \.unsentCounted)
        guard delta > 0 else { return }
        unsentCounter.increment(by: delta)
        logger.warning(
            "QoS 0 publications were never sent: the connection ended or the disconnect flush timed out",
            metadata: [
                "mqtt.broker": .string(url),
                "mqtt.unsent": .stringConvertible(delta),
                "mqtt.unsent_total": .stringConvertible(total),
                "mqtt.flush_timeout": .stringConvertible(configuration.disconnectFlushTimeout),
            ]
        )
    }

    // MARK: Error classification

    func refusedError(code: Int32) -> MQTTError {
        let v5 = configuration.protocolVersion == .v5
        let reason = MosquittoHandle.reasonString(code, v5: v5)
        let authCodes: Set<Int32> = v5 ? [0x86, 0x87, 0x8C] : [4, 5]
        if authCodes.contains(code) {
            return MQTTError(
                .authenticationRefused,
                "The broker at \(url) refused the credentials of client \"\(configuration.clientId)\": \(reason)."
                    + " Check the user name and password."
            )
        }
        let protocolCodes: Set<Int32> = v5 ? [0x81, 0x82, 0x84] : [1]
        if protocolCodes.contains(code) {
            return MQTTError(.protocolError, "The broker at \(url) rejected the protocol: \(reason).")
        }
        return MQTTError(
            .connectionRefused,
            "The broker at \(url) refused the connection of client \"\(configuration.clientId)\": \(reason)."
        )
    }

    func connectFailedError(code: Int32, detail: String) -> MQTTError {
        let lowered = detail.lowercased()
        let looksLikeTLS =
            configuration.tls != nil
            && (code == MosquittoCode.tls || code == MosquittoCode.tlsHandshake || lowered.contains("ssl")
                || lowered.contains("certificate") || lowered.contains("tls"))
        if looksLikeTLS {
            return MQTTError(
                .tlsVerificationFailed,
                "The TLS handshake with \(url) failed: \(detail). Check that the CA file signs the broker"
                    + " certificate and that the certificate names this host."
            )
        }
        switch code {
        case MosquittoCode.timeout:
            return MQTTError(
                .brokerUnreachable,
                "No MQTT broker answered at \(url) within \(configuration.connectTimeout)."
                    + " Check that the broker runs and the address is right."
            )
        case MosquittoCode.protocolError:
            return MQTTError(.protocolError, "Protocol error while connecting to \(url): \(detail).")
        case MosquittoCode.authentication:
            return MQTTError(
                .authenticationRefused,
                "The broker at \(url) refused the credentials: \(detail). Check the user name and password."
            )
        default:
            return MQTTError(
                .brokerUnreachable,
                "Cannot reach the MQTT broker at \(url): \(detail). Check that the broker runs and the address is right."
            )
        }
    }
}
