import CoatyCore
import CoatyStore
import Metrics

/// The operator metrics of a ``CoatyRecorder``, made once from its metrics factory (every label
/// value is from a fixed set: event names and core types, never anything a peer chooses).
///
/// Names and labels (documented in the "Operating a recorder" article):
/// - `coaty_recorder_received_total{event}`: mutations handed to the write queue, by the event
///   that brought them (`Advertise`, `Channel`: one per object; `Deadvertise`: one per event).
/// - `coaty_recorder_stored_total{core_type}`: objects committed to the store.
/// - `coaty_recorder_removed_total`: objects removed (deadvertised ones and their descendants).
/// - `coaty_recorder_dropped_total{reason="write_failed"}`: mutations that could not be committed
///   even on their own (also logged).
/// - `coaty_recorder_batches_total`: transactions committed.
/// - `coaty_recorder_queue_depth`: mutations waiting for the store.
/// - `coaty_recorder_back_pressure_waits_total`: times an observer waited for room in the queue.
/// - `coaty_recorder_requests_answered_total{event}`: Query, Discover and Update requests answered.
/// - `coaty_recorder_request_failures_total{event}`: requests that could not be answered.
/// - `coaty_recorder_answer_duration_seconds{event}`: from taking a request to publishing its
///   answer (including the wait until what arrived before it is committed).
final class RecorderMetrics: Sendable {
    /// The kinds of request the recorder answers.
    enum Request: Int, CaseIterable {
        case query, discover, update

        var name: String {
            switch self {
            case .query: "Query"
            case .discover: "Discover"
            case .update: "Update"
            }
        }
    }

    private let receivedAdvertise: Counter
    private let receivedChannel: Counter
    private let receivedDeadvertise: Counter
    /// By the stored object's core type.
    private let stored: [CoreType: Counter]
    private let removed: Counter
    private let writeFailed: Counter
    private let batches: Counter
    private let queueDepth: Gauge
    private let backPressureWaits: Counter
    private let answered: [Counter]
    private let failures: [Counter]
    private let durations: [Timer]

    init(factory: any MetricsFactory) {
        func received(_ event: String) -> Counter {
            Counter(label: "coaty_recorder_received_total", dimensions: [("event", event)], factory: factory)
        }
        receivedAdvertise = received("Advertise")
        receivedChannel = received("Channel")
        receivedDeadvertise = received("Deadvertise")
        var stored: [CoreType: Counter] = [:]
        for coreType in CoreType.allCases {
            stored[coreType] = Counter(
                label: "coaty_recorder_stored_total",
                dimensions: [("core_type", coreType.rawValue)],
                factory: factory
            )
        }
        self.stored = stored
        removed = Counter(label: "coaty_recorder_removed_total", factory: factory)
        writeFailed = Counter(
            label: "coaty_recorder_dropped_total",
            dimensions: [("reason", "write_failed")],
            factory: factory
        )
        batches = Counter(label: "coaty_recorder_batches_total", factory: factory)
        queueDepth = Gauge(label: "coaty_recorder_queue_depth", factory: factory)
        queueDepth.record(0)
        backPressureWaits = Counter(label: "coaty_recorder_back_pressure_waits_total", factory: factory)
        answered = Request.allCases.map { request in
            Counter(
                label: "coaty_recorder_requests_answered_total",
                dimensions: [("event", request.name)],
                factory: factory
            )
        }
        failures = Request.allCases.map { request in
            Counter(
                label: "coaty_recorder_request_failures_total",
                dimensions: [("event", request.name)],
                factory: factory
            )
        }
        durations = Request.allCases.map { request in
            Timer(
                label: "coaty_recorder_answer_duration_seconds",
                dimensions: [("event", request.name)],
                factory: factory
            )
        }
    }

    /// Counts mutations handed to the queue together (the queue records its own depth).
    func received(_ mutations: [RecorderMutation], waited: Bool) {
        var (advertise, channel, deadvertise) = (0, 0, 0)
        for mutation in mutations {
            switch mutation {
            case .store(_, let receipt) where receipt.eventType == "Channel": channel += 1
            case .store: advertise += 1
            case .remove: deadvertise += 1
            }
        }
        if advertise > 0 { receivedAdvertise.increment(by: advertise) }
        if channel > 0 { receivedChannel.increment(by: channel) }
        if deadvertise > 0 { receivedDeadvertise.increment(by: deadvertise) }
        if waited { backPressureWaits.increment() }
    }

    /// Records the queue's depth (the queue calls it at every change, under its lock).
    func queueDepth(_ depth: Int) {
        queueDepth.record(depth)
    }

    /// Counts a committed batch: the objects it stored and removed.
    func committed(_ batch: [RecorderMutation], outcomes: [RecorderMutationOutcome]) {
        batches.increment()
        var removedCount = 0
        // One counter update per core type and batch, not per object.
        var storedCounts: [CoreType: Int] = [:]
        for (mutation, outcome) in zip(batch, outcomes) {
            switch (mutation, outcome) {
            case (.store(let object, _), .stored): storedCounts[object.coreType, default: 0] += 1
            case (_, .removed(let ids)): removedCount += ids.count
            default: break
            }
        }
        for (coreType, count) in storedCounts { stored[coreType]?.increment(by: count) }
        if removedCount > 0 { removed.increment(by: removedCount) }
    }

    /// Counts a mutation that could not be committed.
    func writeFailedOnce() {
        writeFailed.increment()
    }

    /// Records an answered request and how long it took since it was taken.
    func answered(_ request: Request, since start: ContinuousClock.Instant) {
        answered[request.rawValue].increment()
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        durations[request.rawValue].recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Counts a request that could not be answered.
    func failed(_ request: Request) {
        failures[request.rawValue].increment()
    }
}
