import CoatySync
import Testing

@testable import CoatyCommunication

/// The manager's short tasks are kept until they end: drain() waits for each, also for those
/// started while it waits; cancelAll() ends those that wait.
struct OwnedTasksTests {
    @Test func drainWaitsForEveryTaskAndCancelAllEndsWaitingOnes() async throws {
        let owner = OwnedTasks()
        let done = CoatyCounter()
        for i in 0..<100 {
            owner.spawn {
                try? await Task.sleep(for: .milliseconds(i % 10))
                // A task may start another: drain() waits for it too.
                if i == 99 { owner.spawn { done.add() } }
                done.add()
            }
        }
        await owner.drain()
        #expect(done.value == 101)
        #expect(owner.count == 0)

        let cancelled = CoatyCounter()
        for _ in 0..<10 {
            owner.spawn {
                // Would wait an hour without the cancellation.
                if (try? await Task.sleep(for: .seconds(3600))) == nil { cancelled.add() }
            }
        }
        #expect(owner.count == 10)
        owner.cancelAll()
        await owner.drain()
        #expect(cancelled.value == 10)
        // Draining an idle owner returns at once.
        await owner.drain()
    }
}

/// A counter shared by tasks.
private final class CoatyCounter: Sendable {
    private let count = CoatyMutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
