public import CoatyCore
import CoatySync
public import Logging
public import Metrics
public import ServiceLifecycle
import Synchronization

/// An agent component that persists what it receives and answers from the store: the agent
/// `coaty record` runs.
///
/// It stores every object received by Advertise (of the configured core types and object types)
/// and by Channel (on the configured channel ids) with ``ReceiptMetadata``, removes objects and
/// their descendants by `parentObjectId` on Deadvertise, answers each valid Query with exactly
/// one Retrieve from the store (Coaty's filter semantics, joins by objectId), answers a Discover
/// by objectId or externalId with a Resolve when the object is stored, and optionally applies
/// Update events to stored objects and answers them with Complete.
///
/// Received objects pass through a bounded queue to one writer that commits them in batches:
/// when the database falls behind, the observers wait (back-pressure, nothing is dropped by the
/// recorder), and every mutation received before a Query, Discover or Update is committed before
/// that request is answered.
///
/// ```swift
/// let database = try SQLiteDatabase(path: "coaty.sqlite")
/// let recorder = CoatyRecorder(manager: manager, connection: database.makeConnection())
/// let group = ServiceGroup(services: [recorder, manager], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// Create (and ``run()``) the recorder before starting the manager, so the manager subscribes
/// its topics before it advertises its identity.
public final class CoatyRecorder: Service, Sendable {
    /// What the recorder observes and how it writes.
    public struct Configuration: Sendable, Hashable {
        /// The core types whose Advertise events are stored (`ADV:<CoreType>`); all 12 by default.
        public var coreTypes: [CoreType]
        /// Further object types whose Advertise events are stored (`ADV::<objectType>`); only
        /// needed for object types whose core type is not in ``coreTypes``.
        public var objectTypes: [String]
        /// The channel ids whose Channel events are stored.
        public var channelIds: [String]
        /// Whether Update events (of ``coreTypes``) are applied to stored objects and answered
        /// with Complete.
        public var acceptUpdates: Bool
        /// Whether Query events are answered from the store.
        public var answersQueries: Bool
        /// Whether Discover events by objectId or externalId are answered from the store.
        public var answersDiscovers: Bool
        /// The most mutations waiting for the database; observers wait when it is reached.
        public var queueCapacity: Int
        /// The most mutations committed in one transaction.
        public var maxBatchSize: Int
        /// How long the writer waits for a batch to fill before committing a partial batch.
        public var batchInterval: Duration
        /// The buffer size of ``CoatyRecorder/events()`` sequences; older events are dropped
        /// (they are informational, for a verbose mode).
        public var eventBufferLimit: Int
        /// Durable recording: acknowledge received messages to the transport only once every
        /// object they carry is committed (``CoatyTransport/acknowledge(through:)``). Use it with
        /// a transport that holds acknowledgements (CoatyKit: `MQTTConfiguration`'s
        /// `holdsAcknowledgements`, QoS 1 subscriptions and a persistent session), so the broker
        /// redelivers what a crashed recorder had not committed. Default `false`.
        public var acknowledgesAfterCommit: Bool
        /// Automatic indexes: the most JSON-property indexes the recorder creates per object type
        /// for Queries, when its store can index (``JSONPropertyIndexing``: SQLite, PostgreSQL).
        /// A Query of one object type ordered by a top-level property, or searching one (a
        /// numeric comparison or range, equality with a number or strings), creates that index
        /// before it is answered (once; logged at info), so that this and every later such Query
        /// walks the index and reads only the rows it answers with — such Queries then cost about
        /// the same over a thousand or a million objects. Without it a search reads every row of
        /// the type. `0` turns it off. Default 4.
        public var automaticIndexesPerObjectType: Int
        /// Readiness (``CoatyRecorder/readiness``): how long the store writer may owe work without
        /// committing any before the recorder reports itself not ready (a stalled store: a lock
        /// held elsewhere, a full disk, a database that stopped answering). Default 30 s.
        public var stallTimeout: Duration

        /// A configuration.
        /// - Parameters:
        ///   - coreTypes: core types to store; all by default.
        ///   - objectTypes: further object types to store.
        ///   - channelIds: channel ids to store.
        ///   - acceptUpdates: apply and complete Update events.
        ///   - answersQueries: answer Query events.
        ///   - answersDiscovers: answer Discover events.
        ///   - queueCapacity: the bounded queue's size.
        ///   - maxBatchSize: the largest batch per transaction.
        ///   - batchInterval: the longest wait for a batch to fill.
        ///   - eventBufferLimit: the buffer of each event sequence.
        ///   - acknowledgesAfterCommit: acknowledge received messages only once committed.
        ///   - automaticIndexesPerObjectType: the most automatic indexes per object type (0: none).
        ///   - stallTimeout: how long the writer may owe work before the recorder is not ready.
        public init(
            coreTypes: [CoreType] = CoreType.allCases,
            objectTypes: [String] = [],
            channelIds: [String] = [],
            acceptUpdates: Bool = false,
            answersQueries: Bool = true,
            answersDiscovers: Bool = true,
            queueCapacity: Int = 4096,
            maxBatchSize: Int = 4096,
            batchInterval: Duration = .milliseconds(5),
            eventBufferLimit: Int = 10_000,
            acknowledgesAfterCommit: Bool = false,
            automaticIndexesPerObjectType: Int = 4,
            stallTimeout: Duration = .seconds(30)
        ) {
            self.stallTimeout = stallTimeout
            self.acknowledgesAfterCommit = acknowledgesAfterCommit
            self.automaticIndexesPerObjectType = automaticIndexesPerObjectType
            self.coreTypes = coreTypes
            self.objectTypes = objectTypes
            self.channelIds = channelIds
            self.acceptUpdates = acceptUpdates
            self.answersQueries = answersQueries
            self.answersDiscovers = answersDiscovers
            self.queueCapacity = queueCapacity
            self.maxBatchSize = maxBatchSize
            self.batchInterval = batchInterval
            self.eventBufferLimit = eventBufferLimit
        }
    }

    /// The manager events are received and answered with.
    public let manager: CommunicationManager
    /// The store.
    public let storage: any RecorderStorage
    /// The configuration.
    public let configuration: Configuration
    /// The logger.
    public let logger: Logger
    /// Where automatic indexes are created, if the store can index.
    let indexing: (any JSONPropertyIndexing)?
    /// How this member of a recorder group takes over the sessions of members that are gone
    /// (and ends its own once it left the group and its manager stopped), or `nil`.
    public let handover: SessionHandover?
    /// The properties indexed automatically, by object type.
    private let automaticIndexes = CoatyMutex<[String: Set<String>]>([:])

    private let queue: IngestQueue
    let stats = CoatyMutex(RecorderStatistics())
    private let metrics: RecorderMetrics
    /// Whether the last write the store was given failed entirely (a batch and each of its
    /// mutations on its own); the next successful commit clears it.
    private let storeFailing = CoatyMutex(false)
    /// Events each ingest observation's pump handed to the queue completely, by observation
    /// (durable recording compares them with what the observations delivered).
    private let handed = CoatyMutex<[Int: UInt64]>([:])
    /// The progress of each ingest observation (by the same index as `handed`), while running.
    private let ingestProgress = CoatyMutex<[Int: @Sendable () -> ObservationProgress]>([:])
    private let control = CoatyMutex(Control())
    private let eventSinks = CoatyMutex([Int: AsyncStream<RecorderEvent>.Continuation]())

    private struct Control {
        var running = false
        var stopRequested = false
        var stopWaiter: CheckedContinuation<Void, Never>?
        var ready = false
        var readyWaiters: [CheckedContinuation<Void, Never>] = []
        var registered = false
        var registeredWaiters: [CheckedContinuation<Void, Never>] = []
        var nextSink = 0
    }

    /// A recorder over any ``RecorderStorage``.
    /// - Parameters:
    ///   - manager: the communication manager (started separately).
    ///   - storage: the store.
    ///   - configuration: what to observe and how to write.
    ///   - indexing: the store's indexes, for automatic indexes
    ///     (``Configuration/automaticIndexesPerObjectType``); e.g. the `SQLiteDatabase`.
    ///   - handover: for a member of a recorder group (a manager with a
    ///     ``CommunicationManager/Options/sharedSubscriptionGroup``): how it takes over the
    ///     broker sessions of members that are gone (see "Recorder groups" in "Running a
    ///     recorder"); `nil` (default) otherwise.
    ///   - logger: where to log; nothing by default.
    ///   - metricsFactory: where the recorder's metrics go (see the "Operating a recorder"
    ///     article); the global `MetricsSystem.factory` when `nil`.
    public init(
        manager: CommunicationManager,
        storage: any RecorderStorage,
        configuration: Configuration = Configuration(),
        indexing: (any JSONPropertyIndexing)? = nil,
        handover: SessionHandover? = nil,
        logger: Logger = Logger(label: "coaty.recorder", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.handover = handover
        self.metrics = RecorderMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        self.manager = manager
        self.storage = storage
        self.indexing = indexing
        self.configuration = configuration
        self.logger = logger
        self.queue = IngestQueue(capacity: configuration.queueCapacity)
    }

    /// A recorder over a database connection (in-memory, SQLite, …); a connection that can index
    /// (SQLite) also serves automatic indexes.
    /// - Parameters:
    ///   - manager: the communication manager (started separately).
    ///   - connection: the connection.
    ///   - configuration: what to observe and how to write.
    ///   - handover: for a member of a recorder group, how it takes over the sessions of members
    ///     that are gone; `nil` (default) otherwise.
    ///   - logger: where to log; nothing by default.
    ///   - metricsFactory: where the recorder's metrics go; the global `MetricsSystem.factory`
    ///     when `nil`.
    public convenience init(
        manager: CommunicationManager,
        connection: some ConnectionType,
        configuration: Configuration = Configuration(),
        handover: SessionHandover? = nil,
        logger: Logger = Logger(label: "coaty.recorder", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.init(
            manager: manager,
            storage: ConnectionRecorderStorage(connection),
            configuration: configuration,
            indexing: connection as? any JSONPropertyIndexing,
            handover: handover,
            logger: logger,
            metricsFactory: metricsFactory
        )
    }

    // MARK: Observing the recorder

    /// The counters so far.
    public var statistics: RecorderStatistics { stats.withLock { $0 } }

    /// Whether the recorder can do its job now (an operator's readiness probe, e.g.
    /// `/health/ready` of CoatyOperator): it runs, its subscriptions were acknowledged, its manager
    /// is online (connected to the broker), its store takes writes, and its writer has not owed
    /// work for ``Configuration/stallTimeout`` without committing any.
    ///
    /// ```swift
    /// if !recorder.readiness.isReady { print(recorder.readiness.reason ?? "") }
    /// ```
    public var readiness: RecorderReadiness {
        let (running, ready) = control.withLock { ($0.running && !$0.stopRequested, $0.ready) }
        guard running else { return .notReady("the recorder is not running") }
        guard manager.communicationState == .online else { return .notReady("not connected to the broker") }
        guard ready else { return .notReady("the subscriptions are not acknowledged yet") }
        if storeFailing.withLock({ $0 }) { return .notReady("the store rejects writes") }
        if let stalled = queue.stalledFor, stalled >= configuration.stallTimeout {
            let seconds = stalled.components.seconds
            return .notReady("the store writer committed nothing for \(seconds) s (\(queue.pending) mutations waiting)")
        }
        return .ready
    }

    /// Whether ``readiness`` is ready.
    public var isReady: Bool { readiness.isReady }

    /// The recorder's events (stored, removed, answered, failed) from now on, for a verbose
    /// mode; ends when ``run()`` ends. Beyond ``Configuration/eventBufferLimit`` unread events
    /// the oldest are dropped and counted (``RecorderStatistics/droppedEvents``); the objects
    /// themselves are stored regardless.
    /// - Returns: the events.
    public func events() -> RecorderEvents {
        let (stream, continuation) = AsyncStream<RecorderEvent>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, configuration.eventBufferLimit))
        )
        let id = control.withLock { control in
            defer { control.nextSink += 1 }
            return control.nextSink
        }
        eventSinks.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.eventSinks.withLock { $0.removeValue(forKey: id) }
        }
        return RecorderEvents(stream: stream)
    }

    /// Waits until ``run()`` has registered every observation, the manager is online and the
    /// broker acknowledged the subscriptions.
    public func ready() async { await wait(for: \.ready, \.readyWaiters) }

    /// Waits until ``run()`` has registered its observations with the manager (or has ended).
    ///
    /// Start a manager after this returns, and the manager subscribes the recorder's topics before
    /// it advertises its identity: the identity Advertise then means "ready" to other agents.
    public func registered() async { await wait(for: \.registered, \.registeredWaiters) }

    /// Waits until every object received so far is committed to the store.
    public func flush() async {
        await queue.flush()
    }

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
                    await membership?.announcements.subscribed()
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
                if let membership, !Task.isCancelled { await self.leaveGroup(membership) }
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
    }

    private func waitForStop() async {
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

    private func markRegistered() { release(\.registered, \.registeredWaiters) }

    private func markReady() { release(\.ready, \.readyWaiters) }

    /// Sets a milestone and resumes those waiting for it.
    private func release(
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
    private func wait(
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

    // MARK: Ingest

    private enum IngestObservation: Sendable {
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

    private func makeIngestObservations() throws -> [IngestObservation] {
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

    private func pump(_ observation: IngestObservation, index: Int) async {
        switch observation {
        case .advertise(let events):
            for await event in events {
                let receipt = ReceiptMetadata(sourceId: event.sourceId, eventType: "Advertise", topic: event.topic.name)
                await enqueue(.store(event.object, receipt))
                markHanded(index)
            }
        case .channel(let events):
            for await event in events {
                let receipt = ReceiptMetadata(sourceId: event.sourceId, eventType: "Channel", topic: event.topic.name)
                for object in event.data.objects { await enqueue(.store(object, receipt)) }
                markHanded(index)
            }
        }
    }

    private func pumpDeadvertise(_ events: EventObservation<DeadvertiseEvent>, index: Int) async {
        for await event in events {
            if !event.objectIds.isEmpty {
                // Objects advertised before the Deadvertise (children among them) reach the queue
                // first: they arrive on other observations, handed over by other tasks.
                await settle(except: index)
                await enqueue(.remove(objectIds: event.objectIds.map(\.uuidString)))
            }
            markHanded(index)
        }
    }

    private func markHanded(_ index: Int) {
        handed.withLock { $0[index, default: 0] += 1 }
    }

    // MARK: Durable recording

    /// Whether every event the ingest observations were given so far was handed to the queue:
    /// none is buffered, and the pumps handed over as many as they took.
    private func handedOver() -> Bool {
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
    private func acknowledgeCommitted() async {
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
    private func commitAndAcknowledge(through due: UInt64) async -> Bool {
        let failedBefore = stats.withLock { $0.failedWrites }
        await queue.flush()
        guard stats.withLock({ $0.failedWrites }) == failedBefore else { return false }
        manager.transport.acknowledge(through: due)
        return true
    }

    private func enqueue(_ mutation: RecorderMutation) async {
        stats.withLock { $0.received += 1 }
        let (depth, waited) = await queue.enqueue(mutation)
        metrics.received(mutation, depth: depth, waited: waited)
        stats.withLock { stats in
            stats.peakQueueDepth = max(stats.peakQueueDepth, depth)
            if waited { stats.backPressureWaits += 1 }
        }
    }

    // MARK: Writing

    private func writeLoop() async {
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
    private func write(_ batch: [RecorderMutation]) async {
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

    private func committed(_ batch: [RecorderMutation], outcomes: [RecorderMutationOutcome], batches: Int) {
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

    // MARK: Answering

    /// Lets the observers hand over what the manager delivered before the request (it dispatches
    /// messages in arrival order, so those events are already in the observers' buffers), then
    /// waits until all of it is committed.
    /// - Parameter finalHandOver: the hand-over when the recorder stops: it waits (up to a minute)
    ///   although a stop was requested.
    private func settleAndFlush(finalHandOver: Bool = false) async {
        await settle(finalHandOver: finalHandOver)
        await queue.flush()
    }

    /// Waits until the ingest observations handed to the queue every event the manager delivered
    /// to them before now (what they held or had taken), except observation `excluded` (the
    /// caller's own), without waiting for the commit. Exact: each observation's progress says how
    /// many events it was given, and each pump counts what it handed over.
    private func settle(except excluded: Int? = nil, finalHandOver: Bool = false) async {
        let deadline = ContinuousClock.now + .seconds(60)
        let sources = ingestProgress.withLock { $0 }
        var targets: [Int: UInt64] = [:]
        for (index, progress) in sources where index != excluded {
            let sample = progress()
            targets[index] = sample.taken + UInt64(sample.waiting)
        }
        while true {
            let counts = handed.withLock { $0 }
            if targets.allSatisfy({ counts[$0.key, default: 0] >= $0.value }) { return }
            if Task.isCancelled { return }
            if finalHandOver ? ContinuousClock.now > deadline : control.withLock({ $0.stopRequested }) { return }
            if queue.hasBlockedProducers {
                await queue.flush()
            } else {
                try? await Task.sleep(for: .microseconds(200))
            }
        }
    }

    private func answer(_ queries: EventObservation<QueryEvent>) async {
        for await query in queries {
            let start = ContinuousClock.now
            await settleAndFlush()
            let scope: StoreScope
            if let objectTypes = query.data.objectTypes {
                scope = .collections(objectTypes)
            } else {
                scope = .coreTypes((query.data.coreTypes ?? []).map(\.rawValue))
            }
            await indexIfUseful(query.data)
            do {
                let json = try await storage.objects(
                    in: scope,
                    filter: query.data.objectFilter,
                    joins: query.data.objectJoinConditions?.conditions ?? []
                )
                let objects = decode(json)
                try await query.retrieve(objects: objects)
                metrics.answered(.query, since: start)
                stats.withLock { $0.answeredQueries += 1 }
                emit(.retrieved(correlationId: query.topic.correlationUUID, count: objects.count))
            } catch {
                metrics.failed(.query)
                stats.withLock { $0.failedAnswers += 1 }
                logger.error("Could not answer a Query", metadata: ["error": "\(Self.describe(error))"])
                emit(.failed(message: "could not answer a Query: \(Self.describe(error))"))
            }
        }
    }

    /// Creates the automatic indexes a Query of one object type calls for
    /// (``Configuration/automaticIndexesPerObjectType``): on its first ordering property, and on
    /// the properties its conditions search (``indexedSearchProperties(of:)``).
    private func indexIfUseful(_ data: QueryEventData) async {
        guard let indexing, configuration.automaticIndexesPerObjectType > 0,
            let objectTypes = data.objectTypes, objectTypes.count == 1
        else { return }
        let objectType = objectTypes[0]
        var properties: [String] = []
        if let path = data.objectFilter?.orderByProperties?.first?.property.path, path.count == 1 {
            properties.append(path[0])
        }
        properties += Self.indexedSearchProperties(of: data.objectFilter?.conditions).sorted()
        for property in properties {
            guard JSONIndexDeclarations.isIndexable(property), !PromotedColumns.names.contains(property),
                !indexing.hasIndex(collection: objectType, property: property)
            else { continue }
            let admitted = automaticIndexes.withLock { indexes -> Bool in
                guard indexes[objectType, default: []].count < configuration.automaticIndexesPerObjectType else {
                    return false
                }
                return indexes[objectType, default: []].insert(property).inserted
            }
            guard admitted else { continue }
            do {
                try await indexing.createIndex(collection: objectType, property: property)
                logger.info(
                    "Created an index for Queries on a property",
                    metadata: ["objectType": "\(objectType)", "property": "\(property)"]
                )
            } catch {
                logger.warning(
                    "Could not create an index",
                    metadata: ["objectType": "\(objectType)", "property": "\(property)", "error": "\(error)"]
                )
            }
        }
    }

    /// The top-level properties whose conditions an index can search: compared with a number
    /// (`LessThan` … `GreaterThanOrEqual`, `Between`, `Equals`) or equal to strings (`Equals`,
    /// `In`). Of an and-ed list every such property; of an or-ed list only a property that every
    /// condition searches (otherwise each branch but one still reads every row).
    static func indexedSearchProperties(of conditions: ObjectFilterConditions?) -> Set<String> {
        func searches(_ expression: ObjectFilterExpression) -> Bool {
            switch expression.operator {
            case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
                return expression.operand1?.doubleValue != nil
            case .between:
                return expression.operand1?.doubleValue != nil && expression.operand2?.doubleValue != nil
            case .equals:
                return expression.operand1?.doubleValue != nil || expression.operand1?.stringValue != nil
            case .in:
                guard case .array(let values)? = expression.operand1 else { return false }
                return !values.isEmpty && values.allSatisfy { $0.stringValue != nil }
            default:
                return false
            }
        }
        let searched = SQLText.properties(of: conditions, where: searches)
        guard case .or(let list)? = conditions else { return searched }
        let all = Set(list.map { $0.property.path.joined(separator: ".") })
        return all.count == 1 ? searched : []
    }

    private func answer(_ discovers: EventObservation<DiscoverEvent>) async {
        for await discover in discovers {
            let start = ContinuousClock.now
            let data = discover.data
            let lookup: (property: String, value: String)
            if let objectId = data.objectId {
                lookup = ("objectId", objectId.uuidString)
            } else if let externalId = data.externalId {
                lookup = ("externalId", externalId)
            } else {
                continue  // by types only: not answered from the store
            }
            await settleAndFlush()
            do {
                let candidates = decode(try await storage.objects(where: lookup.property, equals: lookup.value))
                guard let object = candidates.first(where: data.matches) else { continue }
                try await discover.resolve(object: object)
                metrics.answered(.discover, since: start)
                stats.withLock { $0.answeredDiscovers += 1 }
                emit(.resolved(correlationId: discover.topic.correlationUUID, objectId: object.objectId))
            } catch {
                metrics.failed(.discover)
                stats.withLock { $0.failedAnswers += 1 }
                logger.error("Could not answer a Discover", metadata: ["error": "\(Self.describe(error))"])
                emit(.failed(message: "could not answer a Discover: \(Self.describe(error))"))
            }
        }
    }

    private func answer(_ updates: EventObservation<UpdateEvent<AnyCoatyObject>>) async {
        for await update in updates {
            let start = ContinuousClock.now
            await settleAndFlush()
            let receipt = ReceiptMetadata(sourceId: update.sourceId, eventType: "Update", topic: update.topic.name)
            do {
                guard let json = try await storage.update(update.object, receipt: receipt) else {
                    stats.withLock { $0.ignoredUpdates += 1 }
                    continue
                }
                let object = try manager.registry.decode(json)
                try await update.complete(object: object)
                metrics.answered(.update, since: start)
                stats.withLock { $0.completedUpdates += 1 }
                emit(.updated(objectId: object.objectId, objectType: object.objectType, receipt: receipt))
            } catch {
                metrics.failed(.update)
                stats.withLock { $0.failedAnswers += 1 }
                logger.error("Could not apply an Update", metadata: ["error": "\(Self.describe(error))"])
                emit(.failed(message: "could not apply an Update: \(Self.describe(error))"))
            }
        }
    }

    /// An error as one bounded line for a log: a backend error may quote a whole generated
    /// statement (megabytes for a Query of many conditions), and anyone on the bus can send one.
    static func describe(_ error: any Error) -> String {
        var text = String(describing: error).split(whereSeparator: \.isNewline).joined(separator: " ")
        let limit = 300
        if text.count > limit {
            let more = text.count - limit
            text = String(text.prefix(limit)) + "… (\(more) more characters)"
        }
        return text
    }

    /// Decodes stored JSON into objects, skipping (and logging) rows that are no Coaty object.
    private func decode(_ json: [JSONValue]) -> [AnyCoatyObject] {
        json.compactMap { value in
            do {
                return try manager.registry.decode(value)
            } catch {
                logger.warning(
                    "Skipped a stored row that is not a Coaty object",
                    metadata: ["error": "\(Self.describe(error))"]
                )
                return nil
            }
        }
    }

    // MARK: Events

    private func emit(_ event: RecorderEvent) {
        let sinks = eventSinks.withLock { Array($0.values) }
        for sink in sinks {
            if case .dropped = sink.yield(event) { stats.withLock { $0.droppedEvents += 1 } }
        }
    }

    private func finishEvents() {
        let sinks = eventSinks.withLock { sinks in
            defer { sinks.removeAll() }
            return Array(sinks.values)
        }
        for sink in sinks { sink.finish() }
        control.withLock { control in
            control.running = false
            control.stopRequested = false
            control.ready = false
        }
    }
}

/// The counters of a ``CoatyRecorder``.
public struct RecorderStatistics: Sendable, Hashable, CustomStringConvertible {
    /// Mutations received (objects to store and Deadvertise events).
    public var received = 0
    /// Objects committed to the store.
    public var stored = 0
    /// Objects removed (deadvertised ones and their descendants).
    public var removed = 0
    /// Transactions committed.
    public var batches = 0
    /// The most mutations that waited for the database at once (at most the queue capacity).
    public var peakQueueDepth = 0
    /// How often an observer waited for room in the queue (back-pressure).
    public var backPressureWaits = 0
    /// Mutations that could not be committed even on their own.
    public var failedWrites = 0
    /// Query events answered with a Retrieve.
    public var answeredQueries = 0
    /// Discover events answered with a Resolve.
    public var answeredDiscovers = 0
    /// Update events applied and answered with a Complete.
    public var completedUpdates = 0
    /// Update events of objects that are not stored (not answered).
    public var ignoredUpdates = 0
    /// Requests that could not be answered because of a store or publication error.
    public var failedAnswers = 0
    /// Recorder events (``CoatyRecorder/events()``) dropped because a reader of them fell
    /// ``CoatyRecorder/Configuration/eventBufferLimit`` events behind (never objects: the store
    /// gets every one).
    public var droppedEvents = 0
    /// Broker sessions of gone recorder group members this member took over (what they held is
    /// counted in ``received`` and ``stored``).
    public var handedOverSessions = 0

    /// No counts.
    public init() {}

    /// The counts on one line.
    public var description: String {
        "received \(received), stored \(stored), removed \(removed), batches \(batches), "
            + "failed writes \(failedWrites), queries \(answeredQueries), discovers \(answeredDiscovers), "
            + "updates \(completedUpdates) (ignored \(ignoredUpdates)), failed answers \(failedAnswers), "
            + "dropped recorder events \(droppedEvents), handed-over sessions \(handedOverSessions)"
    }
}

/// Whether a ``CoatyRecorder`` can do its job now, and if not, why (``CoatyRecorder/readiness``).
public struct RecorderReadiness: Sendable, Hashable, CustomStringConvertible {
    /// Whether it is ready.
    public var isReady: Bool
    /// Why it is not ready, one short line for an operator; `nil` when ready.
    public var reason: String?

    /// Ready.
    public static let ready = RecorderReadiness(isReady: true, reason: nil)

    /// Not ready, for `reason`.
    /// - Parameter reason: why, one short line.
    /// - Returns: the readiness.
    public static func notReady(_ reason: String) -> RecorderReadiness {
        RecorderReadiness(isReady: false, reason: reason)
    }

    /// `ready`, or `not ready: <reason>`.
    public var description: String { isReady ? "ready" : "not ready: \(reason ?? "unknown")" }
}

/// What a ``CoatyRecorder`` did, one event at a time (see ``CoatyRecorder/events()``).
public enum RecorderEvent: Sendable, Hashable {
    /// An object was committed.
    case stored(objectId: CoatyUUID, objectType: String, receipt: ReceiptMetadata)
    /// Objects were removed (a Deadvertise and its descendants).
    case removed(objectIds: [String])
    /// A Query was answered with this many objects.
    case retrieved(correlationId: CoatyUUID?, count: Int)
    /// A Discover was answered with this object.
    case resolved(correlationId: CoatyUUID?, objectId: CoatyUUID)
    /// An Update was applied and completed.
    case updated(objectId: CoatyUUID, objectType: String, receipt: ReceiptMetadata)
    /// Something could not be stored or answered (also logged).
    case failed(message: String)
}

/// The events of a ``CoatyRecorder``, as an `AsyncSequence`.
public struct RecorderEvents: AsyncSequence, Sendable {
    /// Never fails.
    public typealias Failure = Never
    /// An event.
    public typealias Element = RecorderEvent

    let stream: AsyncStream<RecorderEvent>

    /// Creates the iterator.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { Iterator(base: stream.makeAsyncIterator()) }

    /// The iterator of ``RecorderEvents``.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<RecorderEvent>.Iterator

        /// The next event, or `nil` when the recorder stopped.
        public mutating func next() async -> RecorderEvent? { await base.next() }

        /// The next event, or `nil` when the recorder stopped.
        /// - Parameter actor: the caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> RecorderEvent? {
            await base.next(isolation: actor)
        }
    }
}

/// Errors of a ``CoatyRecorder``.
public enum RecorderError: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``CoatyRecorder/run()`` was called while it runs; run one recorder once at a time.
    case alreadyRunning
    /// Handing over the session of a gone member of a recorder group: what the broker held for
    /// it did not all arrive within a minute (the session is kept; the handover is retried).
    case groupBarrierTimedOut
    /// Handing over the session of a gone member of a recorder group: the connection under its
    /// client id was lost (another member took the session, or the broker went away); retried.
    case groupHandoverInterrupted

    /// What happened and what to do.
    public var description: String {
        switch self {
        case .alreadyRunning: "The recorder is already running; call run() once and stop() it before running again."
        case .groupBarrierTimedOut:
            "The session of a gone recorder group member did not drain within a minute; it is kept and retried."
        case .groupHandoverInterrupted:
            "The connection taking over a gone recorder group member's session was lost; the handover is retried."
        }
    }
}
