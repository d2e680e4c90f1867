import CMosquittoShim
import CoatySync
import Foundation
public import Logging
public import Metrics
import Synchronization

/// An MQTT client on libmosquitto: connect, subscribe, publish, receive, with automatic reconnect and resubscribe.
///
/// ```swift
/// let client = MQTTClient(configuration: try MQTTConfiguration(url: "mqtt://127.0.0.1:1883", clientId: "demo"))
/// try await client.connect()
/// try await client.subscribe("sensors/+/temperature")
/// try await client.publish("sensors/1/temperature", payload: Array("21.5".utf8))
/// for await message in client.messages { print(message.topic) }
/// ```
///
/// All network I/O runs on a network thread owned by the C shim. libmosquitto's callbacks are C: they copy each
/// received message into a bounded buffer and each acknowledgement into a queue. Between its read/write steps (outside
/// every libmosquitto callback and lock) the same thread hands them to Swift: it resumes the tasks waiting for them,
/// or calls the message handler, with no hand-off to another thread.
/// After a successful ``connect()``, the client reconnects with exponential backoff until ``disconnect()``
/// (also after the broker refuses or a TLS handshake fails), re-subscribes every remembered filter, and only then
/// reports ``MQTTConnectionState/connected`` again.
public final class MQTTClient: Sendable {
    let core: ClientCore

    /// Creates a client; nothing happens on the network until ``connect()``.
    /// - Parameters:
    ///   - configuration: The broker address, credentials, TLS, will and buffer settings.
    ///   - logger: Where connection changes, reconnect attempts and dropped messages are logged.
    ///   - metricsFactory: The metrics backend for `coaty_mqtt_dropped_messages_total` and
    ///     `coaty_mqtt_unsent_messages_total`; `nil` uses the global one.
    public init(
        configuration: MQTTConfiguration,
        logger: Logger = Logger(label: "coaty.mqtt"),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        core = ClientCore(configuration: configuration, logger: logger, metricsFactory: metricsFactory)
    }

    deinit {
        core.shutdown()
    }

    /// The configuration this client was created with.
    public var configuration: MQTTConfiguration { core.configuration }

    /// Connects to the broker, and keeps reconnecting (with backoff) after a success until ``disconnect()``.
    ///
    /// Returns when the broker accepted the connection and every remembered subscription is acknowledged.
    /// - Throws: ``MQTTError`` of kind `.brokerUnreachable` (nothing answered within
    ///   ``MQTTConfiguration/connectTimeout``), `.tlsVerificationFailed`, `.authenticationRefused`,
    ///   `.connectionRefused`, `.alreadyConnected` or `.invalidConfiguration`; `CancellationError` when cancelled.
    public func connect() async throws { try await core.connect() }

    /// Flushes queued publications, sends DISCONNECT and stops reconnecting; ends ``messages``.
    ///
    /// While the connection is up, every publication libmosquitto has queued is written before DISCONNECT, for up to
    /// ``MQTTConfiguration/disconnectFlushTimeout``; QoS 0 messages still unsent then (or lost with a connection
    /// earlier) are counted in `coaty_mqtt_unsent_messages_total` and logged at warning level, never dropped silently.
    /// Never hangs: when the broker is down or a reconnect is under way it returns within about a second, and
    /// 3 s after the flush timeout at most it abandons the network thread. The client may connect again afterwards.
    public func disconnect() async { await core.disconnect() }

    /// Subscribes to a topic filter and waits for the broker's SUBACK.
    ///
    /// The filter is remembered and subscribed again after every reconnect. While reconnecting, the call waits
    /// until the connection is back.
    /// - Parameters:
    ///   - topicFilter: A topic filter (`+` and `#` allowed as whole levels).
    ///   - qos: The maximum QoS of delivered messages.
    /// - Throws: ``MQTTError`` of kind `.invalidTopic`, `.notConnected` (before `connect()`), or
    ///   `.subscriptionRefused`; `CancellationError` when cancelled.
    public func subscribe(_ topicFilter: String, qos: MQTTQoS = .atMostOnce) async throws {
        try await core.subscribe([(topicFilter, qos)])
    }

    /// Subscribes to several topic filters (one SUBSCRIBE packet per QoS) and waits for every SUBACK.
    /// - Parameter filters: Topic filters with their QoS.
    /// - Throws: See ``subscribe(_:qos:)``.
    public func subscribe(_ filters: [(String, MQTTQoS)]) async throws {
        try await core.subscribe(filters)
    }

    /// Unsubscribes from a topic filter, forgets it for reconnects, and waits for the UNSUBACK.
    /// - Parameter topicFilter: A filter passed to ``subscribe(_:qos:)`` before.
    /// - Throws: ``MQTTError`` of kind `.invalidTopic`; `CancellationError` when cancelled.
    public func unsubscribe(_ topicFilter: String) async throws {
        try await core.unsubscribe(topicFilter)
    }

    /// Subscribes to a topic filter without waiting: queues the SUBSCRIBE on the live connection and returns `true`,
    /// or returns `false` (doing nothing) when the connection is down or the filter is invalid.
    ///
    /// A publication made after it returned is written after the SUBSCRIBE, and an MQTT broker handles one
    /// connection's packets in order, so the subscription is in place before the publication is seen: a request
    /// published right after subscribing its response topic this way cannot miss its responses, and needs no
    /// SUBACK round trip. The filter is remembered for reconnects like any subscription.
    /// `acknowledged` is called once, on the client's network thread right after it read the SUBACK, with `nil` when
    /// the broker acknowledged it (also by the re-subscription after a reconnect) or with the error (refused, or the
    /// session ended); it must return promptly. Nothing awaits the acknowledgement, so no task wakes for it.
    /// - Parameters:
    ///   - topicFilter: A topic filter.
    ///   - qos: The maximum QoS of delivered messages.
    ///   - acknowledged: The outcome, called at most once when `true` is returned, never otherwise.
    /// - Returns: Whether the SUBSCRIBE is queued.
    public func subscribeNow(
        _ topicFilter: String,
        qos: MQTTQoS = .atMostOnce,
        acknowledged: @escaping @Sendable ((any Error)?) -> Void
    ) -> Bool {
        core.subscribeNow(topicFilter, qos: qos, acknowledged: acknowledged)
    }

    /// Unsubscribes from a topic filter without waiting: forgets it for reconnects and, when connected, queues the
    /// UNSUBSCRIBE.
    ///
    /// `acknowledged` is called once: with `nil` at once when there is nothing to send, or on the network thread
    /// right after it read the UNSUBACK (or the connection was lost, which ends the subscription too).
    /// - Parameters:
    ///   - topicFilter: A filter passed to a subscribe method before.
    ///   - acknowledged: The outcome; must return promptly.
    public func unsubscribeNow(_ topicFilter: String, acknowledged: @escaping @Sendable ((any Error)?) -> Void) {
        core.unsubscribeNow(topicFilter, acknowledged: acknowledged)
    }

    /// Publishes a message.
    ///
    /// QoS 0 returns as soon as libmosquitto has queued the message (it is written before a later `disconnect()`
    /// completes, within ``MQTTConfiguration/disconnectFlushTimeout``) — unless more than
    /// ``MQTTConfiguration/maxOutstandingPublishes`` are queued unwritten: then it waits until half of them are
    /// written, so a fast publisher's memory stays bounded. QoS 1 and 2 return when the broker acknowledged it.
    /// - Parameters:
    ///   - topic: A topic name without wildcards.
    ///   - payload: The payload bytes (`[UInt8]`, `Data`, a slice, …).
    ///   - qos: The quality of service (default QoS 0).
    ///   - retain: Whether the broker keeps the message for future subscribers.
    /// - Throws: ``MQTTError`` of kind `.invalidTopic`, `.notConnected`, `.payloadTooLarge` or `.publishRefused`;
    ///   `CancellationError` when cancelled while waiting for the acknowledgement.
    public func publish(
        _ topic: String,
        payload: some Collection<UInt8>,
        qos: MQTTQoS = .atMostOnce,
        retain: Bool = false
    ) async throws {
        try await core.publish(topic, payload: payload, qos: qos, retain: retain)
    }

    /// Publishes a message value; see ``publish(_:payload:qos:retain:)``.
    /// - Parameter message: The topic, payload, QoS and retain flag.
    /// - Throws: See ``publish(_:payload:qos:retain:)``.
    public func publish(_ message: MQTTMessage) async throws {
        try await core.publish(message.topic, payload: message.payload, qos: message.qos, retain: message.retain)
    }

    /// The received messages (one consumer); see ``MQTTMessages``.
    public var messages: MQTTMessages { MQTTMessages(core: core) }

    /// Delivers received messages to `handler` instead of through ``messages``: in batches, in the order the
    /// broker sent them, called on the client's network thread (one call at a time) right after it read them.
    ///
    /// This saves the hand-off to a consuming task — a thread wake-up per batch — for a consumer whose work per
    /// message is short and never blocks (decoding and handing events on, as a Coaty communication manager does).
    /// While the handler runs, the network thread reads and writes nothing: a handler slower than the inbound
    /// stream slows reading, and the broker's queue for this client fills (its limits apply). Keep it fast and hand
    /// slow work on to a bounded buffer that holds the reads when full (``setReadingPaused(_:)``), as the Coaty
    /// communication manager does for each observation. Set it before ``connect()`` and do not iterate ``messages``
    /// then; `nil` goes back to ``messages``. Messages received before the session ends are still delivered.
    /// - Parameter handler: Called with each batch of received messages; must return promptly.
    public func setMessageHandler(_ handler: (@Sendable (_ batch: [MQTTMessage]) -> Void)?) {
        let boxed = handler.map(MessageHandler.init)
        core.messageHandler.withLock { $0 = boxed }
    }

    /// Runs the tasks that prefer `executor` on this client's network thread while it is connected, right after
    /// each batch handed to the message handler (see ``MQTTDeliveryExecutor``). Set it before ``connect()``; one
    /// executor can serve the clients that follow each other in an application.
    /// - Parameter executor: The executor, or `nil` to stop.
    public func setDeliveryExecutor(_ executor: MQTTDeliveryExecutor?) {
        core.deliveryExecutor.withLock { $0 = executor }
    }

    /// A new sequence of connection states: the current one first, then every change.
    /// - Returns: A sequence any number of tasks may iterate (one sequence per consumer).
    public func connectionStates() -> MQTTConnectionStates { core.connectionStates() }

    /// The current connection state.
    public var connectionState: MQTTConnectionState { core.state.withLock { $0.connection } }

    /// How many received messages were dropped (since the client was created): only when no memory was left for
    /// one. A consumer that lags does not lose messages: once ``MQTTConfiguration/messageBufferCapacity`` messages
    /// wait, the network thread stops reading from the socket until the consumer takes some (back-pressure).
    public var droppedMessageCount: Int { core.droppedMessageCount }

    /// Holds (`true`) or resumes (`false`) reading from the broker, from any thread: back-pressure from a consumer
    /// further down (e.g. a full Coaty observer). While reads are held, TCP flow control holds what the broker sends
    /// in the kernel and the broker; over plain TCP the session stays alive (the network thread writes its own
    /// PINGREQs), over TLS a hold longer than the keep-alive ends the session, which then reconnects by itself.
    /// Messages read before the call are still delivered.
    /// - Parameter paused: Whether to hold the reads.
    public func setReadingPaused(_ paused: Bool) {
        guard case .success(let handle) = core.setup else { return }
        handle.setReadPaused(paused)
    }

    /// With ``MQTTConfiguration/holdsAcknowledgements``: the number of the last received message whose QoS 1
    /// acknowledgement is held, or `nil` when none is. Messages are numbered from 1 in the order this client received
    /// them (since it was created). Hand every message through this number to the application, handle them, then call
    /// ``acknowledge(through:)``; meanwhile the client reads nothing more.
    public var acknowledgementDue: UInt64? {
        guard case .success(let handle) = core.setup else { return nil }
        let due = handle.acknowledgementDue
        return due == 0 ? nil : due
    }

    /// Releases the held acknowledgements of every message through number `through` (see ``acknowledgementDue``).
    /// - Parameter through: the last handled message's number.
    public func acknowledge(through: UInt64) {
        guard case .success(let handle) = core.setup else { return }
        handle.acknowledge(through: through)
    }

    /// Whether the network thread held its reads in its last step: the consumer is behind (the receive buffer
    /// holds ``MQTTConfiguration/messageBufferCapacity`` messages) or ``setReadingPaused(_:)`` asked it to.
    public var isReadingHeld: Bool {
        guard case .success(let handle) = core.setup else { return false }
        return handle.readingHeld
    }

    /// How many QoS 0 publications were queued but never written to the broker (since the client was created):
    /// lost with a broken connection, or still queued when ``disconnect()`` reached
    /// ``MQTTConfiguration/disconnectFlushTimeout``. Also counted in `coaty_mqtt_unsent_messages_total`.
    public var unsentMessageCount: Int {
        guard case .success(let handle) = core.setup else { return 0 }
        return Int(clamping: handle.unsentCount)
    }

    /// How many QoS 0 publications are queued in the client but not yet written to the socket (see
    /// ``MQTTConfiguration/maxOutstandingPublishes``).
    public var outstandingPublishCount: Int {
        guard case .success(let handle) = core.setup else { return 0 }
        return Int(clamping: handle.outstandingPublishes)
    }

    /// Whether publishing skips libmosquitto's own loop wake-up (a `write()` to a socket pair per publish, which
    /// this client's network loop does not need); see the CMosquittoShim sources. False where the kernel does not
    /// allow the thread-local seccomp filter it takes.
    var skipsLibmosquittoWakeUp: Bool {
        guard case .success(let handle) = core.setup else { return false }
        return handle.withoutWakePair
    }

    /// Whether the C shim was built with its Linux-only speed-ups; false on other systems and in the portable
    /// build (`-DCOATY_SHIM_PORTABLE`, `Scripts/portable-test`).
    static var shimHasLinuxSpeedUps: Bool { CMosquittoShim_hasLinuxSpeedUps() }

    /// How many QoS 0 publications the publishing thread wrote to the socket itself (the shim's direct path, plain
    /// TCP only) instead of queueing them in libmosquitto; for tests that must know which path ran.
    var directPublishCount: Int {
        guard case .success(let handle) = core.setup else { return 0 }
        return Int(clamping: handle.directPublishCount)
    }

    /// The shim's tricks switched off in this process by `COATY_SHIM_DISABLE` (a measurement switch, see the
    /// CMosquittoShim sources): `direct`, `seccomp`, `quickack`.
    static var shimDisabledTricks: Set<String> {
        let bits = CMosquittoShim_disabledTricks()
        let names: [(Int32, String)] = [
            (Int32(CMosquittoShim_TrickDirect), "direct"), (Int32(CMosquittoShim_TrickSeccomp), "seccomp"),
            (Int32(CMosquittoShim_TrickQuickAck), "quickack"),
        ]
        return Set(names.filter { bits & $0.0 != 0 }.map(\.1))
    }

    /// The topic filters that are remembered and re-subscribed after a reconnect.
    public var subscriptions: [String: MQTTQoS] { core.state.withLock { $0.subscriptions } }
}

// MARK: - Core

/// The mutable state of a client, guarded by `ClientCore.state`.
struct ClientState: ~Copyable {
    var connection: MQTTConnectionState = .disconnected
    /// A network loop runs (between `connect()` and the loop's Stopped event).
    var running = false
    /// The first connection attempt of `connect()` is not decided yet.
    var initialPhase = false
    var initialToken: UInt64?
    var initialResult: Result<Void, MQTTError>?
    /// A CONNACK was received and the connection is not known to be lost.
    var transportUp = false
    var nextToken: UInt64 = 0
    var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    /// Completion callbacks of operations that nobody awaits (`subscribeNow`, `unsubscribeNow`).
    var callbacks: [UInt64: @Sendable ((any Error)?) -> Void] = [:]
    var publishMids: [Int32: UInt64] = [:]
    /// Publishers waiting for the QoS 0 queue to drain (back-pressure), resumed by the shim's `drained` event.
    var drainTokens: Set<UInt64> = []
    var subscribeMids: [Int32: (token: UInt64, filters: [String])] = [:]
    var ackGroups: [UInt64: Int] = [:]
    var unsubscribeMids: [Int32: UInt64] = [:]
    var awaitingConnected: Set<UInt64> = []
    var resubscribeMids: Set<Int32> = []
    var subscriptions: [String: MQTTQoS] = [:]
    var observers: [UInt64: AsyncStream<MQTTConnectionState>.Continuation] = [:]
    var reconnectAttempts = 0

    mutating func makeToken() -> UInt64 {
        nextToken += 1
        return nextToken
    }

    mutating func setConnection(_ new: MQTTConnectionState) {
        guard new != connection else { return }
        connection = new
        for observer in observers.values { observer.yield(new) }
    }
}

/// Continuations to resume after the state lock is released.
struct Resumptions {
    var list: [(CheckedContinuation<Void, any Error>, Result<Void, any Error>)] = []

    mutating func resolve(_ token: UInt64, _ result: Result<Void, any Error>, in state: inout ClientState) {
        if let continuation = state.waiters.removeValue(forKey: token) {
            list.append((continuation, result))
        } else if let callback = state.callbacks.removeValue(forKey: token) {
            calls.append((callback, result))
        }
    }

    var calls: [(@Sendable ((any Error)?) -> Void, Result<Void, any Error>)] = []

    func resume() {
        for (continuation, result) in list { continuation.resume(with: result) }
        for (callback, result) in calls {
            switch result {
            case .success: callback(nil)
            case .failure(let error): callback(error)
            }
        }
    }
}

/// The single-consumer hand-off of message batches.
struct MessageChannel: ~Copyable {
    var waiter: CheckedContinuation<[MQTTMessage]?, Never>?
    var closed = false
}

/// One session's dispatcher: the network loop thread calls `dispatchRound()` between its steps, so received messages
/// and events reach Swift on that thread, with no hand-off to another thread. The calls come from the loop itself,
/// never from inside a libmosquitto callback, so no libmosquitto lock is held and the round may publish, subscribe
/// or stop. The loop holds this object (retained through the C boundary) until its last call, `loopEnded()`.
final class SessionDispatch: Sendable {
    let core: ClientCore
    let handle: MosquittoHandle
    let executor: MQTTDeliveryExecutor?
    let executorToken: UInt64?
    /// Set when the session stopped or was abandoned: later rounds do nothing, the executor is detached.
    private let ended = Atomic<Bool>(false)

    init(core: ClientCore, handle: MosquittoHandle, executor: MQTTDeliveryExecutor?, executorToken: UInt64?) {
        self.core = core
        self.handle = handle
        self.executor = executor
        self.executorToken = executorToken
    }

    /// A round between two loop steps (loop thread).
    func dispatchRound() {
        guard !ended.load(ordering: .acquiring) else { return }
        if core.dispatchRound(handle, executor) { end() }
    }

    /// The loop's last call (loop thread).
    func loopEnded() { end() }

    /// Ends the session's dispatching (any thread, idempotent): the executor's jobs move to its fallback queue, and
    /// the core forgets this session (which holds the core: a reference cycle until now).
    func end() {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let executor, let executorToken { executor.detach(executorToken) }
        core.currentSession.withLock { current in
            if current === self { current = nil }
        }
    }
}

/// A message handler, boxed so that reading it under a lock does not re-wrap the closure.
final class MessageHandler: Sendable {
    let deliver: @Sendable ([MQTTMessage]) -> Void

    init(_ deliver: @escaping @Sendable ([MQTTMessage]) -> Void) {
        self.deliver = deliver
    }
}

/// Drop accounting, touched by the network thread's dispatch rounds only (a Mutex keeps it Sendable).
struct DropReport {
    var counted: UInt64 = 0
    var unsentCounted: UInt64 = 0
    var eventsLostCounted: UInt64 = 0
    var logged: UInt64 = 0
    var lastLog: ContinuousClock.Instant?
}

/// The shared engine behind ``MQTTClient``; the network loop holds it (through `SessionDispatch`), not the client,
/// so the client can deinit.
final class ClientCore: Sendable {
    let configuration: MQTTConfiguration
    let logger: Logger
    let setup: Result<MosquittoHandle, MQTTError>
    let droppedCounter: Counter
    let unsentCounter: Counter
    let state = CoatyMutex(ClientState())
    let channel = CoatyMutex(MessageChannel())
    let dropReport = CoatyMutex(DropReport())
    /// Set by `MQTTClient.setMessageHandler(_:)`: the dispatch rounds deliver batches to it.
    let messageHandler = CoatyMutex<MessageHandler?>(nil)
    /// Set by `MQTTClient.setDeliveryExecutor(_:)`: the dispatch rounds run its jobs.
    let deliveryExecutor = CoatyMutex<MQTTDeliveryExecutor?>(nil)
    /// The session the network loop thread dispatches for (the last one started).
    let currentSession = CoatyMutex<SessionDispatch?>(nil)
    /// `MQTTConfiguration.consumerWaitBeforeSuspending` in microseconds.
    let blockingWaitMicroseconds: Int32
    /// Mirrors `ClientState.running` for the lock-free QoS 0 publish path.
    let running = Atomic<Bool>(false)
    /// `configuration.brokers` as URLs: the primary first, then the fallbacks.
    let brokerURLs: [String]
    /// The index into `brokerURLs` of the broker in use, or last tried (updated from the shim's connection events).
    let currentBroker = Atomic<Int>(0)

    /// How long after the flush timeout `disconnect()` abandons a network thread that did not stop.
    static let stopGrace: Duration = .seconds(3)
    static let dropLogInterval: Duration = .seconds(5)
    static let resubscribeChunk = 200

    init(configuration: MQTTConfiguration, logger: Logger, metricsFactory: (any MetricsFactory)?) {
        self.configuration = configuration
        brokerURLs = configuration.brokers.map(\.url)
        let (seconds, attoseconds) = configuration.consumerWaitBeforeSuspending.components
        blockingWaitMicroseconds = Int32(
            clamping: max(0, min(seconds, 1) * 1_000_000 + attoseconds / 1_000_000_000_000)
        )
        var logger = logger
        logger[metadataKey: "mqtt.client_id"] = .string(configuration.clientId)
        self.logger = logger
        let dimensions = [("client_id", configuration.clientId)]
        func counter(_ label: String) -> Counter {
            if let metricsFactory { return Counter(label: label, dimensions: dimensions, factory: metricsFactory) }
            return Counter(label: label, dimensions: dimensions)
        }
        droppedCounter = counter("coaty_mqtt_dropped_messages_total")
        unsentCounter = counter("coaty_mqtt_unsent_messages_total")
        do {
            setup = .success(try MosquittoHandle(configuration: configuration))
        } catch let error as MQTTError {
            setup = .failure(error)
        } catch {
            setup = .failure(MQTTError(.invalidConfiguration, "\(error)"))
        }
    }

    /// The URL of the broker in use (or last tried), for messages and logs.
    var url: String { brokerURLs[min(currentBroker.load(ordering: .relaxed), brokerURLs.count - 1)] }

    func requireHandle() throws(MQTTError) -> MosquittoHandle {
        switch setup {
        case .success(let handle): return handle
        case .failure(let error): throw error
        }
    }

    var droppedMessageCount: Int {
        guard case .success(let handle) = setup else { return 0 }
        return Int(clamping: handle.droppedCount)
    }

    /// Stops everything without waiting (client deinit).
    func shutdown() {
        if case .success(let handle) = setup { handle.stop() }
        closeMessages()
        let observers = state.withLock { state in
            let observers = state.observers
            state.observers = [:]
            return observers
        }
        for observer in observers.values { observer.finish() }
    }

    // MARK: Suspension

    /// Suspends until the token registered by `register` is resolved; `register` returns `true` when it is
    /// already done. Cancellation resumes with `CancellationError`.
    private func suspend(_ register: (inout ClientState, UInt64) throws -> Bool) async throws {
        let token = state.withLock { $0.makeToken() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let immediate: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    do {
                        if try register(&state, token) { return .success(()) }
                        state.waiters[token] = continuation
                        return nil
                    } catch {
                        return .failure(error)
                    }
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let continuation = state.withLock { $0.waiters.removeValue(forKey: token) }
            continuation?.resume(throwing: CancellationError())
        }
    }

    private func notConnected(_ what: String) -> MQTTError {
        MQTTError(.notConnected, "Cannot \(what): the client is not connected to \(url); call connect() first.")
    }

    // MARK: Connect / disconnect

    func connect() async throws {
        let handle = try requireHandle()
        try state.withLock { state throws(MQTTError) in
            guard !state.running else {
                throw MQTTError(
                    .alreadyConnected,
                    "The client \"\(configuration.clientId)\" is already connected or connecting to \(url)."
                )
            }
            state.running = true
            state.initialPhase = true
            state.initialToken = nil
            state.initialResult = nil
            state.transportUp = false
            state.reconnectAttempts = 0
            state.setConnection(.connecting)
        }
        channel.withLock { $0.closed = false }
        while handle.popEvent() != nil {}  // stale events of an abandoned session
        handle.openDispatcher()
        running.store(true, ordering: .releasing)
        let executor = deliveryExecutor.withLock { $0 }
        let session = SessionDispatch(
            core: self,
            handle: handle,
            executor: executor,
            executorToken: executor?.attach { handle.wakeDispatcher() }
        )
        currentSession.withLock { $0 = session }
        let retained = handle.setDispatch(session)

        currentBroker.store(0, ordering: .relaxed)  // each network loop starts with the primary broker
        let rc = handle.start()
        guard rc == MosquittoCode.success else {
            handle.discardDispatch(retained)
            session.end()
            finishSession(reason: "the network thread could not start")
            throw MQTTError(
                .protocolError,
                "Cannot start the MQTT network thread for \(url): \(MosquittoHandle.errorString(rc))"
                    + " (a previous connection may still be closing; retry in a few seconds)."
            )
        }
        logger.debug("Connecting", metadata: ["mqtt.broker": .string(url)])
        do {
            try await suspend { state, token in
                if let result = state.initialResult {
                    state.initialResult = nil
                    try result.get()
                    return true
                }
                guard state.running else { throw self.notConnected("connect") }
                state.initialToken = token
                return false
            }
        } catch {
            await stopSession()
            throw error
        }
    }

    func disconnect() async {
        closeMessages()
        guard state.withLock({ $0.running }) else { return }
        await stopSession()
        logger.debug("Disconnected", metadata: ["mqtt.broker": .string(url)])
    }

    /// Asks the network loop to stop and waits (bounded) until its dispatch round has seen it stop.
    private func stopSession() async {
        guard case .success(let handle) = setup else { return }
        handle.stop()
        let deadline = ContinuousClock.now + max(.zero, configuration.disconnectFlushTimeout) + Self.stopGrace
        while state.withLock({ $0.running }) {
            if ContinuousClock.now >= deadline {
                logger.warning(
                    "The MQTT network thread did not stop in time; abandoning it",
                    metadata: ["mqtt.broker": .string(url)]
                )
                handle.closeDispatcher()
                currentSession.withLock { $0 }?.end()
                finishSession(reason: "the network thread was abandoned")
                return
            }
            // Sleep without honouring cancellation: the session must end before disconnect() returns.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await Task.sleep(for: .milliseconds(10)) }
            }
        }
    }

    /// Ends a session: state `.disconnected`, every waiter fails with `.notConnected`.
    private func finishSession(reason: String) {
        var resumptions = Resumptions()
        state.withLock { state in
            guard state.running else { return }
            state.running = false
            state.transportUp = false
            running.store(false, ordering: .releasing)
            let error = MQTTError(
                .notConnected,
                "The connection to \(url) was closed (\(reason)) before the operation completed."
            )
            if state.initialPhase, state.initialToken == nil, state.initialResult == nil {
                state.initialResult = .failure(error)
            }
            state.initialPhase = false
            for token in Array(state.waiters.keys) + Array(state.callbacks.keys) {
                resumptions.resolve(token, .failure(error), in: &state)
            }
            state.publishMids = [:]
            state.drainTokens = []
            state.subscribeMids = [:]
            state.unsubscribeMids = [:]
            state.ackGroups = [:]
            state.awaitingConnected = []
            state.resubscribeMids = []
            state.initialToken = nil
            state.setConnection(.disconnected)
        }
        resumptions.resume()
    }

    // MARK: Subscribe / unsubscribe / publish

    func subscribe(_ filters: [(String, MQTTQoS)]) async throws {
        let handle = try requireHandle()
        guard !filters.isEmpty else { return }
        for (filter, _) in filters { try MQTTTopic.validateFilter(filter) }
        try await suspend { state, token in
            guard state.running else {
                throw notConnected("subscribe to \"\(filters[0].0)\"\(filters.count > 1 ? " and more" : "")")
            }
            var added: [String] = []
            for (filter, qos) in filters where state.subscriptions.updateValue(qos, forKey: filter) == nil {
                added.append(filter)
            }
            guard state.transportUp else {
                // The resubscribe after the next CONNACK includes these filters.
                state.awaitingConnected.insert(token)
                return false
            }
            var mids: [Int32] = []
            for (qos, group) in Self.groupByQoS(filters) {
                for start in stride(from: 0, to: group.count, by: Self.resubscribeChunk) {
                    let chunk = Array(group[start..<min(start + Self.resubscribeChunk, group.count)])
                    let (rc, mid) = handle.subscribe(chunk, qos: qos)
                    if rc == MosquittoCode.noConnection {
                        for mid in mids { state.subscribeMids[mid] = nil }
                        state.awaitingConnected.insert(token)
                        return false
                    }
                    guard rc == MosquittoCode.success else {
                        for mid in mids { state.subscribeMids[mid] = nil }
                        for filter in added { state.subscriptions[filter] = nil }
                        throw MQTTError(
                            .protocolError,
                            "Cannot subscribe to \"\(chunk[0])\" on \(url): \(MosquittoHandle.errorString(rc))."
                        )
                    }
                    mids.append(mid)
                    state.subscribeMids[mid] = (token, chunk)
                }
            }
            state.ackGroups[token] = mids.count
            return false
        }
    }

    private static func groupByQoS(_ filters: [(String, MQTTQoS)]) -> [(MQTTQoS, [String])] {
        var groups: [MQTTQoS: [String]] = [:]
        var seen = Set<String>()
        for (filter, qos) in filters where seen.insert(filter).inserted { groups[qos, default: []].append(filter) }
        return MQTTQoS.allCases.compactMap { qos in groups[qos].map { (qos, $0) } }
    }

    func unsubscribe(_ filter: String) async throws {
        let handle = try requireHandle()
        try MQTTTopic.validateFilter(filter)
        try await suspend { state, token in try !queueUnsubscribe(filter, token: token, handle, &state) }
    }

    /// Forgets `filter` for reconnects and, while the connection is up, queues its UNSUBSCRIBE under `token`.
    /// Returns whether an UNSUBACK will resolve `token` (`false`: there was nothing to send).
    private func queueUnsubscribe(
        _ filter: String,
        token: UInt64,
        _ handle: MosquittoHandle,
        _ state: inout ClientState
    ) throws(MQTTError) -> Bool {
        state.subscriptions[filter] = nil
        guard state.running, state.transportUp else { return false }
        let (rc, mid) = handle.unsubscribe(filter)
        if rc == MosquittoCode.noConnection { return false }
        guard rc == MosquittoCode.success else {
            throw MQTTError(
                .protocolError,
                "Cannot unsubscribe from \"\(filter)\" on \(url): \(MosquittoHandle.errorString(rc))."
            )
        }
        state.unsubscribeMids[mid] = token
        return true
    }

    /// Queues a SUBSCRIBE on the live connection without waiting; see `MQTTClient.subscribeNow`.
    func subscribeNow(
        _ filter: String,
        qos: MQTTQoS,
        acknowledged: @escaping @Sendable ((any Error)?) -> Void
    ) -> Bool {
        guard case .success(let handle) = setup, (try? MQTTTopic.validateFilter(filter)) != nil else { return false }
        return state.withLock { state in
            guard state.running, state.transportUp else { return false }
            let (rc, mid) = handle.subscribe([filter], qos: qos)
            guard rc == MosquittoCode.success else { return false }
            let token = state.makeToken()
            state.subscriptions[filter] = qos
            state.subscribeMids[mid] = (token, [filter])
            state.ackGroups[token] = 1
            state.callbacks[token] = acknowledged
            return true
        }
    }

    /// Forgets a filter and queues its UNSUBSCRIBE without waiting; see `MQTTClient.unsubscribeNow`.
    func unsubscribeNow(_ filter: String, acknowledged: @escaping @Sendable ((any Error)?) -> Void) {
        let pending = Result { () throws -> Bool in
            let handle = try requireHandle()
            try MQTTTopic.validateFilter(filter)
            return try state.withLock { state throws(MQTTError) -> Bool in
                let token = state.makeToken()
                guard try queueUnsubscribe(filter, token: token, handle, &state) else { return false }
                state.callbacks[token] = acknowledged
                return true
            }
        }
        switch pending {
        case .success(true): return  // the UNSUBACK (or the end of the session) calls back
        case .success(false): acknowledged(nil)
        case .failure(let error): acknowledged(error)
        }
    }

    func publish(_ topic: String, payload: some Collection<UInt8>, qos: MQTTQoS, retain: Bool) async throws {
        let handle = try requireHandle()
        try MQTTTopic.validateName(topic)
        if qos == .atMostOnce {
            guard running.load(ordering: .acquiring) else { throw notConnected("publish on \"\(topic)\"") }
            let rc =
                payload.withContiguousStorageIfAvailable { buffer in
                    publishNow(handle, topic, UnsafeRawBufferPointer(buffer), qos, retain).0
                }
                ?? Array(payload).withUnsafeBytes { publishNow(handle, topic, $0, qos, retain).0 }
            if rc != MosquittoCode.success { throw publishError(rc, topic: topic, size: payload.count) }
            let limit = configuration.maxOutstandingPublishes
            if limit > 0, handle.outstandingPublishes > UInt64(limit) {
                await waitForWrites(handle, downTo: UInt64(limit / 2))
            }
            return
        }
        let bytes = Array(payload)
        try await suspend { state, token in
            guard state.running else { throw notConnected("publish on \"\(topic)\"") }
            let (rc, mid) = bytes.withUnsafeBytes { publishNow(handle, topic, $0, qos, retain) }
            guard rc == MosquittoCode.success else { throw publishError(rc, topic: topic, size: bytes.count) }
            state.publishMids[mid] = token
            return false
        }
    }

    /// Back-pressure for QoS 0: waits while more than `target` publications are queued but unwritten, and the
    /// loop runs. The network thread signals when the queue is down to `target` (one wake-up per drain, no polling);
    /// a lost connection settles the queue and signals too; cancellation ends the wait.
    private func waitForWrites(_ handle: MosquittoHandle, downTo target: UInt64) async {
        while handle.outstandingPublishes > target, running.load(ordering: .acquiring), !Task.isCancelled {
            try? await suspend { state, token in
                guard state.running, !handle.armDrain(target) else { return true }
                state.drainTokens.insert(token)
                return false
            }
        }
    }

    private func publishNow(
        _ handle: MosquittoHandle,
        _ topic: String,
        _ payload: UnsafeRawBufferPointer,
        _ qos: MQTTQoS,
        _ retain: Bool
    ) -> (Int32, Int32) {
        guard payload.count <= 268_435_455 - 65_542 else { return (MosquittoCode.payloadSize, 0) }
        return handle.publish(topic: topic, payload: payload, qos: qos, retain: retain)
    }

    private func publishError(_ rc: Int32, topic: String, size: Int) -> MQTTError {
        switch rc {
        case MosquittoCode.noConnection:
            return MQTTError(
                .notConnected,
                "Cannot publish on \"\(topic)\": the connection to \(url) is down (reconnecting); retry later."
            )
        case MosquittoCode.payloadSize, MosquittoCode.oversizePacket:
            return MQTTError(
                .payloadTooLarge,
                "Cannot publish \(size) bytes on \"\(topic)\": the payload exceeds what MQTT or the broker at \(url) allows."
            )
        default:
            return MQTTError(
                .protocolError,
                "Cannot publish on \"\(topic)\" to \(url): \(MosquittoHandle.errorString(rc))."
            )
        }
    }

    // MARK: Messages

    func nextMessageBatch() async -> [MQTTMessage]? {
        guard case .success(let handle) = setup else { return nil }
        let fast = handle.takeMessages(waitingMicroseconds: blockingWaitMicroseconds)
        if !fast.isEmpty { return fast }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[MQTTMessage]?, Never>) in
                let immediate: [MQTTMessage]?? = channel.withLock { channel in
                    let batch = handle.takeMessages(arm: true)
                    if !batch.isEmpty { return .some(batch) }
                    if channel.closed || Task.isCancelled { return .some(nil) }
                    if let previous = channel.waiter {
                        // A second concurrent consumer: let the previous one end rather than leak it.
                        previous.resume(returning: nil)
                    }
                    channel.waiter = continuation
                    return .none
                }
                if case .some(let result) = immediate { continuation.resume(returning: result) }
            }
        } onCancel: {
            let waiter = channel.withLock { channel in
                let waiter = channel.waiter
                channel.waiter = nil
                return waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Called by a dispatch round when a waiting consumer can be served.
    private func serveMessageWaiter(_ handle: MosquittoHandle) {
        let served: (CheckedContinuation<[MQTTMessage]?, Never>, [MQTTMessage])? = channel.withLock { channel in
            guard let waiter = channel.waiter else { return nil }
            let batch = handle.takeMessages(arm: true)
            guard !batch.isEmpty else { return nil }
            channel.waiter = nil
            return (waiter, batch)
        }
        if let (waiter, batch) = served { waiter.resume(returning: batch) }
    }

    private func closeMessages() {
        let waiter = channel.withLock { channel in
            channel.closed = true
            let waiter = channel.waiter
            channel.waiter = nil
            return waiter
        }
        waiter?.resume(returning: nil)
    }

    // MARK: Connection states

    func connectionStates() -> MQTTConnectionStates {
        let (stream, continuation) = AsyncStream.makeStream(
            of: MQTTConnectionState.self,
            bufferingPolicy: .unbounded
        )
        let id = state.withLock { $0.makeToken() }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
        state.withLock { state in
            continuation.yield(state.connection)
            state.observers[id] = continuation
        }
        return MQTTConnectionStates(stream: stream)
    }

    // MARK: Dispatch rounds

    /// One dispatch round, on the network loop thread between two of its steps (see `SessionDispatch`): serves
    /// message consumers, applies events, runs the delivery executor's jobs, reports drops. Returns whether the
    /// session ended (stopped, or abandoned by `disconnect()`).
    fileprivate func dispatchRound(_ handle: MosquittoHandle, _ executor: MQTTDeliveryExecutor?) -> Bool {
        let mask = handle.dispatchReasons()
        // With a handler, an event waits until the messages received before it were handed over. So the handler
        // takes what is queued in every round (also the first after a handler was set mid-session), and due events
        // are looked for every time.
        let ordered = messageHandler.withLock { $0 } != nil
        if ordered {
            deliverToHandler(handle, executor)
        } else if mask & Int32(CMosquittoShim_WakeMessages) != 0 {
            serveMessageWaiter(handle)
        }
        var stopped = false
        if ordered || mask & Int32(CMosquittoShim_WakeEvents) != 0 {
            while let event = ordered ? handle.popDueEvent(includeStopped: true) : handle.popEvent() {
                // What arrived before the end goes to a handler before disconnect() can return.
                if event.kind == .stopped { deliverToHandler(handle, executor) }
                apply(event, handle)
                // What follows belongs to the next session (a connect() right after disconnect() returned).
                if event.kind == .stopped {
                    stopped = true
                    break
                }
            }
        }
        reportDrops(handle)
        reportUnsent(handle)
        reportLostEvents(handle)
        // Ended: the jobs still queued move to the executor's fallback queue when the session detaches it.
        if stopped || mask & Int32(CMosquittoShim_WakeClosed) != 0 { return true }
        // Tasks resumed otherwise (by an event, a timer, another thread) run now, on this thread.
        executor?.runJobs()
        return false
    }

    /// Hands every queued message to the message handler, if one is set, until the queue is empty (which arms the
    /// wake-up for the next message), and applies the events that became due between batches.
    /// The tasks the batch resumed on `executor` run right after it, before the next batch.
    private func deliverToHandler(_ handle: MosquittoHandle, _ executor: MQTTDeliveryExecutor?) {
        guard let handler = messageHandler.withLock({ $0 }) else { return }
        while true {
            let batch = handle.takeMessages(arm: true)
            if batch.isEmpty { return }
            handler.deliver(batch)
            // A steady inbound stream can keep this loop from the event queue for good, so the events that are due
            // are applied between batches: those received before the last message delivered (an acknowledgement
            // must not overtake the messages received before it, which the Coaty manager's copy counting relies
            // on). The end of the session is left to `dispatchRound`. A publisher waiting for the QoS 0 queue to
            // drain is resumed through its own flag, before the event itself is due.
            if handle.takeDrained() { resumeDrainWaiters() }
            executor?.runJobs()
            while let event = handle.popDueEvent(includeStopped: false) { apply(event, handle) }
        }
    }

    /// Resumes the publishers waiting for the QoS 0 queue to drain; each checks the queue again.
    private func resumeDrainWaiters() {
        var resumptions = Resumptions()
        state.withLock { resolveDrainWaiters(&$0, &resumptions) }
        resumptions.resume()
    }

    private func resolveDrainWaiters(_ state: inout ClientState, _ resumptions: inout Resumptions) {
        for token in state.drainTokens { resumptions.resolve(token, .success(()), in: &state) }
        state.drainTokens = []
    }

    private func apply(_ event: ShimEvent, _ handle: MosquittoHandle) {
        if event.kind == .stopped {
            finishSession(reason: "disconnect() was called")
            return
        }
        switch event.kind {
        case .connected, .connectionRefused, .connectFailed, .connectionLost:
            currentBroker.store(event.broker, ordering: .relaxed)
        default:
            break
        }
        var resumptions = Resumptions()
        var stopAfterInitialFailure = false
        state.withLock { state in
            guard state.running else { return }
            switch event.kind {
            case .connected:
                state.transportUp = true
                resubscribe(&state, handle, &resumptions)
            case .connectionRefused, .connectFailed:
                let error =
                    event.kind == .connectionRefused
                    ? refusedError(code: event.code) : connectFailedError(code: event.code, detail: event.detail)
                if state.initialPhase, event.broker + 1 < brokerURLs.count {
                    // The shim tries the next broker at once; connect() fails only when every one failed.
                    logger.info(
                        "Connection attempt failed; trying the next broker",
                        metadata: ["mqtt.broker": .string(url), "mqtt.reason": .string(error.message)]
                    )
                    return
                }
                let initialError =
                    brokerURLs.count > 1
                    ? MQTTError(
                        error.kind,
                        "No MQTT broker accepted the connection (tried \(brokerURLs.joined(separator: ", ")));"
                            + " the last one said: \(error.message)"
                    ) : error
                stopAfterInitialFailure = failInitial(initialError, &state, &resumptions)
                if !stopAfterInitialFailure { logReconnectProblem(error.message, &state) }
            case .connectionLost:
                connectionLost(event, &state, &resumptions)
            case .published:
                guard let token = state.publishMids.removeValue(forKey: event.mid) else { return }
                if event.code >= 0x80 {
                    let reason = MosquittoHandle.reasonString(event.code, v5: true)
                    resumptions.resolve(
                        token,
                        .failure(MQTTError(.publishRefused, "The broker at \(url) refused a publication: \(reason).")),
                        in: &state
                    )
                } else {
                    resumptions.resolve(token, .success(()), in: &state)
                }
            case .subscribed:
                subscribed(event, &state, &resumptions)
            case .unsubscribed:
                if let token = state.unsubscribeMids.removeValue(forKey: event.mid) {
                    resumptions.resolve(token, .success(()), in: &state)
                }
            case .drained:
                _ = handle.takeDrained()
                resolveDrainWaiters(&state, &resumptions)
            case .stopped:
                break
            }
        }
        resumptions.resume()
        if stopAfterInitialFailure { handle.stop() }
    }

    /// Fails the pending `connect()` when the first attempt failed; returns whether it did.
    private func failInitial(_ error: MQTTError, _ state: inout ClientState, _ resumptions: inout Resumptions) -> Bool {
        guard state.initialPhase else { return false }
        state.initialPhase = false
        if let token = state.initialToken {
            state.initialToken = nil
            resumptions.resolve(token, .failure(error), in: &state)
        } else {
            state.initialResult = .failure(error)
        }
        return true
    }

    private func logReconnectProblem(_ message: String, _ state: inout ClientState) {
        state.reconnectAttempts += 1
        state.setConnection(.reconnecting)
        logger.info(
            "Reconnect attempt failed; retrying with backoff",
            metadata: [
                "mqtt.broker": .string(url), "mqtt.reason": .string(message),
                "mqtt.attempt": .stringConvertible(state.reconnectAttempts),
            ]
        )
    }

    private func resubscribe(_ state: inout ClientState, _ handle: MosquittoHandle, _ resumptions: inout Resumptions) {
        state.resubscribeMids = []
        let filters = state.subscriptions.map { ($0.key, $0.value) }
        for (qos, group) in Self.groupByQoS(filters) {
            for start in stride(from: 0, to: group.count, by: Self.resubscribeChunk) {
                let chunk = Array(group[start..<min(start + Self.resubscribeChunk, group.count)])
                let (rc, mid) = handle.subscribe(chunk, qos: qos)
                if rc == MosquittoCode.success {
                    state.resubscribeMids.insert(mid)
                } else {
                    logger.error(
                        "Re-subscribing failed",
                        metadata: [
                            "mqtt.broker": .string(url), "mqtt.filter": .string(chunk[0]),
                            "mqtt.reason": .string(MosquittoHandle.errorString(rc)),
                        ]
                    )
                }
            }
        }
        if state.resubscribeMids.isEmpty { becomeConnected(&state, &resumptions) }
    }

    private func becomeConnected(_ state: inout ClientState, _ resumptions: inout Resumptions) {
        let wasReconnect = !state.initialPhase
        state.setConnection(.connected)
        if state.initialPhase {
            state.initialPhase = false
            if let token = state.initialToken {
                state.initialToken = nil
                resumptions.resolve(token, .success(()), in: &state)
            } else {
                state.initialResult = .success(())
            }
        }
        for token in state.awaitingConnected { resumptions.resolve(token, .success(()), in: &state) }
        state.awaitingConnected = []
        state.reconnectAttempts = 0
        logger.info(
            "\(wasReconnect ? "Reconnected" : "Connected") to \(url)",
            metadata: [
                "mqtt.broker": .string(url), "mqtt.subscriptions": .stringConvertible(state.subscriptions.count),
            ]
        )
    }

    private func connectionLost(_ event: ShimEvent, _ state: inout ClientState, _ resumptions: inout Resumptions) {
        state.transportUp = false
        for (_, pending) in state.subscribeMids {
            state.ackGroups[pending.token] = nil
            state.awaitingConnected.insert(pending.token)
        }
        state.subscribeMids = [:]
        for token in state.unsubscribeMids.values { resumptions.resolve(token, .success(()), in: &state) }
        state.unsubscribeMids = [:]
        state.resubscribeMids = []
        if state.initialPhase {
            // Lost while re-subscribing during connect(): treat like a failed first attempt.
            _ = failInitial(connectFailedError(code: event.code, detail: event.detail), &state, &resumptions)
        }
        state.setConnection(.reconnecting)
        logger.warning(
            "Connection lost; reconnecting",
            metadata: ["mqtt.broker": .string(url), "mqtt.reason": .string(event.detail)]
        )
        // The shim counts the sessions in a row that the broker ended within 2 s of connecting (and backs
        // off across them): the signature of two clients with one client id taking the session from each other.
        let brief = Int(event.mid)
        if brief >= 3, brief == 3 || brief % 10 == 0 {
            logger.error(
                "The broker ended the session \(brief) times in a row within 2 s of connecting: another client probably uses the client id \"\(configuration.clientId)\"; backing off",
                metadata: ["mqtt.broker": .string(url), "mqtt.brief_sessions": .stringConvertible(brief)]
            )
        }
    }

    private func subscribed(_ event: ShimEvent, _ state: inout ClientState, _ resumptions: inout Resumptions) {
        if state.resubscribeMids.remove(event.mid) != nil {
            if event.code >= 0 {
                logger.warning("The broker refused a re-subscription", metadata: ["mqtt.broker": .string(url)])
            }
            if state.resubscribeMids.isEmpty, state.transportUp { becomeConnected(&state, &resumptions) }
            return
        }
        guard let pending = state.subscribeMids.removeValue(forKey: event.mid) else { return }
        if event.code >= 0 {
            let index = Int(event.code)
            let filter = index < pending.filters.count ? pending.filters[index] : pending.filters[0]
            state.subscriptions[filter] = nil
            state.ackGroups[pending.token] = nil
            resumptions.resolve(
                pending.token,
                .failure(
                    MQTTError(
                        .subscriptionRefused,
                        "The broker at \(url) refused the subscription to \"\(filter)\" (check its ACL)."
                    )
                ),
                in: &state
            )
            return
        }
        guard let remaining = state.ackGroups[pending.token] else { return }
        if remaining <= 1 {
            state.ackGroups[pending.token] = nil
            resumptions.resolve(pending.token, .success(()), in: &state)
        } else {
            state.ackGroups[pending.token] = remaining - 1
        }
    }

    private func reportDrops(_ handle: MosquittoHandle) {
        let total = handle.droppedCount
        let (delta, toLog): (UInt64, UInt64) = dropReport.withLock { report in
            let delta = total - report.counted
            report.counted = total
            var toLog: UInt64 = 0
            let now = ContinuousClock.now
            if total > report.logged, report.lastLog.map({ now - $0 >= Self.dropLogInterval }) ?? true {
                toLog = total - report.logged
                report.logged = total
                report.lastLog = now
            }
            return (delta, toLog)
        }
        if delta > 0 { droppedCounter.increment(by: delta) }
        if toLog > 0 {
            logger.warning(
                "Dropped incoming MQTT messages: no memory left to buffer them",
                metadata: [
                    "mqtt.broker": .string(url),
                    "mqtt.dropped": .stringConvertible(toLog),
                    "mqtt.dropped_total": .stringConvertible(total),
                    "mqtt.buffer_capacity": .stringConvertible(configuration.messageBufferCapacity),
                ]
            )
        }
    }

    /// How much of a count of the network thread is new since the last report; records it as reported.
    private func newSinceLastReport(_ total: UInt64, _ counted: WritableKeyPath<DropReport, UInt64>) -> UInt64 {
        dropReport.withLock { report in
            let delta = total - report[keyPath: counted]
            report[keyPath: counted] = total
            return delta
        }
    }

    /// Logs the network thread's events lost to a failed allocation (an acknowledgement or a state
    /// change; the network thread ended the session for each, and the client reconnects).
    private func reportLostEvents(_ handle: MosquittoHandle) {
        let total = handle.eventsLostCount
        let delta = newSinceLastReport(total, \.eventsLostCounted)
        guard delta > 0 else { return }
        logger.error(
            "MQTT events lost: no memory for them on the network thread; reconnecting to re-synchronize",
            metadata: [
                "mqtt.broker": .string(url),
                "mqtt.events_lost": .stringConvertible(delta),
                "mqtt.events_lost_total": .stringConvertible(total),
            ]
        )
        // A lost acknowledgement would leave its publication waiting for good: every publication still
        // waiting fails instead (it may have been delivered; one still unacknowledged is sent again after the
        // reconnect). Subscriptions are re-established by the reconnect itself.
        var resumptions = Resumptions()
        state.withLock { state in
            for token in state.publishMids.values {
                resumptions.resolve(
                    token,
                    .failure(
                        MQTTError(
                            .protocolError,
                            "The acknowledgement of a publication to \(url) may have been lost (no memory on the network thread): it may or may not have been delivered."
                        )
                    ),
                    in: &state
                )
            }
            state.publishMids = [:]
        }
        resumptions.resume()
    }

    /// Counts and logs QoS 0 publications the network thread reported as never written.
    private func reportUnsent(_ handle: MosquittoHandle) {
        let total = handle.unsentCount
        let delta = newSinceLastReport(total, \.unsentCounted)
        guard delta > 0 else { return }
        unsentCounter.increment(by: delta)
        logger.warning(
            "QoS 0 publications were never sent: the connection ended or the disconnect flush timed out",
            metadata: [
                "mqtt.broker": .string(url),
                "mqtt.unsent": .stringConvertible(delta),
                "mqtt.unsent_total": .stringConvertible(total),
                "mqtt.flush_timeout": .stringConvertible(configuration.disconnectFlushTimeout),
            ]
        )
    }

    // MARK: Error classification

    private func refusedError(code: Int32) -> MQTTError {
        let v5 = configuration.protocolVersion == .v5
        let reason = MosquittoHandle.reasonString(code, v5: v5)
        let authCodes: Set<Int32> = v5 ? [0x86, 0x87, 0x8C] : [4, 5]
        if authCodes.contains(code) {
            return MQTTError(
                .authenticationRefused,
                "The broker at \(url) refused the credentials of client \"\(configuration.clientId)\": \(reason)."
                    + " Check the user name and password."
            )
        }
        let protocolCodes: Set<Int32> = v5 ? [0x81, 0x82, 0x84] : [1]
        if protocolCodes.contains(code) {
            return MQTTError(.protocolError, "The broker at \(url) rejected the protocol: \(reason).")
        }
        return MQTTError(
            .connectionRefused,
            "The broker at \(url) refused the connection of client \"\(configuration.clientId)\": \(reason)."
        )
    }

    private func connectFailedError(code: Int32, detail: String) -> MQTTError {
        let lowered = detail.lowercased()
        let looksLikeTLS =
            configuration.tls != nil
            && (code == MosquittoCode.tls || code == MosquittoCode.tlsHandshake || lowered.contains("ssl")
                || lowered.contains("certificate") || lowered.contains("tls"))
        if looksLikeTLS {
            return MQTTError(
                .tlsVerificationFailed,
                "The TLS handshake with \(url) failed: \(detail). Check that the CA file signs the broker"
                    + " certificate and that the certificate names this host."
            )
        }
        switch code {
        case MosquittoCode.timeout:
            return MQTTError(
                .brokerUnreachable,
                "No MQTT broker answered at \(url) within \(configuration.connectTimeout)."
                    + " Check that the broker runs and the address is right."
            )
        case MosquittoCode.protocolError:
            return MQTTError(.protocolError, "Protocol error while connecting to \(url): \(detail).")
        case MosquittoCode.authentication:
            return MQTTError(
                .authenticationRefused,
                "The broker at \(url) refused the credentials: \(detail). Check the user name and password."
            )
        default:
            return MQTTError(
                .brokerUnreachable,
                "Cannot reach the MQTT broker at \(url): \(detail). Check that the broker runs and the address is right."
            )
        }
    }
}
