import CoatySync
import DequeModule

/// The responses routed to one request, between the routing thread and the request's iterator.
///
/// What `AsyncThrowingStream` did here (newest kept beyond the limit, buffered responses handed
/// out before the end, an error thrown once, cancellation ends it), as a concrete type: the
/// standard library's stream is generic code run unspecialized in the runtime library, and its
/// every `yield`, `next` and `finish` looked up the runtime metadata of its nested types — about
/// 15 000 of a requester's ~200 000 instructions per Discover (callgrind). Its element is the
/// received event, so nothing here is generic; the ``ResponseSequence`` makes its typed response
/// from the event on the consumer's side.
final class ResponseQueue: Sendable {
    private struct State {
        var items = Deque<IncomingEvent>()
        var waiter: UnsafeContinuation<IncomingEvent?, any Error>?
        var ended = false
        var failure: (any Error)?
        var onEnd: (@Sendable () -> Void)?
    }

    /// What a consumer gets without waiting.
    private enum Take {
        case event(IncomingEvent)
        case failure(any Error)
        case end
        case wait
    }

    private let state = CoatyMutex(State())
    private let limit: Int

    /// - Parameter limit: the responses kept while the consumer has not taken them (the oldest
    ///   is dropped beyond it).
    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Hands `event` to the waiting consumer, or buffers it; ignored once ended.
    /// - Returns: `false` when the oldest buffered response was dropped to make room.
    @discardableResult
    func yield(_ event: IncomingEvent) -> Bool {
        let (waiter, kept) = state.withLock { state -> (UnsafeContinuation<IncomingEvent?, any Error>?, Bool) in
            guard !state.ended else { return (nil, true) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (waiter, true)
            }
            var kept = true
            if state.items.count >= limit {
                state.items.removeFirst()
                kept = false
            }
            state.items.append(event)
            return (nil, kept)
        }
        waiter?.resume(returning: event)
        return kept
    }

    /// Ends the responses: the consumer gets what is buffered, then `error` (once) or the end.
    /// Runs the end action (``onEnd(_:)``) once; later calls do nothing.
    /// - Parameter error: the failure that ends the request, if any.
    func finish(throwing error: (any Error)? = nil) {
        let (waiter, onEnd) = state.withLock {
            state -> (UnsafeContinuation<IncomingEvent?, any Error>?, (@Sendable () -> Void)?) in
            guard !state.ended else { return (nil, nil) }
            state.ended = true
            let ending = (state.waiter, state.onEnd)
            (state.waiter, state.onEnd) = (nil, nil)
            // A waiting consumer has taken everything buffered: it gets the error now, else after the buffer.
            if ending.0 == nil { state.failure = error }
            return ending
        }
        if let waiter {
            if let error { waiter.resume(throwing: error) } else { waiter.resume(returning: nil) }
        }
        onEnd?()
    }

    /// Sets the action that runs once when the responses end (``finish(throwing:)``, also by the
    /// consumer's cancellation); runs it now when they already ended.
    /// - Parameter action: the end action.
    func onEnd(_ action: @escaping @Sendable () -> Void) {
        let ended = state.withLock { state -> Bool in
            if state.ended { return true }
            state.onEnd = action
            return false
        }
        if ended { action() }
    }

    private static func take(_ state: inout State) -> Take {
        if let event = state.items.popFirst() { return .event(event) }
        guard state.ended else { return .wait }
        if let failure = state.failure {
            state.failure = nil
            return .failure(failure)
        }
        return .end
    }

    /// The next response, waiting for one; `nil` once ended (or when the task is cancelled, which
    /// ends the responses).
    /// - Throws: the error the responses ended with, once.
    func next() async throws -> IncomingEvent? {
        if Task.isCancelled {
            finish()
            return nil
        }
        switch state.withLock({ Self.take(&$0) }) {
        case .event(let event): return event
        case .failure(let error): throw error
        case .end: return nil
        case .wait: break
        }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<IncomingEvent?, any Error>) in
                let ready = state.withLock { state -> Take in
                    let ready = Self.take(&state)
                    if case .wait = ready {
                        precondition(state.waiter == nil, "A ResponseSequence iterator is iterated by two tasks at once")
                        state.waiter = continuation
                    }
                    return ready
                }
                switch ready {
                case .event(let event): continuation.resume(returning: event)
                case .failure(let error): continuation.resume(throwing: error)
                case .end: continuation.resume(returning: nil)
                case .wait: break
                }
            }
        } onCancel: {
            finish()
        }
    }
}
