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

    /// Publishes a message value; see ``publish(_:payload:qos:retain:)``. Its
    /// `userProperties` go out over MQTT 5 only (``MQTTConfiguration/protocolVersion``); over MQTT 3.1.1 they are left
    /// out.
    /// - Parameter message: The topic, payload, QoS, retain flag and user properties.
    /// - Throws: See ``publish(_:payload:qos:retain:)``.
    public func publish(_ message: MQTTMessage) async throws {
        try await core.publish(
            message.topic,
            payload: message.payload,
            qos: message.qos,
            retain: message.retain,
            userProperties: message.userProperties
        )
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
    public var connectionState: MQTTConnectionState { core.state.withLock { $0.session.connection } }

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

    /// Reads nothing more from the broker until the client is connected again after a ``disconnect()``: messages the
    /// broker sends from now on stay with it (a persistent session keeps them for the next connection), and a
    /// connection loss is still noticed. Returns once a read under way ended (within about a loop step; at most
    /// 200 ms while the client is connecting), so ``acknowledgementDue`` is final then. For a durable consumer that
    /// stops: close the intake, handle and acknowledge what was received, then disconnect (which closes the intake
    /// by itself).
    public func closeIntake() async {
        guard case .success(let handle) = core.setup else { return }
        let step = handle.closeIntake()
        let deadline = ContinuousClock.now + .milliseconds(200)
        while !handle.intakeSettled(step), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .microseconds(100))
        }
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

    /// How many QoS 0 publications the publishing thread wrote to the socket itself (the shim's direct path, plain
    /// TCP only) instead of queueing them in libmosquitto; for tests that must know which path ran.
    var directPublishCount: Int {
        guard case .success(let handle) = core.setup else { return 0 }
        return Int(clamping: handle.directPublishCount)
    }

    /// The shim's tricks switched off in this process by `COATY_SHIM_DISABLE` (a measurement switch, see the
    /// CMosquittoShim sources): `direct`, `quickack`.
    static var shimDisabledTricks: Set<String> {
        let bits = CMosquittoShim_disabledTricks()
        let names: [(Int32, String)] = [
            (Int32(CMosquittoShim_TrickDirect), "direct"),
            (Int32(CMosquittoShim_TrickQuickAck), "quickack"),
        ]
        return Set(names.filter { bits & $0.0 != 0 }.map(\.1))
    }

    /// The topic filters that are remembered and re-subscribed after a reconnect.
    public var subscriptions: [String: MQTTQoS] { core.state.withLock { $0.session.subscriptions } }
}
