import CoatyCore
import CoatyStore
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

extension CoatyRecorder {
    // MARK: Running

    /// Observes, stores and answers until graceful shutdown, cancellation or ``stop()``; then
    /// stops observing, commits every object already received, and returns.
    ///
    /// - Throws: ``CommunicationError`` for an invalid object type or channel id in the
    ///   configuration; ``RecorderError/alreadyRunning`` when called twice.
    public func run() async throws {
        let begin = control.withLock { control -> Bool in
            guard !control.running else { return false }
            control.running = true
            return true
        }
        guard begin else { throw RecorderError.alreadyRunning }
        defer { finishEvents() }
        // Also when registering fails: nobody waits for observations that never come.
        defer { markRegistered() }

        let ingest = try makeIngestObservations()
        let queries = configuration.answersQueries ? try manager.observeQuery() : nil
        let discovers = configuration.answersDiscovers ? try manager.observeDiscover() : nil
        var updateObservations: [EventObservation<UpdateEvent<AnyCoatyObject>>] = []
        if configuration.acceptUpdates {
            for coreType in configuration.coreTypes {
                updateObservations.append(try manager.observeUpdate(coreType: coreType))
            }
        }
        let updates = updateObservations
        let deadvertises = try manager.observeDeadvertise()
        let membership = try makeGroupMembership()
        ingestProgress.withLock { sources in
            for (index, observation) in ingest.enumerated() { sources[index] = { observation.progress } }
            sources[ingest.count] = { deadvertises.progress }
        }
        defer { ingestProgress.withLock { $0 = [:] } }
        markRegistered()

        if configuration.acknowledgesAfterCommit {
            manager.acknowledgements.onDue { [progress] in progress.signal() }
        }
        // Owned by run(): ends when the queue is closed, awaited before run() returns.
        let writer = Task { await self.writeLoop() }
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                for (index, observation) in ingest.enumerated() {
                    group.addTask { await self.pump(observation, index: index) }
                }
                group.addTask { await self.pumpDeadvertise(deadvertises, index: ingest.count) }
                if configuration.acknowledgesAfterCommit {
                    group.addTask { await self.acknowledgeCommitted() }
                }
                if let membership { group.addTask { await self.serveGroup(membership) } }
                // Requests are answered on the thread that routes received events (the transport's
                // delivery executor): no switch to another thread between a request and its answer.
                // A Discover's lookup is a brief read right there; a Query's read (SQL, filtering,
                // ordering, however many rows) runs on the store's own threads.
                let answering = self.manager.deliveryExecutor
                if let queries { group.addTask(executorPreference: answering) { await self.answer(queries) } }
                if let discovers { group.addTask(executorPreference: answering) { await self.answer(discovers) } }
                for observation in updates { group.addTask { await self.answer(observation) } }
                group.addTask {
                    // Ready means subscribed at the broker: wait for the connection first.
                    for await state in self.manager.communicationStates() where state == .online { break }
                    for observation in ingest { await observation.subscribed() }
                    await deadvertises.subscribed()
                    await queries?.subscribed()
                    await discovers?.subscribed()
                    for update in updates { await update.subscribed() }
                    await membership?.election.subscribed()
                    await membership?.barrier.subscribed()
                    self.markReady()
                }
                group.addTask { await self.waitForStop() }
                while await group.next() != nil {
                    if control.withLock({ $0.stopRequested }) || Task.isCancelled { break }
                }
                // A group member first leaves the group (nothing more comes; what the broker
                // queued for it arrives). Then take over what the observers already hold before
                // ending them (not possible after cancellation: the observations end at once then).
                if let membership, !Task.isCancelled, !configuration.keepsGroupSessionOnStop {
                    await self.leaveGroup(membership)
                }
                // Durable: nothing more is read; what arrived is committed and acknowledged (the rest
                // stays with the broker), so the Deadvertise and DISCONNECT are not held behind it.
                if !Task.isCancelled, configuration.acknowledgesAfterCommit { await self.acknowledgeReceivedForStop() }
                if !Task.isCancelled { await self.settleAndFlush(finalHandOver: true) }
                if !Task.isCancelled, configuration.acknowledgesAfterCommit {
                    await self.acknowledgeIfCommitted()
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.stop()
        }
        queue.close()
        await writer.value
        logger.info("Recorder stopped", metadata: ["statistics": "\(statistics)"])
    }

    /// Asks ``run()`` to stop observing, commit what it received and return.
    public func stop() {
        let waiter = control.withLock { control in
            control.stopRequested = true
            defer { control.stopWaiter = nil }
            return control.stopWaiter
        }
        waiter?.resume()
        progress.signal()
    }

    func waitForStop() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = control.withLock { control -> Bool in
                    if control.stopRequested || Task.isCancelled { return true }
                    control.stopWaiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.stop()
        }
    }

    func markRegistered() { release(\.registered, \.registeredWaiters) }

    func markReady() { release(\.ready, \.readyWaiters) }

    /// Sets a milestone and resumes those waiting for it.
    func release(
        _ flag: WritableKeyPath<Control, Bool>,
        _ waiting: WritableKeyPath<Control, [CheckedContinuation<Void, Never>]>
    ) {
        let waiters = control.withLock { control in
            control[keyPath: flag] = true
            defer { control[keyPath: waiting].removeAll() }
            return control[keyPath: waiting]
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until a milestone is set.
    func wait(
        for flag: KeyPath<Control, Bool>,
        _ waiting: WritableKeyPath<Control, [CheckedContinuation<Void, Never>]>
    ) async {
        await withCheckedContinuation { continuation in
            let now = control.withLock { control -> Bool in
                if control[keyPath: flag] { return true }
                control[keyPath: waiting].append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
