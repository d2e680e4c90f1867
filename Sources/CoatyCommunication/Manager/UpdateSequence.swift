/// The values a CoatyKit object reports over time — a state now and at every change, or each
/// new value — for one consumer.
///
/// The public sequences of CoatyKit's controllers and IO points are named after what they carry
/// (``IoStates``, ``IoAssociationStates``, `AgentConnectionChanges`, `MQTTTransport.ConnectionStates`,
/// the Sensor Things sequences); they are this type. A sequence ends when its producer stops or
/// when the iterating task is cancelled, and it never fails.
///
/// ```swift
/// for await associated in publisher.associationStates() where associated {
///     print("associated")
/// }
/// ```
public struct UpdateSequence<Element: Sendable>: AsyncSequence, Sendable {
    /// Never fails.
    public typealias Failure = Never

    private let stream: AsyncStream<Element>

    /// A sequence of the values of `stream`.
    /// - Parameter stream: the producer's stream, for this consumer alone.
    package init(_ stream: AsyncStream<Element>) {
        self.stream = stream
    }

    /// Creates the iterator.
    /// - Returns: the iterator.
    public func makeAsyncIterator() -> Iterator { Iterator(base: stream.makeAsyncIterator()) }

    /// The iterator of an ``UpdateSequence``.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<Element>.Iterator

        /// The next value.
        /// - Returns: the value, or `nil` when the producer stopped or the task was cancelled.
        public mutating func next() async -> Element? { await base.next() }

        /// The next value.
        /// - Parameter actor: the caller's isolation.
        /// - Returns: the value, or `nil` when the producer stopped or the task was cancelled.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await base.next(isolation: actor)
        }
    }
}
