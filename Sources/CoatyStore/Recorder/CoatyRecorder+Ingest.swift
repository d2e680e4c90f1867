import CoatyCore
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

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

    /// Durable recording: whenever the transport holds the acknowledgement of received messages
    /// (it reads nothing more meanwhile), waits until all of them were routed, every event they
    /// brought was handed to the queue and committed, then acknowledges them.
    func acknowledgeCommitted() async {
        let transport = manager.transport
        while !Task.isCancelled, !control.withLock({ $0.stopRequested }) {
            guard let due = transport.acknowledgementDue else {
                try? await Task.sleep(for: .microseconds(200))
                continue
            }
            // Reads are held: the messages through `due` are all there is to route and hand over.
            while transport.deliveredCount < due || !handedOver() {
                if Task.isCancelled || control.withLock({ $0.stopRequested }) { return }
                try? await Task.sleep(for: .microseconds(100))
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
        let transport = manager.transport
        guard let due = transport.acknowledgementDue, transport.deliveredCount >= due, handedOver() else { return }
        _ = await commitAndAcknowledge(through: due)
    }

    /// Commits what the queue holds and acknowledges the messages through `due`, unless a write
    /// failed meanwhile: then they stay unacknowledged, so the broker redelivers them to the next
    /// run. Returns whether it acknowledged.
    func commitAndAcknowledge(through due: UInt64) async -> Bool {
        let failedBefore = stats.withLock { $0.failedWrites }
        await queue.flush()
        guard stats.withLock({ $0.failedWrites }) == failedBefore else { return false }
        manager.transport.acknowledge(through: due)
        return true
    }

    func enqueue(_ mutations: [RecorderMutation]) async {
        guard !mutations.isEmpty else { return }
        stats.withLock { $0.received += mutations.count }
        let (depth, waited) = await queue.enqueue(mutations)
        metrics.received(mutations, depth: depth, waited: waited)
        stats.withLock { stats in
            stats.peakQueueDepth = max(stats.peakQueueDepth, depth)
            if waited { stats.backPressureWaits += 1 }
        }
    }

    // MARK: Writing

    func writeLoop() async {
        defer { queue.releaseFlushes() }
        while let batch = await queue.nextBatch(
            maxCount: configuration.maxBatchSize,
            interval: configuration.batchInterval
        ) {
            metrics.queueDepth(queue.pending)
            await write(batch)
            queue.markCommitted()
        }
    }

    /// Commits a batch in one transaction; when that fails, commits each mutation on its own so
    /// one bad mutation costs only itself (it is counted and logged).
    func write(_ batch: [RecorderMutation]) async {
        do {
            let outcomes = try await storage.apply(batch)
            committed(batch, outcomes: outcomes, batches: 1)
            return
        } catch {
            logger.warning(
                "Batch write failed; writing its mutations one by one",
                metadata: ["count": "\(batch.count)", "error": "\(error)"]
            )
        }
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

    func committed(_ batch: [RecorderMutation], outcomes: [RecorderMutationOutcome], batches: Int) {
        storeFailing.withLock { $0 = false }
        metrics.committed(batch, outcomes: outcomes)
        var stored = 0
        var removed = 0
        for outcome in outcomes {
            switch outcome {
            case .stored: stored += 1
            case .removed(let ids): removed += ids.count
            }
        }
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
