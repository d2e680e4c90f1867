public import CoatyMQTT
public import CoatyCommunication
public import CoatyModel
import CoatySync
public import Logging
public import Metrics
import Synchronization

/// The ``CoatyTransport`` of a Coaty agent over MQTT: `CoatyMQTT.MQTTClient` with the protocol
/// defaults (MQTT 3.1.1, QoS 0, clean session, keepalive 60 s, reconnect after 1 s).
///
/// ```swift
/// let identity = Identity(name: "Light agent")
/// let transport = try MQTTTransport(url: "mqtt://127.0.0.1:1883", identityId: identity.objectId)
/// let manager = try CommunicationManager(transport: transport, identity: identity)
/// ```
///
/// The MQTT client takes its last will when it is created, and MQTT 3.1.1 cannot change the will
/// of a live connection, so ``updateWill(_:)`` replaces the client: it disconnects the old one
/// cleanly (no will is published), connects a new one with the new will, subscribes every
/// remembered filter, and only then reports ``TransportConnectionState/connected`` again.
/// ``messages`` continues across the replacement.
public final class MQTTTransport: CoatyTransport {
    /// The configuration every client of this transport is created from (its will is replaced by
    /// the will given to ``connect(will:)`` / ``updateWill(_:)``).
    public let configuration: MQTTConfiguration
    let logger: Logger
    let metricsFactory: (any MetricsFactory)?
    let state: CoatyMutex<State>
    /// The delivery executor, shared by every client this transport creates.
    let executor = MQTTDeliveryExecutor()
    /// The application's ``onAcknowledgementDue(_:)`` function, shared by every client.
    let dueNotifier = DueNotifier()

    struct State {
        var client: MQTTClient?
        var generation = 0
        var will: TransportMessage?
        var filters: [String: TransportQoS] = [:]
        var connection: TransportConnectionState = .disconnected
        var replacing = false
        var nextToken = 0
        var observers: [Int: AsyncStream<TransportConnectionState>.Continuation] = [:]
        var forwarder: Task<Void, Never>?
        var messageHandler: (@Sendable ([TransportMessage]) -> Void)?
        var readingPaused = false
        /// Counts what the current client's batches handed over (a new one per client: the
        /// numbering of acknowledgements is the client's).
        var delivered = DeliveredCounter()

        mutating func set(_ connection: TransportConnectionState) {
            guard self.connection != connection else { return }
            self.connection = connection
            for observer in observers.values { observer.yield(connection) }
        }
    }

    /// Ends the forwarding of the client's states: its task waits for a next state that a
    /// disconnected client never reports, and holds the client (and its network resources) until
    /// it is cancelled.
    deinit {
        state.withLock { state in
            state.forwarder?.cancel()
            for observer in state.observers.values { observer.finish() }
        }
    }

    /// Creates a transport from an MQTT configuration (client id, broker, TLS, credentials).
    ///
    /// - Parameters:
    ///   - configuration: the client configuration; keep the protocol defaults (clean session,
    ///     keepalive 60 s) unless you need otherwise.
    ///   - logger: the logger of the MQTT client.
    ///   - metricsFactory: the metrics factory of the MQTT client.
    public init(configuration: MQTTConfiguration, logger: Logger? = nil, metricsFactory: (any MetricsFactory)? = nil) {
        var configuration = configuration
        configuration.will = nil
        self.configuration = configuration
        self.logger = logger ?? Logger(label: "coaty.mqtt", factory: { _ in SwiftLogNoOpLogHandler() })
        self.metricsFactory = metricsFactory
        self.state = CoatyMutex(State())
    }

    /// Creates a transport for an agent: the Coaty client id of the identity, and the protocol
    /// defaults (QoS 0, clean session, keepalive 60 s, reconnect delay 1 s).
    ///
    /// - Parameters:
    ///   - url: the broker, `mqtt://host[:port]` or `mqtts://host[:port]` (TLS, verified).
    ///   - identityId: the agent's identity id; it determines the MQTT client id.
    ///   - logger: the logger of the MQTT client.
    ///   - metricsFactory: the metrics factory of the MQTT client.
    /// - Throws: `MQTTError` of kind `.invalidConfiguration` for a malformed URL.
    public convenience init(
        url: String,
        identityId: CoatyUUID,
        logger: Logger? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) throws {
        let configuration = try MQTTConfiguration.coaty(url: url, identityId: identityId)
        self.init(configuration: configuration, logger: logger, metricsFactory: metricsFactory)
    }

    // MARK: Messages

    /// Delivers every received message to `handler` on the MQTT client's network thread, in
    /// order and in the batches the client took from its receive buffer (also for the clients
    /// that replace the current one when the will changes).
    ///
    /// - Parameter handler: receives each batch; must return promptly and never block.
    public func deliverMessages(to handler: @escaping @Sendable ([TransportMessage]) -> Void) {
        let (client, delivered) = state.withLock { state in
            state.messageHandler = handler
            return (state.client, state.delivered)
        }
        if let client { client.setMessageHandler(batchHandler(handler, delivered: delivered, client: client)) }
    }

    /// Holds or resumes reading from the broker (the manager's back-pressure), also for the
    /// clients that replace the current one.
    ///
    /// - Parameter paused: whether to hold the reads.
    public func setReceivingPaused(_ paused: Bool) {
        state.withLock { state in
            state.readingPaused = paused
            state.client?.setReadingPaused(paused)
        }
    }

    /// Runs the tasks that prefer it on the current MQTT client's network thread, the thread
    /// that reads, decodes and routes received messages (an `MQTTDeliveryExecutor` shared by every
    /// client this transport creates, so it survives will updates).
    public var deliveryExecutor: (any TaskExecutor)? { executor }

    /// Whether the client speaks MQTT 5 (``MQTTConfiguration/protocolVersion``): then user properties travel.
    public var carriesUserProperties: Bool { configuration.protocolVersion == .v5 }

    /// The handler of `client`'s batches: hands them to `handler`, counts them, and with held
    /// acknowledgements tells the application when one is due.
    func batchHandler(
        _ handler: @escaping @Sendable ([TransportMessage]) -> Void,
        delivered: DeliveredCounter,
        client: MQTTClient
    ) -> @Sendable ([MQTTMessage]) -> Void {
        guard configuration.holdsAcknowledgements else {
            return { batch in
                handler(batch)
                delivered.add(batch.count)
            }
        }
        let notifier = dueNotifier
        return { [weak client] batch in
            handler(batch)
            delivered.add(batch.count)
            if client?.acknowledgementDue != nil { notifier.notify() }
        }
    }

    /// The function ``onAcknowledgementDue(_:)`` set, called from the delivery thread.
    final class DueNotifier: Sendable {
        private let handler = CoatyMutex<(@Sendable () -> Void)?>(nil)
        func set(_ handler: @escaping @Sendable () -> Void) { self.handler.withLock { $0 = handler } }
        func notify() { handler.withLock { $0 }?() }
    }

    /// Messages of the current client handed over completely (see ``deliveredCount``).
    final class DeliveredCounter: Sendable {
        private let value = Atomic<UInt64>(0)
        func add(_ count: Int) { value.add(UInt64(count), ordering: .releasing) }
        var count: UInt64 { value.load(ordering: .acquiring) }
    }

    /// The current client's held acknowledgement (durable delivery, see
    /// `MQTTConfiguration.holdsAcknowledgements`), or `nil`.
    public var acknowledgementDue: UInt64? { state.withLock { $0.client }?.acknowledgementDue }

    /// Messages of the current client handed to the delivery handler completely.
    public var deliveredCount: UInt64 { state.withLock { $0.delivered.count } }

    /// Releases the current client's held acknowledgements through message `through`.
    ///
    /// - Parameter through: the number of the last handled message.
    public func acknowledge(through: UInt64) { state.withLock { $0.client }?.acknowledge(through: through) }

    /// Calls `handler` on the network thread after each batch delivered while an acknowledgement
    /// is due (with ``MQTTConfiguration/holdsAcknowledgements``; otherwise none is ever due).
    ///
    /// - Parameter handler: called after such a batch; must return promptly and never block.
    public func onAcknowledgementDue(_ handler: @escaping @Sendable () -> Void) { dueNotifier.set(handler) }

    /// Reads nothing more from the broker until the next connection (see ``MQTTClient/closeIntake()``).
    public func closeIntake() async { await state.withLock { $0.client }?.closeIntake() }

    // MARK: Connection state

    /// The current connection state.
    public var connectionState: TransportConnectionState { state.withLock { $0.connection } }

    /// The connection state now and at every change.
    public typealias ConnectionStates = UpdateSequence<TransportConnectionState>

    /// The current connection state, then every change.
    /// - Returns: a sequence that ends when the consuming task is cancelled.
    public func connectionStates() -> ConnectionStates {
        let (stream, continuation) = AsyncStream<TransportConnectionState>.makeStream(bufferingPolicy: .unbounded)
        let token = state.withLock { state in
            state.nextToken += 1
            state.observers[state.nextToken] = continuation
            continuation.yield(state.connection)
            return state.nextToken
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: token) }
        }
        return ConnectionStates(stream)
    }

    private func makeClient(will: TransportMessage?) -> MQTTClient {
        var configuration = self.configuration
        configuration.will = will
        return MQTTClient(configuration: configuration, logger: logger, metricsFactory: metricsFactory)
    }

    /// Forwards a client's states while it is the current client and no replacement is under way.
    private func forward(_ client: MQTTClient, generation: Int) -> Task<Void, Never> {
        // Owned by the transport (kept with its client): cancelled when the client is replaced or
        // disconnected.
        return Task { [weak self] in
            for await mqttState in client.connectionStates() {
                guard let self else { return }
                let mapped: TransportConnectionState =
                    switch mqttState {
                    case .disconnected: .disconnected
                    case .connecting: .connecting
                    case .connected: .connected
                    case .reconnecting: .reconnecting
                    }
                let current = state.withLock { state -> Bool in
                    guard state.generation == generation else { return false }
                    if !state.replacing { state.set(mapped) }
                    return true
                }
                if !current { return }
            }
        }
    }

    // MARK: Connecting

    /// Connects with `will`, replacing the client when the will changed; returns when connected
    /// and every remembered subscription is acknowledged.
    ///
    /// - Parameter will: the last will.
    /// - Throws: ``TransportError/brokerUnreachable(reason:)``, ``TransportError/connectionRefused(reason:)``,
    ///   or `CancellationError`.
    public func connect(will: TransportMessage?) async throws {
        let existing = state.withLock { state -> (MQTTClient?, Bool) in
            let sameWill = state.will == will
            state.will = will
            return (sameWill ? state.client : nil, state.connection == .connected)
        }
        if let client = existing.0 {
            if existing.1 { return }
            do {
                try await client.connect()
            } catch let error as MQTTError where error.kind == .alreadyConnected {
                return
            } catch {
                throw Self.transportError(error)
            }
            return
        }
        try await replaceClient(will: will)
    }

    /// Creates and connects a new client with `will`, disconnecting the previous one cleanly.
    private func replaceClient(will: TransportMessage?) async throws {
        let client = makeClient(will: will)
        // The handler is read where the client is stored: `deliverMessages(to:)` either comes
        // before (and is read here) or sees this client.
        let (old, generation, filters, handler, delivered) = state.withLock { state in
            let old = state.client
            state.replacing = old != nil
            state.generation += 1
            state.client = client
            state.delivered = DeliveredCounter()
            state.forwarder?.cancel()
            if old != nil { state.set(.reconnecting) }
            return (old, state.generation, state.filters, state.messageHandler, state.delivered)
        }
        if let handler { client.setMessageHandler(batchHandler(handler, delivered: delivered, client: client)) }
        // Under the lock, so a concurrent setReceivingPaused either is read here or sees this client.
        state.withLock { state in if state.readingPaused { client.setReadingPaused(true) } }
        client.setDeliveryExecutor(executor)
        if let old { await old.disconnect() }
        let forwarder = forward(client, generation: generation)
        state.withLock { $0.forwarder = forwarder }
        do {
            try await client.connect()
            if !filters.isEmpty {
                try await client.subscribe(
                    filters.map { ($0.key, $0.value) }
                )
            }
        } catch {
            state.withLock { state in
                if state.generation == generation {
                    state.replacing = false
                    state.set(.disconnected)
                }
            }
            throw Self.transportError(error)
        }
        state.withLock { state in
            guard state.generation == generation else { return }
            state.replacing = false
            state.set(client.connectionState == .connected ? .connected : .reconnecting)
        }
    }

    /// Replaces the will; while connected this replaces the MQTT client (a clean disconnect and a
    /// new connection, so the old will is not published).
    ///
    /// - Parameter will: the new will.
    /// - Throws: a ``TransportError`` when the new connection fails.
    public func updateWill(_ will: TransportMessage?) async throws {
        let connected = state.withLock { state -> Bool in
            guard state.will != will else { return false }
            state.will = will
            return state.client != nil && state.connection != .disconnected
        }
        if connected { try await replaceClient(will: will) }
    }

    /// Subscribes a filter and remembers it for reconnections and client replacements.
    ///
    /// - Parameters:
    ///   - filter: the MQTT topic filter.
    ///   - qos: the maximum QoS.
    /// - Throws: ``TransportError/notConnected`` before the first connection,
    ///   ``TransportError/invalidTopic(_:_:)``, ``TransportError/subscriptionRejected(filter:)``.
    public func subscribe(_ filter: String, qos: TransportQoS) async throws {
        do {
            try MQTTTopicFilter.validate(filter)
        } catch {
            throw TransportError.invalidTopic(filter, error)
        }
        guard let client = state.withLock({ $0.connection == .disconnected ? nil : $0.client }) else {
            throw TransportError.notConnected
        }
        do {
            try await client.subscribe(filter, qos: qos)
        } catch {
            throw Self.transportError(error, topic: filter)
        }
        state.withLock { $0.filters[filter] = qos }
    }

    /// The topic filters this transport subscribes after every (re)connection, with their QoS.
    public var subscribedFilters: [String: TransportQoS] { state.withLock { $0.filters } }

    /// Subscribes without waiting when the current client is connected: queues the SUBSCRIBE
    /// ahead of later publications and remembers the filter (also for client replacements).
    ///
    /// - Parameters:
    ///   - filter: the MQTT topic filter.
    ///   - qos: the maximum QoS.
    ///   - acknowledged: the outcome, on the MQTT client's network thread.
    /// - Returns: whether the SUBSCRIBE is queued; `false` while not connected.
    public func subscribeNow(
        _ filter: String,
        qos: TransportQoS,
        acknowledged: @escaping @Sendable ((any Error)?) -> Void
    ) -> Bool {
        guard let client = state.withLock({ $0.connection == .connected ? $0.client : nil }) else { return false }
        guard client.subscribeNow(filter, qos: qos, acknowledged: acknowledged) else { return false }
        state.withLock { $0.filters[filter] = qos }
        return true
    }

    /// Forgets a filter and queues its UNSUBSCRIBE without waiting.
    ///
    /// - Parameters:
    ///   - filter: the filter.
    ///   - acknowledged: the outcome.
    public func unsubscribeNow(_ filter: String, acknowledged: @escaping @Sendable ((any Error)?) -> Void) {
        let client = state.withLock { state in
            state.filters[filter] = nil
            return state.client
        }
        guard let client else {
            acknowledged(nil)
            return
        }
        client.unsubscribeNow(filter, acknowledged: acknowledged)
    }

    /// Unsubscribes a filter and forgets it.
    ///
    /// - Parameter filter: the filter.
    /// - Throws: ``TransportError/invalidTopic(_:_:)``.
    public func unsubscribe(_ filter: String) async throws {
        do {
            try MQTTTopicFilter.validate(filter)
        } catch {
            throw TransportError.invalidTopic(filter, error)
        }
        let client = state.withLock { state in
            state.filters[filter] = nil
            return state.client
        }
        do {
            try await client?.unsubscribe(filter)
        } catch {
            throw Self.transportError(error, topic: filter)
        }
    }

    /// Publishes a message.
    ///
    /// - Parameter message: the message.
    /// - Throws: ``TransportError/notConnected`` when not connected, ``TransportError/invalidTopic(_:_:)``.
    public func publish(_ message: TransportMessage) async throws {
        guard let client = state.withLock({ $0.connection == .connected ? $0.client : nil }) else {
            throw TransportError.notConnected
        }
        do {
            // The message overload: concrete, specialized in the client's module (the generic
            // payload overload, called across modules, costs an unspecialized frame per publish).
            try await client.publish(message)
        } catch {
            throw Self.transportError(error, topic: message.topic)
        }
    }

    /// Disconnects cleanly (no will) and stops reconnecting; subscriptions are remembered.
    public func disconnect() async {
        let client = state.withLock { $0.client }
        await client?.disconnect()
        state.withLock { $0.set(.disconnected) }
    }

    static func transportError(_ error: any Error, topic: String = "") -> any Error {
        guard let error = error as? MQTTError else { return error }
        switch error.kind {
        case .notConnected:
            return TransportError.notConnected
        case .brokerUnreachable, .timeout:
            return TransportError.brokerUnreachable(reason: error.message)
        case .tlsVerificationFailed, .authenticationRefused, .connectionRefused, .invalidConfiguration:
            return TransportError.connectionRefused(reason: error.message)
        case .subscriptionRefused:
            return TransportError.subscriptionRejected(filter: topic)
        case .invalidTopic:
            do {
                try MQTTTopicFilter.validate(topic)
            } catch {
                return TransportError.invalidTopic(topic, error)
            }
            return TransportError.failed(error.message)
        default:
            return TransportError.failed(error.message)
        }
    }
}

extension CommunicationManager {
    /// Creates the communication manager of an agent on an MQTT broker.
    ///
    /// ```swift
    /// let manager = try CommunicationManager.mqtt(url: "mqtt://127.0.0.1:1883", identity: Identity(name: "Agent"))
    /// try await manager.start()
    /// ```
    ///
    /// - Parameters:
    ///   - url: the broker, `mqtt://host[:port]` or `mqtts://host[:port]`.
    ///   - identity: the agent's identity (its id determines the MQTT client id).
    ///   - registry: the object types to decode into Swift types.
    ///   - options: namespace, cross-namespacing, buffers.
    ///   - logger: the logger of the manager and the MQTT client.
    ///   - metricsFactory: the metrics factory, or `nil` for the global one.
    /// - Returns: the manager, not started.
    /// - Throws: `MQTTError` for a malformed URL, ``CommunicationError`` for an invalid namespace.
    public static func mqtt(
        url: String,
        identity: Identity = Identity(),
        registry: CoatyObjectRegistry = CoatyObjectRegistry(),
        options: Options = Options(),
        logger: Logger = Logger(label: "coaty.communication", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws -> CommunicationManager {
        let transport = try MQTTTransport(
            url: url,
            identityId: identity.objectId,
            logger: logger,
            metricsFactory: metricsFactory
        )
        return try CommunicationManager(
            transport: transport,
            identity: identity,
            registry: registry,
            options: options,
            logger: logger,
            metricsFactory: metricsFactory
        )
    }
}

extension MQTTConfiguration {
    /// The MQTT settings the Coaty protocol prescribes for an agent: the Coaty client id of
    /// `identityId`, MQTT 3.1.1, clean session, keepalive 60 s, and a reconnect attempt every
    /// second (a fixed period, as Coaty's: the delay does not grow while the broker is away).
    ///
    /// ```swift
    /// let identity = Identity(name: "Lamp controller")
    /// var configuration = try MQTTConfiguration.coaty(url: "mqtts://broker.example", identityId: identity.objectId)
    /// configuration.username = "agent"
    /// let transport = MQTTTransport(configuration: configuration)
    /// let manager = try CommunicationManager(transport: transport, identity: identity)
    /// ```
    ///
    /// - Parameters:
    ///   - url: the broker, `mqtt://host[:port]` or `mqtts://host[:port]` (TLS, verified).
    ///   - identityId: the agent's identity id; it determines the MQTT client id.
    /// - Returns: the configuration; change credentials or TLS files on it as needed.
    /// - Throws: `MQTTError` of kind `.invalidConfiguration` for a malformed URL.
    public static func coaty(url: String, identityId: CoatyUUID) throws -> MQTTConfiguration {
        try coaty(urls: [url], identityId: identityId)
    }

    /// The Coaty MQTT settings of ``coaty(url:identityId:)`` for a list of brokers: the first is the primary one, the
    /// others are failover brokers tried in order (see `MQTTConfiguration.fallbackBrokers`).
    ///
    /// ```swift
    /// let configuration = try MQTTConfiguration.coaty(
    ///     urls: ["mqtt://broker-a:1883", "mqtt://broker-b:1883"], identityId: identity.objectId)
    /// ```
    ///
    /// - Parameters:
    ///   - urls: one or more brokers, all `mqtt://` or all `mqtts://`.
    ///   - identityId: the agent's identity id; it determines the MQTT client id.
    /// - Returns: the configuration; change credentials or TLS files on it as needed.
    /// - Throws: `MQTTError` of kind `.invalidConfiguration` for an empty list, a malformed URL or mixed schemes.
    public static func coaty(urls: [String], identityId: CoatyUUID) throws -> MQTTConfiguration {
        var configuration = try MQTTConfiguration(
            urls: urls,
            clientId: CoatyConnection.clientId(identityId: identityId)
        )
        configuration.protocolVersion = .v311
        configuration.keepAlive = .seconds(60)
        configuration.cleanSession = true
        configuration.reconnectDelay = .seconds(1)
        configuration.maxReconnectDelay = .seconds(1)
        return configuration
    }
}
