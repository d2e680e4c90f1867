// The session logic of the MQTT client as a value: what a connect, a CONNACK, a lost connection or an
// acknowledgement does to the session, with the effects returned as actions. It holds no continuation, no
// handle, no logger and no clock, so every path is unit-tested without a broker (MQTTSessionStateMachineTests);
// ClientCore drives it under its state lock and carries the actions out (ClientCore+Dispatch.swift).
// The shape follows postgres-nio's ConnectionStateMachine: inputs are mutating methods, outputs are actions.

/// The session logic of one ``MQTTClient``: connection state, the first attempt of `connect()`, subscriptions
/// kept for reconnects, and the operations waiting for an acknowledgement, each named by a token.
///
/// The network side is passed in as a `send` function where a packet must be queued while the state is
/// consistent (SUBSCRIBE, UNSUBSCRIBE); everything else the machine decides is returned in ``Actions``.
struct MQTTSessionStateMachine: Sendable {
    // MARK: Inputs and outputs

    /// A SUBSCRIBE to queue: filters of one QoS (at most ``chunkSize`` per packet).
    struct SubscribeChunk: Sendable, Hashable {
        /// The QoS asked for every filter of the chunk.
        var qos: MQTTQoS
        /// The filters, in the order given.
        var filters: [String]
    }

    /// What queueing a packet gave.
    enum SendOutcome: Sendable, Hashable {
        /// Queued; its acknowledgement will carry this message id.
        case sent(mid: Int32)
        /// The connection is down (libmosquitto's `MOSQ_ERR_NO_CONN`): the reconnect will send it.
        case noConnection
        /// Another failure, with its text.
        case failed(String)
    }

    /// Something worth a log line, with what it needs; the client writes it with its broker and client id.
    enum Log: Sendable, Hashable {
        /// A first attempt failed and the next broker is tried at once.
        case tryingNextBroker(reason: String)
        /// A reconnect attempt failed; the shim retries with backoff.
        case reconnectFailed(reason: String, attempt: Int)
        /// Connected, or reconnected, with every kept subscription acknowledged.
        case connected(reconnect: Bool, subscriptions: Int)
        /// The connection was lost; `briefSessions` counts the sessions in a row the broker ended soon after
        /// connecting (the signature of a second client with the same client id).
        case connectionLost(reason: String, briefSessions: Int)
        /// A re-subscription could not be queued after a reconnect.
        case resubscribeFailed(filter: String, reason: String)
        /// The broker refused a re-subscription after a reconnect.
        case resubscriptionRefused
    }

    /// The effects of one input, carried out by the client after the input returns (in this order: logs and the
    /// connection state at once, under the lock; resolutions once the lock is released; then the stop).
    struct Actions: Sendable {
        /// Operations that are decided: the token and its outcome.
        var resolved: [(token: UInt64, result: Result<Void, MQTTError>)] = []
        /// Every operation still waiting (and every callback) fails with this error: the session ended.
        var failEverything: MQTTError?
        /// The new connection states, in order (each differs from the one before).
        var states: [MQTTConnectionState] = []
        /// The log lines, in order.
        var logs: [Log] = []
        /// The network loop must stop (the first attempt of `connect()` failed for good).
        var stopNetworkLoop = false
    }

    /// What `awaitFirstAttempt` found.
    enum FirstAttempt: Sendable, Hashable {
        /// Already decided: connected, `connect()` returns.
        case succeeded
        /// Already decided: `connect()` throws this.
        case failed(MQTTError)
        /// No session runs (it ended before `connect()` waited).
        case notRunning
        /// The token is resolved when the first attempt is decided.
        case waiting
    }

    /// What `subscribe` did.
    enum SubscribeOutcome: Sendable, Hashable {
        /// No session runs.
        case notRunning
        /// Queued (the SUBACKs resolve the token) or kept for the next CONNACK (its re-subscription does).
        case waiting
        /// A SUBSCRIBE could not be queued: nothing of this call is kept.
        case failed(firstFilter: String, reason: String)
    }

    /// What `unsubscribe` did.
    enum UnsubscribeOutcome: Sendable, Hashable {
        /// The filter is forgotten and nothing is to be sent (no connection): done.
        case done
        /// The UNSUBSCRIBE is queued: its UNSUBACK, or the end of the session, resolves the token.
        case waiting
        /// The UNSUBSCRIBE could not be queued (the filter is forgotten all the same).
        case failed(reason: String)
    }

    /// At most this many filters go in one SUBSCRIBE packet.
    static let chunkSize = 200

    // MARK: State

    /// The state ``MQTTClient/connectionState`` reports.
    private(set) var connection: MQTTConnectionState = .disconnected
    /// A network loop runs (between `connect()` and the end of its session).
    private(set) var running = false
    /// A CONNACK was received and the connection is not known to be lost.
    private(set) var transportUp = false
    /// The filters kept for reconnects, with their QoS.
    private(set) var subscriptions: [String: MQTTQoS] = [:]
    /// Failed reconnect attempts since the last connection.
    private(set) var reconnectAttempts = 0

    /// The first attempt of `connect()` is not decided yet.
    private var firstAttemptPending = false
    private var firstAttemptToken: UInt64?
    private var firstAttemptResult: Result<Void, MQTTError>?
    private var nextToken: UInt64 = 0
    private var publishMids: [Int32: UInt64] = [:]
    private var drainTokens: Set<UInt64> = []
    private var subscribeMids: [Int32: (token: UInt64, filters: [String])] = [:]
    /// The SUBACKs each subscribing token still waits for.
    private var ackGroups: [UInt64: Int] = [:]
    private var unsubscribeMids: [Int32: UInt64] = [:]
    /// Tokens resolved by the next complete (re-)subscription after a CONNACK.
    private var awaitingConnected: Set<UInt64> = []
    private var resubscribeMids: Set<Int32> = []

    /// A new token naming an operation.
    mutating func makeToken() -> UInt64 {
        nextToken += 1
        return nextToken
    }

    // MARK: Connect and the end of a session

    /// `connect()` starts a session. Returns `false` (and changes nothing) when one already runs.
    mutating func startSession(_ actions: inout Actions) -> Bool {
        guard !running else { return false }
        running = true
        firstAttemptPending = true
        firstAttemptToken = nil
        firstAttemptResult = nil
        transportUp = false
        reconnectAttempts = 0
        setConnection(.connecting, &actions)
        return true
    }

    /// `connect()` waits for its first attempt under `token`.
    mutating func awaitFirstAttempt(token: UInt64) -> FirstAttempt {
        if let result = firstAttemptResult {
            firstAttemptResult = nil
            switch result {
            case .success: return .succeeded
            case .failure(let error): return .failed(error)
            }
        }
        guard running else { return .notRunning }
        firstAttemptToken = token
        return .waiting
    }

    /// The session ended (stopped, abandoned, or its network thread could not start): every waiting operation
    /// fails with `error`, and the state is `.disconnected`. Subscriptions are kept for the next `connect()`.
    mutating func sessionEnded(_ error: MQTTError, _ actions: inout Actions) {
        guard running else { return }
        running = false
        transportUp = false
        if firstAttemptPending, firstAttemptToken == nil, firstAttemptResult == nil {
            firstAttemptResult = .failure(error)
        }
        firstAttemptPending = false
        firstAttemptToken = nil
        actions.failEverything = error
        publishMids = [:]
        drainTokens = []
        subscribeMids = [:]
        unsubscribeMids = [:]
        ackGroups = [:]
        awaitingConnected = []
        resubscribeMids = []
        setConnection(.disconnected, &actions)
    }

    // MARK: Connection events

    /// A CONNACK accepted the connection: every kept subscription is queued again (the state becomes
    /// `.connected` when all are acknowledged, at once when there are none).
    mutating func connected(send: (SubscribeChunk) -> SendOutcome, _ actions: inout Actions) {
        guard running else { return }
        transportUp = true
        resubscribeMids = []
        for chunk in Self.chunks(subscriptions.map { ($0.key, $0.value) }) {
            switch send(chunk) {
            case .sent(let mid):
                resubscribeMids.insert(mid)
            case .noConnection:
                actions.logs.append(.resubscribeFailed(filter: chunk.filters[0], reason: "no connection"))
            case .failed(let reason):
                actions.logs.append(.resubscribeFailed(filter: chunk.filters[0], reason: reason))
            }
        }
        if resubscribeMids.isEmpty { becomeConnected(&actions) }
    }

    /// An attempt to connect to broker number `broker` (of `brokerCount`) failed with `error`; `firstAttemptError`
    /// is what `connect()` throws when it was the last broker of its first attempt.
    mutating func connectAttemptFailed(
        _ error: MQTTError,
        firstAttemptError: MQTTError,
        broker: Int,
        brokerCount: Int,
        _ actions: inout Actions
    ) {
        guard running else { return }
        if firstAttemptPending, broker + 1 < brokerCount {
            // The shim tries the next broker at once; connect() fails only when every one failed.
            actions.logs.append(.tryingNextBroker(reason: error.message))
            return
        }
        if failFirstAttempt(firstAttemptError, &actions) {
            actions.stopNetworkLoop = true
        } else {
            reconnectAttempts += 1
            setConnection(.reconnecting, &actions)
            actions.logs.append(.reconnectFailed(reason: error.message, attempt: reconnectAttempts))
        }
    }

    /// The connection was lost (`reason` as libmosquitto gave it; `error` what a waiting `connect()` throws).
    /// Subscriptions waiting for a SUBACK wait for the re-subscription instead; UNSUBSCRIBEs are done (the
    /// filter is forgotten, and a new session does not have it).
    mutating func connectionLost(
        reason: String,
        error: MQTTError,
        briefSessions: Int,
        _ actions: inout Actions
    ) {
        guard running else { return }
        transportUp = false
        for (_, pending) in subscribeMids {
            ackGroups[pending.token] = nil
            awaitingConnected.insert(pending.token)
        }
        subscribeMids = [:]
        for token in unsubscribeMids.values { actions.resolved.append((token, .success(()))) }
        unsubscribeMids = [:]
        resubscribeMids = []
        // Lost while re-subscribing during connect(): like a failed first attempt.
        _ = failFirstAttempt(error, &actions)
        setConnection(.reconnecting, &actions)
        actions.logs.append(.connectionLost(reason: reason, briefSessions: briefSessions))
    }

    // MARK: Acknowledgements

    /// The PUBACK/PUBCOMP of message `mid` arrived; `refusal` is set when its MQTT 5 reason code refused it.
    mutating func published(mid: Int32, refusal: MQTTError?, _ actions: inout Actions) {
        guard running, let token = publishMids.removeValue(forKey: mid) else { return }
        actions.resolved.append((token, refusal.map { .failure($0) } ?? .success(())))
    }

    /// The SUBACK of message `mid` arrived; `refusedIndex` is the first filter the broker refused, if any
    /// (`refusal` makes the error from the refused filter).
    mutating func subscribed(
        mid: Int32,
        refusedIndex: Int?,
        refusal: (String) -> MQTTError,
        _ actions: inout Actions
    ) {
        guard running else { return }
        if resubscribeMids.remove(mid) != nil {
            if refusedIndex != nil { actions.logs.append(.resubscriptionRefused) }
            if resubscribeMids.isEmpty, transportUp { becomeConnected(&actions) }
            return
        }
        guard let pending = subscribeMids.removeValue(forKey: mid) else { return }
        if let refusedIndex {
            let filter = refusedIndex < pending.filters.count ? pending.filters[refusedIndex] : pending.filters[0]
            subscriptions[filter] = nil
            ackGroups[pending.token] = nil
            actions.resolved.append((pending.token, .failure(refusal(filter))))
            return
        }
        guard let remaining = ackGroups[pending.token] else { return }
        if remaining <= 1 {
            ackGroups[pending.token] = nil
            actions.resolved.append((pending.token, .success(())))
        } else {
            ackGroups[pending.token] = remaining - 1
        }
    }

    /// The UNSUBACK of message `mid` arrived.
    mutating func unsubscribed(mid: Int32, _ actions: inout Actions) {
        guard running, let token = unsubscribeMids.removeValue(forKey: mid) else { return }
        actions.resolved.append((token, .success(())))
    }

    /// The QoS 0 queue drained: every publisher waiting for it is resumed (each checks the queue again).
    mutating func drained(_ actions: inout Actions) {
        for token in drainTokens { actions.resolved.append((token, .success(()))) }
        drainTokens = []
    }

    /// An acknowledgement may have been lost (the network thread had no memory for an event): every publication
    /// still waiting fails with `error` (the reconnect that follows re-synchronizes the rest).
    mutating func acknowledgementsMayBeLost(_ error: MQTTError, _ actions: inout Actions) {
        for token in publishMids.values { actions.resolved.append((token, .failure(error))) }
        publishMids = [:]
    }

    // MARK: Operations

    /// `subscribe` asks for `filters` under `token`: they are kept for reconnects and, while the connection is up,
    /// queued with `send`.
    mutating func subscribe(
        token: UInt64,
        filters: [(String, MQTTQoS)],
        send: (SubscribeChunk) -> SendOutcome
    ) -> SubscribeOutcome {
        guard running else { return .notRunning }
        var added: [String] = []
        for (filter, qos) in filters where subscriptions.updateValue(qos, forKey: filter) == nil {
            added.append(filter)
        }
        guard transportUp else {
            // The re-subscription after the next CONNACK includes these filters.
            awaitingConnected.insert(token)
            return .waiting
        }
        var mids: [Int32] = []
        for chunk in Self.chunks(filters) {
            switch send(chunk) {
            case .sent(let mid):
                mids.append(mid)
                subscribeMids[mid] = (token, chunk.filters)
            case .noConnection:
                for mid in mids { subscribeMids[mid] = nil }
                awaitingConnected.insert(token)
                return .waiting
            case .failed(let reason):
                for mid in mids { subscribeMids[mid] = nil }
                for filter in added { subscriptions[filter] = nil }
                return .failed(firstFilter: chunk.filters[0], reason: reason)
            }
        }
        ackGroups[token] = mids.count
        return .waiting
    }

    /// `subscribeNow` queues one filter under `token` without waiting; returns whether it was queued (only on a
    /// live connection; nothing is kept otherwise).
    mutating func subscribeNow(
        token: UInt64,
        filter: String,
        qos: MQTTQoS,
        send: (SubscribeChunk) -> SendOutcome
    ) -> Bool {
        guard running, transportUp, case .sent(let mid) = send(SubscribeChunk(qos: qos, filters: [filter])) else {
            return false
        }
        subscriptions[filter] = qos
        subscribeMids[mid] = (token, [filter])
        ackGroups[token] = 1
        return true
    }

    /// `unsubscribe` forgets `filter` for reconnects and, while the connection is up, queues its UNSUBSCRIBE with
    /// `send` under `token`.
    mutating func unsubscribe(token: UInt64, filter: String, send: () -> SendOutcome) -> UnsubscribeOutcome {
        subscriptions[filter] = nil
        guard running, transportUp else { return .done }
        switch send() {
        case .sent(let mid):
            unsubscribeMids[mid] = token
            return .waiting
        case .noConnection:
            return .done
        case .failed(let reason):
            return .failed(reason: reason)
        }
    }

    /// A QoS 1/2 publication was queued as message `mid`: its acknowledgement resolves `token`.
    mutating func publicationQueued(mid: Int32, token: UInt64) {
        publishMids[mid] = token
    }

    /// A publisher waits under `token` for the QoS 0 queue to drain (resolved by `drained`).
    mutating func awaitDrain(token: UInt64) {
        drainTokens.insert(token)
    }

    // MARK: Helpers

    /// `filters` grouped by QoS (lowest first, each filter once, first QoS given wins) in chunks of ``chunkSize``.
    static func chunks(_ filters: [(String, MQTTQoS)]) -> [SubscribeChunk] {
        var groups: [MQTTQoS: [String]] = [:]
        var seen = Set<String>()
        for (filter, qos) in filters where seen.insert(filter).inserted { groups[qos, default: []].append(filter) }
        return MQTTQoS.allCases.flatMap { qos -> [SubscribeChunk] in
            guard let group = groups[qos] else { return [] }
            return stride(from: 0, to: group.count, by: chunkSize).map { start in
                SubscribeChunk(qos: qos, filters: Array(group[start..<min(start + chunkSize, group.count)]))
            }
        }
    }

    private mutating func setConnection(_ new: MQTTConnectionState, _ actions: inout Actions) {
        guard new != connection else { return }
        connection = new
        actions.states.append(new)
    }

    /// Fails the waiting `connect()` when its first attempt is not decided yet; returns whether it did.
    private mutating func failFirstAttempt(_ error: MQTTError, _ actions: inout Actions) -> Bool {
        guard firstAttemptPending else { return false }
        firstAttemptPending = false
        if let token = firstAttemptToken {
            firstAttemptToken = nil
            actions.resolved.append((token, .failure(error)))
        } else {
            firstAttemptResult = .failure(error)
        }
        return true
    }

    private mutating func becomeConnected(_ actions: inout Actions) {
        let reconnect = !firstAttemptPending
        setConnection(.connected, &actions)
        if firstAttemptPending {
            firstAttemptPending = false
            if let token = firstAttemptToken {
                firstAttemptToken = nil
                actions.resolved.append((token, .success(())))
            } else {
                firstAttemptResult = .success(())
            }
        }
        for token in awaitingConnected { actions.resolved.append((token, .success(()))) }
        awaitingConnected = []
        reconnectAttempts = 0
        actions.logs.append(.connected(reconnect: reconnect, subscriptions: subscriptions.count))
    }
}
