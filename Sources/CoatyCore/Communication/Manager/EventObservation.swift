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

/// The events of one observation, as an `AsyncSequence`.
///
/// Creating the observation registers it and subscribes its topic filter (one MQTT subscription
/// per filter, shared by all observers of it); the subscription ends when the iteration ends, the
/// iterating task is cancelled, or the sequence and its iterators are released. Await
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
/// (``CommunicationStatistics/observerOverflow``).
public struct EventObservation<Element: Sendable>: AsyncSequence, Sendable {
    /// Never fails: invalid events are dropped and counted, not thrown.
    public typealias Failure = Never

    let stream: AsyncStream<Element>
    let registration: ObservationRegistration

    /// Waits until the broker acknowledged the subscription of this observation (or returns at
    /// once when the manager is not connected; it subscribes when it connects).
    public func subscribed() async {
        await registration.manager.awaitEstablished(registration.filter)
    }

    /// The MQTT topic filter this observation is subscribed with.
    public var topicFilter: String { registration.filter }

    /// Creates the iterator.
    /// - Returns: an iterator that keeps the subscription alive.
    public func makeAsyncIterator() -> Iterator {
        Iterator(base: stream.makeAsyncIterator(), registration: registration)
    }

    /// The iterator of an ``EventObservation``.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<Element>.Iterator
        let registration: ObservationRegistration

        /// The next event, or `nil` when the observation ended (its task was cancelled, or the
        /// manager finished it).
        public mutating func next() async -> Element? {
            await base.next()
        }

        /// The next event, or `nil` when the observation ended.
        /// - Parameter actor: the caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await base.next(isolation: actor)
        }
    }
}
