import CoatyCore
import CoatyStore
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import Tracing

extension CoatyRecorder {
    // MARK: Ingest

    enum IngestObservation: Sendable {
        case advertise(EventObservation<AdvertiseEvent<AnyCoatyObject>>)
        case channel(EventObservation<ChannelEvent>)

        func subscribed() async {
            switch self {
            case .advertise(let observation): await observation.subscribed()
            case .channel(let observation): await observation.subscribed()
            }
        }

        var progress: ObservationProgress {
            switch self {
            case .advertise(let observation): observation.progress
            case .channel(let observation): observation.progress
            }
        }
    }

    func makeIngestObservations() throws -> [IngestObservation] {
        var observations: [IngestObservation] = []
        for coreType in configuration.coreTypes {
            observations.append(.advertise(try manager.observeAdvertise(coreType: coreType)))
        }
        for objectType in configuration.objectTypes {
            observations.append(.advertise(try manager.observeAdvertise(objectType: objectType)))
        }
        for channelId in configuration.channelIds {
            observations.append(.channel(try manager.observeChannel(channelId)))
        }
        return observations
    }

    /// The most events an ingest pump takes from its observation at once.
    static let pumpBatchLimit = 512

    /// Hands what an ingest observation delivers to the queue, a batch of waiting events at a
    /// time (one lock and one counter update per batch, not per object).
    func pump(_ observation: IngestObservation, index: Int) async {
        switch observation {
        case .advertise(let events):
            var iterator = events.makeAsyncIterator()
            while let batch = await iterator.nextBatch(maxCount: Self.pumpBatchLimit) {
                await enqueue(
                    batch.map { event in
                        // No JSON tree is built: the store writes the received text and reads its
                        // promoted columns from it (`Writer.row(for:metadata:)`).
                        .store(
                            event.object,
                            ReceiptMetadata(sourceId: event.sourceId, eventType: "Advertise", topic: event.topic.name)
                        )
                    }
                )
                markHanded(index, count: batch.count)
            }
        case .channel(let events):
            var iterator = events.makeAsyncIterator()
            while let batch = await iterator.nextBatch(maxCount: Self.pumpBatchLimit) {
                var mutations: [RecorderMutation] = []
                for event in batch {
                    let receipt = ReceiptMetadata(
                        sourceId: event.sourceId,
                        eventType: "Channel",
                        topic: event.topic.name
                    )
                    for object in event.data.objects { mutations.append(.store(object, receipt)) }
                }
                await enqueue(mutations)
                markHanded(index, count: batch.count)
            }
        }
    }

    func pumpDeadvertise(_ events: EventObservation<DeadvertiseEvent>, index: Int) async {
        for await event in events {
            if !event.objectIds.isEmpty {
                // Objects advertised before the Deadvertise (children among them) reach the queue
                // first: they arrive on other observations, handed over by other tasks.
                await settle(except: index)
                await enqueue([.remove(objectIds: event.objectIds.map(\.uuidString))])
            }
            markHanded(index, count: 1)
        }
    }

    func markHanded(_ index: Int, count: Int) {
        handed.withLock { $0[index, default: 0] += UInt64(count) }
        progress.signal()
    }

    // MARK: Durable recording

    /// Whether every event the ingest observations were given so far was handed to the queue:
    /// none is buffered, and the pumps handed over as many as they took.
    func handedOver() -> Bool {
        let sources = ingestProgress.withLock { $0 }
        let counts = handed.withLock { $0 }
        return sources.allSatisfy { index, progress in
            let sample = progress()
            return sample.waiting == 0 && sample.taken == counts[index, default: 0]
        }
    }

    /// Whether the messages through number `due` were all routed and every event they brought was
    /// handed to the queue (what must be true before they are committed and acknowledged).
    func handedOver(through due: UInt64) -> Bool {
        manager.acknowledgements.delivered >= due && handedOver()
    }

    /// Durable recording: whenever the transport holds the acknowledgement of received messages
    /// (it reads nothing more meanwhile), waits until all of them were routed, every event they
    /// brought was handed to the queue and committed, then acknowledges them. Woken by
    /// ``progress`` (a due acknowledgement, a hand-over, the stop), never by a timer.
    func acknowledgeCommitted() async {
        let acknowledgements = manager.acknowledgements
        while true {
            let seen = progress.generation
            if Task.isCancelled || control.withLock({ $0.stopRequested }) { return }
            // Reads are held: the messages through `due` are all there is to route and hand over.
            guard let due = acknowledgements.due, handedOver(through: due) else {
                await progress.wait(beyond: seen)
                continue
            }
            guard await commitAndAcknowledge(through: due) else {
                logger.error(
                    "Durable recording: a write failed; its messages stay unacknowledged and reading stops until restart"
                )
                return
            }
        }
    }

    /// On stop: acknowledges what was received when everything of it is committed.
    func acknowledgeIfCommitted() async {
        guard let due = manager.acknowledgements.due, handedOver(through: due) else { return }
        _ = await commitAndAcknowledge(through: due)
    }

    /// On stop (durable recording): closes the transport's intake, so what the broker sends from
    /// now on stays with it, then (within ``Configuration/stopAcknowledgeTimeout``) waits until
    /// everything received was routed and handed to the queue, commits it and acknowledges it.
    func acknowledgeReceivedForStop() async {
        let acknowledgements = manager.acknowledgements
        // The persistent session keeps its subscriptions (the observations end now): what is published
        // while the recorder is away is queued for its next start.
        manager.keepSubscriptionsUntilStop()
        await acknowledgements.closeIntake()
        let deadline = ContinuousClock.now + configuration.stopAcknowledgeTimeout
        while !Task.isCancelled {
            let seen = progress.generation
            guard let due = acknowledgements.due else { return }
            if handedOver(through: due) {
                guard await commitAndAcknowledge(through: due) else { return }
                continue
            }
            if ContinuousClock.now >= deadline {
                logger.notice(
                    "Durable recording: stopping with received messages not handled in time; the broker keeps them for the next start",
                    metadata: ["through": "\(due)", "delivered": "\(acknowledgements.delivered)"]
                )
                return
            }
            await progress.wait(beyond: seen, until: deadline)
        }
    }

    /// Commits what the queue holds and acknowledges the messages through `due`, unless a write
    /// failed meanwhile: then they stay unacknowledged, so the broker redelivers them to the next
    /// run. Returns whether it acknowledged.
    func commitAndAcknowledge(through due: UInt64) async -> Bool {
        let failedBefore = stats.withLock { $0.failedWrites }
        await queue.flush()
        guard stats.withLock({ $0.failedWrites }) == failedBefore else { return false }
        manager.acknowledgements.acknowledge(through: due)
        return true
    }

    func enqueue(_ mutations: [RecorderMutation]) async {
        guard !mutations.isEmpty else { return }
        stats.withLock { $0.received += mutations.count }
        let (depth, waited) = await queue.enqueue(mutations)
        metrics.received(mutations, waited: waited)
        stats.withLock { stats in
            stats.peakQueueDepth = max(stats.peakQueueDepth, depth)
            if waited { stats.backPressureWaits += 1 }
        }
    }

    // MARK: Writing

    func writeLoop() async {
        defer { queue.releaseFlushes() }
        if let ordered = storage as? any OrderedRecorderStorage, ordered.appliesInRequestOrder {
            await writeLoop(requestingAhead: ordered)
            return
        }
        while var batch = await queue.nextBatch(
            maxCount: configuration.maxBatchSize,
            interval: configuration.batchInterval
        ) {
            await write(&batch)
        }
    }

    /// Writes a taken batch (``write(_:)``), marks it committed and releases it off this path.
    func write(_ batch: inout IngestQueue.Batch) async {
        await write(batch.mutations)
        queue.markCommitted(through: batch.through)
        Self.releaseElsewhere(&batch.mutations)
    }

    /// The writer over a storage that commits in request order: the next transaction is requested
    /// while the previous one is written, and takes its batch when it begins, so the database's
    /// thread goes from one commit straight to the next batch. (Taking the batch first and then
    /// requesting its transaction left that thread idle 5–30 ms per batch on a loaded machine,
    /// until the writer's task got a thread again to ask for the next one.) At most two
    /// transactions are outstanding; each is counted (and its flushes released) as soon as it has
    /// ended, after the one before it.
    func writeLoop(requestingAhead storage: some OrderedRecorderStorage) async {
        let maxCount = configuration.maxBatchSize
        // Set inside a transaction whose batch failed, until that batch was written one by one:
        // the transaction requested after it takes nothing meanwhile, so nothing overtakes it.
        let holding = WriteHold()
        var previous: Task<Void, Never>?
        var sequence: UInt64 = 0
        while await queue.waitForBatch(maxCount: maxCount, interval: configuration.batchInterval) {
            if holding.isHeld { await previous?.value }
            sequence += 1
            // Whether the transaction began and took its batch (or was held back), or failed before.
            let took = OneShot<Bool>()
            let before = previous
            let current = Task { [queue, sequence] in
                defer { took.settle(.success(false)) }
                let taken = CoatyMutex(IngestQueue.Batch.empty)
                let began = CoatyMutex<DefaultTracerClock.Timestamp?>(nil)
                let tracing = self.manager.isTracing
                let result: Result<[RecorderMutationOutcome], any Error>
                do {
                    result = .success(
                        try await storage.apply(
                            taking: {
                                let batch = holding.isHeld ? .empty : queue.take(maxCount: maxCount)
                                taken.withLock { $0 = batch }
                                if tracing { began.withLock { $0 = DefaultTracerClock.now } }
                                took.settle(.success(true))
                                return batch.mutations
                            },
                            failing: { holding.hold(by: sequence) }
                        )
                    )
                } catch {
                    result = .failure(error)
                }
                await before?.value
                // Moved out, so that the batch is freed by `finish` alone (off this path).
                var batch = taken.withLock { taken in
                    defer { taken = .empty }
                    return taken
                }
                await self.finish(
                    &batch,
                    result: result,
                    holding: holding,
                    sequence: sequence,
                    began: began.withLock { $0 }
                )
            }
            // Once it took its batch (the transaction before it has ended), what is queued from
            // now on goes to the next transaction.
            let began = (try? await took.value()) ?? false
            previous = current
            if !began {
                // The transaction could not begin (a locked or closed database): the next batch is
                // written as the other storages' are, one mutation at a time if need be, so that
                // failures are counted instead of retried at full speed.
                await current.value
                if var batch = await queue.nextBatch(maxCount: maxCount, interval: .zero) { await write(&batch) }
            }
        }
        await previous?.value
    }

    /// Counts a transaction of ``writeLoop(requestingAhead:)``: its batch committed, or is written
    /// one mutation at a time now.
    func finish(
        _ batch: inout IngestQueue.Batch,
        result: Result<[RecorderMutationOutcome], any Error>,
        holding: WriteHold,
        sequence: UInt64,
        began: DefaultTracerClock.Timestamp?
    ) async {
        switch result {
        case .success(let outcomes):
            if !batch.mutations.isEmpty {
                // Traced first: committing tells the waiters (and the events' observers) it is stored.
                if let began { traceBatch(batch.mutations.count, outcomes: outcomes, began: began) }
                committed(batch.mutations, outcomes: outcomes, batches: 1)
            }
        case .failure(let error):
            if !batch.mutations.isEmpty { await writeOneByOne(batch.mutations, after: error) }
            holding.release(by: sequence)
        }
        if batch.through > 0 { queue.markCommitted(through: batch.through) }
        Self.releaseElsewhere(&batch.mutations)
    }

    /// Whether ``writeLoop(requestingAhead:)`` holds back the batch of the transaction requested
    /// after one that failed. Set inside the failing transaction, so always before the next one
    /// begins. Not covered: a commit that fails after its body succeeded (the disk full at
    /// `COMMIT`); the transaction behind it may then commit first, and the failed batch's
    /// mutations are written one by one after it: in another order, none lost.
    final class WriteHold: Sendable {
        /// The transaction (its number in the loop) whose failure set the hold.
        private let holder = CoatyMutex<UInt64?>(nil)

        var isHeld: Bool { holder.withLock { $0 != nil } }

        /// Set by the failing transaction `sequence`, inside it.
        func hold(by sequence: UInt64) { holder.withLock { $0 = sequence } }

        /// Released by the transaction that set it, once its batch was written one by one (a
        /// transaction whose commit failed without holding leaves another one's hold alone).
        func release(by sequence: UInt64) {
            holder.withLock { holder in if holder == sequence { holder = nil } }
        }
    }

    /// Releases a written batch on another thread: freeing a few thousand received objects takes
    /// milliseconds, which the writer would otherwise spend before it asks for its next batch.
    static func releaseElsewhere(_ batch: inout [RecorderMutation]) {
        var released: [RecorderMutation] = []
        swap(&released, &batch)
        Task.detached { [released] in _ = released.count }
    }

    /// Commits a batch in one transaction; when that fails, commits each mutation on its own so
    /// one bad mutation costs only itself (it is counted and logged).
    func write(_ batch: [RecorderMutation]) async {
        let began = manager.isTracing ? DefaultTracerClock.now : nil
        do {
            let outcomes = try await storage.apply(batch)
            if let began { traceBatch(batch.count, outcomes: outcomes, began: began) }
            committed(batch, outcomes: outcomes, batches: 1)
        } catch {
            await writeOneByOne(batch, after: error)
        }
    }

    /// Commits each mutation of a batch whose transaction failed on its own, so one bad mutation
    /// costs only itself (it is counted and logged).
    func writeOneByOne(_ batch: [RecorderMutation], after error: any Error) async {
        logger.warning(
            "Batch write failed; writing its mutations one by one",
            metadata: ["count": "\(batch.count)", "error": "\(error)"]
        )
        var anyCommitted = false
        defer { if !anyCommitted { storeFailing.withLock { $0 = true } } }
        for mutation in batch {
            do {
                let outcomes = try await storage.apply([mutation])
                committed([mutation], outcomes: outcomes, batches: 1)
                anyCommitted = true
            } catch {
                metrics.writeFailedOnce()
                stats.withLock { $0.failedWrites += 1 }
                logger.error("Could not store a received mutation", metadata: ["error": "\(Self.describe(error))"])
                emit(.failed(message: "could not store: \(error)"))
            }
        }
    }

    /// The span of one ingest batch committed in one transaction (only when the manager traces): from the
    /// transaction taking the batch to its commit, with its size and what it stored and removed. A root span:
    /// a batch gathers events of many publishers.
    func traceBatch(_ count: Int, outcomes: [RecorderMutationOutcome], began: DefaultTracerClock.Timestamp) {
        let span = manager.tracer.startSpan(
            "coaty.record ingest batch",
            context: .topLevel,
            ofKind: .internal,
            at: began
        )
        guard span.isRecording else { return span.end() }
        let (stored, removed) = Self.counts(of: outcomes)
        span.attributes["coaty.batch.size"] = count
        span.attributes["coaty.batch.stored"] = stored
        span.attributes["coaty.batch.removed"] = removed
        span.end()
    }

    /// How many objects a batch's outcomes stored and removed.
    static func counts(of outcomes: [RecorderMutationOutcome]) -> (stored: Int, removed: Int) {
        var stored = 0
        var removed = 0
        for outcome in outcomes {
            switch outcome {
            case .stored: stored += 1
            case .removed(let ids): removed += ids.count
            }
        }
        return (stored, removed)
    }

    func committed(_ batch: [RecorderMutation], outcomes: [RecorderMutationOutcome], batches: Int) {
        storeFailing.withLock { $0 = false }
        metrics.committed(batch, outcomes: outcomes)
        let (stored, removed) = Self.counts(of: outcomes)
        stats.withLock { stats in
            stats.stored += stored
            stats.removed += removed
            stats.batches += batches
        }
        guard eventSinks.withLock({ !$0.isEmpty }) else { return }
        for (mutation, outcome) in zip(batch, outcomes) {
            switch (mutation, outcome) {
            case (.store(let object, let receipt), _):
                emit(.stored(objectId: object.objectId, objectType: object.objectType, receipt: receipt))
            case (.remove, .removed(let ids)):
                emit(.removed(objectIds: ids))
            default: break
            }
        }
    }
}
