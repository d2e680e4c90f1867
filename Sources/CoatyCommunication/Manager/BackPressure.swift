import CoatyFilter
import CoatyModel
import CoatySync
import Logging
import Metrics
import Synchronization

/// How an observation buffers the events its consumer has not taken yet.
///
/// The default, ``backPressure``, loses nothing: when an observer holds
/// ``CommunicationManager/Options/observerBufferLimit`` events, the manager stops reading from
/// the broker until the consumer has taken half of them; TCP flow control then holds the rest in
/// the kernel and the broker (see "Delivery guarantees"). The drop policies are for consumers that
/// prefer fresh values to complete ones (a display of the latest sensor reading): they never hold
/// the reads, and every event they drop is counted
/// (``CommunicationStatistics/observerOverflow``, the metric
/// `coaty_communication_dropped_total{reason="observer_overflow"}`) and logged at warning
/// (at most once per ``CommunicationManager/Options/dropLogInterval``, with the totals).
///
/// ```swift
/// // Only the newest 10 readings matter to this display:
/// let readings = try manager.observeAdvertise(Reading.self).buffering(.dropOldest(10))
/// ```
public enum ObservationBuffering: Sendable, Hashable {
    /// Lossless: a full observer holds the reads from the broker (the default).
    case backPressure
    /// Keeps at most `limit` events; a new event beyond it drops the oldest buffered one.
    case dropOldest(Int)
    /// Keeps at most `limit` events; a new event beyond it is dropped.
    case dropNewest(Int)
}

/// What the manager does with a back-pressured observer whose consumer has taken nothing for
/// ``CommunicationManager/Options/stallTimeout`` while events wait.
///
/// Either way the stall is reported: a warning naming the observation's topic filter and how
/// many events wait (repeated once per timeout while the stall lasts), the metric
/// `coaty_communication_observer_stalls_total`, and ``CommunicationStatistics/observerStalls``.
public enum StallPolicy: Sendable, Hashable {
    /// Keeps holding the reads until the consumer resumes (the default): nothing is lost, and
    /// the connection stays up (the MQTT keep-alive goes on while reads are held).
    case keepBackPressure
    /// Ends the observation: its iteration ends, ``EventObservation/detachment`` tells why, its
    /// buffered events are discarded (and counted as dropped), and reading resumes for the other
    /// observers.
    case detach
}

/// Why an observation was ended by the manager (``StallPolicy/detach``).
public struct ObservationDetached: Error, Sendable, Hashable, CustomStringConvertible {
    /// The observation's topic filter.
    public var topicFilter: String
    /// The events that were waiting (and were discarded).
    public var waiting: Int
    /// How long the consumer had taken nothing.
    public var stalledFor: Duration

    /// A one-line description.
    public var description: String {
        "observation of \(topicFilter) detached: its consumer took nothing for \(stalledFor) with \(waiting) events waiting"
    }
}

/// A buffer the ``BackPressureGate`` watches for stalls.
protocol StallWatched: AnyObject, Sendable {
    /// The events waiting and the consumer's take count, for the stall check; `nil` once finished.
    var stallSample: (waiting: Int, taken: UInt64)? { get }
    /// The observation's topic filter, for reports.
    var topicFilter: String { get }
    /// Ends the observation with `reason` (``StallPolicy/detach``).
    func detach(_ reason: ObservationDetached)
}

/// Decides whether the manager reads from the transport: the meeting point of every
/// back-pressured observer.
///
/// Reading is held while some observer holds its limit, unless a request awaits responses (a
/// handler that, inside its observer loop, Discovers or Queries must get its responses while its
/// own observer is full); then reading goes on until an observer holds the request headroom.
/// Every change is passed to the transport (``CoatyTransport/setReceivingPaused(_:)``).
final class BackPressureGate: Sendable {
    private struct State {
        var full = 0
        var overHeadroom = 0
        var requestsOpen = false
        var paused = false
        var watched: [ObjectIdentifier: Watch] = [:]
        var holds: UInt64 = 0
        var stalls: UInt64 = 0
    }

    private struct Watch {
        weak var buffer: (any StallWatched)?
        var taken: UInt64 = 0
        var since: ContinuousClock.Instant
        var reported: ContinuousClock.Instant?
    }

    private let state = CoatyMutex(State())
    private let setPaused: @Sendable (Bool) -> Void
    private let logger: Logger
    private let stallCounter: Counter
    private let holdCounter: Counter

    init(logger: Logger, factory: any MetricsFactory, setPaused: @escaping @Sendable (Bool) -> Void) {
        self.logger = logger
        self.setPaused = setPaused
        stallCounter = Counter(label: "coaty_communication_observer_stalls_total", factory: factory)
        holdCounter = Counter(label: "coaty_communication_read_holds_total", factory: factory)
    }

    /// Whether reading is held now.
    var isPaused: Bool { state.withLock { $0.paused } }

    /// How often reading was held since the manager was created.
    var holdCount: UInt64 { state.withLock { $0.holds } }

    /// How many stall reports were made since the manager was created.
    var stallCount: UInt64 { state.withLock { $0.stalls } }

    /// An observer reached (`true`) or fell back below (`false`) its limit.
    func observerFull(_ full: Bool) { update { $0.full += full ? 1 : -1 } }

    /// An observer reached (`true`) or fell back below (`false`) the request headroom.
    func observerOverHeadroom(_ over: Bool) { update { $0.overHeadroom += over ? 1 : -1 } }

    /// Whether some request awaits responses.
    func setRequestsOpen(_ open: Bool) { update { $0.requestsOpen = open } }

    private func update(_ change: (inout State) -> Void) {
        // The transport is told under the lock, so two changes reach it in their order.
        state.withLock { state in
            change(&state)
            let paused = state.overHeadroom > 0 || (state.full > 0 && !state.requestsOpen)
            guard paused != state.paused else { return }
            state.paused = paused
            setPaused(paused)
            if paused {
                state.holds += 1
                holdCounter.increment()
            }
        }
    }

    /// Starts watching a back-pressured buffer for stalls.
    func watch(_ buffer: some StallWatched) {
        let now = ContinuousClock.now
        state.withLock { $0.watched[ObjectIdentifier(buffer)] = Watch(buffer: buffer, since: now) }
    }

    /// Stops watching a buffer.
    func unwatch(_ buffer: some StallWatched) {
        _ = state.withLock { $0.watched.removeValue(forKey: ObjectIdentifier(buffer)) }
    }

    /// Reports (and with ``StallPolicy/detach`` ends) the observers whose consumer took nothing for
    /// `timeout` while events waited. Called periodically by the manager.
    func checkStalls(timeout: Duration, policy: StallPolicy, now: ContinuousClock.Instant = .now) {
        var stalled: [(any StallWatched, Int, Duration)] = []
        state.withLock { state in
            for (key, var watch) in state.watched {
                guard let buffer = watch.buffer, let sample = buffer.stallSample else {
                    state.watched[key] = nil
                    continue
                }
                if sample.waiting == 0 || sample.taken != watch.taken {
                    watch.taken = sample.taken
                    watch.since = now
                    watch.reported = nil
                } else if now - watch.since >= timeout, watch.reported.map({ now - $0 >= timeout }) ?? true {
                    watch.reported = now
                    state.stalls += 1
                    stalled.append((buffer, sample.waiting, now - watch.since))
                }
                state.watched[key] = watch
            }
        }
        for (buffer, waiting, duration) in stalled {
            stallCounter.increment()
            let paused = isPaused
            logger.warning(
                "Observer stalled: its consumer took no event while events wait",
                metadata: [
                    "observation": "\(buffer.topicFilter)",
                    "waiting": "\(waiting)",
                    "stalled_for": "\(duration)",
                    "reading_held": "\(paused)",
                    "policy": "\(policy)",
                ]
            )
            if policy == .detach {
                buffer.detach(
                    ObservationDetached(topicFilter: buffer.topicFilter, waiting: waiting, stalledFor: duration)
                )
            }
        }
    }
}

/// Rate-limited warnings about events a drop policy discarded, with the totals.
final class DropReporter: Sendable {
    private struct State {
        var total = 0
        var reported = 0
        var lastLog: ContinuousClock.Instant?
    }

    private let state = CoatyMutex(State())
    private let logger: Logger
    private let interval: Duration
    private let topicFilter: String

    init(logger: Logger, interval: Duration, topicFilter: String) {
        self.logger = logger
        self.interval = interval
        self.topicFilter = topicFilter
    }

    /// Counts `count` dropped events and logs when the interval has passed since the last log.
    func dropped(_ count: Int, policy: ObservationBuffering) {
        let now = ContinuousClock.now
        let report = state.withLock { state -> (Int, Int)? in
            state.total += count
            guard state.lastLog.map({ now - $0 >= interval }) ?? true else { return nil }
            state.lastLog = now
            defer { state.reported = state.total }
            return (state.total - state.reported, state.total)
        }
        guard let (new, total) = report else { return }
        logger.warning(
            "Observer dropped events by its drop policy",
            metadata: [
                "observation": "\(topicFilter)",
                "policy": "\(policy)",
                "dropped": "\(new)",
                "dropped_total": "\(total)",
            ]
        )
    }
}
