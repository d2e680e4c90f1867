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
        reportCounts(handle)
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
        state.withLock { state in
            var actions = MQTTSessionStateMachine.Actions()
            state.session.drained(&actions)
            _ = carryOut(actions, &state, &resumptions)
        }
        resumptions.resume()
    }

    /// Feeds one event of the network thread to the session logic and carries out what it decided.
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
        let stop = state.withLock { state -> Bool in
            var actions = MQTTSessionStateMachine.Actions()
            switch event.kind {
            case .connected:
                state.session.connected(send: subscribeSender(handle), &actions)
            case .connectionRefused, .connectFailed:
                let error =
                    event.kind == .connectionRefused
                    ? refusedError(code: event.code) : connectFailedError(code: event.code, detail: event.detail)
                let firstAttemptError =
                    brokerURLs.count > 1
                    ? MQTTError(
                        error.kind,
                        "No MQTT broker accepted the connection (tried \(brokerURLs.joined(separator: ", ")));"
                            + " the last one said: \(error.message)"
                    ) : error
                state.session.connectAttemptFailed(
                    error,
                    firstAttemptError: firstAttemptError,
                    broker: event.broker,
                    brokerCount: brokerURLs.count,
                    &actions
                )
            case .connectionLost:
                state.session.connectionLost(
                    reason: event.detail,
                    error: connectFailedError(code: event.code, detail: event.detail),
                    briefSessions: event.briefSessions,
                    &actions
                )
            case .published:
                let refusal =
                    event.code >= 0x80
                    ? MQTTError(
                        .publishRefused,
                        "The broker at \(url) refused a publication: \(MosquittoHandle.reasonString(event.code, v5: true))."
                    ) : nil
                state.session.published(mid: event.mid, refusal: refusal, &actions)
            case .subscribed:
                state.session.subscribed(
                    mid: event.mid,
                    refusedIndex: event.code >= 0 ? Int(event.code) : nil,
                    refusal: { filter in
                        MQTTError(
                            .subscriptionRefused,
                            "The broker at \(self.url) refused the subscription to \"\(filter)\" (check its ACL)."
                        )
                    },
                    &actions
                )
            case .unsubscribed:
                state.session.unsubscribed(mid: event.mid, &actions)
            case .drained:
                guard state.session.running else { break }
                _ = handle.takeDrained()
                state.session.drained(&actions)
            case .stopped:
                break
            }
            return carryOut(actions, &state, &resumptions)
        }
        resumptions.resume()
        if stop { handle.stop() }
    }

    /// Carries out what the session logic decided, under the state lock: log lines, the new connection states to
    /// the observers, the decided operations into `resumptions` (resumed once the lock is released). Returns
    /// whether the network loop must stop.
    func carryOut(
        _ actions: MQTTSessionStateMachine.Actions,
        _ state: inout ClientState,
        _ resumptions: inout Resumptions
    ) -> Bool {
        for log in actions.logs { write(log) }
        if let error = actions.failEverything {
            for token in Array(state.waiters.keys) + Array(state.callbacks.keys) {
                resumptions.resolve(token, .failure(error), in: &state)
            }
        }
        for (token, result) in actions.resolved {
            resumptions.resolve(token, result.mapError { $0 }, in: &state)
        }
        for new in actions.states {
            for observer in state.observers.values { observer.yield(new) }
        }
        return actions.stopNetworkLoop
    }

    /// Writes a log line the session logic asked for.
    func write(_ log: MQTTSessionStateMachine.Log) {
        switch log {
        case .tryingNextBroker(let reason):
            logger.info(
                "Connection attempt failed; trying the next broker",
                metadata: ["mqtt.broker": .string(url), "mqtt.reason": .string(reason)]
            )
        case .reconnectFailed(let reason, let attempt):
            logger.info(
                "Reconnect attempt failed; retrying with backoff",
                metadata: [
                    "mqtt.broker": .string(url), "mqtt.reason": .string(reason),
                    "mqtt.attempt": .stringConvertible(attempt),
                ]
            )
        case .connected(let reconnect, let subscriptions):
            logger.info(
                "\(reconnect ? "Reconnected" : "Connected") to \(url)",
                metadata: ["mqtt.broker": .string(url), "mqtt.subscriptions": .stringConvertible(subscriptions)]
            )
        case .connectionLost(let reason, let brief):
            logger.warning(
                "Connection lost; reconnecting",
                metadata: ["mqtt.broker": .string(url), "mqtt.reason": .string(reason)]
            )
            // The shim counts the sessions in a row that the broker ended soon after connecting (and backs off
            // across them): the signature of two clients with one client id taking the session from each other.
            if brief >= 3, brief == 3 || brief % 10 == 0 {
                logger.error(
                    "The broker ended the session \(brief) times in a row within \(ShimEvent.briefSessionLimit) of connecting: another client probably uses the client id \"\(configuration.clientId)\"; backing off",
                    metadata: ["mqtt.broker": .string(url), "mqtt.brief_sessions": .stringConvertible(brief)]
                )
            }
        case .resubscribeFailed(let filter, let reason):
            logger.error(
                "Re-subscribing failed",
                metadata: ["mqtt.broker": .string(url), "mqtt.filter": .string(filter), "mqtt.reason": .string(reason)]
            )
        case .resubscriptionRefused:
            logger.warning("The broker refused a re-subscription", metadata: ["mqtt.broker": .string(url)])
        }
    }

    /// Reports the network thread's drops, unsent publications and lost events that are new since
    /// the last round; with none (every round but a rare one) one lock and three loads, without
    /// reading the clock.
    func reportCounts(_ handle: MosquittoHandle) {
        let (dropped, unsent, lost) = (handle.droppedCount, handle.unsentCount, handle.eventsLostCount)
        let unchanged = dropReport.withLock { report in
            dropped == report.counted && dropped == report.logged && unsent == report.unsentCounted
                && lost == report.eventsLostCounted
        }
        if unchanged { return }
        reportDrops(handle)
        reportUnsent(handle)
        reportLostEvents(handle)
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
            var actions = MQTTSessionStateMachine.Actions()
            state.session.acknowledgementsMayBeLost(
                MQTTError(
                    .protocolError,
                    "The acknowledgement of a publication to \(url) may have been lost (no memory on the network thread): it may or may not have been delivered."
                ),
                &actions
            )
            _ = carryOut(actions, &state, &resumptions)
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
