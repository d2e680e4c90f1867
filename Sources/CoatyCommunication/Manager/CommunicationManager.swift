import CoatyFilter
public import CoatyModel
import CoatySync
public import Logging
public import Metrics
public import ServiceLifecycle
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

/// A received event, decoded once and handed to every matching route.
package struct IncomingEvent: Sendable {
    /// The decoded payload, by event type.
    package enum Payload: Sendable {
        case advertise(AdvertiseEventData)
        case deadvertise(DeadvertiseEventData)
        case channel(ChannelEventData)
        case discover(DiscoverEventData)
        case resolve(ResolveEventData)
        case query(QueryEventData)
        case retrieve(RetrieveEventData)
        case update(UpdateEventData)
        case complete(CompleteEventData)
        case call(CallEventData)
        case `return`(ReturnEventData)
        case associate(AssociateEventData)
        case ioValue([UInt8])
    }

    /// The topic it arrived on.
    package let topic: CoatyTopic
    /// The payload.
    package let payload: Payload
}

extension IncomingEvent.Payload {
    /// Reads a received payload of `eventType` (objects straight from the text where the event
    /// carries one); `nil` for Raw messages, which carry no Coaty payload.
    init?(received bytes: [UInt8], eventType: CommunicationEventType, registry: CoatyObjectRegistry)
        throws(CommunicationEventDataError)
    {
        switch eventType {
        case .advertise: self = .advertise(try AdvertiseEventData(receivedBytes: bytes, registry: registry))
        case .deadvertise: self = .deadvertise(try DeadvertiseEventData(bytes: bytes, registry: registry))
        case .channel: self = .channel(try ChannelEventData(receivedBytes: bytes, registry: registry))
        case .discover: self = .discover(try DiscoverEventData(bytes: bytes, registry: registry))
        case .resolve: self = .resolve(try ResolveEventData(receivedBytes: bytes, registry: registry))
        case .query: self = .query(try QueryEventData(bytes: bytes, registry: registry))
        case .retrieve: self = .retrieve(try RetrieveEventData(bytes: bytes, registry: registry))
        case .update: self = .update(try UpdateEventData(receivedBytes: bytes, registry: registry))
        case .complete: self = .complete(try CompleteEventData(receivedBytes: bytes, registry: registry))
        case .call: self = .call(try CallEventData(bytes: bytes, registry: registry))
        case .return: self = .return(try ReturnEventData(bytes: bytes, registry: registry))
        case .associate: self = .associate(try AssociateEventData(bytes: bytes, registry: registry))
        case .ioValue: self = .ioValue(bytes)
        case .raw: return nil
        }
    }

    /// The event's data; `nil` for an IO value (its bytes are not a Coaty payload).
    var data: (any CommunicationEventData)? {
        switch self {
        case .advertise(let data): data
        case .deadvertise(let data): data
        case .channel(let data): data
        case .discover(let data): data
        case .resolve(let data): data
        case .query(let data): data
        case .retrieve(let data): data
        case .update(let data): data
        case .complete(let data): data
        case .call(let data): data
        case .return(let data): data
        case .associate(let data): data
        case .ioValue: nil
        }
    }
}

/// Receives the events of a route, on the thread that routes received messages (never block it).
package typealias EventSink = @Sendable (IncomingEvent) -> Void
typealias RawSink = @Sendable (RawEvent) -> Void

/// Publishes and observes Coaty communication events over a ``CoatyTransport``.
///
/// One manager is one agent: it has an identity, a namespace, a registry for typed decoding, and
/// a transport. ``start()`` connects with the last will, subscribes, publishes the join event
/// (the Advertise of the identity) and drains publications deferred while offline; ``stop()``
/// publishes the Deadvertise of the identity and disconnects. As a ``Service`` it does both in
/// ``run()``.
///
/// ```swift
/// let manager = CommunicationManager(transport: transport, identity: Identity(name: "Light agent"))
/// try await manager.start()
/// try await manager.publishAdvertise(light)
/// for await event in try manager.observeAdvertise(Light.self) { print(event.object) }
/// ```
///
/// Received messages are dispatched by one task that consumes the transport's messages; routing
/// tables are protected by a mutex, so observers and requests can be created from any task.
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
    /// The short tasks started from routing callbacks and subscription changes; drained by stop().
    let ownedTasks = OwnedTasks()

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
    /// - Throws: ``CommunicationError/invalidTopic(_:)`` for an invalid namespace.
    public init(
        transport: any CoatyTransport,
        identity: Identity = Identity(),
        registry: CoatyObjectRegistry = CoatyObjectRegistry(),
        options: Options = Options(),
        logger: Logger = Logger(label: "coaty.communication", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(CommunicationError) {
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

    private func updateWillIfStarted() async throws(CommunicationError) {
        guard state.withLock({ $0.started }) else { return }
        let will = try lastWill()
        do {
            try await transport.updateWill(will)
        } catch {
            throw .transportFailure(error)
        }
    }

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
        // Owned by the manager, like the stall monitor and the dispatcher: cancelled and awaited by stop().
        let watcher = Task { [self] in await watchConnection() }
        // Owned by the manager: cancelled and awaited by stop().
        let stallMonitor = Task { [weak self, options] in
            let interval = max(options.stallTimeout / 4, .milliseconds(10))
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let self else { return }
                self.gate.checkStalls(timeout: options.stallTimeout, policy: options.stallPolicy)
            }
        }
        state.withLock {
            $0.watcher = watcher
            $0.stallMonitor = stallMonitor
        }
        // Decoding and routing on the transport's own thread when it offers that (one thread
        // hand-off less per message); otherwise a dispatcher task consumes `messages`.
        let delivered = transport.deliverMessages { [weak self] batch in self?.handle(batch) }
        do {
            try await transport.connect(will: will)
        } catch {
            watcher.cancel()
            stallMonitor.cancel()
            state.withLock { state in
                state.started = false
                state.watcher = nil
                state.stallMonitor = nil
            }
            if let error = error as? TransportError { throw CommunicationError.transport(error) }
            throw error
        }
        if !delivered {
            let transport = self.transport
            let dispatcher = Task { [self] in await self.dispatch(messagesOf: transport) }
            state.withLock { $0.dispatcher = dispatcher }
        }
        for await communicationState in communicationStates() where communicationState == .online {
            break
        }
    }

    /// Publishes the Deadvertise of the identity, disconnects, and ends dispatching. Observations
    /// stay registered and are served again after the next ``start()``; every IO point's state
    /// becomes not associated (see ``observeIoState(for:)-(IoSource)``).
    public func stop() async {
        let tasks = state.withLock { state -> (Task<Void, Never>?, Task<Void, Never>?)? in
            guard state.started else { return nil }
            state.started = false
            state.stallMonitor?.cancel()
            defer {
                state.watcher = nil
                state.dispatcher = nil
                state.stallMonitor = nil
            }
            return (state.watcher, state.dispatcher)
        }
        guard let tasks else { return }
        if let will = try? lastWill() {
            try? await transport.publish(will)
        }
        await transport.disconnect()
        tasks.0?.cancel()
        tasks.1?.cancel()
        gate.releaseWaiters()
        await tasks.0?.value
        await tasks.1?.value
        // Answers and subscription changes still under way end with the connection.
        ownedTasks.cancelAll()
        await ownedTasks.drain()
        setOnline(false)
        // The associations are the routers' to give again after the next start (Coaty JS reports
        // every IO point not associated when it stops).
        ioStateTable.forget(pointsNotIn: nil)
    }

    /// Follows the transport's connection states: on every connection, subscribes what is
    /// missing, publishes the join event and drains deferred publications, in that order.
    private func watchConnection() async {
        for await connection in transport.connectionStates() {
            if Task.isCancelled { return }
            if connection == .connected {
                await handleConnected()
            } else {
                setOnline(false)
            }
        }
    }

    private func handleConnected() async {
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

    private func setOnline(_ online: Bool) {
        state.withLock { state in
            guard state.online != online else { return }
            state.online = online
            // Under the lock, so the gauge follows the changes in their order.
            metrics.setOnline(online)
            for observer in state.stateObservers.values { observer.yield(online ? .online : .offline) }
        }
    }

    // MARK: Sending

    /// Publishes now when online, otherwise defers the message (FIFO, bounded).
    /// `message` at ``Options/qos`` at least.
    func atLeastOptionsQoS(_ message: TransportMessage) -> TransportMessage {
        guard message.qos < options.qos else { return message }
        var raised = message
        raised.qos = options.qos
        return raised
    }

    func send(_ message: TransportMessage) async throws(CommunicationError) {
        let message = atLeastOptionsQoS(message)
        let sendNow = state.withLock { state -> Bool in
            if state.online && !state.draining && state.deferred.isEmpty { return true }
            defer_(message, &state)
            return false
        }
        guard sendNow else { return }
        do {
            try await transport.publish(message)
        } catch TransportError.notConnected {
            state.withLock { defer_(message, &$0) }
        } catch {
            throw .transportFailure(error)
        }
    }

    private func defer_(_ message: TransportMessage, _ state: inout ManagerState) {
        if state.deferred.count >= max(0, options.deferredPublicationLimit) {
            if state.deferred.popFirst() != nil || options.deferredPublicationLimit <= 0 {
                counters.deferredOverflow()
                logger.debug(
                    "Deferred publication queue full; dropped the oldest",
                    metadata: ["topic": "\(message.topic)"]
                )
            }
            if options.deferredPublicationLimit <= 0 { return }
        }
        state.deferred.append(message)
    }

    func topic(_ event: CoatyTopic.Event, correlationId: CoatyUUID? = nil) throws(CommunicationError) -> CoatyTopic {
        do throws(CoatyTopicError) {
            return try CoatyTopic(
                event: event,
                namespace: options.namespace,
                sourceId: identity.objectId,
                correlationId: correlationId
            )
        } catch {
            throw .invalidTopic(error)
        }
    }

    package func subscriptionFilter(_ event: CoatyTopic.Event, correlationId: CoatyUUID? = nil)
        throws(CommunicationError)
        -> String
    {
        do throws(CoatyTopicError) {
            if let correlationId {
                return try CoatyTopic.subscriptionFilter(
                    for: event,
                    namespace: options.namespace,
                    crossNamespacing: options.crossNamespacing,
                    correlationId: correlationId
                )
            }
            return try CoatyTopic.subscriptionFilter(
                for: event,
                namespace: options.namespace,
                crossNamespacing: options.crossNamespacing
            )
        } catch {
            throw .invalidTopic(error)
        }
    }

    /// The Advertise messages of `object`, one per topic: its type's topics
    /// (``advertiseTopicNames(objectType:coreType:)``), or those of `filters`. Every topic is built
    /// before any message is returned, so an invalid object type sends nothing.
    func advertiseMessage(
        _ object: AnyCoatyObject,
        privateData: JSONObject?,
        filters: [CoatyTopic.TypeFilter]? = nil
    ) throws(CommunicationError) -> [TransportMessage] {
        let payload = AdvertiseEventData(object: object, privateData: privateData).payloadBytes
        let topics: [String]
        if let filters {
            topics = try filters.map { filter throws(CommunicationError) in try topicName(.advertise(filter)) }
        } else {
            topics = try advertiseTopicNames(objectType: object.objectType, coreType: object.coreType)
        }
        return topics.map { TransportMessage(topic: $0, payload: payload) }
    }

    /// The Advertise topic names of an object type, `ADV:<CoreType>` and, for a custom object
    /// type, `ADV::<objectType>`: one lookup per Advertise, built once per type (up to 1024 kept).
    func advertiseTopicNames(objectType: String, coreType: CoreType) throws(CommunicationError) -> [String] {
        let key = AdvertisedType(objectType: objectType, coreType: coreType)
        if let names = advertiseNames.withLock({ $0[key] }) { return names }
        var names: [String] = []
        for filter in CoatyTopic.TypeFilter.publishing(objectType: objectType, coreType: coreType) {
            names.append(try topicName(.advertise(filter)))
        }
        advertiseNames.withLock { cache in
            if cache.count < 1024 { cache[key] = names }
        }
        return names
    }

    /// The topic name of a one-way event of this agent, built once per event (up to 1024 kept).
    func topicName(_ event: CoatyTopic.Event) throws(CommunicationError) -> String {
        if let name = topicNames.withLock({ $0[event] }) { return name }
        let name = try topic(event).name
        topicNames.withLock { names in
            if names.count < 1024 { names[event] = name }
        }
        return name
    }

    /// Publishes a response in the own namespace with the request's correlation id.
    func publishResponse(
        _ event: CoatyTopic.Event,
        correlationId: CoatyUUID,
        payload: JSONObject
    ) async throws(CommunicationError) {
        let topic = try topic(event, correlationId: correlationId)
        try await send(TransportMessage(topic: topic.name, payload: payload.serializedBytes()))
    }

    // MARK: Subscriptions (reference counted per topic filter)

    /// Adds one reference to `filter` and registers the route in the same critical section.
    /// A `shared` filter is subscribed in ``Options/sharedSubscriptionGroup`` when there is one.
    func retain(_ filter: String, shared: Bool = false, register: (inout ManagerState) -> Void) {
        state.withLock { state in
            if shared, options.sharedSubscriptionGroup != nil { state.sharedFilters.insert(filter) }
            state.refCounts[filter, default: 0] += 1
            register(&state)
        }
        spawnReconcile(filter)
    }

    /// Drops one reference to `filter` and unregisters the route.
    func release(_ filter: String, unregister: (inout ManagerState) -> Void) {
        state.withLock { state in
            unregister(&state)
            if let count = state.refCounts[filter] {
                if count <= 1 {
                    state.refCounts.removeValue(forKey: filter)
                } else {
                    state.refCounts[filter] = count - 1
                }
            }
        }
        spawnReconcile(filter)
    }

    func spawnReconcile(_ filter: String) {
        let start = state.withLock { state -> Bool in
            guard state.started else { return false }
            state.pendingReconciles += 1
            return true
        }
        guard start else { return }
        ownedTasks.spawn { [self] in
            await reconcile(filter)
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.pendingReconciles -= 1
                guard state.pendingReconciles == 0 else { return [] }
                defer { state.settleWaiters.removeAll() }
                return state.settleWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Brings the transport's subscription of `filter` in line with its reference count. Only one
    /// task works on a filter at a time; it loops until wanted and established agree, so
    /// overlapping subscribe/unsubscribe requests cannot reorder.
    func reconcile(_ filter: String) async {
        while true {
            enum Action { case subscribe, unsubscribe }
            let action = state.withLock { state -> Action? in
                guard !state.busy.contains(filter) else { return nil }
                let wanted = state.refCounts[filter] != nil
                let established = state.established.contains(filter)
                guard wanted != established, state.started else {
                    state.resumeWaiters(for: filter)
                    return nil
                }
                state.busy.insert(filter)
                return wanted ? .subscribe : .unsubscribe
            }
            guard let action else { return }
            var succeeded = true
            let brokerFilter = self.brokerFilter(filter)
            do {
                switch action {
                case .subscribe: try await transport.subscribe(brokerFilter, qos: options.qos)
                case .unsubscribe: try await transport.unsubscribe(brokerFilter)
                }
            } catch {
                succeeded = false
                logger.debug("Subscription change failed", metadata: ["filter": "\(filter)", "error": "\(error)"])
            }
            let again = state.withLock { state -> Bool in
                state.busy.remove(filter)
                if succeeded {
                    if action == .subscribe {
                        state.established.insert(filter)
                    } else {
                        state.established.remove(filter)
                    }
                }
                if !succeeded { state.resumeWaiters(for: filter) }
                return succeeded
            }
            if !again { return }
        }
    }

    /// The filter subscribed on the broker for `filter`: in the shared-subscription group when
    /// `filter` is shared and there is a group.
    func brokerFilter(_ filter: String) -> String {
        guard let group = options.sharedSubscriptionGroup, state.withLock({ $0.sharedFilters.contains(filter) }) else {
            return filter
        }
        return Self.sharedSubscriptionFilter(filter, group: group)
    }

    /// The MQTT shared-subscription filter of `filter` in `group`: `$share/<group>/<filter>`.
    ///
    /// - Parameters:
    ///   - filter: a topic filter.
    ///   - group: the group name: not empty, without `/`, `+`, `#` or NUL.
    /// - Returns: the shared filter.
    public static func sharedSubscriptionFilter(_ filter: String, group: String) -> String {
        "$share/\(group)/\(filter)"
    }

    /// Whether `group` can name a shared-subscription group: not empty, no `/`, `+`, `#` or NUL.
    ///
    /// - Parameter group: the name.
    /// - Returns: `true` when it is valid.
    public static func isValidSharedSubscriptionGroup(_ group: String) -> Bool {
        !group.isEmpty && !group.contains { $0 == "/" || $0 == "+" || $0 == "#" || $0 == "\0" }
    }

    /// Waits until `filter` is subscribed on the broker, or no longer wanted, or the manager
    /// cannot subscribe now (not started).
    func awaitEstablished(_ filter: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.established.contains(filter) || state.refCounts[filter] == nil || !state.started {
                    return true
                }
                state.establishWaiters[filter, default: []].append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
        // A subscription that was busy when asked may just have finished: check once more.
        await reconcile(filter)
    }

    /// Waits until every subscription change requested so far has reached the broker (e.g. the
    /// unsubscription after the last observer of a filter ended).
    public func subscriptionsSettled() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.pendingReconciles == 0 { return true }
                state.settleWaiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// The executor that runs tasks on the thread that decodes and routes received events, or `nil`
    /// when the transport has none (CoatyKit's MQTT transport has one).
    ///
    /// Code that must react fast — a responder answering requests, a requester in a tight loop —
    /// can run there and skip a thread hand-off per event:
    ///
    /// ```swift
    /// await withTaskExecutorPreference(manager.deliveryExecutor) {
    ///     for await discover in try manager.observeDiscover() {
    ///         try? await discover.resolve(object: light)
    ///     }
    /// }
    /// ```
    ///
    /// While such code runs, no events are routed: keep it short and never block the thread
    /// (awaiting is fine). Actor-isolated code still runs on its actor.
    public var deliveryExecutor: (any TaskExecutor)? {
        transport.deliveryExecutor
    }

    /// The topic filters currently subscribed through the transport, with their observer counts.
    public var subscribedFilters: [String: Int] {
        state.withLock { state in state.refCounts.filter { state.established.contains($0.key) } }
    }

    // MARK: Dispatching

    private func dispatch(messagesOf transport: some CoatyTransport) async {
        for await message in transport.messages {
            handle(CollectionOfOne(message))
            // Back-pressure for a transport without a delivery handler: take no more while held.
            await gate.waitWhilePaused()
            if Task.isCancelled { return }
        }
    }

    /// Routes a batch of received messages, then wakes the observers that got events, once each.
    func handle(_ batch: some Sequence<TransportMessage>) {
        for message in batch { handle(message) }
        wakeups.flush()
    }

    private func handle(_ message: TransportMessage) {
        if options.deliversCopyPerSubscription, isExtraCopy(message) { return }
        switch classify(message.topic) {
        case .raw:
            metrics.received(.raw)
            let sinks = state.withLock { state in
                state.rawRoutes.values.filter {
                    MQTTTopicFilter.matches(
                        topic: message.topic,
                        filter: options.brokerType.deliveredForm(ofFilter: $0.filter)
                    )
                }
            }
            guard !sinks.isEmpty else { return }
            let event = RawEvent(topic: message.topic, payload: message.payload, retain: message.retain)
            for route in sinks { route.sink(event) }
        case .invalid(let error):
            counters.invalidTopic()
            logger.debug("Dropped a message on an invalid Coaty topic", metadata: ["error": "\(error)"])
            if !options.brokerType.rewritesDotsInTopics, !rewrittenTopicWarned.load(ordering: .relaxed),
                CoatyTopic.restoringRewrittenDots(message.topic) != nil,
                rewrittenTopicWarned.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
            {
                logger.warning(
                    "Dropped a Coaty topic whose dots the broker rewrote as '/' (RabbitMQ's MQTT plugin does); set the broker type to rabbitmq (--broker-type rabbitmq, communication.brokerType, COATY_BROKER_TYPE or CommunicationManager.Options.brokerType) to read such topics",
                    metadata: ["topic": "\(message.topic.prefix(200))"]
                )
            }
        case .coaty(let topic):
            if !options.crossNamespacing, topic.namespace != options.namespace { return }
            metrics.received(topic.eventType)
            if topic.eventType.isResponse {
                guard let correlationId = topic.correlationUUID,
                    let sink = state.withLock({ $0.responseRoutes[correlationId] })
                else { return }
                guard let payload = decode(message.payload, topic: topic) else { return }
                sink(IncomingEvent(topic: topic, payload: payload))
            } else {
                let sinks = state.withLock { state in state.routes[topic.eventLevel]?.sinks }
                guard let sinks, !sinks.isEmpty else { return }
                guard let payload = decode(message.payload, topic: topic) else { return }
                let event = IncomingEvent(topic: topic, payload: payload)
                for sink in sinks { sink(event) }
            }
        }
    }

    /// ``CoatyTopic/classify(_:)``, remembering the last topic: a stream of events from one
    /// publisher repeats its topic, which is then compared instead of parsed again.
    private func classify(_ topic: String) -> CoatyTopic.Classification {
        // Compared byte for byte: MQTT topics are byte strings (`==` on `String` would also take
        // canonically equivalent spellings for equal).
        func sameBytes(_ a: String, _ b: String) -> Bool {
            var a = a
            var b = b
            return a.withUTF8 { x in b.withUTF8 { y in x.count == y.count && x.elementsEqual(y) } }
        }
        if let hit = lastTopic.withLock({ last in last.flatMap { sameBytes($0.topic, topic) ? $0.classification : nil }
        }) {
            return hit
        }
        var classification = CoatyTopic.classify(topic)
        if case .invalid = classification, options.brokerType.rewritesDotsInTopics,
            let restored = CoatyTopic.restoringRewrittenDots(topic)
        {
            classification = .coaty(restored)
        }
        lastTopic.withLock { $0 = (topic, classification) }
        return classification
    }

    /// Whether `message` is an extra copy delivered for a second overlapping subscription.
    ///
    /// A broker delivers the copies of one publication one after another, so the first copy is
    /// dispatched and the next `copies - 1` identical messages are dropped. Overlaps only exist
    /// while Raw observers exist, so other agents pay nothing for this check.
    private func isExtraCopy(_ message: TransportMessage) -> Bool {
        state.withLock { state in
            guard !state.rawRoutes.isEmpty || !state.expectedCopies.isEmpty else { return false }
            let key = MessageKey(topic: message.topic, payload: message.payload)
            if let remaining = state.expectedCopies[key] {
                state.expectedCopies[key] = remaining > 1 ? remaining - 1 : nil
                return true
            }
            guard !state.rawRoutes.isEmpty else { return false }
            var copies = 0
            for filter in [state.established, state.directResponseFilters].joined()
            where MQTTTopicFilter.matches(topic: message.topic, filter: filter) {
                copies += 1
            }
            if copies > 1 { state.expectedCopies[key] = copies - 1 }
            return false
        }
    }

    private func decode(_ bytes: [UInt8], topic: CoatyTopic) -> IncomingEvent.Payload? {
        if bytes.count > options.maximumPayloadSize, topic.eventType != .ioValue, topic.eventType != .raw {
            counters.invalidPayload()
            logger.warning(
                "Dropped an event whose payload exceeds the size limit (Options.maximumPayloadSize)",
                metadata: [
                    "topic": "\(topic.name)", "bytes": "\(bytes.count)", "limit": "\(options.maximumPayloadSize)",
                ]
            )
            return nil
        }
        do throws(CommunicationEventDataError) {
            return try IncomingEvent.Payload(received: bytes, eventType: topic.eventType, registry: registry)
        } catch {
            counters.invalidPayload()
            logger.debug(
                "Dropped an event with an invalid payload",
                metadata: ["topic": "\(topic.name)", "error": "\(error)"]
            )
            return nil
        }
    }

    // MARK: Built-in responders

    private func registerBuiltInResponders() {
        guard let filter = try? subscriptionFilter(.discover) else { return }
        let identity = identityJSON
        let identityId = identity.objectId
        let sink: EventSink = { [weak self] event in
            guard let self, case .discover(let data) = event.payload else { return }
            guard let correlationId = event.topic.correlationUUID else { return }
            let asksIdentity =
                (data.coreTypes?.contains(.identity) ?? false)
                || (data.objectTypes?.contains(CoreType.identity.objectType) ?? false)
                || data.objectId == identityId
            var answers: [AnyCoatyObject] = []
            if asksIdentity, self.options.announcesIdentity, data.matches(identity) { answers.append(identity) }
            if data.coreTypes?.contains(.ioNode) ?? false {
                for node in self.state.withLock({ $0.ioNodes }) {
                    if let wrapped = try? AnyCoatyObject(node), data.matches(wrapped) { answers.append(wrapped) }
                }
            }
            guard !answers.isEmpty else { return }
            self.ownedTasks.spawn { [answers] in
                for answer in answers {
                    let payload = ResolveEventData(unchecked: answer)
                    try? await self.publishResponse(.resolve, correlationId: correlationId, payload: payload.json)
                }
            }
        }
        state.withLock { state in
            state.refCounts[filter, default: 0] += 1
            let id = state.makeToken()
            state.setRoute("DSC", token: id, sink: sink)
        }
    }
}

/// An object type with its core type, as Advertise topics depend on both.
struct AdvertisedType: Hashable {
    let objectType: String
    let coreType: CoreType
}

// MARK: - State

/// The mutable state of a manager, under its mutex.
struct ManagerState {
    var started = false
    var online = false
    /// The filters subscribed in the shared-subscription group (see ``CommunicationManager/Options/sharedSubscriptionGroup``).
    var sharedFilters: Set<String> = []
    var draining = false
    var nextToken = 0

    /// Non-response routes by event level (`ADV:Task`, `DSC`, `CLL:switch`, …), keyed by
    /// `Substring` so a received topic's level is looked up without copying it.
    private(set) var routes: [Substring: Route] = [:]

    /// The observers of one event level.
    struct Route {
        /// By registration token.
        var byToken: [Int: EventSink] = [:]
        /// The same in registration order: what routing a message reads (no copy per message).
        var sinks: [EventSink] = []
    }

    /// Adds (or with `nil` removes) the observer `token` of the event level `key`.
    mutating func setRoute(_ key: String, token: Int, sink: EventSink?) {
        var route = routes[Substring(key)] ?? Route()
        route.byToken[token] = sink
        if route.byToken.isEmpty {
            routes[Substring(key)] = nil
        } else {
            route.sinks = route.byToken.sorted { $0.key < $1.key }.map(\.value)
            routes[Substring(key)] = route
        }
    }
    /// Response routes by correlation id. Whether any is open is passed to the back-pressure gate
    /// (under the manager's lock, so in order): reading goes on while a request awaits responses.
    var responseRoutes: [CoatyUUID: EventSink] = [:] {
        didSet { updateRequestsOpen() }
    }
    /// Response routes that stay for an observation's lifetime (an object lifecycle's Resolves):
    /// they do not count as requests awaiting responses, or they would keep reading past a full
    /// observer for as long as they live.
    var standingResponseIds: Set<CoatyUUID> = [] {
        didSet { updateRequestsOpen() }
    }
    var requestsOpen = false

    private mutating func updateRequestsOpen() {
        var standing = 0
        for id in standingResponseIds where responseRoutes[id] != nil { standing += 1 }
        let open = responseRoutes.count > standing
        guard open != requestsOpen else { return }
        requestsOpen = open
        gate?.setRequestsOpen(open)
    }
    var gate: BackPressureGate?
    /// Raw routes.
    var rawRoutes: [Int: (filter: String, sink: RawSink)] = [:]

    /// Observers per topic filter.
    var refCounts: [String: Int] = [:]
    /// Filters acknowledged by the transport.
    var established: Set<String> = []
    /// Filters with a subscribe/unsubscribe in flight.
    var busy: Set<String> = []
    var establishWaiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// Response topic filters subscribed with `subscribeNow` (not reference counted).
    var directResponseFilters: Set<String> = []
    var pendingReconciles = 0
    var settleWaiters: [CheckedContinuation<Void, Never>] = []

    var deferred = MessageQueue()
    /// The IoNodes this agent owns: advertised on join, answered to Discovers, in the last will.
    var ioNodes: [IoNode] = []
    /// Extra copies still expected of messages received on overlapping subscriptions.
    var expectedCopies: [MessageKey: Int] = [:]
    var stateObservers: [Int: AsyncStream<CommunicationState>.Continuation] = [:]
    var watcher: Task<Void, Never>?
    var dispatcher: Task<Void, Never>?
    var stallMonitor: Task<Void, Never>?

    mutating func makeToken() -> Int {
        nextToken += 1
        return nextToken
    }

    mutating func resumeWaiters(for filter: String) {
        for waiter in establishWaiters.removeValue(forKey: filter) ?? [] { waiter.resume() }
    }
}

/// Identifies the copies of one publication.
struct MessageKey: Hashable {
    let topic: String
    let payload: [UInt8]
}

/// A FIFO of messages with O(1) amortized removal at the front.
struct MessageQueue {
    private var storage: [TransportMessage] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ message: TransportMessage) { storage.append(message) }

    mutating func popFirst() -> TransportMessage? {
        guard head < storage.count else { return nil }
        let message = storage[head]
        head += 1
        if head > 64, head * 2 > storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return message
    }

    mutating func pushFront(_ message: TransportMessage) {
        if head > 0 {
            head -= 1
            storage[head] = message
        } else {
            storage.insert(message, at: 0)
        }
    }
}

/// Drop counters, kept both as numbers (for ``CommunicationManager/statistics``) and metrics.
final class Counters: Sendable {
    private let values = CoatyMutex(CommunicationStatistics())
    private let logger: Logger
    private let invalidTopicCounter: Counter
    private let invalidPayloadCounter: Counter
    private let invalidResponseCounter: Counter
    private let observerOverflowCounter: Counter
    private let deferredOverflowCounter: Counter

    init(factory: any MetricsFactory, logger: Logger) {
        self.logger = logger
        let label = "coaty_communication_dropped_total"
        invalidTopicCounter = Counter(label: label, dimensions: [("reason", "invalid_topic")], factory: factory)
        invalidPayloadCounter = Counter(label: label, dimensions: [("reason", "invalid_payload")], factory: factory)
        invalidResponseCounter = Counter(label: label, dimensions: [("reason", "invalid_response")], factory: factory)
        observerOverflowCounter = Counter(label: label, dimensions: [("reason", "observer_overflow")], factory: factory)
        deferredOverflowCounter = Counter(label: label, dimensions: [("reason", "deferred_overflow")], factory: factory)
    }

    func snapshot() -> CommunicationStatistics { values.withLock { $0 } }

    func invalidTopic() {
        values.withLock { $0.invalidTopics += 1 }
        invalidTopicCounter.increment()
    }

    func invalidPayload() {
        values.withLock { $0.invalidPayloads += 1 }
        invalidPayloadCounter.increment()
    }

    /// Counts and logs (at debug) a response on `topic` that does not answer its request.
    func invalidResponse(on topic: CoatyTopic) {
        values.withLock { $0.invalidResponses += 1 }
        invalidResponseCounter.increment()
        logger.debug("Dropped a response that does not answer its request", metadata: ["topic": "\(topic.name)"])
    }

    func observerOverflow(_ count: Int = 1) {
        values.withLock { $0.observerOverflow += count }
        observerOverflowCounter.increment(by: count)
    }

    func deferredOverflow() {
        values.withLock { $0.deferredOverflow += 1 }
        deferredOverflowCounter.increment()
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
