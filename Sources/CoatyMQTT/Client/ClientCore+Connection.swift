import CMosquittoShim
import CoatySync
import Foundation
import Logging
import Metrics
import Synchronization

extension ClientCore {
    // MARK: Suspension

    /// Suspends until the token registered by `register` is resolved; `register` returns `true` when it is
    /// already done. Cancellation resumes with `CancellationError`.
    func suspend(_ register: (inout ClientState, UInt64) throws -> Bool) async throws {
        let token = state.withLock { $0.makeToken() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let immediate: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    do {
                        if try register(&state, token) { return .success(()) }
                        state.waiters[token] = continuation
                        return nil
                    } catch {
                        return .failure(error)
                    }
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let continuation = state.withLock { $0.waiters.removeValue(forKey: token) }
            continuation?.resume(throwing: CancellationError())
        }
    }

    func notConnected(_ what: String) -> MQTTError {
        MQTTError(.notConnected, "Cannot \(what): the client is not connected to \(url); call connect() first.")
    }

    // MARK: Connect / disconnect

    func connect() async throws {
        let handle = try requireHandle()
        try state.withLock { state throws(MQTTError) in
            var actions = MQTTSessionStateMachine.Actions()
            guard state.session.startSession(&actions) else {
                throw MQTTError(
                    .alreadyConnected,
                    "The client \"\(configuration.clientId)\" is already connected or connecting to \(url)."
                )
            }
            var resumptions = Resumptions()
            _ = carryOut(actions, &state, &resumptions)
        }
        channel.withLock { $0.closed = false }
        while handle.popEvent() != nil {}  // stale events of an abandoned session
        handle.openDispatcher()
        running.store(true, ordering: .releasing)
        let executor = deliveryExecutor.withLock { $0 }
        let session = SessionDispatch(
            core: self,
            handle: handle,
            executor: executor,
            executorToken: executor?.attach { handle.wakeDispatcher() }
        )
        currentSession.withLock { $0 = session }
        let retained = handle.setDispatch(session)

        currentBroker.store(0, ordering: .relaxed)  // each network loop starts with the primary broker
        let rc = handle.start()
        guard rc == MosquittoCode.success else {
            handle.discardDispatch(retained)
            session.end()
            finishSession(reason: "the network thread could not start")
            throw MQTTError(
                .protocolError,
                "Cannot start the MQTT network thread for \(url): \(MosquittoHandle.errorString(rc))"
                    + " (a previous connection may still be closing; retry in a few seconds)."
            )
        }
        logger.debug("Connecting", metadata: ["mqtt.broker": .string(url)])
        do {
            try await suspend { state, token in
                switch state.session.awaitFirstAttempt(token: token) {
                case .succeeded:
                    return true
                case .failed(let error):
                    throw error
                case .notRunning:
                    throw self.notConnected("connect")
                case .waiting:
                    return false
                }
            }
        } catch {
            await stopSession()
            throw error
        }
    }

    func disconnect() async {
        closeMessages()
        guard state.withLock({ $0.session.running }) else { return }
        await stopSession()
        logger.debug("Disconnected", metadata: ["mqtt.broker": .string(url)])
    }

    /// Asks the network loop to stop and waits (bounded) until its dispatch round has seen it stop.
    func stopSession() async {
        guard case .success(let handle) = setup else { return }
        handle.stop()
        let deadline = ContinuousClock.now + max(.zero, configuration.disconnectFlushTimeout) + Self.stopGrace
        while state.withLock({ $0.session.running }) {
            if ContinuousClock.now >= deadline {
                logger.warning(
                    "The MQTT network thread did not stop in time; abandoning it",
                    metadata: ["mqtt.broker": .string(url)]
                )
                handle.closeDispatcher()
                currentSession.withLock { $0 }?.end()
                finishSession(reason: "the network thread was abandoned")
                return
            }
            // Sleep without honouring cancellation: the session must end before disconnect() returns.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await Task.sleep(for: .milliseconds(10)) }
            }
        }
    }

    /// Ends a session: state `.disconnected`, every waiter fails with `.notConnected`.
    func finishSession(reason: String) {
        var resumptions = Resumptions()
        state.withLock { state in
            guard state.session.running else { return }
            running.store(false, ordering: .releasing)
            var actions = MQTTSessionStateMachine.Actions()
            state.session.sessionEnded(
                MQTTError(
                    .notConnected,
                    "The connection to \(url) was closed (\(reason)) before the operation completed."
                ),
                &actions
            )
            _ = carryOut(actions, &state, &resumptions)
        }
        resumptions.resume()
    }

    // MARK: Messages

    func nextMessageBatch() async -> [MQTTMessage]? {
        guard case .success(let handle) = setup else { return nil }
        let fast = handle.takeMessages(waitingMicroseconds: blockingWaitMicroseconds)
        if !fast.isEmpty { return fast }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[MQTTMessage]?, Never>) in
                let immediate: [MQTTMessage]?? = channel.withLock { channel in
                    let batch = handle.takeMessages(arm: true)
                    if !batch.isEmpty { return .some(batch) }
                    if channel.closed || Task.isCancelled { return .some(nil) }
                    if let previous = channel.waiter {
                        // A second concurrent consumer: let the previous one end rather than leak it.
                        previous.resume(returning: nil)
                    }
                    channel.waiter = continuation
                    return .none
                }
                if case .some(let result) = immediate { continuation.resume(returning: result) }
            }
        } onCancel: {
            let waiter = channel.withLock { channel in
                let waiter = channel.waiter
                channel.waiter = nil
                return waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Called by a dispatch round when a waiting consumer can be served.
    func serveMessageWaiter(_ handle: MosquittoHandle) {
        let served: (CheckedContinuation<[MQTTMessage]?, Never>, [MQTTMessage])? = channel.withLock { channel in
            guard let waiter = channel.waiter else { return nil }
            let batch = handle.takeMessages(arm: true)
            guard !batch.isEmpty else { return nil }
            channel.waiter = nil
            return (waiter, batch)
        }
        if let (waiter, batch) = served { waiter.resume(returning: batch) }
    }

    func closeMessages() {
        let waiter = channel.withLock { channel in
            channel.closed = true
            let waiter = channel.waiter
            channel.waiter = nil
            return waiter
        }
        waiter?.resume(returning: nil)
    }

    // MARK: Connection states

    func connectionStates() -> MQTTConnectionStates {
        let (stream, continuation) = AsyncStream.makeStream(
            of: MQTTConnectionState.self,
            bufferingPolicy: .unbounded
        )
        let id = state.withLock { $0.makeToken() }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
        state.withLock { state in
            continuation.yield(state.session.connection)
            state.observers[id] = continuation
        }
        return MQTTConnectionStates(stream: stream)
    }
}
