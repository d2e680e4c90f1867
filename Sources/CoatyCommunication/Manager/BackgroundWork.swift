import CoatySync

/// The communication manager's background work between ``CommunicationManager/start()`` and
/// ``CommunicationManager/stop()``, in one task group: its long-running children (the connection
/// watcher, the stall monitor) and the short jobs synchronous code hands it (a routing callback on
/// the network thread that answers a Discover, a subscription to bring in line with its
/// observers).
///
/// One task owns the group, and ``finish()`` ends it: every job handed over before it still runs,
/// all children are cancelled, and it returns once the last one ended. Nothing the manager started
/// outlives its `stop()`; a job handed over later is refused (``spawn(_:)`` returns `false`).
final class BackgroundWork: Sendable {
    typealias Job = @Sendable () async -> Void

    private let jobs: AsyncStream<Job>.Continuation
    private let owner: Task<Void, Never>

    /// Starts the group with its long-running children.
    /// - Parameter children: work that runs until it is cancelled by ``finish()``.
    init(children: [Job]) {
        let (stream, jobs) = AsyncStream.makeStream(of: Job.self)
        self.jobs = jobs
        // The group's one owner: awaited by finish(), which the manager's stop() calls.
        owner = Task {
            await withDiscardingTaskGroup { group in
                for child in children { group.addTask { await child() } }
                // Ends when finish() finishes the stream, after every job handed over before it
                // (this task itself is never cancelled, so none is dropped unrun).
                for await job in stream { group.addTask { await job() } }
                group.cancelAll()
            }
        }
    }

    /// Hands `job` to the group; `false` once ``finish()`` was called (the job does not run).
    @discardableResult
    func spawn(_ job: @escaping Job) -> Bool {
        if case .enqueued = jobs.yield(job) { return true }
        return false
    }

    /// Takes no more jobs, cancels every child (each still ends on its own) and returns once
    /// all ended.
    func finish() async {
        jobs.finish()
        await owner.value
    }
}
