import CoatyFilter
import CoatyModel
import CoatySync
import Logging
import Metrics
public import ServiceLifecycle
import Synchronization

extension CommunicationManager {
    // MARK: Lifecycle

    /// Connects, subscribes, publishes the join event and drains deferred publications; returns
    /// once the manager is ``CommunicationState/online``. Calling it while started does nothing.
    ///
    /// - Throws: ``CommunicationError/transport(_:)`` when the broker refuses or cannot be
    ///   reached, `CancellationError` when cancelled first.
    public func start() async throws {
        let will = try lastWill()
        let begin = state.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            return true
        }
        guard begin else { return }
        // The watcher and the stall monitor, and later the jobs of routing callbacks, in one
        // group that stop() ends and awaits.
        let work = BackgroundWork(children: [
            { [self] in await watchConnection() },
            { [weak self, options] in
                let interval = max(options.stallTimeout / 4, .milliseconds(10))
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard let self else { return }
                    self.gate.checkStalls(timeout: options.stallTimeout, policy: options.stallPolicy)
                }
            },
        ])
        state.withLock { $0.work = work }
        // Decoding and routing on the transport's own delivery thread (no hand-off per message).
        transport.deliverMessages { [weak self] batch in self?.handle(batch) }
        do {
            try await transport.connect(will: will)
        } catch {
            state.withLock { state in
                state.started = false
                state.work = nil
            }
            await work.finish()
            if let error = error as? TransportError { throw CommunicationError.transport(error) }
            throw error
        }
        for await communicationState in communicationStates() where communicationState == .online {
            break
        }
    }

    /// Publishes the Deadvertise of the identity, disconnects, and ends dispatching. Observations
    /// stay registered and are served again after the next ``start()``; every IO point's state
    /// becomes not associated (see ``observeIoState(for:)-(IoSource)``).
    public func stop() async {
        let work = state.withLock { state -> BackgroundWork?? in
            guard state.started else { return nil }
            state.started = false
            state.keepsSubscriptions = false
            defer { state.work = nil }
            return .some(state.work)
        }
        guard let work else { return }
        if let will = try? lastWill() {
            try? await transport.publish(will)
        }
        await transport.disconnect()
        // The watcher, the stall monitor, and the answers and subscription changes still under
        // way end with the connection.
        await work?.finish()
        setOnline(false)
        // The associations are the routers' to give again after the next start (Coaty JS reports
        // every IO point not associated when it stops).
        ioStateTable.forget(pointsNotIn: nil)
    }

    /// Follows the transport's connection states: on every connection, subscribes what is
    /// missing, publishes the join event and drains deferred publications, in that order.
    func watchConnection() async {
        for await connection in transport.connectionStates() {
            if Task.isCancelled { return }
            if connection == .connected {
                await handleConnected()
            } else {
                setOnline(false)
            }
        }
    }

    func handleConnected() async {
        state.withLock { $0.draining = true }
        // 1. Subscriptions: the transport re-establishes those it knows; add those requested
        //    while it could not subscribe.
        let missing = state.withLock { state in
            Set(state.refCounts.keys).symmetricDifference(state.established).sorted()
        }
        for filter in missing { await reconcile(filter) }
        // 2. Join events: the Advertise of the identity on ADV:Identity only, then of each IoNode
        //    on ADV:IoNode only.
        if options.announcesIdentity,
            let join = try? advertiseMessage(identityJSON, privateData: nil, filters: [.coreType(.identity)])
        {
            for message in join { try? await transport.publish(atLeastOptionsQoS(message)) }
        }
        for node in state.withLock({ $0.ioNodes }) {
            guard let wrapped = try? AnyCoatyObject(node),
                let join = try? advertiseMessage(wrapped, privateData: nil, filters: [.coreType(.ioNode)])
            else { continue }
            for message in join { try? await transport.publish(atLeastOptionsQoS(message)) }
        }
        // 3. Deferred publications, FIFO.
        while true {
            let next = state.withLock { state -> TransportMessage? in
                guard let message = state.deferred.popFirst() else {
                    state.draining = false
                    return nil
                }
                return message
            }
            guard let next else { break }
            do {
                try await transport.publish(next)
            } catch TransportError.notConnected {
                // Lost the connection again: keep it first in line for the next connection.
                state.withLock { state in
                    state.deferred.pushFront(next)
                    state.draining = false
                }
                return
            } catch {
                // A message the transport refuses for good (never a connection problem): drop it.
                logger.warning(
                    "Dropped a deferred publication the transport refused",
                    metadata: ["topic": "\(next.topic)", "error": "\(error)"]
                )
            }
        }
        setOnline(transport.connectionState == .connected)
    }

    func setOnline(_ online: Bool) {
        state.withLock { state in
            guard state.online != online else { return }
            state.online = online
            // Under the lock, so the gauge follows the changes in their order.
            metrics.setOnline(online)
            for observer in state.stateObservers.values { observer.yield(online ? .online : .offline) }
        }
    }
}

extension CommunicationManager: Service {
    /// Starts the manager, waits for graceful shutdown (or cancellation), then stops it.
    ///
    /// - Throws: what ``start()`` throws.
    public func run() async throws {
        try await start()
        try? await gracefulShutdown()
        await stop()
    }
}
