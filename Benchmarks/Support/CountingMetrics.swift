public import Metrics
import Synchronization

/// A metrics factory that only counts: benchmarks read counters such as
/// `coaty_mqtt_dropped_messages_total` from it (recorders and timers are discarded).
///
/// Counters are kept per creation, so create the clients that use it once, not per message.
public final class CountingMetrics: MetricsFactory {
    final class CountingCounter: CounterHandler {
        let label: String
        let value = Atomic<Int64>(0)

        init(label: String) { self.label = label }

        func increment(by amount: Int64) { value.add(amount, ordering: .relaxed) }
        func reset() { value.store(0, ordering: .relaxed) }
    }

    private let counters = Mutex<[CountingCounter]>([])

    /// A factory with no counters yet.
    public init() {}

    /// The sum of every counter created with `label`.
    /// - Parameter label: the counter's label.
    /// - Returns: the total.
    public func total(_ label: String) -> Int {
        Int(counters.withLock { $0.filter { $0.label == label }.reduce(0) { $0 + $1.value.load(ordering: .relaxed) } })
    }

    /// Creates a counting counter.
    /// - Parameters:
    ///   - label: the label.
    ///   - dimensions: ignored (``total(_:)`` sums over them).
    /// - Returns: the counter.
    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        let counter = CountingCounter(label: label)
        counters.withLock { $0.append(counter) }
        return counter
    }

    /// Discards recordings.
    /// - Parameters:
    ///   - label: ignored.
    ///   - dimensions: ignored.
    ///   - aggregate: ignored.
    /// - Returns: a no-op recorder.
    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance
    }

    /// Discards timings.
    /// - Parameters:
    ///   - label: ignored.
    ///   - dimensions: ignored.
    /// - Returns: a no-op timer.
    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        NOOPMetricsHandler.instance
    }

    /// Keeps the counter (its count stays in the total).
    /// - Parameter handler: the counter.
    public func destroyCounter(_ handler: any CounterHandler) {}

    /// Nothing to do.
    /// - Parameter handler: the recorder.
    public func destroyRecorder(_ handler: any RecorderHandler) {}

    /// Nothing to do.
    /// - Parameter handler: the timer.
    public func destroyTimer(_ handler: any TimerHandler) {}
}
