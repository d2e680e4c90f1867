import CoatyFilter
import CoatyModel
import Synchronization

/// The responses to a two-way request (Discover, Query, Update, Call), as an `AsyncSequence`.
///
/// Nothing is sent until iteration starts: the first `next()` subscribes the response topic of
/// a fresh correlation id and publishes the request (deferred while offline). Over a transport
/// that supports ``CoatyTransport/subscribeNow(_:qos:acknowledged:)`` (MQTT), the request goes out
/// right behind the SUBSCRIBE, without waiting a round trip for the broker's acknowledgement —
/// a broker handles one connection's packets in order — and the response topic is unsubscribed
/// the same way when the iteration ends; otherwise the request waits for the acknowledgement. Responses that do not answer the request as the protocol requires
/// are dropped and counted (``CommunicationStatistics/invalidResponses``). The iteration ends
/// after ``limit`` responses or when ``timeout`` elapses (Coaty itself has neither: without
/// them it runs until the task is cancelled); the response subscription ends with it.
///
/// ```swift
/// let resolve = try await manager.publishDiscover(.coreTypes([.identity])).first(timeout: .seconds(2))
/// for try await response in manager.publishQuery(query).responses(limit: 3, timeout: .seconds(5)) { … }
/// ```
public struct ResponseSequence<Response: Sendable>: AsyncSequence, Sendable {
    /// Publication errors (e.g. a permanent transport failure) end the iteration with an error.
    public typealias Failure = any Error

    let manager: CommunicationManager
    let requests: [RequestMessage]
    let responseEvent: CoatyTopic.Event
    /// The typed response to a received event, or `nil` when it does not answer the request.
    let accept: @Sendable (IncomingEvent) -> Response?

    /// The number of responses after which the iteration ends, or `nil` for no limit.
    public private(set) var limit: Int?
    /// How long to wait for responses after publishing, or `nil` to wait until cancelled.
    public private(set) var timeout: Duration?

    init(
        manager: CommunicationManager,
        requests: [RequestMessage],
        responseEvent: CoatyTopic.Event,
        accept: @escaping @Sendable (IncomingEvent) -> Response?
    ) {
        self.manager = manager
        self.requests = requests
        self.responseEvent = responseEvent
        self.accept = accept
    }

    /// The same request, ending after `limit` responses and/or when `timeout` elapses.
    ///
    /// - Parameters:
    ///   - limit: the number of responses to wait for, or `nil` for any number.
    ///   - timeout: how long to wait after publishing, or `nil` for no timeout.
    /// - Returns: the configured sequence (still lazy).
    public func responses(limit: Int? = nil, timeout: Duration? = nil) -> ResponseSequence {
        var copy = self
        copy.limit = limit.map { Swift.max(1, $0) }
        copy.timeout = timeout
        return copy
    }

    /// Publishes the request and returns the first valid response, or `nil` when `timeout` elapses first.
    ///
    /// - Parameter timeout: how long to wait, or `nil` to wait until the task is cancelled.
    /// - Returns: the first response, or `nil`.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func first(timeout: Duration? = nil) async throws -> Response? {
        var iterator = responses(limit: 1, timeout: timeout).makeAsyncIterator()
        return try await iterator.next()
    }

    /// Publishes the request and collects the valid responses until the limit or timeout.
    ///
    /// - Returns: the responses in arrival order.
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    public func collect() async throws -> [Response] {
        var result: [Response] = []
        for try await response in self { result.append(response) }
        return result
    }

    /// Creates the iterator; the request is published by its first `next()`.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { Iterator(sequence: self) }

    /// The iterator of a ``ResponseSequence``.
    public struct Iterator: AsyncIteratorProtocol {
        let sequence: ResponseSequence
        var responses: ResponseQueue?
        var run: RequestRun?

        /// The next valid response; the first call publishes the request.
        /// - Returns: the response, or `nil` when the limit is reached, the timeout elapsed or the
        ///   task was cancelled.
        /// - Throws: ``CommunicationError`` when publishing fails permanently.
        public mutating func next() async throws -> Response? {
            let queue: ResponseQueue
            if let responses {
                queue = responses
            } else {
                if run != nil { return nil }
                let accept = sequence.accept
                let (started, run) = await sequence.manager.startRequest(
                    RequestPlan(
                        requests: sequence.requests,
                        responseEvent: sequence.responseEvent,
                        limit: sequence.limit,
                        timeout: sequence.timeout,
                        answers: { accept($0) != nil }
                    )
                )
                self.run = run
                responses = started
                queue = started
            }
            // The routing accepted each of them already (it counts the invalid ones); the typed
            // response is made here, on the consumer's side.
            while let incoming = try await queue.next() {
                if let response = sequence.accept(incoming) { return response }
            }
            return nil
        }
    }
}

/// One request message of a ``ResponseSequence``: its event and payload.
struct RequestMessage: Sendable {
    let event: CoatyTopic.Event
    let payload: [UInt8]
}

/// What ``CommunicationManager/startRequest(_:)`` needs of a ``ResponseSequence``, without its
/// response type (so that the routing of responses is not generic code).
struct RequestPlan: Sendable {
    let requests: [RequestMessage]
    let responseEvent: CoatyTopic.Event
    let limit: Int?
    let timeout: Duration?
    /// Whether a received event answers the request as the protocol requires.
    let answers: @Sendable (IncomingEvent) -> Bool
}

/// Ends a request's response routing when the iterator is released.
final class RequestRun: Sendable {
    let releaser: ReleaseOnce

    init(releaser: ReleaseOnce) {
        self.releaser = releaser
    }

    deinit { releaser.release() }
}
