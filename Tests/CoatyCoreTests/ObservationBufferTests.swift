import CoatyCore
import CoatySync
import Testing

@testable import CoatyCommunication
@testable import CoatyFilter
@testable import CoatyModel

/// The buffer behind every `EventObservation`: bounded, counted, and waking its consumer once per
/// delivered batch of messages.
struct ObservationBufferTests {
    final class Record: Sendable {
        let values = CoatyMutex<[Int]>([])
        let overflows = CoatyMutex(0)
        let released = CoatyMutex(false)
        var all: [Int] { values.withLock { $0 } }
    }

    func makeBuffer(limit: Int, record: Record, wakeups: ObservationWakeups = ObservationWakeups())
        -> ObservationBuffer<Int>
    {
        ObservationBuffer(
            limit: limit,
            wakeups: wakeups,
            overflow: { count in record.overflows.withLock { $0 += count } },
            releaser: ReleaseOnce { record.released.withLock { $0 = true } }
        )
    }

    @Test func aWaitingConsumerWakesAtTheFlushAndThenTakesTheWholeBatch() async throws {
        let record = Record()
        let wakeups = ObservationWakeups()
        let buffer = makeBuffer(limit: 100, record: record, wakeups: wakeups)
        let consumer = Task {
            for _ in 0..<3 {
                guard let value = await buffer.next(isolation: nil) else { return }
                record.values.withLock { $0.append(value) }
            }
        }
        try await eventually(5) { buffer.isConsumerWaiting }
        #expect(buffer.isConsumerWaiting)
        for value in 1...3 { buffer.push(value) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(record.all.isEmpty, "the consumer must not be woken before the batch ends")
        wakeups.flush()
        await consumer.value
        #expect(record.all == [1, 2, 3])
        #expect(record.overflows.withLock { $0 } == 0)
    }

    @Test func eventsBufferedWhileTheConsumerRunsNeedNoFlush() async {
        let record = Record()
        let buffer = makeBuffer(limit: 10, record: record)
        buffer.push(7)
        buffer.push(8)
        #expect(await buffer.next(isolation: nil) == 7)
        #expect(await buffer.next(isolation: nil) == 8)
    }

    @Test func byDefaultNothingIsDroppedBeyondTheLimit() async {
        let record = Record()
        let buffer = makeBuffer(limit: 2, record: record)
        for value in 1...5 { buffer.push(value) }
        #expect(record.overflows.withLock { $0 } == 0)
        for value in 1...5 { #expect(await buffer.next(isolation: nil) == value) }
    }

    @Test func dropOldestKeepsTheNewestAndCountsEveryDrop() async {
        let record = Record()
        let buffer = makeBuffer(limit: 100, record: record)
        buffer.setPolicy(.dropOldest(2))
        for value in 1...5 { buffer.push(value) }
        #expect(record.overflows.withLock { $0 } == 3)
        #expect(await buffer.next(isolation: nil) == 4)
        #expect(await buffer.next(isolation: nil) == 5)
    }

    @Test func dropNewestKeepsTheOldestAndCountsEveryDrop() async {
        let record = Record()
        let buffer = makeBuffer(limit: 100, record: record)
        buffer.setPolicy(.dropNewest(2))
        for value in 1...5 { buffer.push(value) }
        #expect(record.overflows.withLock { $0 } == 3)
        #expect(await buffer.next(isolation: nil) == 1)
        #expect(await buffer.next(isolation: nil) == 2)
    }

    @Test func cancellingTheConsumerEndsTheIterationAndReleasesTheRoute() async throws {
        let record = Record()
        let buffer = makeBuffer(limit: 10, record: record)
        let consumer = Task { await buffer.next(isolation: nil) }
        try await eventually(5) { buffer.isConsumerWaiting }
        consumer.cancel()
        #expect(await consumer.value == nil)
        #expect(record.released.withLock { $0 })
        buffer.push(1)  // ignored once finished
        #expect(await buffer.next(isolation: nil) == nil)
    }

    /// A busy stream must not keep a cancelled consumer's iteration alive (and its route subscribed).
    @Test func aCancelledConsumerEndsAlsoWhileEventsAreBuffered() async {
        let record = Record()
        let buffer = makeBuffer(limit: 10, record: record)
        for value in 1...3 { buffer.push(value) }
        let consumer = Task { () -> Int? in
            withUnsafeCurrentTask { $0?.cancel() }
            return await buffer.next(isolation: nil)
        }
        #expect(await consumer.value == nil)
        #expect(record.released.withLock { $0 })
    }

    @Test func aFinishedBufferDropsWhatItHeld() async {
        let record = Record()
        let buffer = makeBuffer(limit: 10, record: record)
        buffer.push(1)
        buffer.finish()
        #expect(await buffer.next(isolation: nil) == nil)
        #expect(record.released.withLock { $0 })
    }
}
