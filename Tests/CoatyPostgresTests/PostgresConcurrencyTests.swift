import CoatyRecording
import CoatyStore
import CoatyStoreTestSupport
import CoatySync
import Dispatch
import Foundation
import PostgresNIO
import Testing

@testable import CoatyPostgres

extension PostgresBackendTests {
    /// 64 write transactions, each with a statement that sleeps in PostgreSQL, run from tasks that
    /// prefer an executor of two threads. A statement awaited through postgres-nio leaves the
    /// thread to the other transactions, so (nearly) all of them sleep at once; a statement that
    /// blocked its thread (a `wait()`) would let two sleep at a time, 64 × 0.25 s / 2 = 8 s.
    @Test func sixtyFourTransactionsProgressTogetherOnTwoThreads() async throws {
        let server = try #require(PostgresTestServer.current, "the suite has no PostgreSQL server")
        var configuration = try CoatyPostgres.PostgresDatabase.configuration(url: try server.makeDatabase())
        configuration.options.maximumConnections = 64
        let database = CoatyPostgres.PostgresDatabase(configuration: configuration)
        let transactions = 64
        let sleep = 0.25
        try await withThrowingTaskGroup(of: Void.self) { service in
            service.addTask { try await database.run() }
            defer { service.cancelAll() }
            let connection = try await database.makeConnection()
            let executor = TwoThreadExecutor()
            defer { executor.shutDown() }
            let sleeping = InFlight()
            let clock = ContinuousClock()
            let start = clock.now
            try await withTaskExecutorPreference(executor) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for id in 0..<transactions {
                        group.addTask {
                            try await connection.write { tx in
                                try await Note(id: id, text: "sleeps").write(to: tx)
                                sleeping.enter()
                                _ = try await tx.fetch("SELECT pg_sleep(\(sleep))")
                                sleeping.leave()
                                #expect(try await Note.read(tx).byKey("\(id)") != nil)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let elapsed = start.duration(to: clock.now)
            print(
                "\(transactions) PostgreSQL transactions sleeping \(sleep) s each on 2 threads: \(elapsed),"
                    + " at most \(sleeping.maximum) asleep at once"
            )
            #expect(try await connection.read { tx in try await Note.read(tx).count() } == transactions)
            #expect(executor.jobsRun > 0, "the transactions did not run on the two-thread executor")
            // Two blocked threads would let at most two sleep at once.
            #expect(sleeping.maximum >= 16, "at most \(sleeping.maximum) transactions progressed at once")
            // A generous bound: half the time two blocked threads would take at least.
            #expect(elapsed < .seconds(Double(transactions) * sleep / 4), "took \(elapsed)")
        }
    }
}

/// How many transactions are inside a statement, and the most at once.
private final class InFlight: Sendable {
    private let counts = CoatyMutex((now: 0, maximum: 0))

    func enter() {
        counts.withLock {
            $0.now += 1
            $0.maximum = max($0.maximum, $0.now)
        }
    }

    func leave() { counts.withLock { $0.now -= 1 } }

    var maximum: Int { counts.withLock { $0.maximum } }
}

/// A task executor of exactly two threads, taking jobs from one queue in order.
private final class TwoThreadExecutor: TaskExecutor {
    private let queue = CoatyMutex((jobs: [UnownedJob](), isStopping: false, run: 0))
    /// Signalled once per job and once per thread by ``shutDown()``.
    private let wakeUp = DispatchSemaphore(value: 0)

    init() {
        for index in 0..<2 {
            let thread = Thread { [self] in work() }
            thread.name = "two-thread-executor-\(index)"
            thread.start()
        }
    }

    /// How many jobs the threads have run.
    var jobsRun: Int { queue.withLock { $0.run } }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.jobs.append(job) }
        wakeUp.signal()
    }

    /// Lets both threads end once the queue is empty.
    func shutDown() {
        queue.withLock { $0.isStopping = true }
        wakeUp.signal()
        wakeUp.signal()
    }

    private func work() {
        let executor = asUnownedTaskExecutor()
        while true {
            wakeUp.wait()
            let job = queue.withLock { queue -> UnownedJob? in
                guard !queue.jobs.isEmpty else { return nil }
                queue.run += 1
                return queue.jobs.removeFirst()
            }
            if let job {
                job.runSynchronously(on: executor)
            } else if queue.withLock({ $0.isStopping }) {
                return
            }
        }
    }
}
