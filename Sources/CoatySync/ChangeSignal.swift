/// Wakes the tasks waiting for something to change, from any thread: a generation counter and its
/// waiters. A waiter reads ``generation``, checks its condition, and waits beyond the generation it
/// read, so a change signalled between the check and the wait is never missed.
///
/// ```swift
/// while true {
///     let seen = progress.generation
///     if done() { break }
///     await progress.wait(beyond: seen)
/// }
/// ```
package final class ChangeSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = CoatyMutex(State())

    /// A signal of generation 0.
    package init() {}

    /// The number of changes signalled so far.
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Counts a change and wakes every waiter.
    package func signal() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            guard !state.waiters.isEmpty else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation is beyond `seen` (at once when it already is), or when the
    /// task is cancelled.
    /// - Parameter seen: the generation the caller read before checking its condition.
    package func wait(beyond seen: UInt64) async {
        let id = state.withLock { state -> Int in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.generation != seen || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// Like ``wait(beyond:)``, and returns at `deadline` at the latest.
    /// - Parameters:
    ///   - seen: the generation the caller read before checking its condition.
    ///   - deadline: the latest return.
    package func wait(beyond seen: UInt64, until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait(beyond: seen) }
            group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
            await group.next()
            group.cancelAll()
        }
    }
}
