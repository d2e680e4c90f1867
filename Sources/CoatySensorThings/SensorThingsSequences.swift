public import CoatyCore
import CoatySync
import Synchronization

/// A live sequence of Sensor Things values taken from received events (Advertises, Channel
/// events), as the observer controllers return them.
///
/// Like the ``EventObservation`` it wraps, it is subscribed when created; ending the iteration
/// (or cancelling its task) unsubscribes. Await ``subscribed()`` before expecting events that
/// are published right away.
public struct SensorThingsEvents<Element: Sendable>: AsyncSequence, Sendable {
    /// Never fails: the sequence ends when its task is cancelled.
    public typealias Failure = Never

    private let waitUntilSubscribed: @Sendable () async -> Void
    private let makeIterator: @Sendable () -> Iterator
    /// The MQTT topic filter the observation subscribes.
    public let topicFilter: String

    init<Base: Sendable>(_ base: EventObservation<Base>, transform: @escaping @Sendable (Base) -> Element?) {
        waitUntilSubscribed = { await base.subscribed() }
        topicFilter = base.topicFilter
        makeIterator = {
            var iterator = base.makeAsyncIterator()
            return Iterator {
                while let event = await iterator.next() {
                    if let element = transform(event) { return element }
                }
                return nil
            }
        }
    }

    /// Returns when the broker has acknowledged the subscription.
    public func subscribed() async {
        await waitUntilSubscribed()
    }

    /// Creates the iterator.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { makeIterator() }

    /// The iterator of ``SensorThingsEvents``.
    public struct Iterator: AsyncIteratorProtocol {
        let nextElement: () async -> Element?

        /// The next value, or `nil` when the observation ended.
        /// - Returns: the value.
        public mutating func next() async -> Element? {
            await nextElement()
        }
    }
}

/// The lazy responses to a Discover or Query sent by an observer controller, as Sensor Things
/// values; iterating publishes the request (see ``ResponseSequence``).
///
/// Without a timeout the responses are awaited until the task is cancelled, as Coaty JS's
/// observables are; use ``responses(limit:timeout:)``, ``first(timeout:)`` or ``collect()``
/// to bound them.
public struct SensorThingsResponses<Element: Sendable>: AsyncSequence, Sendable {
    /// Publication errors end the iteration with an error.
    public typealias Failure = any Error

    private let configure: @Sendable (Int?, Duration?) -> SensorThingsResponses
    private let makeIterator: @Sendable () -> Iterator

    init<Response: Sendable>(_ base: ResponseSequence<Response>, transform: @escaping @Sendable (Response) -> Element?)
    {
        configure = { limit, timeout in
            SensorThingsResponses(base.responses(limit: limit, timeout: timeout), transform: transform)
        }
        makeIterator = {
            var iterator = base.makeAsyncIterator()
            return Iterator {
                while let response = try await iterator.next() {
                    if let element = transform(response) { return element }
                }
                return nil
            }
        }
    }

    /// The same request, ending after `limit` responses and/or when `timeout` elapses.
    /// - Parameters:
    ///   - limit: the number of responses (Resolves or Retrieves) to wait for, or `nil`.
    ///   - timeout: how long to wait after publishing, or `nil`.
    /// - Returns: the configured sequence (still lazy).
    public func responses(limit: Int? = nil, timeout: Duration? = nil) -> SensorThingsResponses {
        configure(limit, timeout)
    }

    /// Publishes the request and returns the first value, or `nil` when `timeout` elapses first.
    /// - Parameter timeout: how long to wait, or `nil` to wait until the task is cancelled.
    /// - Returns: the first value, or `nil`.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func first(timeout: Duration? = nil) async throws -> Element? {
        var iterator = responses(limit: 1, timeout: timeout).makeAsyncIterator()
        return try await iterator.next()
    }

    /// Publishes the request and collects the values until the limit or the timeout.
    /// - Returns: the values in arrival order.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func collect() async throws -> [Element] {
        var result: [Element] = []
        for try await element in self { result.append(element) }
        return result
    }

    /// Creates the iterator; its first `next()` publishes the request.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { makeIterator() }

    /// The iterator of ``SensorThingsResponses``.
    public struct Iterator: AsyncIteratorProtocol {
        let nextElement: () async throws -> Element?

        /// The next value; the first call publishes the request.
        /// - Returns: the value, or `nil` at the limit, the timeout or cancellation.
        /// - Throws: ``CommunicationError`` when publishing fails permanently.
        public mutating func next() async throws -> Element? {
            try await nextElement()
        }
    }
}

/// A one-shot signal that ends work started with ``run(_:)``: children of the structured task
/// that runs them, stopped individually (a sensor unregistered, a thing gone).
final class StopSignal: Sendable {
    private let stream: AsyncStream<Never>
    private let continuation: AsyncStream<Never>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Never.self)
    }

    /// Ends the work run with this signal (now, or as soon as it starts).
    func stop() {
        continuation.finish()
    }

    /// Runs `body` until it returns, the signal is stopped, or the task is cancelled (then
    /// `body`'s task is cancelled). Call it once per signal.
    func run(_ body: @escaping @Sendable () async -> Void) async {
        let stream = self.stream
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await body() }
            group.addTask { for await _ in stream {} }
            await group.next()
            group.cancelAll()
        }
    }
}

/// The values read for a sensor's published observations
/// (``SensorSourceController/sensorValues(_:)``); it ends when the sensor is unregistered.
public typealias SensorValues = UpdateSequence<JSONValue>

/// The changes of the registered sensors, the latest first
/// (``ThingSensorObservationObserverController/registeredSensorsChanges()``).
public typealias RegisteredSensorsChanges = UpdateSequence<RegisteredSensorsChangeInfo>

/// The observations received for registered sensors
/// (``ThingSensorObservationObserverController/sensorObservations()``).
public typealias SensorObservations = UpdateSequence<SensorObservation>
