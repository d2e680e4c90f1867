import CoatyCore
import CoatySync
import Logging
import Metrics
import Testing

@testable import CoatyCommunication
@testable import CoatyFilter
@testable import CoatyModel

/// The back-pressure gate: when a full observer holds the reads, when requests keep them going,
/// and how stalls are reported and (by choice) detached.
struct BackPressureGateTests {
    final class Calls: Sendable {
        let paused = CoatyMutex<[Bool]>([])
        let overflows = CoatyMutex(0)
        var last: Bool? { paused.withLock { $0.last } }
    }

    func makeGate(_ calls: Calls) -> BackPressureGate {
        BackPressureGate(
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            factory: NOOPMetricsHandler.instance,
            setPaused: { paused in calls.paused.withLock { $0.append(paused) } }
        )
    }

    func makeBuffer(_ gate: BackPressureGate, _ calls: Calls, limit: Int, headroom: Int? = nil) -> ObservationBuffer<
        Int
    > {
        ObservationBuffer(
            limit: limit,
            headroom: headroom,
            wakeups: ObservationWakeups(),
            gate: gate,
            overflow: { count in calls.overflows.withLock { $0 += count } },
            topicFilter: "coaty/3/-/ADV::t/+",
            releaser: ReleaseOnce {}
        )
    }

    @Test func aFullObserverHoldsTheReadsUntilItsConsumerTookHalf() async {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 4)
        for value in 1...3 { buffer.push(value) }
        #expect(calls.last == nil, "below the limit nothing is held")
        buffer.push(4)
        #expect(calls.last == true)
        #expect(gate.isPaused)
        buffer.push(5)  // read before the hold took effect: kept, not dropped
        #expect(await buffer.next(isolation: nil) == 1)
        #expect(await buffer.next(isolation: nil) == 2)
        #expect(gate.isPaused, "3 of 4 still buffered")
        #expect(await buffer.next(isolation: nil) == 3)
        #expect(calls.last == false, "at half the limit reading resumes")
        #expect(calls.paused.withLock { $0 } == [true, false])
        #expect(calls.overflows.withLock { $0 } == 0)
        #expect(gate.holdCount == 1)
    }

    /// A batched take (`EventObservation.Iterator.nextBatch`) takes what is buffered, in order,
    /// at most the count asked for, releases the hold as the single takes do, waits only while
    /// nothing is buffered, and ends with `nil`.
    @Test func aBatchTakesWhatIsBufferedInOrderAndReleasesTheHold() async throws {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 4)
        for value in 1...5 { buffer.push(value) }
        #expect(gate.isPaused)
        #expect(await buffer.nextBatch(maxCount: 2, isolation: nil) == [1, 2])
        #expect(gate.isPaused, "3 of 4 still buffered")
        #expect(await buffer.nextBatch(maxCount: 10, isolation: nil) == [3, 4, 5])
        #expect(calls.paused.withLock { $0 } == [true, false])
        #expect(buffer.progress.taken == 5)
        let waiting = Task { await buffer.nextBatch(maxCount: 10, isolation: nil) }
        try await eventually(5) { buffer.isConsumerWaiting }
        buffer.push(6)
        buffer.wake()
        #expect(await waiting.value == [6])
        buffer.push(7)
        buffer.finish()
        #expect(await buffer.nextBatch(maxCount: 10, isolation: nil) == nil, "an ended observation ends the batches")
        #expect(calls.overflows.withLock { $0 } == 0)
    }

    @Test func anOpenRequestKeepsReadingUntilTheHeadroom() {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 2, headroom: 6)
        gate.setRequestsOpen(true)
        for value in 1...5 { buffer.push(value) }
        #expect(!gate.isPaused, "a handler awaiting responses must get them while its observer is full")
        buffer.push(6)
        #expect(gate.isPaused, "the headroom bounds memory also while requests are open")
    }

    @Test func closingTheLastRequestHoldsTheReadsOfAFullObserver() {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 2, headroom: 100)
        gate.setRequestsOpen(true)
        for value in 1...3 { buffer.push(value) }
        #expect(!gate.isPaused)
        gate.setRequestsOpen(false)
        #expect(gate.isPaused)
    }

    @Test func endingAFullObservationReleasesItsHold() {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 2)
        for value in 1...2 { buffer.push(value) }
        #expect(gate.isPaused)
        buffer.finish()
        #expect(!gate.isPaused)
    }

    @Test func aDropPolicyNeverHoldsTheReads() {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 2)
        buffer.setPolicy(.dropOldest(3))
        for value in 1...10 { buffer.push(value) }
        #expect(!gate.isPaused)
        #expect(calls.overflows.withLock { $0 } == 7)
    }

    @Test func aStalledConsumerIsReportedOncePerTimeoutAndKeptByDefault() async {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 2)
        for value in 1...3 { buffer.push(value) }
        let start = ContinuousClock.now
        gate.checkStalls(timeout: .seconds(10), policy: .keepBackPressure, now: start)
        gate.checkStalls(timeout: .seconds(10), policy: .keepBackPressure, now: start + .seconds(9))
        #expect(gate.stallCount == 0)
        gate.checkStalls(timeout: .seconds(10), policy: .keepBackPressure, now: start + .seconds(10))
        #expect(gate.stallCount == 1)
        gate.checkStalls(timeout: .seconds(10), policy: .keepBackPressure, now: start + .seconds(15))
        #expect(gate.stallCount == 1, "rate-limited: once per timeout")
        gate.checkStalls(timeout: .seconds(10), policy: .keepBackPressure, now: start + .seconds(20))
        #expect(gate.stallCount == 2)
        #expect(gate.isPaused, "kept: still holding, nothing dropped")
        #expect(calls.overflows.withLock { $0 } == 0)
        #expect(await buffer.next(isolation: nil) == 1)
    }

    @Test func aConsumerThatTakesIsNotStalled() async {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 100)
        for value in 1...3 { buffer.push(value) }
        let start = ContinuousClock.now
        gate.checkStalls(timeout: .seconds(1), policy: .detach, now: start)
        _ = await buffer.next(isolation: nil)
        gate.checkStalls(timeout: .seconds(1), policy: .detach, now: start + .seconds(2))
        #expect(gate.stallCount == 0)
        #expect(buffer.detachment == nil)
    }

    @Test func detachEndsTheStalledObservationWithAReasonAndResumesReading() async {
        let calls = Calls()
        let gate = makeGate(calls)
        let buffer = makeBuffer(gate, calls, limit: 2)
        for value in 1...3 { buffer.push(value) }
        #expect(gate.isPaused)
        let start = ContinuousClock.now
        gate.checkStalls(timeout: .seconds(1), policy: .detach, now: start)
        gate.checkStalls(timeout: .seconds(1), policy: .detach, now: start + .seconds(1))
        #expect(!gate.isPaused, "the other observers get their events again")
        #expect(await buffer.next(isolation: nil) == nil)
        let detachment = buffer.detachment
        #expect(detachment?.waiting == 3)
        #expect(detachment?.topicFilter == "coaty/3/-/ADV::t/+")
        #expect(calls.overflows.withLock { $0 } == 3, "the discarded events are counted")
    }
}
