import CoatyFilter
import CoatyModel
import CoatySync
import Synchronization

/// The response timeouts of a manager's requests, served by one sleeping task instead of a task
/// per request.
///
/// Scheduling a deadline later than the earliest pending one (the usual case: requests with the
/// same timeout) costs a dictionary insert, and cancelling one (the request ended first) a
/// removal; neither wakes a thread. The sleeper is restarted only for a new earliest deadline.
final class RequestTimers: Sendable {
    private struct Entry {
        let deadline: ContinuousClock.Instant
        let fire: @Sendable () -> Void
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        var nextToken = 0
        /// The deadline the sleeper waits for, when one runs.
        var sleeperDeadline: ContinuousClock.Instant?
        var sleeper: Task<Void, Never>?
    }

    private let state = CoatyMutex(State())

    /// Calls `fire` once `timeout` has elapsed, unless ``cancel(_:)`` comes first.
    ///
    /// - Parameters:
    ///   - timeout: the delay from now.
    ///   - fire: what to do on expiry (called without locks held, from the sleeper task).
    /// - Returns: the token for ``cancel(_:)``.
    func schedule(after timeout: Duration, _ fire: @escaping @Sendable () -> Void) -> Int {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        return state.withLock { state in
            state.nextToken += 1
            let token = state.nextToken
            state.entries[token] = Entry(deadline: deadline, fire: fire)
            if let current = state.sleeperDeadline, current <= deadline { return token }
            state.sleeper?.cancel()
            state.sleeperDeadline = deadline
            // Detached at a fixed priority: not at the priority of whichever request came first.
            // Owned by the timers: replaced (cancelled) when an earlier deadline comes, and it ends
            // by itself once no request waits.
            state.sleeper = Task.detached(priority: .high) { [weak self] in await self?.sleep(until: deadline) }
            return token
        }
    }

    /// Forgets a scheduled timeout (no effect when it already fired).
    ///
    /// - Parameter token: the token from ``schedule(after:_:)``.
    func cancel(_ token: Int) {
        _ = state.withLock { $0.entries.removeValue(forKey: token) }
    }

    private func sleep(until first: ContinuousClock.Instant) async {
        var deadline = first
        while true {
            do {
                try await Task.sleep(until: deadline, clock: .continuous)
            } catch {
                return  // replaced by a sleeper for an earlier deadline
            }
            let (due, next) = state.withLock { state -> ([@Sendable () -> Void], ContinuousClock.Instant?) in
                guard state.sleeperDeadline == deadline else { return ([], nil) }
                let now = ContinuousClock.now
                var due: [Entry] = []
                var next: ContinuousClock.Instant?
                for (token, entry) in state.entries {
                    if entry.deadline <= now {
                        due.append(entry)
                        state.entries[token] = nil
                    } else if next.map({ entry.deadline < $0 }) ?? true {
                        next = entry.deadline
                    }
                }
                state.sleeperDeadline = next
                if next == nil { state.sleeper = nil }
                // A late wake-up finds several due: fire them in deadline order.
                return (due.sorted { $0.deadline < $1.deadline }.map(\.fire), next)
            }
            for fire in due { fire() }
            guard let next else { return }
            deadline = next
        }
    }
}
