import CoatyCommunication
import CoatyFilter
import CoatyModel
import CoatySync

/// Hands values to any number of `AsyncStream`s, each ending when its consumer stops or
/// ``finish()`` is called.
package final class Broadcast<Element: Sendable>: Sendable {
    private struct State {
        var sinks: [Int: AsyncStream<Element>.Continuation] = [:]
        var nextToken = 0
        var finished = false
    }

    private let state = CoatyMutex(State())

    /// A new stream receiving every later value; `initial` first, if given. Already finished: a
    /// finished stream.
    package init() {}

    package func stream(initial: Element? = nil) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        let token = state.withLock { state -> Int? in
            guard !state.finished else { return nil }
            defer { state.nextToken += 1 }
            state.sinks[state.nextToken] = continuation
            if let initial { continuation.yield(initial) }
            return state.nextToken
        }
        guard let token else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.sinks.removeValue(forKey: token) }
        }
        return stream
    }

    /// Hands `value` to every stream.
    package func yield(_ value: Element) {
        state.withLock { state in
            for sink in state.sinks.values { sink.yield(value) }
        }
    }

    /// Ends every stream, and those made later.
    package func finish() {
        let sinks = state.withLock { state in
            state.finished = true
            defer { state.sinks = [:] }
            return Array(state.sinks.values)
        }
        for sink in sinks { sink.finish() }
    }
}

/// The single run of a controller that tracks the network: ``begin(_:)`` claims it once, and
/// ``waitUntilReady()`` returns once ``markReady()`` has been called (before or after), as the
/// controllers' `started()` methods need.
package final class SingleRun: Sendable {
    private struct State {
        var hasBegun = false
        var isReady = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = CoatyMutex(State())

    package init() {}

    /// Claims the run.
    /// - Parameter name: the controller's name, for the error.
    /// - Throws: ``AgentRuntimeError/controllerAlreadyRan(_:)`` when it was claimed before.
    package func begin(_ name: String) throws(AgentRuntimeError) {
        let first = state.withLock { state -> Bool in
            defer { state.hasBegun = true }
            return !state.hasBegun
        }
        guard first else { throw .controllerAlreadyRan(name) }
    }

    /// Releases every waiter, now and later; later calls do nothing.
    package func markReady() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isReady = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once ``markReady()`` has been called.
    package func waitUntilReady() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.isReady { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
