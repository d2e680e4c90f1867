public import CoatyCore
import Foundation
import Synchronization

/// The monotonic clock in nanoseconds (`CLOCK_MONOTONIC`: comparable across processes on one machine).
/// - Returns: the time.
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// The median of some values (the upper one of an even count).
/// - Parameter values: at least one value.
/// - Returns: the median.
public func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

/// The 50th and 99th percentiles of latency samples, in microseconds.
public struct LatencyPercentiles: Sendable {
    /// The median, µs.
    public var p50: Double
    /// The 99th percentile, µs.
    public var p99: Double

    /// The percentiles of samples in nanoseconds.
    /// - Parameter nanoseconds: at least one sample.
    public init(nanoseconds: [UInt64]) {
        let sorted = nanoseconds.sorted()
        p50 = Double(sorted[sorted.count / 2]) / 1000
        p99 = Double(sorted[sorted.count * 99 / 100]) / 1000
    }

    /// `{"count":…,"p50":…,"p99":…}`, a round-trip role's result.
    /// - Parameter count: the number of samples.
    /// - Returns: the JSON object.
    public func json(count: Int) -> JSONObject {
        ["count": .int(Int64(count)), "p50": .double(p50), "p99": .double(p99)]
    }
}

/// Counts a role's progress and ends a stalled run: when the count stops moving for
/// `stallTimeout`, `onStall` runs, so a loss shows as a short count instead of a hang.
public final class ProgressWatchdog: Sendable {
    private let count = Atomic<Int>(0)
    private let task: Mutex<Task<Void, any Error>?> = Mutex(nil)

    /// A watchdog; call ``start(stallTimeout:onStall:)`` to arm it.
    public init() {}

    /// The progress reported so far.
    public var progress: Int { count.load(ordering: .relaxed) }

    /// Reports progress (call it for every item, or every few).
    /// - Parameter value: the items done so far.
    @inline(__always)
    public func report(_ value: Int) { count.store(value, ordering: .relaxed) }

    /// Arms the watchdog.
    /// - Parameters:
    ///   - stallTimeout: how long the progress may stand still.
    ///   - onStall: what ends the run (e.g. disconnecting, cancelling the consumer).
    public func start(stallTimeout: Duration = .seconds(3), onStall: @escaping @Sendable () async -> Void) {
        let task = Task {
            var seen = -1
            while !Task.isCancelled {
                try await Task.sleep(for: stallTimeout)
                let now = progress
                if now == seen {
                    await onStall()
                    return
                }
                seen = now
            }
        }
        self.task.withLock { $0 = task }
    }

    /// Disarms the watchdog.
    public func stop() { task.withLock { $0?.cancel() } }
}

/// The resident set size of this process from `/proc/self/status` (`VmRSS`), in KiB.
/// - Returns: the size, or `nil` where `/proc` is not available.
public func residentSetKilobytes() -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }
    return nil
}

/// Samples this process's resident set size at an interval together with a progress count,
/// and summarizes it: start, peak, end, and the slope over the run after a warm-up.
public final class MemorySampler: Sendable {
    /// One sample.
    public struct Sample: Sendable {
        /// Items processed when the sample was taken.
        public var items: Int
        /// Resident set size, KiB.
        public var kilobytes: Int
    }

    private let samples = Mutex<[Sample]>([])
    private let task: Mutex<Task<Void, any Error>?> = Mutex(nil)

    /// A sampler; call ``start(every:progress:)``.
    public init() {}

    /// Takes one sample now.
    /// - Parameter items: the progress count.
    public func sample(items: Int) {
        guard let kilobytes = residentSetKilobytes() else { return }
        samples.withLock { $0.append(Sample(items: items, kilobytes: kilobytes)) }
    }

    /// Samples every `interval` until ``stop(items:)``.
    /// - Parameters:
    ///   - interval: the sampling interval.
    ///   - progress: the current progress count.
    public func start(every interval: Duration, progress: @escaping @Sendable () -> Int) {
        sample(items: progress())
        let task = Task {
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                sample(items: progress())
            }
        }
        self.task.withLock { $0 = task }
    }

    /// Stops sampling and takes a last sample.
    /// - Parameter items: the final progress count.
    public func stop(items: Int) {
        task.withLock { $0?.cancel() }
        sample(items: items)
    }

    /// `{"startKB","peakKB","endKB","slopeKBPerMillion","samples"}`: the slope is the least-squares
    /// fit of RSS against items over the samples after the first `warmUp` fraction of the items.
    /// - Parameter warmUp: the fraction of items left out of the slope (allocator and buffer growth).
    /// - Returns: the summary.
    public func summary(warmUp: Double = 0.1) -> JSONObject {
        let all = samples.withLock { $0 }
        guard let first = all.first, let last = all.last else { return [:] }
        let steady = all.filter { Double($0.items) >= warmUp * Double(last.items) }
        var slope = 0.0
        if steady.count >= 2 {
            let n = Double(steady.count)
            let mx = steady.reduce(0.0) { $0 + Double($1.items) } / n
            let my = steady.reduce(0.0) { $0 + Double($1.kilobytes) } / n
            let sxy = steady.reduce(0.0) { $0 + (Double($1.items) - mx) * (Double($1.kilobytes) - my) }
            let sxx = steady.reduce(0.0) { $0 + (Double($1.items) - mx) * (Double($1.items) - mx) }
            if sxx > 0 { slope = sxy / sxx * 1_000_000 }
        }
        return [
            "startKB": .int(Int64(first.kilobytes)),
            "peakKB": .int(Int64(all.map(\.kilobytes).max() ?? 0)),
            "endKB": .int(Int64(last.kilobytes)),
            "slopeKBPerMillion": .double((slope * 10).rounded() / 10),
            "samples": .int(Int64(all.count)),
        ]
    }
}
