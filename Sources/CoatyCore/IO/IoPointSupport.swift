import CoatySync
import ServiceLifecycle
import Synchronization

/// The association state of an IO point, broadcast to every watcher: each new stream yields the
/// current state at once, then every change.
final class AssociationStateBroadcast: Sendable {
    private struct Watchers {
        var isAssociated = false
        var nextToken = 0
        var continuations: [Int: AsyncStream<Bool>.Continuation] = [:]
        var finished = false
    }

    private let watchers = CoatyMutex(Watchers())

    var isAssociated: Bool { watchers.withLock { $0.isAssociated } }

    func stream() -> AsyncStream<Bool> {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(16))
        watchers.withLock { watchers in
            continuation.yield(watchers.isAssociated)
            guard !watchers.finished else {
                continuation.finish()
                return
            }
            let token = watchers.nextToken
            watchers.nextToken += 1
            watchers.continuations[token] = continuation
            continuation.onTermination = { [weak self] _ in
                self?.watchers.withLock { _ = $0.continuations.removeValue(forKey: token) }
            }
        }
        return stream
    }

    func set(_ isAssociated: Bool) {
        watchers.withLock { watchers in
            guard watchers.isAssociated != isAssociated else { return }
            watchers.isAssociated = isAssociated
            for continuation in watchers.continuations.values { continuation.yield(isAssociated) }
        }
    }

    func finish() {
        let continuations = watchers.withLock { watchers in
            defer {
                watchers.continuations = [:]
                watchers.finished = true
            }
            return Array(watchers.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}

/// What an IO point's publisher or observer shares: the Associate events of its context, its
/// association state, and the signal that stops its run.
final class AssociationFollower: Sendable {
    let associates: EventObservation<AssociateEvent>
    let state = AssociationStateBroadcast()
    private let stopSignal: AsyncStream<Void>
    private let stopContinuation: AsyncStream<Void>.Continuation

    init(_ manager: CommunicationManager, ioContextName: String) throws(CommunicationError) {
        associates = try manager.observeAssociate(ioContextName: ioContextName)
        (stopSignal, stopContinuation) = AsyncStream.makeStream(of: Void.self)
    }

    func stop() {
        stopContinuation.finish()
    }

    /// Runs `body` until it returns, ``stop()`` or graceful shutdown; then cancels it and ends
    /// the association state streams.
    func run(_ body: @escaping @Sendable () async -> Void) async {
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await body() }
                group.addTask { [stopSignal] in for await _ in stopSignal {} }
                await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: { [stopContinuation] in
            stopContinuation.finish()
        }
        state.set(false)
        state.finish()
    }
}
