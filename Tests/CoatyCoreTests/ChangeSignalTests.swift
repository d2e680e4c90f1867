import CoatySync
import Testing

/// ChangeSignal: a change signalled between a waiter's check and its wait is never missed, every
/// waiter wakes, cancellation and deadlines end a wait.
struct ChangeSignalTests {
    @Test func aChangeBeforeTheWaitEndsItAtOnce() async {
        let signal = ChangeSignal()
        let seen = signal.generation
        signal.signal()
        await signal.wait(beyond: seen)
        #expect(signal.generation == seen + 1)
    }

    @Test func everyWaiterWakes() async {
        let signal = ChangeSignal()
        let woken = Tally()
        let seen = signal.generation
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    await signal.wait(beyond: seen)
                    woken.add()
                }
            }
            // Signalled until every waiter has returned (a waiter may start after a signal: it returns at once then).
            while woken.value < 50 {
                signal.signal()
                await Task.yield()
            }
        }
        #expect(woken.value == 50)
    }

    @Test func aCounterReachesItsTargetThroughSignals() async {
        // The pattern the recorder uses: read the generation, check, wait.
        let signal = ChangeSignal()
        let count = Tally()
        async let producer: Void = {
            for _ in 0..<1_000 {
                count.add()
                signal.signal()
                if Bool.random() { await Task.yield() }
            }
        }()
        while true {
            let seen = signal.generation
            if count.value == 1_000 { break }
            await signal.wait(beyond: seen)
        }
        await producer
        #expect(count.value == 1_000)
    }

    @Test func cancellationEndsAWait() async {
        let signal = ChangeSignal()
        let waiter = Task { await signal.wait(beyond: signal.generation) }
        waiter.cancel()
        await waiter.value
        #expect(signal.generation == 0)
    }

    @Test func aDeadlineEndsAWait() async {
        let signal = ChangeSignal()
        let start = ContinuousClock.now
        await signal.wait(beyond: signal.generation, until: start + .milliseconds(20))
        #expect(ContinuousClock.now - start >= .milliseconds(20))
        #expect(signal.generation == 0)
    }
}

private final class Tally: Sendable {
    private let count = CoatyMutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
