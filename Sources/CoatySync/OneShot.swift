/// A result handed over once, from any thread, to the one task that awaits it (a promise).
///
/// ```swift
/// let done = OneShot<Int>()
/// callbackAPI { value in done.settle(.success(value)) }
/// let value = try await done.value()
/// ```
package final class OneShot<Value: Sendable>: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<Value, any Error>)
        case settled(Result<Value, any Error>)
        case taken
    }

    private let state = CoatyMutex(State.pending)

    /// A pending result.
    package init() {}

    /// Settles the result; only the first call counts.
    /// - Parameter result: the result.
    package func settle(_ result: Result<Value, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            switch state {
            case .pending:
                state = .settled(result)
                return nil
            case .waiting(let continuation):
                state = .taken
                return continuation
            case .settled, .taken:
                return nil
            }
        }
        continuation?.resume(with: result)
    }

    /// The result, once settled. Awaited once: a second wait fails with ``OneShotAwaitedTwice``.
    /// - Returns: the value.
    /// - Throws: the settled error.
    package func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<Value, any Error>? in
                switch state {
                case .pending:
                    state = .waiting(continuation)
                    return nil
                case .settled(let result):
                    state = .taken
                    return result
                case .waiting, .taken:
                    return .failure(OneShotAwaitedTwice())
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

/// A ``OneShot`` was awaited a second time.
package struct OneShotAwaitedTwice: Error {
    package init() {}
}
