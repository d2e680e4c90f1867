public import CoatyCore
public import CoatyStore
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// The counters of a ``CoatyRecorder``.
public struct RecorderStatistics: Sendable, Hashable, CustomStringConvertible {
    /// Mutations received (objects to store and Deadvertise events).
    public var received = 0
    /// Objects committed to the store.
    public var stored = 0
    /// Objects removed (deadvertised ones and their descendants).
    public var removed = 0
    /// Transactions committed.
    public var batches = 0
    /// The most mutations that waited for the database at once (at most the queue capacity).
    public var peakQueueDepth = 0
    /// How often an observer waited for room in the queue (back-pressure).
    public var backPressureWaits = 0
    /// Mutations that could not be committed even on their own.
    public var failedWrites = 0
    /// Query events answered with a Retrieve.
    public var answeredQueries = 0
    /// Discover events answered with a Resolve.
    public var answeredDiscovers = 0
    /// Update events applied and answered with a Complete.
    public var completedUpdates = 0
    /// Update events of objects that are not stored (not answered).
    public var ignoredUpdates = 0
    /// Requests that could not be answered because of a store or publication error.
    public var failedAnswers = 0
    /// Recorder events (``CoatyRecorder/events()``) dropped because a reader of them fell
    /// ``CoatyRecorder/Configuration/eventBufferLimit`` events behind (never objects: the store
    /// gets every one).
    public var droppedEvents = 0
    /// Broker sessions of gone recorder group members this member took over (what they held is
    /// counted in ``received`` and ``stored``).
    public var handedOverSessions = 0

    /// No counts.
    public init() {}

    /// The counts on one line.
    public var description: String {
        "received \(received), stored \(stored), removed \(removed), batches \(batches), "
            + "failed writes \(failedWrites), queries \(answeredQueries), discovers \(answeredDiscovers), "
            + "updates \(completedUpdates) (ignored \(ignoredUpdates)), failed answers \(failedAnswers), "
            + "dropped recorder events \(droppedEvents), handed-over sessions \(handedOverSessions)"
    }
}

/// Whether a ``CoatyRecorder`` can do its job now, and if not, why (``CoatyRecorder/readiness``).
public struct RecorderReadiness: Sendable, Hashable, CustomStringConvertible {
    /// Whether it is ready.
    public var isReady: Bool
    /// Why it is not ready, one short line for an operator; `nil` when ready.
    public var reason: String?

    /// Ready.
    public static let ready = RecorderReadiness(isReady: true, reason: nil)

    /// Not ready, for `reason`.
    /// - Parameter reason: why, one short line.
    /// - Returns: the readiness.
    public static func notReady(_ reason: String) -> RecorderReadiness {
        RecorderReadiness(isReady: false, reason: reason)
    }

    /// `ready`, or `not ready: <reason>`.
    public var description: String { isReady ? "ready" : "not ready: \(reason ?? "unknown")" }
}

/// What a ``CoatyRecorder`` did, one event at a time (see ``CoatyRecorder/events()``).
public enum RecorderEvent: Sendable, Hashable {
    /// An object was committed.
    case stored(objectId: CoatyUUID, objectType: String, receipt: ReceiptMetadata)
    /// Objects were removed (a Deadvertise and its descendants).
    case removed(objectIds: [String])
    /// A Query was answered with this many objects.
    case retrieved(correlationId: CoatyUUID?, count: Int)
    /// A Discover was answered with this object.
    case resolved(correlationId: CoatyUUID?, objectId: CoatyUUID)
    /// An Update was applied and completed.
    case updated(objectId: CoatyUUID, objectType: String, receipt: ReceiptMetadata)
    /// Something could not be stored or answered (also logged).
    case failed(message: String)
}

/// The events of a ``CoatyRecorder``, as an `AsyncSequence`.
public struct RecorderEvents: AsyncSequence, Sendable {
    /// Never fails.
    public typealias Failure = Never
    /// An event.
    public typealias Element = RecorderEvent

    let stream: AsyncStream<RecorderEvent>

    /// Creates the iterator.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { Iterator(base: stream.makeAsyncIterator()) }

    /// The iterator of ``RecorderEvents``.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<RecorderEvent>.Iterator

        /// The next event, or `nil` when the recorder stopped.
        public mutating func next() async -> RecorderEvent? { await base.next() }

        /// The next event, or `nil` when the recorder stopped.
        /// - Parameter actor: the caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> RecorderEvent? {
            await base.next(isolation: actor)
        }
    }
}

/// Errors of a ``CoatyRecorder``.
public enum RecorderError: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``CoatyRecorder/run()`` was called while it runs; run one recorder once at a time.
    case alreadyRunning
    /// Handing over the session of a gone member of a recorder group: what the broker held for
    /// it did not all arrive within a minute (the session is kept; the handover is retried).
    case groupBarrierTimedOut
    /// Handing over the session of a gone member of a recorder group: the connection under its
    /// client id was lost (another member took the session, or the broker went away); retried.
    case groupHandoverInterrupted

    /// What happened and what to do.
    public var description: String {
        switch self {
        case .alreadyRunning: "The recorder is already running; call run() once and stop() it before running again."
        case .groupBarrierTimedOut:
            "The session of a gone recorder group member did not drain within a minute; it is kept and retried."
        case .groupHandoverInterrupted:
            "The connection taking over a gone recorder group member's session was lost; the handover is retried."
        }
    }
}
