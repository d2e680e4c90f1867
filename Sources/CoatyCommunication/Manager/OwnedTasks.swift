import CoatySync

/// The short tasks a component starts from synchronous code — a routing callback on the network
/// thread that answers a Discover, a subscription change to bring in line — kept so that their
/// owner can wait for them: none outlives the owner's ``drain()``, none runs unaccounted.
///
/// A task removes itself when it ends. ``CommunicationManager/stop()`` drains the manager's after
/// the transport has disconnected, so a stopped manager has no task of its own left running.
package final class OwnedTasks: Sendable {
    private struct State {
        var running: [Int: Task<Void, Never>] = [:]
        var nextId = 0
        /// Waiters of ``drain()``, resumed once nothing runs.
        var drainers: [CheckedContinuation<Void, Never>] = []
    }

    private let state = CoatyMutex(State())

    /// An owner with no tasks.
    package init() {}

    /// How many tasks are running.
    package var count: Int { state.withLock { $0.running.count } }

    /// Starts `job` in a task this owner keeps until it ends.
    /// - Parameter job: the work; it runs in a new top-level task (no caller's context).
    package func spawn(_ job: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            let id = state.nextId
            state.nextId += 1
            // Owned here: removed by itself when it ends, awaited by drain().
            state.running[id] = Task { [self] in
                await job()
                finished(id)
            }
        }
    }

    /// Cancels every running task (each still ends on its own, see ``drain()``).
    package func cancelAll() {
        for task in state.withLock({ Array($0.running.values) }) { task.cancel() }
    }

    /// Waits until no task runs, including tasks started while it waits.
    package func drain() async {
        await withCheckedContinuation { continuation in
            let idle = state.withLock { state -> Bool in
                guard !state.running.isEmpty else { return true }
                state.drainers.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    private func finished(_ id: Int) {
        let drainers = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running[id] = nil
            guard state.running.isEmpty else { return [] }
            defer { state.drainers.removeAll() }
            return state.drainers
        }
        for drainer in drainers { drainer.resume() }
    }
}
