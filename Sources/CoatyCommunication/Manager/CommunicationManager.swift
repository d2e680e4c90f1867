import CoatyFilter
public import CoatyModel
import CoatySync
public import Logging
public import Metrics
import ServiceLifecycle
public import Tracing
import Synchronization

/// Whether the agent is connected to the broker (Coaty's communication state).
public enum CommunicationState: Sendable, Hashable {
    /// Not connected; publications are deferred.
    case offline
    /// Connected, subscribed, join events published and deferred publications drained.
    case online
}

/// Counters of what the communication manager dropped or deferred; also reported as metrics.
public struct CommunicationStatistics: Sendable, Hashable {
    /// Received `coaty/…` topics that break a protocol rule.
    public var invalidTopics = 0
    /// Received payloads that are not valid for their event.
    public var invalidPayloads = 0
    /// Responses that do not answer their request (e.g. a Resolve of another type).
    public var invalidResponses = 0
    /// Events dropped by an observation's opt-in drop policy (``ObservationBuffering``), or
    /// discarded with an observation a stall detached (``StallPolicy/detach``). Zero by default:
    /// a full observer holds the reads instead (back-pressure).
    public var observerOverflow = 0
    /// Stall reports: a back-pressured observer whose consumer took nothing for
    /// ``CommunicationManager/Options/stallTimeout`` while events waited (one per report).
    public var observerStalls = 0
    /// How often reading from the broker was held because an observer was full.
    public var readHolds = 0
    /// Deferred publications dropped because the deferral queue was full (oldest first).
    public var deferredOverflow = 0
    /// Publications currently deferred.
    public var deferredPending = 0
}

/// The communication states of a ``CommunicationManager``: the current one, then every change.
public struct CommunicationStates: AsyncSequence, Sendable {
    /// Never fails.
    public typealias Failure = Never
    let stream: AsyncStream<CommunicationState>

    /// Creates the iterator.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { Iterator(base: stream.makeAsyncIterator()) }

    /// The iterator of ``CommunicationStates``.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<CommunicationState>.Iterator

        /// The next state, or `nil` when the task is cancelled.
        public mutating func next() async -> CommunicationState? { await base.next() }

        /// The next state, or `nil` when the task is cancelled.
        /// - Parameter actor: the caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> CommunicationState? {
            await base.next(isolation: actor)
        }
    }
}

/// Publishes and observes Coaty communication events over a ``CoatyTransport``.
///
/// One manager is one agent: it has an identity, a namespace, a registry for typed decoding, and
/// a transport. ``start()`` connects with the last will, subscribes, publishes the join event
/// (the Advertise of the identity) and drains publications deferred while offline; ``stop()``
/// publishes the Deadvertise of the identity and disconnects. As a ``Service`` it does both in
/// ``run()``.
///
/// ```swift
/// let manager = try CommunicationManager(transport: transport, identity: Identity(name: "Light agent"))
/// try await manager.start()
/// try await manager.publishAdvertise(light)
/// for await event in try manager.observeAdvertise(Light.self) { print(event.object) }
/// ```
///
/// Received messages are decoded and routed on the transport's delivery thread, in batches the
/// transport pushes (``CoatyTransport/deliverMessages(to:)``); routing tables are protected by a mutex, so observers and
/// requests can be created from any task.
/// Every observer has its own buffer; an MQTT subscription is shared by all observers of its
/// topic filter and ends with the last of them.
public final class CommunicationManager: Sendable {
    /// Settings of a communication manager.
    public struct Options: Sendable {
        /// The namespace: publications use it; observations receive only it unless
        /// ``crossNamespacing`` is on. Default `-`.
        public var namespace: String
        /// Whether to receive events from every namespace (responses are always answered in the
        /// responder's own namespace).
        public var crossNamespacing: Bool
        /// The most publications kept while offline; beyond it the **oldest** is dropped (and
        /// counted in ``CommunicationStatistics/deferredOverflow``), so the freshest state is sent
        /// on reconnection.
        public var deferredPublicationLimit: Int
        /// The events an observer buffers before the manager holds the reads from the broker
        /// (back-pressure, the default ``ObservationBuffering``); reading resumes when it is back
        /// to half. Default 4096: large enough that a consumer keeping pace never holds the
        /// reads, small enough to bound memory (it is not a safety margin: nothing is dropped).
        public var observerBufferLimit: Int
        /// While a request of this agent awaits responses, reading goes on past
        /// ``observerBufferLimit`` until an observer holds this many events, so a handler that
        /// publishes a request inside its observer loop and awaits the responses gets them while
        /// its own observer is full. Default 65 536 (at least ``observerBufferLimit``). A request
        /// whose responses wait behind more events than this in the broker's queue times out.
        public var requestHeadroom: Int?

        /// ``requestHeadroom``, or its default.
        var effectiveRequestHeadroom: Int { max(requestHeadroom ?? 65_536, observerBufferLimit) }
        /// How long a back-pressured observer's consumer may take nothing while events wait before
        /// it is reported as stalled (default 10 s).
        public var stallTimeout: Duration
        /// What happens to a stalled observer after it is reported (default
        /// ``StallPolicy/keepBackPressure``: keep holding the reads; nothing is lost).
        public var stallPolicy: StallPolicy
        /// The shortest interval between two warnings about events a drop policy dropped, per
        /// observation (default 5 s; each warning carries the totals).
        public var dropLogInterval: Duration
        /// The least QoS of every publication and subscription of this agent, as Coaty JS's
        /// `mqttClientOptions.qos`. Coaty's default is ``TransportQoS/atMostOnce``;
        /// ``TransportQoS/atLeastOnce`` (opt-in) makes the broker keep and redeliver what a
        /// connection loss would lose, within its limits (see "Delivery guarantees"). Agents with
        /// different levels interoperate: the broker delivers at the lower of the publication's
        /// and the subscription's QoS.
        public var qos: TransportQoS
        /// Whether the broker delivers one copy of a message per matching subscription of a
        /// client, as mosquitto 2 does (default `true`). Overlapping subscriptions only arise
        /// with Raw observers (`#` also matches Coaty topics); the manager then drops the extra
        /// copies so every observer sees a message once. Set it to `false` for a broker that
        /// delivers a single copy, or identical consecutive messages would be taken for copies.
        public var brokerDeliversCopyPerSubscription: Bool
        /// The largest payload of a Coaty event (JSON) that is read, in bytes; a larger one is
        /// dropped before it is parsed, counted in ``CommunicationStatistics/invalidPayloads`` and
        /// logged at warning. Default 16 MiB (``defaultMaximumPayloadSize``): far above any Coaty
        /// object, and a bound on the memory one message can make the agent allocate while
        /// parsing. IO values and Raw messages are not limited (their data is not parsed here).
        public var maximumPayloadSize: Int
        /// The MQTT shared-subscription group of this agent's event observations, or `nil` (the
        /// default: every observation gets every event).
        ///
        /// With a group name, the observations of the events that carry work — Advertise, Channel,
        /// Update, Discover, Query, Call — subscribe `$share/<group>/<filter>`: the broker
        /// delivers each matching event to **one** of the agents observing it in the same group
        /// (MQTT 5 shared subscriptions; mosquitto offers them to MQTT 3.1.1 clients too). Agents
        /// in a group share the load of one job, e.g. recorders that each store a part of the
        /// Advertise events and answer a part of the Discover and Query requests (recorder
        /// groups). Deadvertise events (agents and objects gone), Associate and IoValue events
        /// and the responses to this agent's own requests reach every member. A Discover for a
        /// member's identity is answered only by the member the broker gives it to. The name
        /// must be a valid topic level without wildcards (``isValidSharedSubscriptionGroup(_:)``).
        public var sharedSubscriptionGroup: String?
        /// Whether the manager announces its identity (default `true`): the join Advertise on
        /// every connection, the Deadvertise as its last will and when it stops. `false` is for a
        /// connection that acts on behalf of another agent without joining as one, e.g. a member
        /// of a recorder group resuming the broker session of a member that is gone.
        public var announcesIdentity: Bool = true
        /// The kind of broker, where it departs from MQTT in ways that matter to Coaty (default
        /// ``BrokerType/standard``). ``BrokerType/rabbitMQ`` reads back the topics RabbitMQ's MQTT
        /// plugin delivers with `/` for every `.` inside a level (object types, dotted channel ids
        /// and operations), takes ``brokerDeliversCopyPerSubscription`` as `false` and refuses a
        /// ``sharedSubscriptionGroup``. A manager on ``BrokerType/standard`` that receives such a
        /// topic drops it, counts it as an invalid topic and logs a warning naming this option.
        public var brokerType: BrokerType = .standard
        /// Whether a one-way event (Advertise, Deadvertise, Channel, Associate, IoValue) published outside any trace
        /// asks the tracer for a span of its own, a root its sampler decides for each publication (default `true`).
        /// With swift-otel that decision costs about 10 000 instructions and 5 allocations per event also for the
        /// events it drops (a third more than the publication itself, `Benchmarks/README.md`). `false`: only a
        /// publication made where a service context is current (inside a span: a request's handling, the
        /// application's own) makes a span, whose parent decides; a stream published outside any trace costs
        /// nothing. Only matters while a tracer is bootstrapped or given.
        public var tracesUnparentedOneWayEvents: Bool = true

        /// ``brokerDeliversCopyPerSubscription`` as the broker type allows.
        var deliversCopyPerSubscription: Bool { brokerDeliversCopyPerSubscription && brokerType != .rabbitMQ }

        /// The default ``maximumPayloadSize``: 16 MiB.
        public static let defaultMaximumPayloadSize = 16 << 20

        /// Creates options.
        /// - Parameters:
        ///   - namespace: the namespace; `-` by default.
        ///   - crossNamespacing: whether to receive from every namespace.
        ///   - deferredPublicationLimit: the size of the offline queue.
        ///   - observerBufferLimit: the buffer size of each observer.
        ///   - brokerDeliversCopyPerSubscription: whether overlapping subscriptions bring copies.
        ///   - requestHeadroom: the buffer size up to which reading goes on while requests await
        ///     responses (`nil`: 65 536).
        ///   - stallTimeout: when a consumer that takes nothing is reported.
        ///   - stallPolicy: what happens to a stalled observer.
        ///   - dropLogInterval: the shortest interval between two drop warnings of an observation.
        ///   - qos: the least QoS of every publication and subscription (default QoS 0).
        ///   - maximumPayloadSize: the largest Coaty event payload read, in bytes (default 16 MiB).
        ///   - sharedSubscriptionGroup: the shared-subscription group of the event observations,
        ///     or `nil` (default) for none.
        public init(
            namespace: String = CoatyTopic.defaultNamespace,
            crossNamespacing: Bool = false,
            deferredPublicationLimit: Int = 1000,
            observerBufferLimit: Int = 4096,
            brokerDeliversCopyPerSubscription: Bool = true,
            requestHeadroom: Int? = nil,
            stallTimeout: Duration = .seconds(10),
            stallPolicy: StallPolicy = .keepBackPressure,
            dropLogInterval: Duration = .seconds(5),
            qos: TransportQoS = .atMostOnce,
            maximumPayloadSize: Int = Options.defaultMaximumPayloadSize,
            sharedSubscriptionGroup: String? = nil
        ) {
            self.sharedSubscriptionGroup = sharedSubscriptionGroup
            self.maximumPayloadSize = maximumPayloadSize
            self.qos = qos
            self.requestHeadroom = requestHeadroom
            self.stallTimeout = stallTimeout
            self.stallPolicy = stallPolicy
            self.dropLogInterval = dropLogInterval
            self.brokerDeliversCopyPerSubscription = brokerDeliversCopyPerSubscription
            self.namespace = namespace
            self.crossNamespacing = crossNamespacing
            self.deferredPublicationLimit = deferredPublicationLimit
            self.observerBufferLimit = observerBufferLimit
        }
    }

    /// The transport.
    public let transport: any CoatyTransport
    /// The agent's identity, advertised on every (re)connection.
    public let identity: Identity
    /// Where the spans of requests sent and handled go: the tracer given to ``init(transport:identity:registry:options:logger:metricsFactory:tracer:)``,
    /// else the one the process bootstrapped (`InstrumentationSystem`), else none (swift-distributed-tracing's no-op tracer).
    public let tracer: any Tracer
    /// Whether ``tracer`` is a real one (not swift-distributed-tracing's no-op tracer): only then are the requests
    /// handled given spans (and an answering agent such as the recorder adds spans of its steps).
    public let isTracing: Bool
    /// The registry that decodes received objects into Swift types.
    public let registry: CoatyObjectRegistry
    /// The options.
    public let options: Options
    /// The logger.
    public let logger: Logger

    let state: CoatyMutex<ManagerState>
    let counters: Counters
    /// Received events, connection state, reconnections and response times as metrics.
    let metrics: CommunicationMetrics
    let identityJSON: AnyCoatyObject
    /// The response timeouts of requests.
    let requestTimers = RequestTimers()
    /// Topic names of one-way events published before (they depend only on the event: the
    /// namespace and source id are fixed), so a stream of Advertises builds each name once.
    let topicNames = CoatyMutex<[CoatyTopic.Event: String]>([:])
    /// The topic names and response filters of two-way events up to their correlation id (see
    /// ``twoWayTopicName(_:correlationId:)``).
    let twoWayPrefixes = CoatyMutex(TwoWayPrefixes())
    /// The last received topic and what it is (see `classify(_:)`).
    let lastTopic = CoatyMutex<(topic: String, classification: CoatyTopic.Classification)?>(nil)
    /// The Advertise topic names of each object type published before (see ``advertiseTopicNames(objectType:coreType:)``).
    let advertiseNames = CoatyMutex<[AdvertisedType: [String]]>([:])
    /// Observers to wake at the end of the batch of messages being routed.
    let wakeups = ObservationWakeups()
    /// Whether the warning about a topic a broker rewrote (see ``Options/brokerType``) was logged.
    let rewrittenTopicWarned = Atomic(false)
    /// Whether the manager reads from the transport (back-pressure of full observers).
    let gate: BackPressureGate
    /// The association states of the agent's IO points (see ``observeIoState(for:)-(IoSource)``).
    let ioStateTable = IoStateTable()

    /// Creates a manager; nothing happens until ``start()``.
    ///
    /// - Parameters:
    ///   - transport: the transport (CoatyKit's `MQTTTransport`, or CoatyTesting's in-process one).
    ///   - identity: the agent's identity; its `objectId` is the source id of every publication
    ///     and determines the MQTT client id.
    ///   - registry: the object types to decode into Swift types.
    ///   - options: namespace, cross-namespacing and buffer sizes.
    ///   - logger: where to log (dropped events at debug level).
    ///   - metricsFactory: the metrics factory; the global `MetricsSystem.factory` when `nil`.
    ///   - tracer: where the spans of requests sent go; the bootstrapped `InstrumentationSystem.tracer` when `nil`
    ///     (swift-distributed-tracing's no-op tracer unless the application bootstrapped one).
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid namespace.
    public init(
        transport: any CoatyTransport,
        identity: Identity = Identity(),
        registry: CoatyObjectRegistry = CoatyObjectRegistry(),
        options: Options = Options(),
        logger: Logger = Logger(label: "coaty.communication", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil,
        tracer: (any Tracer)? = nil
    ) throws(CommunicationError) {
        self.tracer = tracer ?? InstrumentationSystem.tracer
        isTracing = !(self.tracer is NoOpTracer)
        self.transport = transport
        self.identity = identity
        self.registry = registry
        self.options = options
        self.logger = logger
        let factory = metricsFactory ?? MetricsSystem.factory
        self.counters = Counters(factory: factory, logger: logger)
        self.metrics = CommunicationMetrics(factory: factory)
        self.gate = BackPressureGate(logger: logger, factory: factory) { [transport] paused in
            transport.setReceivingPaused(paused)
        }
        do {
            self.identityJSON = try AnyCoatyObject(identity)
        } catch {
            throw .encodingFailed(objectType: identity.objectType, reason: "\(error)")
        }
        do throws(CoatyTopicError) {
            _ = try CoatyTopic.subscriptionFilter(for: .discover, namespace: options.namespace)
        } catch {
            throw .invalidTopic(error)
        }
        if let group = options.sharedSubscriptionGroup {
            guard Self.isValidSharedSubscriptionGroup(group) else {
                throw .invalidTopic(.invalidSharedSubscriptionGroup(String(group.prefix(80))))
            }
            guard options.brokerType != .rabbitMQ else {
                throw .invalidTopic(.sharedSubscriptionsUnsupported(options.brokerType))
            }
        }
        var initial = ManagerState()
        initial.gate = gate
        self.state = CoatyMutex(initial)
        registerBuiltInResponders()
    }

    // MARK: State

    /// The current communication state.
    public var communicationState: CommunicationState {
        state.withLock { $0.online ? .online : .offline }
    }

    /// A snapshot of the drop and deferral counters.
    public var statistics: CommunicationStatistics {
        var snapshot = counters.snapshot()
        snapshot.deferredPending = state.withLock { $0.deferred.count }
        snapshot.readHolds = Int(gate.holdCount)
        snapshot.observerStalls = Int(gate.stallCount)
        return snapshot
    }

    /// The communication states: the current one, then every change, until the task is cancelled.
    ///
    /// - Returns: a sequence of states.
    public func communicationStates() -> CommunicationStates {
        let (stream, continuation) = AsyncStream<CommunicationState>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let token = state.withLock { state in
            let token = state.makeToken()
            state.stateObservers[token] = continuation
            continuation.yield(state.online ? .online : .offline)
            return token
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.stateObservers.removeValue(forKey: token) }
        }
        return CommunicationStates(stream: stream)
    }

    /// The last will: the Deadvertise of the identity.
    func lastWill() throws(CommunicationError) -> TransportMessage? {
        guard options.announcesIdentity else { return nil }
        do throws(CoatyTopicError) {
            return try CoatyConnection.lastWill(
                namespace: options.namespace,
                identityId: identity.objectId,
                ownedObjectIds: state.withLock { $0.ioNodes.map(\.objectId) }
            )
        } catch {
            throw .invalidTopic(error)
        }
    }

    // MARK: IoNodes

    /// The IoNodes this agent owns.
    public var ioNodes: [IoNode] { state.withLock { $0.ioNodes } }

    /// Adds an IoNode owned by this agent (replacing one with the same objectId): it is
    /// advertised now and on every (re)connection, answers Discovers of core type IoNode, and is
    /// added to the last will (which may reconnect the transport; see
    /// ``CoatyTransport/updateWill(_:)``).
    ///
    /// Before the node is advertised, the manager subscribes the Associate events of its IO
    /// context (the node's `name`), so ``observeIoState(for:)-(IoSource)`` follows its points.
    ///
    /// - Parameter node: the IoNode.
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` when the node's name cannot be an IO
    ///   context name (a topic level); ``CommunicationError`` when the will cannot be updated or
    ///   the Advertise fails.
    public func addIoNode(_ node: IoNode) async throws(CommunicationError) {
        _ = try subscriptionFilter(.associate(ioContextName: node.name))
        await changeIoNodes { nodes in
            nodes.removeAll { $0.objectId == node.objectId }
            nodes.append(node)
            return true
        }
        try await updateWillIfStarted()
        let wrapped = try AnyCoatyObject.wrapping(node)
        for message in try advertiseMessage(wrapped, privateData: nil, filters: [.coreType(.ioNode)]) {
            try await send(message)
        }
    }

    /// Removes an IoNode: it is deadvertised and taken out of the last will; its points are no
    /// longer associated (their ``observeIoState(for:)-(IoSource)`` reports it at once).
    ///
    /// - Parameter objectId: the IoNode's objectId.
    /// - Throws: ``CommunicationError`` when the will cannot be updated or the Deadvertise fails.
    public func removeIoNode(objectId: CoatyUUID) async throws(CommunicationError) {
        let removed = await changeIoNodes { nodes in
            let before = nodes.count
            nodes.removeAll { $0.objectId == objectId }
            return nodes.count != before
        }
        guard removed else { return }
        try await updateWillIfStarted()
        try await publishDeadvertise([objectId])
    }

    func updateWillIfStarted() async throws(CommunicationError) {
        guard state.withLock({ $0.started }) else { return }
        let will = try lastWill()
        do {
            try await transport.updateWill(will)
        } catch {
            throw .transportFailure(error)
        }
    }
}
