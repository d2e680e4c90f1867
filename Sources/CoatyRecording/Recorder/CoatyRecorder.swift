public import CoatyCore
public import CoatyStore
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
        /// Stopping: how long a group member waits for what the broker had queued for it after it
        /// left the group's subscriptions (see ``CoatyRecorder/leftGroupDrained``). What has not
        /// arrived by then stays in its session for another member to take over, so a member
        /// stops in about this time even under a flood. Default 500 ms.
        public var groupLeaveTimeout: Duration = .milliseconds(500)
        /// Stopping, group member: keep the broker session, its shared subscriptions and the
        /// announcement instead of leaving the group. The stop is then a clean death: a member
        /// alive takes the session over (stores what the broker queued for it, then ends it); with
        /// none alive — the whole group stopped — the session goes on collecting this member's
        /// share, which it stores when it restarts under the same identity (`coaty record --member`).
        /// Leaving instead (the default) loses what is published while no member is subscribed, and
        /// suits members with a new identity each run, whose sessions nobody would resume.
        public var keepsGroupSessionOnStop = false
        /// Stopping, durable recording: how long the recorder waits, after closing the transport's
        /// intake, for everything it received to be routed, committed and acknowledged. What is
        /// unacknowledged after that stays with the broker for the next start. Default 500 ms.
        public var stopAcknowledgeTimeout: Duration = .milliseconds(500)

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

    /// Whether this group member, when it stopped, left its group with everything the broker had
    /// queued for it stored and acknowledged, and cleared its announcement: end its broker session
    /// then (``SessionHandover/end``). `false` before it stopped, and when what was queued did not
    /// arrive within the stop's bound (``Configuration/groupLeaveTimeout``): its session and
    /// announcement stay, so another member takes the session over as it does a gone member's (or
    /// this member resumes it when it restarts under the same identity).
    public var leftGroupDrained: Bool { control.withLock { $0.leftGroupDrained } }
    /// The properties indexed automatically, by object type.
    let automaticIndexes = CoatyMutex<[String: Set<String>]>([:])

    let queue: IngestQueue
    let stats = CoatyMutex(RecorderStatistics())
    let metrics: RecorderMetrics
    /// Whether the last write the store was given failed entirely (a batch and each of its
    /// mutations on its own); the next successful commit clears it.
    let storeFailing = CoatyMutex(false)
    /// Events each ingest observation's pump handed to the queue completely, by observation
    /// (durable recording compares them with what the observations delivered).
    let handed = CoatyMutex<[Int: UInt64]>([:])
    /// Signalled when a pump handed events over, when an acknowledgement becomes due, and on
    /// ``stop()``: what settling and durable acknowledging wait for (instead of polling).
    let progress = ChangeSignal()
    /// The progress of each ingest observation (by the same index as `handed`), while running.
    let ingestProgress = CoatyMutex<[Int: @Sendable () -> ObservationProgress]>([:])
    let control = CoatyMutex(Control())
    let eventSinks = CoatyMutex([Int: AsyncStream<RecorderEvent>.Continuation]())

    struct Control {
        var running = false
        var stopRequested = false
        var stopWaiter: CheckedContinuation<Void, Never>?
        var ready = false
        var readyWaiters: [CheckedContinuation<Void, Never>] = []
        var registered = false
        var registeredWaiters: [CheckedContinuation<Void, Never>] = []
        var nextSink = 0
        var leftGroupDrained = false
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
        self.queue = IngestQueue(capacity: configuration.queueCapacity) { [metrics] in metrics.queueDepth($0) }
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

    // MARK: Events

    func emit(_ event: RecorderEvent) {
        let sinks = eventSinks.withLock { Array($0.values) }
        for sink in sinks {
            if case .dropped = sink.yield(event) { stats.withLock { $0.droppedEvents += 1 } }
        }
    }

    func finishEvents() {
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
