import CoatySync
import Dispatch
import GRDB
import GRDBSQLite

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

/// Thrown from GRDB's closure so that GRDB rolls back after the body threw.
private struct BodyThrew: Error {}

extension ConnectionThreadExecutor {
    /// Runs `body` in a GRDB transaction: `access` runs its closure on a connection's thread
    /// (GRDB's `DatabasePool.asyncRead` or `asyncWrite`), which serves the body's jobs while the
    /// body runs in the calling task (its task-local values, priority and cancellation apply).
    ///
    /// `access` is GRDB's callback API, called from the calling task: the access is queued on the
    /// connection's dispatch queue at once, with no task of the cooperative pool to start first
    /// (a recorder's writer waited 3–12 ms per transaction for one on a loaded machine). The
    /// calling task moves to this executor before GRDB's closure starts, so the connection's
    /// thread runs the task as soon as it holds the transaction, and lets GRDB end the transaction
    /// as soon as the body has ended: the transaction is never held while the task waits for a
    /// thread of the cooperative pool.
    ///
    /// Cancellation (as GRDB's async API): a task cancelled before its transaction begins gets
    /// `CancellationError` and its body never runs; with `interruptible` (reads), cancelling it while
    /// the body runs interrupts the statement SQLite is running (`sqlite3_interrupt`), and the read
    /// fails with `CancellationError`. A write's body runs to its end once begun (it may check
    /// `Task.isCancelled` itself): an interrupted write would be rolled back by SQLite under GRDB.
    /// - Parameters:
    ///   - interruptible: whether cancellation interrupts the running body's statements.
    ///   - access: GRDB's access: runs its first closure in a transaction on the connection's
    ///     thread, commits when it returns, rolls back when it throws, then calls its second
    ///     closure with how that ended (also when the access could not begin).
    ///   - body: the transaction's body, given the database.
    /// - Returns: what `body` returns.
    /// - Throws: `CancellationError` when the task is cancelled before the access begins (or, when
    ///   interruptible, while it runs), what `body` throws (after the rollback), or GRDB's error.
    static func run<T: Sendable>(
        interruptible: Bool,
        in access: (
            _ work: @escaping @Sendable (Database) throws -> Void,
            _ ended: @escaping @Sendable (Result<Void, any Error>) -> Void
        ) -> Void,
        _ body: @escaping @Sendable (Database) async throws -> T
    ) async throws -> T {
        try Task.checkCancellation()
        let cancellation = AccessCancellation(interrupts: interruptible)
        return try await withTaskCancellationHandler {
            try await run(access, body, cancellation: cancellation)
        } onCancel: {
            cancellation.cancel()
        }
    }

    private static func run<T: Sendable>(
        _ access: (
            _ work: @escaping @Sendable (Database) throws -> Void,
            _ ended: @escaping @Sendable (Result<Void, any Error>) -> Void
        ) -> Void,
        _ body: @escaping @Sendable (Database) async throws -> T,
        cancellation: AccessCancellation
    ) async throws -> T {
        let executor = ConnectionThreadExecutor()
        let handoff = OneShot<DatabaseHandle>()
        let held = OneShot<Void>()
        let bodyThrew = CoatyMutex(false)
        access(
            { db in
                guard cancellation.begin(db) else {
                    // Cancelled while the access waited for the connection: the body never runs.
                    handoff.settle(.failure(CancellationError()))
                    executor.abandon()
                    throw CancellationError()
                }
                handoff.settle(.success(DatabaseHandle(db: db)))
                executor.serve()
                cancellation.end()
                if bodyThrew.withLock({ $0 }) { throw BodyThrew() }
            },
            { result in
                if case .failure(let error) = result {
                    // Before the body got the database (the database is closed, say): the body
                    // fails with this error, and its jobs go to the global executor.
                    handoff.settle(.failure(error))
                    executor.abandon()
                }
                held.settle(result)
            }
        )
        let outcome = await withTaskExecutorPreference(executor) { () async -> Result<T, any Error> in
            let outcome: Result<T, any Error>
            do {
                outcome = .success(try await body(try await handoff.value().db))
            } catch {
                outcome = .failure(error)
                bodyThrew.withLock { $0 = true }
            }
            executor.finish()
            return outcome
        }
        do {
            try await held.value()
        } catch {
            if case .failure(let bodyError) = outcome {
                if cancellation.interrupted, let error = bodyError as? DatabaseError,
                    error.resultCode == .SQLITE_INTERRUPT
                {
                    throw CancellationError()
                }
                throw bodyError
            }
            throw error
        }
        return try outcome.get()
    }
}

/// The cancellation of one access: whether it was cancelled, and the connection whose statements
/// a cancellation interrupts while the body runs.
private final class AccessCancellation: Sendable {
    private struct State {
        var cancelled = false
        var interrupted = false
        var serving: DatabaseHandle?
    }

    private let interrupts: Bool
    private let state = CoatyMutex(State())

    init(interrupts: Bool) { self.interrupts = interrupts }

    /// Whether a cancellation interrupted the body's statements.
    var interrupted: Bool { state.withLock { $0.interrupted } }

    /// On the connection's thread, before the body runs: `false` when already cancelled.
    func begin(_ db: Database) -> Bool {
        state.withLock { state in
            guard !state.cancelled else { return false }
            if interrupts { state.serving = DatabaseHandle(db: db) }
            return true
        }
    }

    /// On the connection's thread, once the body has ended (before the transaction ends: the
    /// commit or rollback is never interrupted).
    func end() { state.withLock { $0.serving = nil } }

    /// Marks the access cancelled; interrupts the body's running statement (under the lock, so
    /// only while the body runs).
    func cancel() {
        state.withLock { state in
            state.cancelled = true
            if let serving = state.serving {
                state.interrupted = true
                sqlite3_interrupt(serving.db.sqliteConnection)
            }
        }
    }
}
