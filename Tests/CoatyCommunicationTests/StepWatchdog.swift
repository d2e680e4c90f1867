import Synchronization
import Testing

/// The step a test has reached, named by the test as it goes; a watchdog reports it when the test hangs.
///
/// A suite's time limit ends a hung test without saying where it waited. A test whose waits have no
/// bound of their own (an iterator's `next()`, a polled condition) names each step before it, and
/// ``withStepWatchdog(_:_:)`` records an issue naming the step that did not finish in time.
final class TestSteps: Sendable {
    private let current = Mutex("the start")

    /// Marks the start of `step`.
    func at(_ step: String) {
        current.withLock { $0 = step }
    }

    /// The step last marked.
    var step: String {
        current.withLock { $0 }
    }
}

/// Runs `body`; if it has not returned within `limit`, records an issue naming the step it is at.
///
/// The body keeps running (the suite's time limit ends it): the report is what this adds.
func withStepWatchdog(
    _ limit: Duration,
    _ body: (TestSteps) async throws -> Void
) async throws {
    let steps = TestSteps()
    let watchdog = Task {
        try await Task.sleep(for: limit)
        Issue.record("still waiting after \(limit) at step: \(steps.step)")
    }
    defer { watchdog.cancel() }
    try await body(steps)
}
