import CoatyCore
import CoatySync
import Testing

@testable import CoatyCommunication
@testable import CoatyFilter
@testable import CoatyModel

/// The shared timer behind request timeouts (`ResponseSequence.responses(limit:timeout:)`).
struct RequestTimersTests {
    final class Fired: Sendable {
        let names = CoatyMutex<[String]>([])
        func append(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
    }

    @Test func firesInDeadlineOrderWhateverTheSchedulingOrder() async throws {
        let timers = RequestTimers()
        let fired = Fired()
        let start = ContinuousClock.now
        _ = timers.schedule(after: .milliseconds(300)) { fired.append("late") }
        _ = timers.schedule(after: .milliseconds(60)) { fired.append("early") }  // restarts the sleeper
        _ = timers.schedule(after: .milliseconds(150)) { fired.append("middle") }
        try await eventually(5) { fired.all.count == 3 }
        #expect(fired.all == ["early", "middle", "late"])
        #expect(ContinuousClock.now - start >= .milliseconds(300))
    }

    @Test func aCancelledTimeoutNeverFires() async throws {
        let timers = RequestTimers()
        let fired = Fired()
        let cancelled = timers.schedule(after: .milliseconds(50)) { fired.append("cancelled") }
        _ = timers.schedule(after: .milliseconds(120)) { fired.append("kept") }
        timers.cancel(cancelled)
        try await eventually(5) { !fired.all.isEmpty }
        try await Task.sleep(for: .milliseconds(100))
        #expect(fired.all == ["kept"])
    }
}
