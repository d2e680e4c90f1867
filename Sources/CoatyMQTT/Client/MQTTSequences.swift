/// The messages received on an ``MQTTClient``'s subscriptions, as an `AsyncSequence`.
///
/// Intended for **one** consumer: concurrent iterators share (split) the messages. Messages arrive in batches
/// from the C shim, so iterating costs one lock per batch, not per message. The sequence ends when
/// ``MQTTClient/disconnect()`` is called (after the messages already buffered) or the iterating task is cancelled.
/// While the consumer lags, up to ``MQTTConfiguration/messageBufferCapacity`` messages are buffered; then the
/// network thread stops reading from the broker until the consumer takes some (back-pressure, nothing dropped).
public struct MQTTMessages: AsyncSequence, Sendable {
    /// The element type.
    public typealias Element = MQTTMessage
    /// The sequence never throws.
    public typealias Failure = Never

    let core: ClientCore

    /// Creates an iterator.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(core: core) }

    /// Iterates over received messages, serving each batch from a local buffer.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let core: ClientCore
        private var batch: [MQTTMessage] = []
        private var index = 0

        init(core: ClientCore) { self.core = core }

        /// The next message, or `nil` after `disconnect()` or cancellation.
        public mutating func next() async -> MQTTMessage? {
            await next(isolation: nil)
        }

        /// The next message, or `nil` after `disconnect()` or cancellation.
        /// - Parameter actor: The caller's isolation, so batches are served without an executor hop.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> MQTTMessage? {
            if index < batch.count {
                defer { index += 1 }
                return batch[index]
            }
            guard let next = await core.nextMessageBatch(), !next.isEmpty else {
                batch = []
                index = 0
                return nil
            }
            batch = next
            index = 1
            return next[0]
        }
    }
}

/// The connection states of an ``MQTTClient``: the current state first, then every change.
///
/// Any number of these sequences may be iterated at once; each buffers the changes its consumer has not seen yet.
/// The sequence ends when the client is deinitialized or the iterating task is cancelled.
public struct MQTTConnectionStates: AsyncSequence, Sendable {
    /// The element type.
    public typealias Element = MQTTConnectionState
    /// The sequence never throws.
    public typealias Failure = Never

    let stream: AsyncStream<MQTTConnectionState>

    /// Creates an iterator.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator()) }

    /// Iterates over connection states.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<MQTTConnectionState>.AsyncIterator

        /// The next state, or `nil` when the sequence ended.
        public mutating func next() async -> MQTTConnectionState? { await base.next() }

        /// The next state, or `nil` when the sequence ended.
        /// - Parameter actor: The caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> MQTTConnectionState? {
            await base.next(isolation: actor)
        }
    }
}
