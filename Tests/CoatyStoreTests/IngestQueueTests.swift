import CoatyCore
import Synchronization
import Testing

@testable import CoatyStore
@testable import CoatyRecording

@Suite("Recorder ingest queue")
struct IngestQueueTests {
    static func mutations(_ count: Int) throws -> [RecorderMutation] {
        let receipt = ReceiptMetadata(sourceId: nil, eventType: "Advertise", topic: "t")
        return try RecorderFixtures.objects(count).map { .store($0, receipt) }
    }

    /// The depth is reported at every change under the queue's lock: with producers and a taker
    /// racing, the reports come in the order of the changes, so the last one is the queue's depth
    /// (a depth read and reported after the lock could end on a stale value).
    @Test func depthReportsFollowTheChangesInOrder() async throws {
        let reports = Mutex<[Int]>([])
        let queue = IngestQueue(capacity: 64) { depth in reports.withLock { $0.append(depth) } }
        let batches = try (0..<4).map { _ in try Self.mutations(50) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for batch in batches {
                group.addTask { await queue.enqueue(batch) }
            }
            group.addTask {
                var taken = 0
                while taken < 200 {
                    taken += queue.take(maxCount: 7).mutations.count
                    await Task.yield()
                }
            }
            try await group.waitForAll()
        }
        let all = reports.withLock { $0 }
        #expect(all.last == 0, "the last report is the empty queue")
        #expect(queue.pending == 0)
        #expect(all.allSatisfy { $0 >= 0 && $0 <= 200 })
    }

    /// Batches taken ahead of their commits (the SQLite writer's): a flush waits until the batch
    /// holding the last mutation enqueued before it is marked committed, not merely taken.
    @Test func aFlushWaitsForTheCommitOfTheBatchThatHoldsItsLastMutation() async throws {
        let queue = IngestQueue(capacity: 8)
        let first = try Self.mutations(3)
        await queue.enqueue(first)
        let taken = queue.take(maxCount: 2)
        #expect(taken.mutations == Array(first.prefix(2)))
        #expect(taken.through == 2)
        let flushed = Flag()
        let flush = Task {
            await queue.flush()
            flushed.set()
        }
        let rest = queue.take(maxCount: 8)
        #expect(rest.mutations == [first[2]])
        #expect(rest.through == 3)
        #expect(queue.take(maxCount: 8).mutations.isEmpty, "nothing is left to take")
        queue.markCommitted(through: taken.through)
        for _ in 0..<100 { await Task.yield() }
        #expect(!flushed.isSet, "the third mutation is taken, not committed")
        queue.markCommitted(through: rest.through)
        await flush.value
        #expect(flushed.isSet)
        #expect(queue.stalledFor == nil, "nothing is owed once everything is committed")
    }

    /// ``IngestQueue/waitForBatch(maxCount:interval:)`` returns at once for a full batch, and
    /// `false` only when the queue is closed and empty.
    @Test func waitingForABatchEndsWithTheClosedEmptyQueue() async throws {
        let queue = IngestQueue(capacity: 8)
        await queue.enqueue(try Self.mutations(4))
        #expect(await queue.waitForBatch(maxCount: 4, interval: .seconds(3600)))
        queue.close()
        #expect(await queue.waitForBatch(maxCount: 4, interval: .seconds(3600)), "closed, but 4 still queued")
        #expect(queue.take(maxCount: 8).mutations.count == 4)
        #expect(await queue.waitForBatch(maxCount: 4, interval: .seconds(3600)) == false)
    }
}

/// A flag set once, read from any task.
private final class Flag: Sendable {
    private let value = Atomic(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
