public import CoatyCore
import CoatySync
import Synchronization

/// A `CoatyTransport` attached to an ``InProcessBroker``: an MQTT client without a
/// network.
///
/// Besides the transport requirements it offers fault injection:
/// ``simulateConnectionLoss(reconnect:)`` (an unclean loss: the will is published, the transport
/// reconnects), ``restoreConnection()`` and ``kill()`` (the process dies: the will is published and
/// the transport stays disconnected).
public final class InProcessTransport: CoatyTransport {
    /// The broker this transport is attached to.
    public let broker: InProcessBroker
    /// The MQTT client id.
    public let clientId: String
    let index: Int

    init(broker: InProcessBroker, index: Int, clientId: String) {
        self.broker = broker
        self.index = index
        self.clientId = clientId
    }

    /// Whether user properties travel: the broker's ``InProcessBroker/Configuration/carriesUserProperties``.
    public var carriesUserProperties: Bool { broker.configuration.carriesUserProperties }

    // MARK: Messages

    /// The single-consumer sequence of messages received on this transport's subscriptions (for
    /// tests that use the transport as a plain MQTT client, without a delivery handler).
    public struct Messages: AsyncSequence, Sendable {
        /// A received message.
        public typealias Element = TransportMessage
        /// Receiving never fails.
        public typealias Failure = Never

        let transport: InProcessTransport

        /// Creates an iterator over the transport's mailbox.
        public func makeAsyncIterator() -> Iterator { Iterator(transport: transport) }

        /// Pops messages from the transport's mailbox, waiting when it is empty.
        public struct Iterator: AsyncIteratorProtocol, Sendable {
            let transport: InProcessTransport

            /// The next received message; `nil` once the consuming task is cancelled, once the
            /// mailbox is empty after ``InProcessTransport/disconnect()`` or
            /// ``InProcessTransport/kill()``, or when another consumer is already waiting (the
            /// sequence has a single consumer).
            public mutating func next() async -> TransportMessage? {
                await transport.nextMessage()
            }
        }
    }

    /// Every message received on any subscription, in delivery order, while no delivery handler
    /// is set (``deliverMessages(to:)``); consume it from one task, as an MQTT client's messages.
    ///
    /// Messages wait in the mailbox until consumed, across reconnects; breaking out of a
    /// `for await` loop loses none of them. After ``disconnect()`` or ``kill()`` the iteration ends
    /// once the mailbox is empty, until the next ``connect(will:)``.
    public var messages: Messages { Messages(transport: self) }

    /// Pushes every received message to `handler`, in delivery order, in batches of up to 64,
    /// one batch at a time: the one delivery contract of `CoatyTransport`. The task that put a
    /// message into the mailbox (a publisher's, or the one that resumed reading) calls it,
    /// outside the broker's lock. Once set, ``messages`` sees nothing more.
    ///
    /// - Parameter handler: receives each batch; must return promptly and never block.
    public func deliverMessages(to handler: @escaping @Sendable ([TransportMessage]) -> Void) {
        let index = self.index
        broker.withState { $0.clients[index].deliveryHandler = handler }
    }

    /// Holds (`true`) or resumes (`false`) the delivery to the handler: messages wait in the
    /// mailbox meanwhile, as a paused MQTT client leaves them in the broker.
    ///
    /// - Parameter paused: whether to hold the delivery.
    public func setReceivingPaused(_ paused: Bool) {
        let index = self.index
        broker.state.withLock { $0.clients[index].receivingPaused = paused }
        // What waited is delivered by a new task, not by this call: the caller (the manager's
        // back-pressure gate) holds a lock that delivery takes.
        if !paused { Task { [broker] in broker.deliverDue() } }
    }

    /// Whether the delivery to the handler is held (``setReceivingPaused(_:)``).
    public var isReceivingPaused: Bool {
        broker.state.withLock { $0.clients[index].receivingPaused }
    }

    /// The number of received messages not yet consumed from ``messages``.
    public var pendingMessageCount: Int {
        broker.state.withLock { state in
            state.clients[index].mailbox.count - state.clients[index].mailboxHead
        }
    }

    func nextMessage() async -> TransportMessage? {
        while true {
            if Task.isCancelled { return nil }
            let index = self.index
            let broker = self.broker
            let popped = broker.state.withLock { state -> TransportMessage?? in
                if let message = state.clients[index].popMessage() { return .some(message) }
                return state.clients[index].messagesFinished ? .some(nil) : nil
            }
            if let popped { return popped }
            let woken = await withTaskCancellationHandler {
                await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
                    broker.state.withLock { state in
                        if state.clients[index].mailboxHead < state.clients[index].mailbox.count {
                            continuation.resume(returning: true)
                        } else if Task.isCancelled || state.clients[index].messagesFinished
                            || state.clients[index].messageWaiter != nil
                        {
                            continuation.resume(returning: false)
                        } else {
                            state.clients[index].messageWaiter = continuation
                        }
                    }
                }
            } onCancel: {
                broker.state.withLock { state in
                    if let waiter = state.clients[index].messageWaiter {
                        state.clients[index].messageWaiter = nil
                        waiter.resume(returning: false)
                    }
                }
            }
            if !woken { return nil }
        }
    }

    // MARK: Connection state

    /// A sequence of connection states: the current one, then every change.
    public typealias ConnectionStates = UpdateSequence<TransportConnectionState>

    /// The current connection state.
    public var connectionState: TransportConnectionState {
        broker.state.withLock { $0.clients[index].lifecycle }
    }

    /// A new sequence that yields the current connection state, then every change, in order.
    public func connectionStates() -> ConnectionStates {
        let (stream, continuation) = AsyncStream.makeStream(of: TransportConnectionState.self)
        let index = self.index
        let broker = self.broker
        let token = broker.state.withLock { state in
            let token = state.makeToken()
            state.clients[index].stateObservers[token] = continuation
            continuation.yield(state.clients[index].lifecycle)
            return token
        }
        continuation.onTermination = { _ in
            broker.state.withLock { state in
                state.clients[index].stateObservers[token] = nil
            }
        }
        return ConnectionStates(stream)
    }

    // MARK: Connecting

    /// Connects; returns at once when the broker is online, otherwise waits (`connecting`) until
    /// ``InProcessBroker/goOnline()`` or ``restoreConnection()``. Remembered subscriptions are
    /// re-established before it returns. Connecting while connected only replaces the will.
    ///
    /// - Parameter will: the last will, published on an unclean loss of the connection.
    /// - Throws: `TransportError.connectionRefused` while the broker refuses
    ///   connections (``InProcessBroker/refuseConnections(reason:)``), `CancellationError` if the
    ///   task is cancelled first (the transport then goes back to `disconnected`),
    ///   `TransportError.failed` if ``disconnect()`` or ``kill()`` is called while
    ///   waiting.
    public func connect(will: TransportMessage?) async throws {
        enum Start {
            case connected
            case refused(String)
            case wait
        }
        let index = self.index
        let configuration = broker.configuration
        let start = broker.withState { state -> Start in
            state.clients[index].will = will
            state.clients[index].messagesFinished = false
            if state.clients[index].lifecycle == .connected { return .connected }
            if let reason = state.refusal {
                state.clients[index].wantsConnection = false
                state.setLifecycle(index, .disconnected)
                return .refused(reason)
            }
            state.clients[index].wantsConnection = true
            if state.clients[index].lifecycle == .disconnected {
                state.setLifecycle(index, .connecting)
            }
            state.establishIfPossible(index, configuration)
            return state.clients[index].lifecycle == .connected ? .connected : .wait
        }
        switch start {
        case .connected: return
        case .refused(let reason): throw TransportError.connectionRefused(reason: reason)
        case .wait: break
        }
        switch await waitForConnection(abandonConnectingOnCancel: true) {
        case .connected: return
        case .cancelled: throw CancellationError()
        case .stopped: throw TransportError.failed("the connection attempt of client '\(clientId)' was stopped")
        }
    }

    /// Waits until the transport is connected (or disconnected, or the task is cancelled).
    ///
    /// - Parameter abandonConnectingOnCancel: whether cancellation also stops connecting.
    private func waitForConnection(abandonConnectingOnCancel: Bool) async -> ConnectOutcome {
        let index = self.index
        let broker = self.broker
        let token = broker.state.withLock { $0.makeToken() }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<ConnectOutcome, Never>) in
                broker.state.withLock { state in
                    switch state.clients[index].lifecycle {
                    case .connected:
                        continuation.resume(returning: .connected)
                    case .disconnected:
                        continuation.resume(returning: .stopped)
                    case .connecting, .reconnecting:
                        if Task.isCancelled {
                            if abandonConnectingOnCancel { Self.abandonConnecting(&state, index) }
                            continuation.resume(returning: .cancelled)
                        } else {
                            state.clients[index].connectWaiters[token] = continuation
                        }
                    }
                }
            }
        } onCancel: {
            broker.state.withLock { state in
                if let waiter = state.clients[index].connectWaiters.removeValue(forKey: token) {
                    if abandonConnectingOnCancel { Self.abandonConnecting(&state, index) }
                    waiter.resume(returning: .cancelled)
                }
            }
        }
    }

    /// Gives up a pending first connection after cancellation.
    private static func abandonConnecting(_ state: inout BrokerState, _ index: Int) {
        guard state.clients[index].lifecycle != .connected else { return }
        state.clients[index].wantsConnection = false
        state.setLifecycle(index, .disconnected)
    }

    /// Replaces the last will. While connected and with
    /// ``InProcessBroker/Configuration/reconnectsToUpdateWill`` (the default), the transport
    /// reconnects cleanly like the MQTT 3.1.1 binding: observers see `reconnecting`, then
    /// `connected` after the subscriptions are re-established. No will is published.
    ///
    /// - Parameter will: the new last will, or `nil` for none.
    public func updateWill(_ will: TransportMessage?) async throws {
        let index = self.index
        let configuration = broker.configuration
        broker.withState { state in
            state.clients[index].will = will
            guard configuration.reconnectsToUpdateWill, state.clients[index].lifecycle == .connected else { return }
            state.dropConnection(index, publishWill: false, then: .reconnecting, configuration)
            state.establishIfPossible(index, configuration)
        }
    }

    /// Disconnects cleanly: no will, state `disconnected`, no reconnection. Subscriptions are
    /// kept for the next ``connect(will:)``; ``messages`` ends once its buffered messages are consumed.
    public func disconnect() async {
        let index = self.index
        let configuration = broker.configuration
        broker.withState { state in
            state.clients[index].wantsConnection = false
            state.clients[index].linkDown = false
            state.dropConnection(index, publishWill: false, then: .disconnected, configuration)
            state.finishMessages(index)
        }
    }

    // MARK: Subscriptions and publications

    /// Adds `filter` to the remembered subscriptions; while connected, delivers the retained
    /// messages that match it (flagged `retain`), as a broker does for every SUBSCRIBE. While
    /// connecting or reconnecting it waits for the connection, as the MQTT client does.
    ///
    /// - Parameters:
    ///   - filter: an MQTT topic filter.
    ///   - qos: the maximum QoS of deliveries.
    /// - Throws: `TransportError.notConnected` before ``connect(will:)`` or after
    ///   ``disconnect()`` (also when that happens while waiting),
    ///   `TransportError.invalidTopic` for an invalid filter, `CancellationError`
    ///   when cancelled while waiting.
    public func subscribe(_ filter: String, qos: TransportQoS) async throws {
        do {
            try MQTTTopicFilter.validate(filter)
        } catch {
            throw TransportError.invalidTopic(filter, error)
        }
        enum Step {
            case done
            case notConnected
            case wait(isNew: Bool)
        }
        let index = self.index
        let step = broker.withState { state -> Step in
            let lifecycle = state.clients[index].lifecycle
            guard lifecycle != .disconnected else { return .notConnected }
            var isNew = false
            state.clients[index].subscribeRequests.append(Subscription(filter: filter, qos: qos))
            if let existing = state.clients[index].subscriptions.firstIndex(where: { $0.filter == filter }) {
                state.clients[index].subscriptions[existing].qos = qos
            } else {
                state.clients[index].subscriptions.append(Subscription(filter: filter, qos: qos))
                isNew = true
            }
            guard lifecycle == .connected else { return .wait(isNew: isNew) }
            state.deliverRetained(to: index, filter: filter, qos: qos)
            return .done
        }
        switch step {
        case .done:
            return
        case .notConnected:
            throw TransportError.notConnected
        case .wait(let isNew):
            // The filter is in the set, so the reconnection establishes it before `connected`.
            let outcome = await waitForConnection(abandonConnectingOnCancel: false)
            if outcome == .connected { return }
            if isNew {
                broker.state.withLock { state in state.clients[index].subscriptions.removeAll { $0.filter == filter } }
            }
            if outcome == .cancelled { throw CancellationError() }
            throw TransportError.notConnected
        }
    }

    /// Removes `filter` from the subscription set; no message is delivered for it afterwards.
    ///
    /// - Parameter filter: the filter to remove; unknown filters are ignored.
    /// - Throws: `TransportError.invalidTopic` for an invalid filter.
    public func unsubscribe(_ filter: String) async throws {
        do {
            try MQTTTopicFilter.validate(filter)
        } catch {
            throw TransportError.invalidTopic(filter, error)
        }
        let index = self.index
        broker.withState { state in
            state.clients[index].subscriptions.removeAll { $0.filter == filter }
        }
    }

    /// Publishes a message; when it returns, the message is in the mailbox of every matching
    /// subscriber, this transport included.
    ///
    /// - Parameter message: the message; retained when `retain` is set (an empty payload clears
    ///   the retained message of the topic).
    /// - Throws: `TransportError.notConnected` when not connected,
    ///   `TransportError.invalidTopic` for an invalid topic name.
    public func publish(_ message: TransportMessage) async throws {
        try publishNow(message)
    }

    /// Publishes synchronously; see ``publish(_:)``.
    ///
    /// - Parameter message: the message.
    /// - Throws: see ``publish(_:)``.
    public func publishNow(_ message: TransportMessage) throws {
        do {
            try MQTTTopicFilter.validateTopicName(message.topic)
        } catch {
            throw TransportError.invalidTopic(message.topic, error)
        }
        let index = self.index
        let configuration = broker.configuration
        let connected = broker.withState { state in
            guard state.clients[index].lifecycle == .connected else { return false }
            state.route(message, from: index, isWill: false, configuration)
            return true
        }
        if !connected { throw TransportError.notConnected }
    }

    // MARK: Fault injection

    /// Simulates an unclean loss of the connection (network failure, broker kicking the client).
    ///
    /// The broker publishes the will, the transport reports `reconnecting`; with `reconnect`
    /// (the default) and the broker online it reconnects at once (re-establishing subscriptions,
    /// then `connected`), otherwise it stays `reconnecting` until ``restoreConnection()``.
    /// Does nothing unless connected.
    ///
    /// - Parameter reconnect: whether the network comes back immediately.
    public func simulateConnectionLoss(reconnect: Bool = true) {
        let index = self.index
        let configuration = broker.configuration
        broker.withState { state in
            guard state.clients[index].lifecycle == .connected else { return }
            state.clients[index].linkDown = !reconnect
            state.dropConnection(index, publishWill: true, then: .reconnecting, configuration)
            state.establishIfPossible(index, configuration)
        }
    }

    /// Brings the network back after ``simulateConnectionLoss(reconnect:)`` with
    /// `reconnect: false`: the transport reconnects if the broker is online.
    public func restoreConnection() {
        let index = self.index
        let configuration = broker.configuration
        broker.withState { state in
            state.clients[index].linkDown = false
            state.establishIfPossible(index, configuration)
        }
    }

    /// Simulates the death of the agent process: the broker publishes the will and the transport
    /// goes `disconnected` without reconnecting (a later ``connect(will:)`` starts afresh);
    /// ``messages`` ends once its buffered messages are consumed.
    public func kill() {
        let index = self.index
        let configuration = broker.configuration
        broker.withState { state in
            state.clients[index].wantsConnection = false
            state.clients[index].linkDown = false
            state.dropConnection(index, publishWill: true, then: .disconnected, configuration)
            state.finishMessages(index)
        }
    }
}
