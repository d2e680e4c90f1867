import DequeModule
import Synchronization

/// Runs a release action exactly once, from whichever owner lets go first.
final class ReleaseOnce: Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>

    init(_ action: @escaping @Sendable () -> Void) {
        self.action = Mutex(action)
    }

    func release() {
        let action = self.action.withLock { action -> (@Sendable () -> Void)? in
            defer { action = nil }
            return action
        }
        action?()
    }
}

/// Keeps an observation's route and subscription alive while the sequence or an iterator exists.
final class ObservationRegistration: Sendable {
    let releaser: ReleaseOnce
    let manager: CommunicationManager
    let filter: String

    init(manager: CommunicationManager, filter: String, releaser: ReleaseOnce) {
        self.manager = manager
        self.filter = filter
        self.releaser = releaser
    }

    deinit { releaser.release() }
}

/// What an ``EventObservation/Iterator`` holds. Releasing the last copy of the iterator ends the
/// observation: leaving a `for await` loop (`break`, `return`, a thrown error) ends it even while
/// the sequence itself is still kept.
final class ObservationIteration<Element: Sendable>: Sendable {
    let buffer: ObservationBuffer<Element>
    let registration: ObservationRegistration

    init(buffer: ObservationBuffer<Element>, registration: ObservationRegistration) {
        self.buffer = buffer
        self.registration = registration
    }

    deinit { buffer.finish() }
}

/// The events of one observation, as an `AsyncSequence`.
///
/// Creating the observation registers it and subscribes its topic filter (one MQTT subscription
/// per filter, shared by all observers of it). The subscription ends when the iteration ends
/// (leaving the `for await` loop, or releasing the iterator), when the iterating task is
/// cancelled, or when the sequence is released without being iterated. An ended observation
/// yields nothing more: create a new one to observe again. Await
/// ``subscribed()`` before relying on the broker delivering to it (e.g. before publishing the
/// first event you want to see).
///
/// ```swift
/// for await event in try manager.observeAdvertise(Light.self) {
///     print(event.object.isOn)
/// }
/// ```
///
/// An observation has one consumer: iterate it from one task (create another observation for a
/// second consumer; they share the subscription). Events are buffered per observer up to ``CommunicationManager/Options/observerBufferLimit``;
/// beyond it the oldest buffered event is dropped and counted
/// (``CommunicationStatistics/observerOverflow``). A waiting consumer is woken once per batch of
/// messages the transport delivers, not once per event, so a fast stream costs few task switches.
public struct EventObservation<Element: Sendable>: AsyncSequence, Sendable {
    /// Never fails: invalid events are dropped and counted, not thrown.
    public typealias Failure = Never

    let buffer: ObservationBuffer<Element>
    let registration: ObservationRegistration

    /// Waits until the broker acknowledged the subscription of this observation (or returns at
    /// once when the manager is not connected; it subscribes when it connects).
    public func subscribed() async {
        await registration.manager.awaitEstablished(registration.filter)
    }

    /// The MQTT topic filter this observation is subscribed with.
    public var topicFilter: String { registration.filter }

    /// Creates the iterator.
    /// - Returns: an iterator that keeps the subscription alive until it is released (which ends
    ///   the observation).
    public func makeAsyncIterator() -> Iterator {
        Iterator(iteration: ObservationIteration(buffer: buffer, registration: registration))
    }

    /// The iterator of an ``EventObservation``.
    public struct Iterator: AsyncIteratorProtocol {
        let iteration: ObservationIteration<Element>

        /// The next event, or `nil` when the observation ended (its task was cancelled, or an
        /// earlier iteration of it ended).
        public mutating func next() async -> Element? {
            await iteration.buffer.next(isolation: nil)
        }

        /// The next event, or `nil` when the observation ended.
        /// - Parameter actor: the caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await iteration.buffer.next(isolation: actor)
        }
    }
}

/// Consumer wake-ups owed at the end of the batch of messages being routed.
///
/// Routing a message only appends its event to the observers' buffers; the transport's batch
/// ends with ``flush()``, which wakes each waiting consumer once, however many events it got.
final class ObservationWakeups: Sendable {
    private let pending = Mutex<[any ObservationWaking]>([])

    func schedule(_ buffer: any ObservationWaking) {
        pending.withLock { $0.append(buffer) }
    }

    /// Wakes the consumers that got events since the last flush.
    func flush() {
        let due = pending.withLock { pending -> [any ObservationWaking] in
            guard !pending.isEmpty else { return [] }
            defer { pending.removeAll(keepingCapacity: true) }
            return pending
        }
        for buffer in due { buffer.wake() }
    }
}

/// A buffer whose waiting consumer is woken by ``ObservationWakeups/flush()``.
protocol ObservationWaking: AnyObject, Sendable {
    func wake()
}

/// The bounded buffer between the routing of received events and an observation's consumer.
///
/// Like `AsyncStream` with `.bufferingNewest(limit)`, but a consumer waiting for an event is
/// resumed by the next ``ObservationWakeups/flush()`` (the end of the transport's batch)
/// instead of by every event, and it then takes the buffered events without suspending.
final class ObservationBuffer<Element: Sendable>: ObservationWaking {
    private struct State {
        var items = Deque<Element>()
        var waiter: UnsafeContinuation<Element?, Never>?
        var wakeScheduled = false
        var finished = false

        /// What a consumer gets without waiting: `.some(event)`, `.some(nil)` once finished, or
        /// `nil` when it has to wait.
        mutating func takeReady() -> Element?? {
            if let element = items.popFirst() { return .some(element) }
            return finished ? .some(nil) : nil
        }
    }

    private let state = Mutex(State())
    private let limit: Int
    private let wakeups: ObservationWakeups
    private let overflow: @Sendable () -> Void
    private let releaser: ReleaseOnce

    /// - Parameters:
    ///   - limit: the most events buffered; beyond it the oldest is dropped.
    ///   - wakeups: where a waiting consumer's wake-up is scheduled.
    ///   - overflow: called for every dropped event.
    ///   - releaser: released when the observation ends (cancelled).
    init(
        limit: Int,
        wakeups: ObservationWakeups,
        overflow: @escaping @Sendable () -> Void,
        releaser: ReleaseOnce
    ) {
        self.limit = max(1, limit)
        self.wakeups = wakeups
        self.overflow = overflow
        self.releaser = releaser
    }

    /// Whether a consumer waits for an event (for tests).
    var isConsumerWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// Buffers an event; a waiting consumer is woken by the next flush of `wakeups`.
    func push(_ element: Element) {
        let (dropped, schedule) = state.withLock { state -> (Bool, Bool) in
            guard !state.finished else { return (false, false) }
            var dropped = false
            if state.items.count >= limit {
                state.items.removeFirst()
                dropped = true
            }
            state.items.append(element)
            guard state.waiter != nil, !state.wakeScheduled else { return (dropped, false) }
            state.wakeScheduled = true
            return (dropped, true)
        }
        if dropped { overflow() }
        if schedule { wakeups.schedule(self) }
    }

    func wake() {
        let resumption = state.withLock { state -> (UnsafeContinuation<Element?, Never>, Element?)? in
            state.wakeScheduled = false
            guard let waiter = state.waiter, let ready = state.takeReady() else { return nil }
            state.waiter = nil
            return (waiter, ready)
        }
        if let (waiter, element) = resumption { waiter.resume(returning: element) }
    }

    /// Ends the observation: drops what is buffered, ends a waiting iteration, releases the route.
    func finish() {
        let waiter = state.withLock { state -> UnsafeContinuation<Element?, Never>? in
            state.finished = true
            state.items.removeAll()
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
        releaser.release()
    }

    /// The next buffered event, waiting for one; `nil` once finished (or the task is cancelled).
    func next(isolation actor: isolated (any Actor)?) async -> Element? {
        // As with `AsyncStream`, a cancelled consumer's iteration ends, also while events are buffered.
        if Task.isCancelled {
            finish()
            return nil
        }
        if let ready = state.withLock({ $0.takeReady() }) { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Element?, Never>) in
                let ready = state.withLock { state -> Element?? in
                    if let ready = state.takeReady() { return ready }
                    precondition(state.waiter == nil, "An EventObservation is iterated by two tasks at once")
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish()
        }
    }
}
