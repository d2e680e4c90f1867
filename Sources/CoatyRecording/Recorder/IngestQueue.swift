import CoatySync
import Synchronization

/// The bounded FIFO between the recorder's observers (producers) and its database writer (one
/// consumer): a producer **waits** while the queue is full (back-pressure, never a drop), the
/// writer takes batches, and ``flush()`` waits until everything enqueued so far is committed.
final class IngestQueue: Sendable {
    /// Mutations taken at once, and how many were taken from the queue up to and including them
    /// (what ``markCommitted(through:)`` is given once they are written).
    struct Batch: Sendable {
        /// The mutations, in queue order.
        var mutations: [RecorderMutation]
        /// The count of mutations taken from the queue so far, these included.
        var through: UInt64

        /// No mutations (a transaction held back takes this).
        static let empty = Batch(mutations: [], through: 0)
    }

    private struct State {
        var buffer: [RecorderMutation] = []
        var head = 0
        var enqueued: UInt64 = 0
        var committed: UInt64 = 0
        var taken: UInt64 = 0
        var closed = false
        var finished = false
        var blockedProducers = 0
        var producers: [CheckedContinuation<Void, Never>] = []
        var consumer: CheckedContinuation<Void, Never>?
        var wakeAt = 1
        var generation: UInt64 = 0
        var flushWaiters: [(target: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
        /// Since when the writer owes work without having committed any: set when mutations
        /// arrive at an idle queue, moved on by every commit, `nil` while nothing is owed.
        var owingSince: ContinuousClock.Instant?

        var count: Int { buffer.count - head }
        var flushRequested: Bool { !flushWaiters.isEmpty }

        mutating func takeConsumer() -> CheckedContinuation<Void, Never>? {
            defer { consumer = nil }
            return consumer
        }
    }

    let capacity: Int
    private let state = CoatyMutex(State())
    /// Told the depth at every change, under the queue's lock, so two reports reach it in the
    /// order of the changes (the recorder's `coaty_recorder_queue_depth` gauge; a depth read
    /// and recorded after the lock could overwrite a newer one with a stale value).
    private let depthChanged: @Sendable (Int) -> Void

    init(capacity: Int, depthChanged: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.capacity = max(1, capacity)
        self.depthChanged = depthChanged
    }

    /// How many mutations wait to be written.
    var pending: Int { state.withLock { $0.count } }

    /// Whether a producer waits for room.
    var hasBlockedProducers: Bool { state.withLock { $0.blockedProducers > 0 } }

    /// How long the writer has owed work without committing any (mutations waited, or a batch
    /// was being written, all that time), or `nil` when nothing is owed.
    var stalledFor: Duration? {
        state.withLock { $0.owingSince.map { ContinuousClock.now - $0 } }
    }

    /// Appends mutations in order, waiting while the queue is full (a batch larger than the room
    /// left goes in as room is made). After ``close()`` every mutation is still accepted (the
    /// writer drains everything before it ends).
    /// - Returns: the queue depth after the last append, and whether the producer had to wait.
    @discardableResult
    func enqueue(_ mutations: [RecorderMutation]) async -> (depth: Int, waited: Bool) {
        var waited = false
        var next = mutations.startIndex
        while true {
            let accepted = state.withLock { state -> (Int?, CheckedContinuation<Void, Never>?) in
                let room =
                    state.closed ? mutations.endIndex - next : min(capacity - state.count, mutations.endIndex - next)
                guard room > 0 || next == mutations.endIndex else { return (nil, nil) }
                if room > 0 {
                    if state.owingSince == nil { state.owingSince = .now }
                    state.buffer.append(contentsOf: mutations[next..<(next + room)])
                    state.enqueued += UInt64(room)
                    next += room
                    depthChanged(state.count)
                }
                let wake = state.count >= state.wakeAt ? state.takeConsumer() : nil
                return (next == mutations.endIndex ? state.count : nil, wake)
            }
            accepted.1?.resume()
            if let depth = accepted.0 { return (depth, waited) }
            waited = true
            state.withLock { $0.blockedProducers += 1 }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.count < capacity || state.closed { return true }
                    state.producers.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
            state.withLock { $0.blockedProducers -= 1 }
        }
    }

    /// Waits until every mutation enqueued before this call is committed (or returns at once when
    /// the writer has ended).
    func flush() async {
        // Nothing uncommitted (a request answered between bursts): no continuation to suspend on.
        if state.withLock({ $0.committed >= $0.enqueued || $0.finished }) { return }
        await withCheckedContinuation { continuation in
            let (done, wake) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?) in
                if state.committed >= state.enqueued || state.finished { return (true, nil) }
                state.flushWaiters.append((state.enqueued, continuation))
                return (false, state.takeConsumer())
            }
            wake?.resume()
            if done { continuation.resume() }
        }
    }

    /// Ends the queue: the writer drains what is queued and then gets `nil`.
    func close() {
        let (consumer, producers) = state.withLock { state in
            state.closed = true
            defer { state.producers.removeAll() }
            return (state.takeConsumer(), state.producers)
        }
        consumer?.resume()
        for producer in producers { producer.resume() }
    }

    /// The next batch of at most `maxCount` mutations: ``waitForBatch(maxCount:interval:)``, then
    /// ``take(maxCount:)``. Returns `nil` when the queue is closed and empty.
    func nextBatch(maxCount: Int, interval: Duration) async -> Batch? {
        guard await waitForBatch(maxCount: maxCount, interval: interval) else { return nil }
        let batch = take(maxCount: maxCount)
        return batch.mutations.isEmpty ? nil : batch
    }

    /// Waits for the first mutation, then up to `interval` for `maxCount` (cut short by a flush or
    /// ``close()``). Returns `false` when the queue is closed and empty.
    func waitForBatch(maxCount: Int, interval: Duration) async -> Bool {
        while !(await park(untilCount: 1, orFlush: false, timer: nil)) {}
        if interval > .zero {
            _ = await park(untilCount: max(1, maxCount), orFlush: true, timer: interval)
        }
        return state.withLock { $0.count > 0 }
    }

    /// Takes at most `maxCount` queued mutations at once (none when none is queued) and wakes the
    /// producers waiting for room.
    /// - Returns: the mutations, and how many were taken from the queue up to and including them
    ///   (for ``markCommitted(through:)``).
    func take(maxCount: Int) -> Batch {
        let maxCount = max(1, maxCount)
        let (batch, through, producers) = state.withLock {
            state -> ([RecorderMutation], UInt64, [CheckedContinuation<Void, Never>]) in
            let end = min(state.buffer.count, state.head + maxCount)
            let batch: [RecorderMutation]
            if state.head == 0 && end == state.buffer.count {
                // The batch takes everything queued (the usual case: the capacity is the batch
                // size): hand the buffer over instead of copying each mutation out of it.
                batch = state.buffer
                state.buffer = []
                state.buffer.reserveCapacity(min(capacity, maxCount))
                state.head = 0
            } else {
                batch = Array(state.buffer[state.head..<end])
                state.head = end
                if state.head > 4096 && state.head * 2 >= state.buffer.count {
                    state.buffer.removeFirst(state.head)
                    state.head = 0
                }
            }
            state.taken += UInt64(batch.count)
            if !batch.isEmpty { depthChanged(state.count) }
            defer { state.producers.removeAll() }
            return (batch, state.taken, state.producers)
        }
        for producer in producers { producer.resume() }
        return Batch(mutations: batch, through: through)
    }

    /// Marks the mutations taken up to and including `through` as committed (or given up) and
    /// wakes the flushes it satisfies. Batches are marked in the order they were taken.
    func markCommitted(through: UInt64) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.committed = max(state.committed, through)
            state.owingSince = state.committed < state.enqueued ? .now : nil
            var ready: [CheckedContinuation<Void, Never>] = []
            state.flushWaiters.removeAll { waiter in
                guard waiter.target <= state.committed else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Marks the writer as ended and wakes every flush waiter.
    func releaseFlushes() {
        let waiters = state.withLock { state in
            state.finished = true
            defer { state.flushWaiters.removeAll() }
            return state.flushWaiters.map(\.continuation)
        }
        for continuation in waiters { continuation.resume() }
    }

    /// Returns `true` at once when `count` mutations are queued, the queue is closed or (with
    /// `orFlush`) a flush waits; otherwise parks the consumer until one of these happens or `timer` elapses,
    /// and returns `false`.
    private func park(untilCount count: Int, orFlush: Bool, timer: Duration?) async -> Bool {
        let ready = state.withLock { state in state.count >= count || state.closed || (orFlush && state.flushRequested)
        }
        if ready { return true }
        var timerTask: Task<Void, Never>?
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (now, generation) = state.withLock { state -> (Bool, UInt64) in
                if state.count >= count || state.closed || (orFlush && state.flushRequested) { return (true, 0) }
                state.consumer = continuation
                state.wakeAt = count
                state.generation += 1
                return (false, state.generation)
            }
            if now {
                continuation.resume()
            } else if let timer {
                // Owned by this wait: cancelled when it returns.
                timerTask = Task { [weak self] in
                    try? await Task.sleep(for: timer)
                    self?.wakeConsumer(generation: generation)
                }
            }
        }
        timerTask?.cancel()
        return false
    }

    private func wakeConsumer(generation: UInt64) {
        state.withLock { state in state.generation == generation ? state.takeConsumer() : nil }?.resume()
    }
}
