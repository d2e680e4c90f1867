import CoatySync
import Testing

@testable import CoatyCommunication

/// The manager's background work is one group: finish() runs every job handed over before it,
/// cancels the children, waits for the last, and refuses jobs after it.
struct BackgroundWorkTests {
    @Test func finishRunsEveryJobHandedOverCancelsTheChildrenAndWaitsForAll() async throws {
        let childCancelled = Counter()
        let work = BackgroundWork(children: [
            {
                // Would wait an hour without the cancellation.
                if (try? await Task.sleep(for: .seconds(3600))) == nil { childCancelled.add() }
            }
        ])
        let done = Counter()
        for i in 0..<100 {
            #expect(work.spawn {
                try? await Task.sleep(for: .milliseconds(i % 10))
                done.add()
            })
        }
        // A job may hand over another while the group takes jobs.
        let nested = Counter()
        let started = Signal()
        work.spawn {
            work.spawn { nested.add() }
            started.fire()
        }
        await started.wait()
        let waiting = Counter()
        for _ in 0..<10 {
            work.spawn {
                if (try? await Task.sleep(for: .seconds(3600))) == nil { waiting.add() }
            }
        }
        await work.finish()
        #expect(childCancelled.value == 1)
        #expect(done.value == 100)
        #expect(nested.value == 1)
        #expect(waiting.value == 10, "jobs still waiting are cancelled, and finish waited for them")
        // After finish: refused, never run.
        let late = Counter()
        #expect(!work.spawn { late.add() })
        try await Task.sleep(for: .milliseconds(50))
        #expect(late.value == 0)
        // Finishing again returns at once.
        await work.finish()
    }
}

/// A counter shared by tasks.
private final class Counter: Sendable {
    private let count = CoatyMutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// A one-shot signal.
private final class Signal: Sendable {
    private let state = CoatyMutex<(fired: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func fire() {
        let waiters = state.withLock { state in
            state.fired = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.fired { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
