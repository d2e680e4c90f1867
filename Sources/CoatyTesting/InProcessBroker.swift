public import CoatyCore
import CoatySync
import Synchronization

/// An MQTT 3.1.1 broker that lives in the test process, with transports that implement
/// `CoatyTransport`.
///
/// It delivers with MQTT semantics: `+`/`#` wildcard subscriptions, `$`-topics not matched by
/// leading wildcards, per-client delivery in publish order, no echo suppression (a client
/// receives its own publications), retained messages, and the last will on an unclean
/// connection loss (``InProcessTransport/simulateConnectionLoss(reconnect:)``,
/// ``InProcessTransport/kill()``) but not on ``InProcessTransport/disconnect()``. Toggle it with
/// ``goOffline()`` / ``goOnline()`` / ``simulateRestart()`` to exercise reconnect logic, and
/// inspect ``publications`` to assert what was sent.
///
/// Everything is synchronous under one lock: when `publish` returns, the message is in the
/// mailbox of every matching subscriber, so tests need no sleeps. A transport with a delivery
/// handler (``InProcessTransport/deliverMessages(to:)``, as the communication manager sets)
/// gets its mailbox's messages pushed to it, in order, by the task that published them.
///
/// ```swift
/// let broker = InProcessBroker()
/// let transport = broker.makeTransport(clientId: "agent-1")
/// try await transport.connect(will: nil)
/// try await transport.subscribe("coaty/3/-/ADV:Task/+")
/// ```
public final class InProcessBroker: Sendable {
    /// Options that select between behaviors of real brokers.
    public struct Configuration: Sendable, Hashable {
        /// Whether a client whose subscriptions overlap receives one copy of a message per
        /// matching subscription, as mosquitto 2 does by default (`true`), or one copy in total.
        public var deliversCopyPerMatchingSubscription: Bool
        /// Whether retained messages survive ``simulateRestart()`` / ``goOffline()`` (a broker with
        /// persistence); mosquitto's default is not to keep them.
        public var keepsRetainedMessagesAcrossRestarts: Bool
        /// Whether ``InProcessTransport/updateWill(_:)`` while connected reconnects (reporting
        /// `reconnecting` then `connected`), as the MQTT 3.1.1 binding must; with `false` the will is
        /// replaced silently.
        public var reconnectsToUpdateWill: Bool
        /// Whether publications are recorded in ``InProcessBroker/publications``.
        public var recordsPublications: Bool
        /// Whether the clients speak MQTT 5: then ``InProcessTransport/carriesUserProperties`` is `true` and
        /// `TransportMessage.userProperties` travel with each message, as over an MQTT 5 connection.
        public var carriesUserProperties: Bool

        /// Creates a configuration; the defaults mimic mosquitto 2 with its default settings.
        ///
        /// - Parameters:
        ///   - deliversCopyPerMatchingSubscription: one copy per matching subscription.
        ///   - keepsRetainedMessagesAcrossRestarts: keep retained messages over restarts.
        ///   - reconnectsToUpdateWill: reconnect to make an updated will effective.
        ///   - recordsPublications: record every publication.
        ///   - carriesUserProperties: the clients speak MQTT 5 (user properties travel).
        public init(
            deliversCopyPerMatchingSubscription: Bool = true,
            keepsRetainedMessagesAcrossRestarts: Bool = false,
            reconnectsToUpdateWill: Bool = true,
            recordsPublications: Bool = true,
            carriesUserProperties: Bool = false
        ) {
            self.carriesUserProperties = carriesUserProperties
            self.deliversCopyPerMatchingSubscription = deliversCopyPerMatchingSubscription
            self.keepsRetainedMessagesAcrossRestarts = keepsRetainedMessagesAcrossRestarts
            self.reconnectsToUpdateWill = reconnectsToUpdateWill
            self.recordsPublications = recordsPublications
        }
    }

    /// A message as it was published to the broker.
    public struct Publication: Sendable, Hashable {
        /// The client id of the publisher, or `nil` for ``InProcessBroker/publish(_:)``.
        public var clientId: String?
        /// The message as sent (with the publisher's retain flag).
        public var message: TransportMessage
        /// Whether the broker published it as the last will of `clientId`.
        public var isWill: Bool

        /// Creates a publication record.
        ///
        /// - Parameters:
        ///   - clientId: the publisher's client id, `nil` for an injected message.
        ///   - message: the message as sent.
        ///   - isWill: whether it is a last will.
        public init(clientId: String?, message: TransportMessage, isWill: Bool = false) {
            self.clientId = clientId
            self.message = message
            self.isWill = isWill
        }
    }

    /// The configuration given at creation.
    public let configuration: Configuration
    let state: CoatyMutex<BrokerState>

    /// Creates a broker that is online and has no clients.
    ///
    /// - Parameter configuration: behavior options; the defaults mimic mosquitto 2.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.state = CoatyMutex(BrokerState())
    }

    /// Creates a transport (an MQTT client) attached to this broker. It starts disconnected.
    ///
    /// - Parameter clientId: the MQTT client id, used in ``publications`` and diagnostics.
    /// - Returns: a transport implementing `CoatyTransport`.
    /// Runs `body` under the broker's lock, then hands what it put into mailboxes to the delivery handlers
    /// (see ``deliverDue()``).
    func withState<Result>(_ body: (inout sending BrokerState) -> sending Result) -> sending Result {
        let result = state.withLock(body)
        deliverDue()
        return result
    }

    /// Hands waiting messages to the delivery handlers of the transports that have one and are not paused: one batch
    /// at a time per transport, in mailbox order, outside the lock. Whoever finds a batch due delivers it (the
    /// publishing task, or the task that resumed reading), so delivery needs no task of its own; a transport being
    /// delivered to by another thread is skipped, and that thread takes what arrived meanwhile.
    func deliverDue() {
        while let due = state.withLock({ $0.takeDueBatch() }) {
            due.handler(due.batch)
            state.withLock { $0.clients[due.index].delivering = false }
        }
    }

    public func makeTransport(clientId: String) -> InProcessTransport {
        let index = state.withLock { state in
            state.clients.append(ClientState(clientId: clientId))
            return state.clients.count - 1
        }
        return InProcessTransport(broker: self, index: index, clientId: clientId)
    }

    // MARK: Availability

    /// Whether the broker accepts connections.
    public var isOnline: Bool { state.withLock { $0.online } }

    /// Takes the broker down: every connected client loses its connection without wills being
    /// published (the broker is gone) and keeps trying to reconnect (`reconnecting`); retained
    /// messages are dropped unless ``Configuration/keepsRetainedMessagesAcrossRestarts``.
    public func goOffline() {
        withState { state in
            guard state.online else { return }
            state.online = false
            if !configuration.keepsRetainedMessagesAcrossRestarts { state.retained.removeAll() }
            for i in state.clients.indices where state.clients[i].lifecycle == .connected {
                state.setLifecycle(i, .reconnecting)
            }
        }
    }

    /// Brings the broker up: every client that wants a connection (connecting or reconnecting)
    /// connects, its subscriptions are re-established, then it reports `connected`.
    public func goOnline() {
        withState { state in
            guard !state.online else { return }
            state.online = true
            for i in state.clients.indices {
                state.establishIfPossible(i, configuration)
            }
        }
    }

    /// Restarts the broker: ``goOffline()`` then ``goOnline()``. Each client observes
    /// `reconnecting` then `connected`.
    public func simulateRestart() {
        goOffline()
        goOnline()
    }

    /// Makes the broker refuse new connections, as for bad credentials or an ACL.
    ///
    /// A ``InProcessTransport/connect(will:)`` started afterwards throws
    /// `TransportError.connectionRefused(reason:)` and leaves the transport `disconnected`;
    /// clients that lose their connection keep `reconnecting` (as the MQTT client does) until
    /// ``acceptConnections()``. Connected clients stay connected.
    ///
    /// - Parameter reason: the reason reported to connecting clients.
    public func refuseConnections(reason: String) {
        state.withLock { $0.refusal = reason }
    }

    /// Accepts connections again after ``refuseConnections(reason:)``; reconnecting clients
    /// connect at once if the broker is online.
    public func acceptConnections() {
        withState { state in
            state.refusal = nil
            for i in state.clients.indices {
                state.establishIfPossible(i, configuration)
            }
        }
    }

    // MARK: Publishing from outside

    /// Publishes a message as an anonymous client that is not subscribed to anything, e.g. to
    /// inject what a foreign agent would send.
    ///
    /// - Parameter message: the message; its topic is not validated, so tests can inject
    ///   malformed Coaty topics.
    /// - Returns: whether the broker was online and routed the message.
    @discardableResult
    public func publish(_ message: TransportMessage) -> Bool {
        withState { state in
            guard state.online else { return false }
            state.route(message, from: nil, isWill: false, configuration)
            return true
        }
    }

    // MARK: Inspection

    /// Every publication since creation or ``clearPublications()``, in order (wills included).
    public var publications: [Publication] { state.withLock { $0.publications } }

    /// The publications whose topic matches an MQTT topic filter.
    ///
    /// - Parameter filter: an MQTT topic filter, e.g. `coaty/3/+/ADV:Identity/+`.
    /// - Returns: the matching publications in order.
    public func publications(matching filter: String) -> [Publication] {
        state.withLock { state in
            state.publications.filter { MQTTTopicFilter.matches(topic: $0.message.topic, filter: filter) }
        }
    }

    /// Forgets the recorded publications.
    public func clearPublications() {
        state.withLock { $0.publications.removeAll() }
    }

    /// The retained messages, sorted by topic.
    public var retainedMessages: [TransportMessage] {
        state.withLock { state in state.retained.values.sorted { $0.topic < $1.topic } }
    }

    /// The client ids of the currently connected clients, in creation order.
    public var connectedClientIds: [String] {
        state.withLock { state in state.clients.filter { $0.lifecycle == .connected }.map(\.clientId) }
    }

    /// The topic filters a client has subscribed, in subscription order (empty if unknown).
    ///
    /// The broker applies them only while the client is connected.
    ///
    /// - Parameter clientId: the client id given to ``makeTransport(clientId:)``.
    /// - Returns: the filters of the first client with that id.
    public func subscriptions(ofClient clientId: String) -> [String] {
        state.withLock { state in
            state.clients.first { $0.clientId == clientId }?.subscriptions.map(\.filter) ?? []
        }
    }

    /// The QoS a client subscribed a topic filter with.
    ///
    /// - Parameters:
    ///   - clientId: the client id given to ``makeTransport(clientId:)``.
    ///   - filter: the topic filter.
    /// - Returns: the QoS, or `nil` when the client has no such subscription.
    public func subscriptionQoS(ofClient clientId: String, filter: String) -> TransportQoS? {
        state.withLock { state in
            state.clients.first { $0.clientId == clientId }?.subscriptions.first { $0.filter == filter }?.qos
        }
    }

    /// Every subscribe request a client made, in order, including subscriptions it has since
    /// ended (a request's response topic, for instance).
    ///
    /// Unlike ``subscriptions(ofClient:)`` followed by ``subscriptionQoS(ofClient:filter:)``,
    /// this is one snapshot: a subscription ending in between cannot make it inconsistent.
    ///
    /// - Parameter clientId: the client id given to ``makeTransport(clientId:)``.
    /// - Returns: the filter and QoS of each request of the first client with that id.
    public func subscribeRequests(ofClient clientId: String) -> [(filter: String, qos: TransportQoS)] {
        state.withLock { state in
            state.clients.first { $0.clientId == clientId }?.subscribeRequests.map { ($0.filter, $0.qos) } ?? []
        }
    }
}

// MARK: - State

/// A subscription of a client.
struct Subscription {
    var filter: String
    var qos: TransportQoS
}

/// The result of waiting for a connection.
enum ConnectOutcome {
    case connected
    case cancelled
    case stopped
}

/// The broker-side view of one transport, mailbox included.
struct ClientState {
    let clientId: String
    var lifecycle: TransportConnectionState = .disconnected
    /// `connect` was called and neither `disconnect` nor `kill` since.
    var wantsConnection = false
    /// The simulated network link is down (``InProcessTransport/simulateConnectionLoss(reconnect:)``).
    var linkDown = false
    var will: TransportMessage?
    /// The transport-owned subscription set, in order; active on the broker while connected.
    var subscriptions: [Subscription] = []
    /// Every subscribe request since the client was created, in order, also those since ended.
    var subscribeRequests: [Subscription] = []
    /// Received messages not yet consumed: `mailbox[mailboxHead...]`.
    var mailbox: [TransportMessage] = []
    var mailboxHead = 0
    /// The consumer waiting in `messages.next()`.
    var messageWaiter: UnsafeContinuation<Bool, Never>?
    /// `messages` ends once the mailbox is empty (after `disconnect` or `kill`, until `connect`).
    var messagesFinished = false
    /// The delivery handler (``InProcessTransport/deliverMessages(to:)``): it takes the mailbox's messages.
    var deliveryHandler: (@Sendable ([TransportMessage]) -> Void)?
    /// ``InProcessTransport/setReceivingPaused(_:)``: messages wait in the mailbox meanwhile.
    var receivingPaused = false
    /// A thread is calling the delivery handler (one batch at a time).
    var delivering = false

    /// Whether a batch waits for the delivery handler and may be handed to it now.
    var isDeliveryDue: Bool { deliveryHandler != nil && !receivingPaused && !delivering && mailboxHead < mailbox.count }
    var stateObservers: [Int: AsyncStream<TransportConnectionState>.Continuation] = [:]
    var connectWaiters: [Int: UnsafeContinuation<ConnectOutcome, Never>] = [:]

    init(clientId: String) {
        self.clientId = clientId
    }

    mutating func deliver(_ message: TransportMessage) {
        mailbox.append(message)
        if let waiter = messageWaiter {
            messageWaiter = nil
            waiter.resume(returning: true)
        }
    }

    /// Takes up to `limit` messages from the mailbox, oldest first.
    mutating func takeBatch(limit: Int) -> [TransportMessage] {
        var batch: [TransportMessage] = []
        while batch.count < limit, let message = popMessage() { batch.append(message) }
        return batch
    }

    mutating func popMessage() -> TransportMessage? {
        guard mailboxHead < mailbox.count else { return nil }
        let message = mailbox[mailboxHead]
        mailboxHead += 1
        if mailboxHead == mailbox.count {
            mailbox.removeAll(keepingCapacity: true)
            mailboxHead = 0
        } else if mailboxHead >= 4096 && mailboxHead * 2 >= mailbox.count {
            mailbox.removeFirst(mailboxHead)
            mailboxHead = 0
        }
        return message
    }
}

/// Everything the broker knows, guarded by one lock.
struct BrokerState {
    var online = true
    /// Why connections are refused, or `nil` when they are accepted.
    var refusal: String?
    var clients: [ClientState] = []
    var retained: [String: TransportMessage] = [:]
    var publications: [InProcessBroker.Publication] = []
    /// Per shared-subscription group and filter, how many messages it was given (round robin).
    var sharedTurns: [String: Int] = [:]
    var nextToken = 0

    /// The next batch for a delivery handler, marking its client as delivering; `nil` when none is due.
    mutating func takeDueBatch() -> (index: Int, handler: @Sendable ([TransportMessage]) -> Void, batch: [TransportMessage])? {
        guard let index = clients.indices.first(where: { clients[$0].isDeliveryDue }),
            let handler = clients[index].deliveryHandler
        else { return nil }
        clients[index].delivering = true
        // Bounded like a network read, so a pause asked for while handling a batch holds the rest.
        return (index, handler, clients[index].takeBatch(limit: 64))
    }

    mutating func makeToken() -> Int {
        nextToken += 1
        return nextToken
    }

    /// Sets a client's connection state and tells its observers.
    mutating func setLifecycle(_ index: Int, _ lifecycle: TransportConnectionState) {
        guard clients[index].lifecycle != lifecycle else { return }
        clients[index].lifecycle = lifecycle
        for observer in clients[index].stateObservers.values {
            observer.yield(lifecycle)
        }
        if lifecycle == .connected || lifecycle == .disconnected {
            let outcome: ConnectOutcome = lifecycle == .connected ? .connected : .stopped
            let waiters = clients[index].connectWaiters
            clients[index].connectWaiters.removeAll()
            for waiter in waiters.values {
                waiter.resume(returning: outcome)
            }
        }
    }

    /// Connects a client that wants a connection when the broker is online and its link is up:
    /// re-establishes its subscriptions (delivering matching retained messages) and then reports
    /// `connected`.
    mutating func establishIfPossible(_ index: Int, _ configuration: InProcessBroker.Configuration) {
        guard online, refusal == nil, clients[index].wantsConnection, !clients[index].linkDown,
            clients[index].lifecycle != .connected
        else { return }
        let subscriptions = clients[index].subscriptions
        for subscription in subscriptions {
            deliverRetained(to: index, filter: subscription.filter, qos: subscription.qos)
        }
        setLifecycle(index, .connected)
    }

    /// Ends the client's `messages` once its mailbox is drained, waking a waiting consumer.
    mutating func finishMessages(_ index: Int) {
        clients[index].messagesFinished = true
        if let waiter = clients[index].messageWaiter {
            clients[index].messageWaiter = nil
            waiter.resume(returning: false)
        }
    }

    /// Drops a client's connection. The will is published unless the client disconnected cleanly.
    mutating func dropConnection(
        _ index: Int,
        publishWill: Bool,
        then lifecycle: TransportConnectionState,
        _ configuration: InProcessBroker.Configuration
    ) {
        let wasConnected = clients[index].lifecycle == .connected
        setLifecycle(index, lifecycle)
        if wasConnected, publishWill, online, let will = clients[index].will {
            route(will, from: index, isWill: true, configuration)
        }
    }

    /// Delivers retained messages matching a new subscription, flagged `retain`.
    mutating func deliverRetained(to index: Int, filter: String, qos: TransportQoS) {
        guard !retained.isEmpty else { return }
        for message in retained.values.sorted(by: { $0.topic < $1.topic })
        where MQTTTopicFilter.matches(topic: message.topic, filter: filter) {
            var copy = message
            copy.retain = true
            copy.qos = min(message.qos, qos)
            clients[index].deliver(copy)
        }
    }

    /// Records, retains and delivers a publication to every connected client with a matching
    /// subscription, in one step so that every client sees publications in the same order.
    mutating func route(
        _ message: TransportMessage,
        from publisher: Int?,
        isWill: Bool,
        _ configuration: InProcessBroker.Configuration
    ) {
        if configuration.recordsPublications {
            publications.append(
                InProcessBroker.Publication(
                    clientId: publisher.map { clients[$0].clientId },
                    message: message,
                    isWill: isWill
                )
            )
        }
        if message.retain {
            if message.payload.isEmpty {
                retained[message.topic] = nil
            } else {
                retained[message.topic] = message
            }
        }
        var delivered = message
        delivered.retain = false
        let perSubscription = configuration.deliversCopyPerMatchingSubscription
        // Shared subscriptions (`$share/<group>/<filter>`): one member per group and filter gets it.
        var sharedMembers: [String: [(client: Int, qos: TransportQoS)]] = [:]
        for i in clients.indices where clients[i].lifecycle == .connected {
            for subscription in clients[i].subscriptions {
                if let shared = Self.splitShared(subscription.filter) {
                    if MQTTTopicFilter.matches(topic: message.topic, filter: shared.filter) {
                        sharedMembers[subscription.filter, default: []].append((i, subscription.qos))
                    }
                    continue
                }
                guard MQTTTopicFilter.matches(topic: message.topic, filter: subscription.filter) else { continue }
                delivered.qos = min(message.qos, subscription.qos)
                clients[i].deliver(delivered)
                if !perSubscription { break }
            }
        }
        for (key, members) in sharedMembers.sorted(by: { $0.key < $1.key }) {
            let turn = sharedTurns[key, default: 0]
            sharedTurns[key] = turn &+ 1
            let member = members[turn % members.count]
            delivered.qos = min(message.qos, member.qos)
            clients[member.client].deliver(delivered)
        }
    }

    /// The filter of a shared subscription `$share/<group>/<filter>`, or `nil` for another filter.
    static func splitShared(_ filter: String) -> (group: Substring, filter: String)? {
        guard filter.hasPrefix("$share/") else { return nil }
        let rest = filter.dropFirst("$share/".count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        return (rest[..<slash], String(rest[rest.index(after: slash)...]))
    }
}
