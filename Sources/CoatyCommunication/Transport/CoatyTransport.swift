import CoatyFilter
import CoatyModel
// MQTT's vocabulary (message, QoS, topic filters) is part of this module's API.
@_exported public import CoatyMQTTTypes

/// The MQTT quality of service of a publication, subscription or will (one type with the MQTT
/// client's: ``MQTTQoS``).
public typealias TransportQoS = MQTTQoS

/// A message sent or received through a ``CoatyTransport``, also used as the last will (one type
/// with the MQTT client's: ``MQTTMessage``).
public typealias TransportMessage = MQTTMessage

/// The state of a transport's connection to its broker.
public enum TransportConnectionState: Sendable, Hashable, CustomStringConvertible {
    /// Not connected and not trying: before ``CoatyTransport/connect(will:)`` or after
    /// ``CoatyTransport/disconnect()`` (or a permanent failure).
    case disconnected
    /// Trying to establish the first connection.
    case connecting
    /// Connected, and every subscription is established (acknowledged by the broker).
    case connected
    /// The connection was lost; the transport is trying to reconnect on its own.
    case reconnecting

    /// Whether the transport is ``connected`` (Coaty's communication state `online`).
    public var isConnected: Bool { self == .connected }

    /// The state name, e.g. `"connected"`.
    public var description: String {
        switch self {
        case .disconnected: "disconnected"
        case .connecting: "connecting"
        case .connected: "connected"
        case .reconnecting: "reconnecting"
        }
    }
}

/// An error reported by a ``CoatyTransport``.
public enum TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The operation needs a connection and the transport is not connected; the caller defers
    /// the publication until the state is ``TransportConnectionState/connected`` again.
    case notConnected
    /// The broker refused the connection permanently (bad credentials, TLS verification failure,
    /// protocol error); the transport does not retry. Fix the configuration named in the reason.
    case connectionRefused(reason: String)
    /// The broker could not be reached within the transport's connect timeout; the transport is
    /// `disconnected`. Check that the broker runs at the configured address, or retry later.
    case brokerUnreachable(reason: String)
    /// The topic name or topic filter is not valid MQTT; fix the topic.
    case invalidTopic(String, MQTTTopicError)
    /// The broker rejected a subscription (SUBACK failure code), e.g. for lack of authorization.
    case subscriptionRejected(filter: String)
    /// The operation failed for another reason given in the text.
    case failed(String)

    /// A message that says what is wrong and what to do.
    public var description: String {
        switch self {
        case .notConnected:
            "Not connected to the broker; retry (or defer the publication) once the connection is back."
        case .connectionRefused(let reason):
            "The broker refused the connection: \(reason). Check broker address, credentials and TLS settings."
        case .brokerUnreachable(let reason):
            "The broker could not be reached: \(reason). Check that it runs at the configured address, or retry later."
        case .invalidTopic(let topic, let error):
            "Invalid MQTT topic '\(excerpt(topic))': \(error)"
        case .subscriptionRejected(let filter):
            "The broker rejected the subscription to '\(excerpt(filter))'; check the broker's access control."
        case .failed(let reason):
            "Transport failure: \(reason)"
        }
    }
}

/// The publish/subscribe transport under a Coaty communication manager.
///
/// CoatyCore talks to MQTT only through this protocol. CoatyKit binds it to `CoatyMQTT.MQTTClient`;
/// CoatyTesting provides an in-process broker. A conforming type must meet these requirements:
///
/// - **Delivery**: the transport pushes every message received on any subscription to the
///   handler given to ``deliverMessages(to:)``, in the order the broker delivered them,
///   continuous across reconnects (including those that update the will), one batch at a time
///   (MQTTTransport on its network thread; InProcessTransport on the publishing task), never from
///   inside ``setReceivingPaused(_:)``.
///   Messages published by this transport are delivered back when they match one of its
///   subscriptions (no echo suppression). ``setReceivingPaused(_:)`` holds the delivery (the
///   manager's back-pressure): the transport then reads nothing more, and what it already read
///   may still come in the batch under way. It never drops a message silently; if it bounds a
///   buffer it counts (and logs) what it drops.
/// - **Connection**: ``connect(will:)`` returns once the broker has accepted the connection and
///   every remembered subscription is acknowledged. While the broker is unreachable the transport
///   keeps trying (state ``TransportConnectionState/connecting``) until its connect timeout, if
///   it has one, elapses (``TransportError/brokerUnreachable(reason:)``) or the calling task is
///   cancelled (`CancellationError`); either way it goes back to
///   ``TransportConnectionState/disconnected``. After the first connection the transport
///   reconnects by itself after every loss (``TransportConnectionState/reconnecting``) until
///   ``disconnect()``.
/// - **Subscriptions** are a set of topic filters remembered by the transport: subscribing a
///   filter that is already subscribed keeps one subscription; they survive reconnects and
///   ``disconnect()`` — after every (re)connection the transport re-establishes all of them
///   *before* it reports ``TransportConnectionState/connected``, so a caller may publish its join
///   events as soon as it sees `connected`. Subscribing needs a connection: before the first
///   ``connect(will:)`` and after ``disconnect()`` it throws ``TransportError/notConnected`` (the
///   caller keeps its own list of filters and subscribes them after connecting); while
///   connecting or reconnecting it waits until the connection is back. Reference counting of
///   observers is the caller's job.
/// - **Will**: the last will given to ``connect(will:)`` (or the latest ``updateWill(_:)``) is
///   published by the broker when the connection is lost without a clean ``disconnect()``, and
///   not after one.
/// - **Connection states**: ``connectionStates()`` starts with the current state and then yields
///   every change in order; any number of observers may call it.
/// - Every method is safe to call from any task; calls from one task take effect in order.
public protocol CoatyTransport: Sendable {
    /// A sequence of connection states.
    associatedtype ConnectionStates: AsyncSequence, Sendable
    where ConnectionStates.Element == TransportConnectionState, ConnectionStates.Failure == Never

    /// Subscribes without waiting, when the transport can: queues the subscription request ahead
    /// of any later publication and returns `true`, or returns `false` and does nothing (not
    /// connected, or not supported) — then the caller uses ``subscribe(_:qos:)``.
    ///
    /// The filter is remembered for reconnects like any subscription. `acknowledged` is called
    /// at most once (only after `true`), from a transport thread, with `nil` on success or the
    /// error; it must return promptly. Requests use it for their response topics: nothing
    /// awaits the acknowledgement, so no task wakes for it. The default implementation returns
    /// `false`.
    ///
    /// - Parameters:
    ///   - filter: an MQTT topic filter.
    ///   - qos: the maximum quality of service to receive with.
    ///   - acknowledged: the outcome.
    /// - Returns: whether the subscription request is queued.
    func subscribeNow(
        _ filter: String,
        qos: TransportQoS,
        acknowledged: @escaping @Sendable ((any Error)?) -> Void
    ) -> Bool

    /// Removes a subscription made with ``subscribeNow(_:qos:acknowledged:)`` without waiting:
    /// forgets the filter and, when connected, queues the unsubscription request.
    ///
    /// `acknowledged` is called once, possibly before this returns, with `nil` or the error.
    /// The default implementation unsubscribes with ``unsubscribe(_:)`` in a new task.
    ///
    /// - Parameters:
    ///   - filter: the filter.
    ///   - acknowledged: the outcome; must return promptly.
    func unsubscribeNow(_ filter: String, acknowledged: @escaping @Sendable ((any Error)?) -> Void)

    /// Sets the handler the transport calls with every received message, in delivery order, on
    /// a thread of its own (or the task that published them, in process): the one way messages
    /// reach the manager.
    ///
    /// The handler gets the messages in batches (what arrived together; never an empty batch),
    /// one batch at a time; it must return promptly and never block. Call it before
    /// ``connect(will:)``; a later call replaces the handler.
    ///
    /// - Parameter handler: receives each batch of messages.
    func deliverMessages(to handler: @escaping @Sendable ([TransportMessage]) -> Void)

    /// Holds (`true`) or resumes (`false`) the delivery of received messages: the manager's
    /// back-pressure when an observer is full. A network transport stops reading its socket (so
    /// TCP flow control holds the rest in the kernel and the broker) while keeping its session
    /// alive. Messages read before the call are still delivered. The manager calls it under a
    /// lock of its own: it must not call the delivery handler itself.
    func setReceivingPaused(_ paused: Bool)

    /// Durable delivery (opt-in, e.g. a durable recorder): the number of the last received
    /// message whose acknowledgement waits until the application handled it, or `nil` when none
    /// waits (or the transport does not hold acknowledgements). Messages are numbered from 1 in
    /// the order the transport received them; while one waits, the transport reads nothing more.
    var acknowledgementDue: UInt64? { get }

    /// How many received messages the transport has handed over completely (the delivery
    /// handler returned for them), numbered as ``acknowledgementDue``.
    var deliveredCount: UInt64 { get }

    /// Acknowledges every received message through number `through` (see
    /// ``acknowledgementDue``); the transport then reads on.
    func acknowledge(through: UInt64)

    /// Sets the function the transport calls, on its delivery thread, after each batch of
    /// messages it delivered while an acknowledgement is due (``acknowledgementDue``): the
    /// application learns that it holds reading without polling. Replaces an earlier one.
    /// - Parameter handler: called after such a batch; must return promptly and never block.
    func onAcknowledgementDue(_ handler: @escaping @Sendable () -> Void)

    /// Stops receiving until the next ``connect(will:)``: the transport reads nothing more from the
    /// network (messages sent meanwhile stay with the broker, and with a persistent session for
    /// the next connection); returns once a read under way ended, so ``acknowledgementDue`` is
    /// final then. A durable consumer that stops closes the intake, handles and acknowledges what
    /// it received, then disconnects.
    func closeIntake() async

    /// A task executor that runs tasks on the thread calling the ``deliverMessages(to:)``
    /// handler, right after each batch, or `nil` (the default) when the transport has none.
    ///
    /// A task preferring it that waits for a received event resumes without a thread hand-off.
    var deliveryExecutor: (any TaskExecutor)? { get }

    /// Whether the transport sends and delivers `TransportMessage.userProperties` (MQTT 5), `false` by default. The
    /// manager puts a request's trace context there only when it does (see <doc:TracingRequests>).
    var carriesUserProperties: Bool { get }

    /// The current connection state (a snapshot).
    var connectionState: TransportConnectionState { get }

    /// A new sequence that yields the current connection state, then every change.
    ///
    /// - Returns: a sequence that ends when the consuming task is cancelled.
    func connectionStates() -> ConnectionStates

    /// Connects to the broker and keeps the connection up, reconnecting after losses, until
    /// ``disconnect()``.
    ///
    /// Returns when the broker has accepted the connection and every remembered subscription is
    /// acknowledged. Calling it while already connected is harmless (a transport may replace the
    /// will for the next connection, or throw ``TransportError/failed(_:)``).
    ///
    /// - Parameter will: the last will (for Coaty the Deadvertise of the identity and its
    ///   IoNodes), or `nil` for none.
    /// - Throws: ``TransportError/connectionRefused(reason:)`` on a permanent failure,
    ///   ``TransportError/brokerUnreachable(reason:)`` when a connect timeout elapses,
    ///   `CancellationError` when the calling task is cancelled first.
    func connect(will: TransportMessage?) async throws

    /// Replaces the last will.
    ///
    /// While connected the new will must become effective on the broker. MQTT 3.1.1 cannot
    /// change the will of a live connection, so a binding may reconnect without publishing the
    /// old will (a clean disconnect followed by a connect); callers see
    /// ``TransportConnectionState/reconnecting`` then ``TransportConnectionState/connected``
    /// and treat it like any reconnection. While not connected the will is stored for the next
    /// connection.
    ///
    /// - Parameter will: the new last will, or `nil` for none.
    /// - Throws: a ``TransportError`` if the reconnection fails permanently.
    func updateWill(_ will: TransportMessage?) async throws

    /// Subscribes to a topic filter and returns when the broker has acknowledged it; while
    /// connecting or reconnecting it first waits for the connection.
    ///
    /// The filter is remembered and re-established after every reconnect. Retained messages
    /// matching it are delivered (to ``deliverMessages(to:)``'s handler) with `retain == true`.
    ///
    /// - Parameters:
    ///   - filter: an MQTT topic filter.
    ///   - qos: the maximum quality of service to receive with.
    /// - Throws: ``TransportError/notConnected`` before ``connect(will:)`` or after
    ///   ``disconnect()``, ``TransportError/invalidTopic(_:_:)``,
    ///   ``TransportError/subscriptionRejected(filter:)``, or `CancellationError` when the task is
    ///   cancelled while waiting.
    func subscribe(_ filter: String, qos: TransportQoS) async throws

    /// Removes a subscription (also from the remembered set) and returns when the broker has
    /// acknowledged it. After it returns no further message is delivered for that filter (other
    /// subscriptions may still match).
    ///
    /// - Parameter filter: a filter previously given to ``subscribe(_:qos:)``; unknown filters
    ///   are ignored.
    /// - Throws: ``TransportError/invalidTopic(_:_:)`` for an invalid filter.
    func unsubscribe(_ filter: String) async throws

    /// Publishes a message.
    ///
    /// With QoS 0 it returns when the message is handed to the connection, in order with
    /// earlier publications of the same task.
    ///
    /// - Parameter message: the message; its topic must be a valid MQTT topic name.
    /// - Throws: ``TransportError/notConnected`` when not connected (the caller defers it), or
    ///   ``TransportError/invalidTopic(_:_:)``.
    func publish(_ message: TransportMessage) async throws

    /// Disconnects cleanly (the broker does not publish the will) and stops reconnecting.
    ///
    /// Messages already received are still delivered. The transport can be connected again
    /// with ``connect(will:)``; its subscriptions are kept.
    func disconnect() async
}

extension CoatyTransport {
    /// Does not subscribe without waiting.
    ///
    /// - Parameters:
    ///   - filter: ignored.
    ///   - qos: ignored.
    ///   - acknowledged: never called.
    /// - Returns: `false`.
    public func subscribeNow(
        _ filter: String,
        qos: TransportQoS,
        acknowledged: @escaping @Sendable ((any Error)?) -> Void
    ) -> Bool {
        false
    }

    /// Unsubscribes with ``CoatyTransport/unsubscribe(_:)`` in a new task.
    ///
    /// - Parameters:
    ///   - filter: the filter.
    ///   - acknowledged: the outcome.
    public func unsubscribeNow(_ filter: String, acknowledged: @escaping @Sendable ((any Error)?) -> Void) {
        // Owned by the caller through `acknowledged`, called when it ends (the manager waits for it).
        Task {
            do {
                try await unsubscribe(filter)
                acknowledged(nil)
            } catch {
                acknowledged(error)
            }
        }
    }

    /// None: `nil`.
    public var deliveryExecutor: (any TaskExecutor)? { nil }

    /// `false`: user properties are not carried.
    public var carriesUserProperties: Bool { false }

    /// None: acknowledgements are not held.
    public var acknowledgementDue: UInt64? { nil }

    /// 0: messages are not counted.
    public var deliveredCount: UInt64 { 0 }

    /// Does nothing: acknowledgements are not held.
    ///
    /// - Parameter through: ignored.
    public func acknowledge(through: UInt64) {}

    /// Does nothing: acknowledgements are not held, so none is ever due.
    ///
    /// - Parameter handler: ignored.
    public func onAcknowledgementDue(_ handler: @escaping @Sendable () -> Void) {}

    /// Does nothing: nothing is held for the broker to keep.
    public func closeIntake() async {}

    /// Subscribes to a topic filter with QoS 0, the Coaty default.
    ///
    /// - Parameter filter: an MQTT topic filter.
    /// - Throws: see ``CoatyTransport/subscribe(_:qos:)``.
    public func subscribe(_ filter: String) async throws {
        try await subscribe(filter, qos: .atMostOnce)
    }

    /// Publishes a payload on a topic with QoS 0 and without retain, the Coaty default.
    ///
    /// - Parameters:
    ///   - topic: the MQTT topic name.
    ///   - payload: the payload bytes.
    /// - Throws: see ``CoatyTransport/publish(_:)``.
    public func publish(topic: String, payload: [UInt8]) async throws {
        try await publish(TransportMessage(topic: topic, payload: payload))
    }
}
