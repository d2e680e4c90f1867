import CoatySync
import Dispatch
import GRDB

/// Runs the `async` body of a transaction on the thread of the SQLite connection that holds the
/// transaction.
///
/// GRDB's transactions are synchronous closures, each on the dispatch queue of one connection
/// (the pool's writer, or one of its readers), and a GRDB `Database` may only be used there. The
/// closure therefore serves this executor: it runs the jobs of the body's task, one after the
/// other, and waits (the connection's thread, never a Swift concurrency thread) while the body
/// awaits something else, until the body has ended. Then the closure returns and GRDB commits, or
/// it throws and GRDB rolls back.
///
/// A job enqueued after the serving thread has left (none is expected: the body's task leaves
/// the executor's preference when the body ends) goes to the global concurrent executor.
final class ConnectionThreadExecutor: TaskExecutor {
    private enum Step {
        case run(UnownedJob)
        case wait
        case leave
    }

    private struct Queue {
        var jobs: [UnownedJob] = []
        /// Set by ``finish()``: the serving thread leaves once no job is left.
        var isFinished = false
        /// Whether a thread serves the queue; jobs go to the global executor once it has left.
        var isServed = true
    }

    private let queue = CoatyMutex(Queue())
    /// Signalled once per job and once by ``finish()``: the serving thread waits on it.
    private let wakeUp = DispatchSemaphore(value: 0)

    /// Queues a job for the serving thread.
    /// - Parameter job: the job.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let queued = queue.withLock { queue in
            guard queue.isServed else { return false }
            queue.jobs.append(job)
            return true
        }
        if queued {
            wakeUp.signal()
        } else {
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
        }
    }

    /// Runs the queued jobs on the calling thread, waiting for more, until ``finish()`` was called
    /// and no job is left.
    func serve() {
        let executor = asUnownedTaskExecutor()
        while true {
            let step = queue.withLock { queue -> Step in
                if !queue.jobs.isEmpty { return .run(queue.jobs.removeFirst()) }
                if queue.isFinished {
                    queue.isServed = false
                    return .leave
                }
                return .wait
            }
            switch step {
            case .run(let job): job.runSynchronously(on: executor)
            case .wait: wakeUp.wait()
            case .leave: return
            }
        }
    }

    /// Lets the serving thread leave once the queued jobs have run.
    func finish() {
        queue.withLock { $0.isFinished = true }
        wakeUp.signal()
    }

    /// Gives the queued jobs, and every later one, to the global concurrent executor: no thread
    /// will serve this executor (GRDB failed before running its closure).
    func abandon() {
        let jobs = queue.withLock { queue -> [UnownedJob] in
            guard queue.isServed else { return [] }
            queue.isServed = false
            defer { queue.jobs = [] }
            return queue.jobs
        }
        for job in jobs { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }
}

/// GRDB's `Database` handed from the connection's thread to the task whose body runs there.
///
/// `@unchecked Sendable` at the SQLite C boundary: a `Database` wraps a `sqlite3` connection that
/// may only be used on its connection's thread. The box only carries it to the body, whose every
/// job runs on that thread (``ConnectionThreadExecutor``) while the thread holds the transaction.
private struct DatabaseHandle: @unchecked Sendable {
    let db: Database
}

/// The `Database` the connection's thread hands over, or why it never will.
private final class DatabaseHandoff: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<DatabaseHandle, any Error>)
        case delivered(DatabaseHandle)
        case failed(any Error)
        case taken
    }

    private let state = CoatyMutex(State.pending)

    /// Called on the connection's thread.
    func deliver(_ db: Database) { settle(.success(DatabaseHandle(db: db))) }

    /// Called when GRDB fails before running the closure (cancelled, closed database).
    func fail(_ error: any Error) { settle(.failure(error)) }

    private func settle(_ result: Result<DatabaseHandle, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<DatabaseHandle, any Error>? in
            switch state {
            case .pending:
                switch result {
                case .success(let handle): state = .delivered(handle)
                case .failure(let error): state = .failed(error)
                }
                return nil
            case .waiting(let continuation):
                state = .taken
                return continuation
            case .delivered, .failed, .taken:
                return nil
            }
        }
        continuation?.resume(with: result)
    }

    /// The database, once delivered.
    func database() async throws -> DatabaseHandle {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<DatabaseHandle, any Error>? in
                switch state {
                case .pending:
                    state = .waiting(continuation)
                    return nil
                case .delivered(let handle):
                    state = .taken
                    return .success(handle)
                case .failed(let error):
                    state = .taken
                    return .failure(error)
                case .waiting, .taken:
                    return .failure(CoatySQLiteError("A transaction's database was taken twice"))
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

/// Thrown from GRDB's closure so that GRDB rolls back after the body threw.
private struct BodyThrew: Error {}

extension ConnectionThreadExecutor {
    /// Runs `body` in a GRDB transaction: `access` runs its closure on a connection's thread
    /// (GRDB's `DatabasePool.read` or `write`), which serves the body's jobs while the body runs in
    /// the calling task (its task-local values, priority and cancellation apply).
    ///
    /// The calling task moves to this executor before GRDB's closure starts, so the connection's
    /// thread runs the task as soon as it holds the transaction, and lets GRDB end the transaction
    /// as soon as the body has ended: the transaction is never held while the task waits for a
    /// thread of the cooperative pool.
    /// - Parameters:
    ///   - access: GRDB's access, committing when its closure returns, rolling back when it throws.
    ///   - body: the transaction's body, given the database.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws (after the rollback), or GRDB's error.
    static func run<T: Sendable>(
        in access: @escaping @Sendable (@escaping @Sendable (Database) throws -> Void) async throws -> Void,
        _ body: @escaping @Sendable (Database) async throws -> T
    ) async throws -> T {
        let executor = ConnectionThreadExecutor()
        let handoff = DatabaseHandoff()
        let bodyThrew = CoatyMutex(false)
        @Sendable func hold() async throws {
            do {
                try await access { db in
                    handoff.deliver(db)
                    executor.serve()
                    if bodyThrew.withLock({ $0 }) { throw BodyThrew() }
                }
            } catch {
                handoff.fail(error)
                executor.abandon()
                throw error
            }
        }
        async let held: Void = hold()
        let outcome = await withTaskExecutorPreference(executor) { () async -> Result<T, any Error> in
            let outcome: Result<T, any Error>
            do {
                outcome = .success(try await body(try await handoff.database().db))
            } catch {
                outcome = .failure(error)
                bodyThrew.withLock { $0 = true }
            }
            executor.finish()
            return outcome
        }
        do {
            try await held
        } catch {
            if case .failure(let bodyError) = outcome { throw bodyError }
            throw error
        }
        return try outcome.get()
    }
}
