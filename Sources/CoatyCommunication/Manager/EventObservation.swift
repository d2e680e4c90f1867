import CoatyFilter
import CoatyModel
import CoatySync
import DequeModule
import Synchronization

/// Runs a release action exactly once, from whichever owner lets go first.
package final class ReleaseOnce: Sendable {
    private let action: CoatyMutex<(@Sendable () -> Void)?>

    package init(_ action: @escaping @Sendable () -> Void) {
        self.action = CoatyMutex(action)
    }

    package func release() {
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
/// second consumer; they share the subscription). Nothing is lost by default: when the consumer
/// falls ``CommunicationManager/Options/observerBufferLimit`` events behind, the manager stops
/// reading from the broker until it catches up (back-pressure; see ``ObservationBuffering``,
/// which also offers opt-in drop policies, and the "Delivery guarantees" article). A waiting
/// consumer is woken once per batch of messages the transport delivers, not once per event, so a
/// fast stream costs few task switches.
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

    /// Sets how this observation buffers events its consumer has not taken yet, and returns it.
    ///
    /// The default is ``ObservationBuffering/backPressure`` (lossless). A drop policy applies from
    /// the next event on; set it before iterating.
    ///
    /// ```swift
    /// for await reading in try manager.observeAdvertise(Reading.self).buffering(.dropOldest(10)) {
    ///     display.show(reading.object)   // a slow display sees the newest readings
    /// }
    /// ```
    ///
    /// - Parameter policy: the buffering policy.
    /// - Returns: this observation.
    public func buffering(_ policy: ObservationBuffering) -> Self {
        buffer.setPolicy(policy)
        return self
    }

    /// How far the consumer is: the events buffered now and the events it took so far, read
    /// together (e.g. to tell whether everything delivered so far was taken and handled).
    public var progress: ObservationProgress {
        let sample = buffer.progress
        return ObservationProgress(waiting: sample.waiting, taken: sample.taken)
    }

    /// Why the manager ended this observation (``StallPolicy/detach``), or `nil` while it runs or
    /// when it ended otherwise. Check it after the `for await` loop ends.
    public var detachment: ObservationDetached? { buffer.detachment }

    /// Creates the iterator.
    /// - Returns: an iterator that keeps the subscription alive until it is released (which ends
    ///   the observation).
    public func makeAsyncIterator() -> Iterator {
        Iterator(iteration: ObservationIteration(buffer: buffer, registration: registration))
    }

    /// The iterator of an ``EventObservation``.
    public struct Iterator: AsyncIteratorProtocol {
        let iteration: ObservationIteration<Element>

        /// The events buffered for this iteration: what ``next()`` returns without waiting
        /// (e.g. to flush output exactly when the loop is about to wait).
        public var waitingCount: Int { iteration.buffer.count }

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

        /// The events buffered now, at most `maxCount` of them, in order: waits only while none
        /// is buffered. `nil` when the observation ended (as ``next()``).
        ///
        /// For a consumer that handles events in batches (writes them to a store in one
        /// transaction, to a file in one write): one call takes what a per-event loop takes with
        /// many, and the events are the same, in the same order, with the same back-pressure.
        ///
        /// ```swift
        /// var events = try manager.observeAdvertise(Reading.self).makeAsyncIterator()
        /// while let batch = await events.nextBatch(maxCount: 512) {
        ///     try await store.insert(batch.map(\.object))
        /// }
        /// ```
        ///
        /// - Parameters:
        ///   - maxCount: the most events returned (at least 1).
        ///   - actor: the caller's isolation.
        /// - Returns: 1 to `maxCount` events, or `nil` when the observation ended.
        public mutating func nextBatch(
            maxCount: Int,
            isolation actor: isolated (any Actor)? = #isolation
        ) async -> [Element]? {
            await iteration.buffer.nextBatch(maxCount: maxCount, isolation: actor)
        }
    }
}

/// How far the consumer of an ``EventObservation`` is (see ``EventObservation/progress``).
public struct ObservationProgress: Sendable, Hashable {
    /// The events buffered, waiting for the consumer.
    public var waiting: Int
    /// The events the consumer took since the observation was created.
    public var taken: UInt64
}

/// Consumer wake-ups owed at the end of the batch of messages being routed.
///
/// Routing a message only appends its event to the observers' buffers; the transport's batch
/// ends with ``flush()``, which wakes each waiting consumer once, however many events it got.
final class ObservationWakeups: Sendable {
    private let pending = CoatyMutex<[any ObservationWaking]>([])

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

/// Gate changes an ``ObservationBuffer`` owes after a state change, applied outside its lock (outside the generic
/// class: a type nested in it needs a runtime metadata lookup at each use in unspecialized code).
private struct GateChange {
    var full: Bool?
    var overHeadroom: Bool?
}

/// An ``ObservationBuffer``'s progress (what ``EventObservation/progress`` reports), kept beside its generic state
/// under a lock of its own, so that reading it — a recorder reads every ingest observation's before each request it
/// answers — takes no runtime metadata lookup (each of the generic state's costs hundreds of instructions in
/// unspecialized code). Changed only while the buffer's state is locked, so it always equals that state.
private struct ProgressCounts {
    var waiting = 0
    var taken: UInt64 = 0
}

/// The bounded buffer between the routing of received events and an observation's consumer.
///
/// Like `AsyncStream`, but a consumer waiting for an event is resumed by the next
/// ``ObservationWakeups/flush()`` (the end of the transport's batch) instead of by every event,
/// and it then takes the buffered events without suspending. With
/// ``ObservationBuffering/backPressure`` (the default) it never drops: reaching its limit tells
/// the ``BackPressureGate`` to hold the reads, and taking it back to half the limit releases them.
///
/// Its entry points are pre-specialized for the event types the framework itself observes (a
/// recorder's, an agent's requests): the observations are created in other modules, so the
/// generic code otherwise runs unspecialized there, and every `Element?`, `State` or `Deque`
/// it touches is a runtime metadata lookup (some 14 000 instructions of a Discover answered by
/// the recorder). The generic entry checks the type and calls the specialized body.
final class ObservationBuffer<Element: Sendable>: ObservationWaking, StallWatched {
    private struct State {
        var items = Deque<Element>()
        var waiter: UnsafeContinuation<Element?, Never>?
        var wakeScheduled = false
        var finished = false
        var policy = ObservationBuffering.backPressure
        /// Reported to the gate: at the limit, at the request headroom.
        var full = false
        var overHeadroom = false
        /// Events the consumer took (for the stall check).
        var taken: UInt64 = 0
        var detachment: ObservationDetached?

        /// Clears both holds (the limit, the headroom) and returns the gate changes that owes.
        mutating func releaseHolds() -> GateChange {
            var change = GateChange()
            if full { change.full = false }
            if overHeadroom { change.overHeadroom = false }
            full = false
            overHeadroom = false
            return change
        }

        /// What a consumer gets without waiting: `.some(event)`, `.some(nil)` once finished, or
        /// `nil` when it has to wait.
        mutating func takeReady() -> Element?? {
            if let element = items.popFirst() {
                taken &+= 1
                return .some(element)
            }
            return finished ? .some(nil) : nil
        }
    }


    private let state = CoatyMutex(State())
    /// The buffered count and the taken count of `state`, changed with it (see ``ProgressCounts``).
    private let counts = CoatyMutex(ProgressCounts())
    private let limit: Int
    private let headroom: Int
    private let wakeups: ObservationWakeups
    private let gate: BackPressureGate?
    private let overflow: @Sendable (Int) -> Void
    private let drops: DropReporter?
    private let releaser: ReleaseOnce
    let topicFilter: String

    /// - Parameters:
    ///   - limit: the events buffered before reading is held (back-pressure).
    ///   - headroom: the events buffered before reading is held also while requests await responses.
    ///   - wakeups: where a waiting consumer's wake-up is scheduled.
    ///   - gate: the manager's back-pressure gate (`nil`: none, as in unit tests of the buffer).
    ///   - overflow: called with the number of events a drop policy dropped.
    ///   - drops: logs drops at warning, rate-limited.
    ///   - topicFilter: the observation's topic filter, for reports.
    ///   - releaser: released when the observation ends (cancelled).
    init(
        limit: Int,
        headroom: Int? = nil,
        wakeups: ObservationWakeups,
        gate: BackPressureGate? = nil,
        overflow: @escaping @Sendable (Int) -> Void,
        drops: DropReporter? = nil,
        topicFilter: String = "",
        releaser: ReleaseOnce
    ) {
        self.limit = max(1, limit)
        self.headroom = max(self.limit, headroom ?? self.limit)
        self.wakeups = wakeups
        self.gate = gate
        self.overflow = overflow
        self.drops = drops
        self.topicFilter = topicFilter
        self.releaser = releaser
        gate?.watch(self)
    }

    /// Whether a consumer waits for an event (for tests).
    var isConsumerWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// The events buffered now (for tests and reports).
    var count: Int { state.withLock { $0.items.count } }

    /// Why the manager ended this observation, if it did.
    var detachment: ObservationDetached? { state.withLock { $0.detachment } }

    var stallSample: (waiting: Int, taken: UInt64)? {
        state.withLock { state in
            guard !state.finished else { return nil }
            // Only a back-pressured observer can stall the reads; a dropping one is never reported.
            return (state.policy == .backPressure ? state.items.count : 0, state.taken)
        }
    }

    /// The events buffered and the events taken, read together.
    var progress: (waiting: Int, taken: UInt64) {
        counts.withLock { ($0.waiting, $0.taken) }
    }

    /// Notes a change of the buffered and taken counts; called with `state` locked.
    private func count(buffered: Int, taken: Int = 0) {
        counts.withLock { counts in
            counts.waiting += buffered
            counts.taken &+= UInt64(taken)
        }
    }

    /// Sets how events are buffered from now on.
    func setPolicy(_ policy: ObservationBuffering) {
        let change = state.withLock { state -> GateChange in
            state.policy = policy
            // A drop policy never holds the reads (it trims what is buffered with its next event).
            guard policy == .backPressure else { return state.releaseHolds() }
            return Self.checkLimits(&state, limit: limit, headroom: headroom)
        }
        apply(change)
    }

    /// Buffers an event; a waiting consumer is woken by the next flush of `wakeups`.
    @_specialize(where Element == DiscoverEvent)
    @_specialize(where Element == QueryEvent)
    @_specialize(where Element == CallEvent)
    @_specialize(where Element == DeadvertiseEvent)
    @_specialize(where Element == ChannelEvent)
    @_specialize(where Element == AdvertiseEvent<AnyCoatyObject>)
    @_specialize(where Element == UpdateEvent<AnyCoatyObject>)
    func push(_ element: Element) {
        let (dropped, schedule, change, policy) = state.withLock {
            state -> (Int, Bool, GateChange, ObservationBuffering) in
            guard !state.finished else { return (0, false, GateChange(), state.policy) }
            var dropped = 0
            var change = GateChange()
            switch state.policy {
            case .backPressure:
                state.items.append(element)
                count(buffered: 1)
                change = Self.checkLimits(&state, limit: limit, headroom: headroom)
            case .dropOldest(let keep):
                while state.items.count >= max(1, keep) {
                    state.items.removeFirst()
                    dropped += 1
                }
                state.items.append(element)
                count(buffered: 1 - dropped)
            case .dropNewest(let keep):
                if state.items.count >= max(1, keep) {
                    dropped = 1
                } else {
                    state.items.append(element)
                    count(buffered: 1)
                }
            }
            guard state.waiter != nil, !state.wakeScheduled, !state.items.isEmpty else {
                return (dropped, false, change, state.policy)
            }
            state.wakeScheduled = true
            return (dropped, true, change, state.policy)
        }
        if dropped > 0 {
            overflow(dropped)
            drops?.dropped(dropped, policy: policy)
        }
        apply(change)
        if schedule { wakeups.schedule(self) }
    }

    /// The gate changes owed by the buffer's fill level (back-pressure): full at the limit,
    /// released at half of it; the same for the headroom.
    private static func checkLimits(_ state: inout State, limit: Int, headroom: Int) -> GateChange {
        var change = GateChange()
        let count = state.items.count
        if !state.full, count >= limit {
            state.full = true
            change.full = true
        } else if state.full, count <= limit / 2 {
            state.full = false
            change.full = false
        }
        if !state.overHeadroom, count >= headroom {
            state.overHeadroom = true
            change.overHeadroom = true
        } else if state.overHeadroom, count <= headroom / 2 {
            state.overHeadroom = false
            change.overHeadroom = false
        }
        return change
    }

    private func apply(_ change: GateChange) {
        guard let gate else { return }
        if let full = change.full { gate.observerFull(full) }
        if let over = change.overHeadroom { gate.observerOverHeadroom(over) }
    }

    /// Takes a ready event under the lock, noting the gate changes the take owes.
    private func take(_ state: inout State, _ change: inout GateChange) -> Element?? {
        let ready = state.takeReady()
        if case .some(.some) = ready { count(buffered: -1, taken: 1) }
        if state.full || state.overHeadroom { change = Self.checkLimits(&state, limit: limit, headroom: headroom) }
        return ready
    }

    /// Resumes the waiting consumer with the next event. Called through ``ObservationWaking`` (so
    /// unspecialized), it picks the specialized body by hand: a `@_specialize`d entry fetches the
    /// metadata of the body's `Optional`, continuation and tuple types before it checks the type
    /// (some 2 000 instructions per wake-up); comparing `Element` with each type costs a few.
    func wake() {
        if Element.self == DiscoverEvent.self {
            unsafeDowncast(self, to: ObservationBuffer<DiscoverEvent>.self).wakeConsumer()
        } else if Element.self == AdvertiseEvent<AnyCoatyObject>.self {
            unsafeDowncast(self, to: ObservationBuffer<AdvertiseEvent<AnyCoatyObject>>.self).wakeConsumer()
        } else if Element.self == QueryEvent.self {
            unsafeDowncast(self, to: ObservationBuffer<QueryEvent>.self).wakeConsumer()
        } else if Element.self == CallEvent.self {
            unsafeDowncast(self, to: ObservationBuffer<CallEvent>.self).wakeConsumer()
        } else if Element.self == ChannelEvent.self {
            unsafeDowncast(self, to: ObservationBuffer<ChannelEvent>.self).wakeConsumer()
        } else if Element.self == DeadvertiseEvent.self {
            unsafeDowncast(self, to: ObservationBuffer<DeadvertiseEvent>.self).wakeConsumer()
        } else if Element.self == UpdateEvent<AnyCoatyObject>.self {
            unsafeDowncast(self, to: ObservationBuffer<UpdateEvent<AnyCoatyObject>>.self).wakeConsumer()
        } else {
            wakeConsumer()
        }
    }

    /// ``wake()``'s body, specialized where it is called with a concrete type.
    @inline(never)
    private func wakeConsumer() {
        var change = GateChange()
        let resumption = state.withLock { state -> (UnsafeContinuation<Element?, Never>, Element?)? in
            state.wakeScheduled = false
            guard let waiter = state.waiter, let ready = take(&state, &change) else { return nil }
            state.waiter = nil
            return (waiter, ready)
        }
        apply(change)
        if let (waiter, element) = resumption { waiter.resume(returning: element) }
    }

    /// Ends the observation: drops what is buffered, ends a waiting iteration, releases the route.
    func finish() {
        end(detachment: nil)
    }

    func detach(_ reason: ObservationDetached) {
        end(detachment: reason)
    }

    private func end(detachment: ObservationDetached?) {
        let (waiter, change, discarded) = state.withLock {
            state -> (UnsafeContinuation<Element?, Never>?, GateChange, Int) in
            guard !state.finished else { return (nil, GateChange(), 0) }
            state.finished = true
            state.detachment = detachment
            let discarded = state.items.count
            state.items.removeAll()
            count(buffered: -discarded)
            let change = state.releaseHolds()
            defer { state.waiter = nil }
            return (state.waiter, change, discarded)
        }
        apply(change)
        if detachment != nil, discarded > 0 { overflow(discarded) }
        gate?.unwatch(self)
        waiter?.resume(returning: nil)
        releaser.release()
    }

    /// Up to `maxCount` buffered events, waiting for the first; `nil` once finished (or the task
    /// is cancelled).
    // The recorder's ingest pumps take batches.
    @_specialize(where Element == AdvertiseEvent<AnyCoatyObject>)
    @_specialize(where Element == ChannelEvent)
    func nextBatch(maxCount: Int, isolation actor: isolated (any Actor)?) async -> [Element]? {
        if Task.isCancelled {
            finish()
            return nil
        }
        var batch = takeBatch(maxCount)
        if !batch.isEmpty { return batch }
        guard let first = await next(isolation: actor) else { return nil }
        batch.append(first)
        batch.append(contentsOf: takeBatch(maxCount - 1))
        return batch
    }

    /// Takes up to `maxCount` ready events (none when the buffer is empty or finished).
    private func takeBatch(_ maxCount: Int) -> [Element] {
        guard maxCount > 0 else { return [] }
        var change = GateChange()
        let batch = state.withLock { state -> [Element] in
            let count = min(maxCount, state.items.count)
            guard count > 0 else { return [] }
            let batch = Array(state.items.prefix(count))
            state.items.removeFirst(count)
            state.taken &+= UInt64(count)
            self.count(buffered: -count, taken: count)
            if state.full || state.overHeadroom { change = Self.checkLimits(&state, limit: limit, headroom: headroom) }
            return batch
        }
        apply(change)
        return batch
    }

    /// The next buffered event, waiting for one; `nil` once finished (or the task is cancelled).
    @_specialize(where Element == DiscoverEvent)
    @_specialize(where Element == QueryEvent)
    @_specialize(where Element == CallEvent)
    @_specialize(where Element == DeadvertiseEvent)
    @_specialize(where Element == ChannelEvent)
    @_specialize(where Element == AdvertiseEvent<AnyCoatyObject>)
    @_specialize(where Element == UpdateEvent<AnyCoatyObject>)
    func next(isolation actor: isolated (any Actor)?) async -> Element? {
        // As with `AsyncStream`, a cancelled consumer's iteration ends, also while events are buffered.
        if Task.isCancelled {
            finish()
            return nil
        }
        var change = GateChange()
        let ready = state.withLock { take(&$0, &change) }
        apply(change)
        if let ready { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Element?, Never>) in
                var change = GateChange()
                let ready = state.withLock { state -> Element?? in
                    if let ready = take(&state, &change) { return ready }
                    precondition(state.waiter == nil, "An EventObservation is iterated by two tasks at once")
                    state.waiter = continuation
                    return nil
                }
                apply(change)
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish()
        }
    }
}
