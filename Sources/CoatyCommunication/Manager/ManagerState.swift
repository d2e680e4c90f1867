import CoatyFilter
import CoatyModel
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

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
    /// Until the next stop: observations that end do not unsubscribe at the broker (see
    /// ``CommunicationManager/keepSubscriptionsUntilStop()``).
    var keepsSubscriptions = false
    var settleWaiters: [CheckedContinuation<Void, Never>] = []

    var deferred = MessageQueue()
    /// The IoNodes this agent owns: advertised on join, answered to Discovers, in the last will.
    var ioNodes: [IoNode] = []
    /// Extra copies still expected of messages received on overlapping subscriptions.
    var expectedCopies: [MessageKey: Int] = [:]
    var stateObservers: [Int: AsyncStream<CommunicationState>.Continuation] = [:]
    /// The background work of the current start (see ``BackgroundWork``); `nil` while stopped.
    var work: BackgroundWork?

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
