import CoatyFilter
import CoatyModel
import CoatySync
import ServiceLifecycle
import Synchronization

/// Whether an IO point is associated, now and at every change (distinct values); see
/// ``IoSourcePublisher/associationStates()`` and ``IoActorObserver/associationStates()``.
public typealias IoAssociationStates = UpdateSequence<Bool>

/// A state broadcast to every watcher: each new stream yields the current value at once, then
/// every change (distinct values; a slow watcher keeps the newest 16).
final class StateBroadcast<Value: Sendable & Equatable>: Sendable {
    private struct Watchers {
        var value: Value
        var nextToken = 0
        var continuations: [Int: AsyncStream<Value>.Continuation] = [:]
        var finished = false
    }

    private let watchers: CoatyMutex<Watchers>

    init(_ initial: Value) {
        watchers = CoatyMutex(Watchers(value: initial))
    }

    var value: Value { watchers.withLock { $0.value } }

    func stream() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: .bufferingNewest(16))
        watchers.withLock { watchers in
            continuation.yield(watchers.value)
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

    func set(_ value: Value) {
        watchers.withLock { watchers in
            guard watchers.value != value else { return }
            watchers.value = value
            for continuation in watchers.continuations.values { continuation.yield(value) }
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

/// The associations of one IoSource as its Associate events describe them (Coaty JS's IO source
/// items): one route shared by the associated actors, and the latest update rate.
struct SourceAssociations: Sendable, Equatable {
    var route: String?
    var actorIds: [CoatyUUID] = []
    var updateRate: Double?

    /// Applies an Associate of the source: one with a new route replaces the actors (they were
    /// associated on the old route); a disassociate drops its actor, and the last one the route
    /// and the rate.
    mutating func apply(_ data: AssociateEventData) {
        if let newRoute = data.associatingRoute {
            if route == newRoute {
                if !actorIds.contains(data.ioActorId) { actorIds.append(data.ioActorId) }
            } else {
                route = newRoute
                actorIds = [data.ioActorId]
            }
            updateRate = data.updateRate
        } else {
            actorIds.removeAll { $0 == data.ioActorId }
            if actorIds.isEmpty {
                route = nil
                updateRate = nil
            }
        }
    }

    /// The IO state of the source.
    var ioState: IoState {
        guard route != nil else { return IoState() }
        return IoState(hasAssociations: true, updateRate: updateRate)
    }
}

/// The associations of one IoActor as its Associate events describe them (Coaty JS's IO actor
/// items): the sources associated on each route.
struct ActorAssociations: Sendable, Equatable {
    var routes: [String: [CoatyUUID]] = [:]

    /// Whether at least one source is associated.
    var isAssociated: Bool { !routes.isEmpty }

    /// The associated sources.
    var sourceIds: [CoatyUUID] { routes.values.flatMap { $0 } }

    /// Applies an Associate of the actor: its source leaves every other route (and a
    /// disassociate every route). Returns a route that is new for the actor (not entered: see
    /// ``enter(_:ioSourceId:)``) and the routes no source is left on.
    mutating func apply(_ data: AssociateEventData) -> (added: String?, removed: [String]) {
        var removed: [String] = []
        for (route, sources) in routes where route != data.associatingRoute && sources.contains(data.ioSourceId) {
            let left = sources.filter { $0 != data.ioSourceId }
            routes[route] = left.isEmpty ? nil : left
            if left.isEmpty { removed.append(route) }
        }
        guard let route = data.associatingRoute else { return (nil, removed) }
        if let sources = routes[route] {
            if !sources.contains(data.ioSourceId) { routes[route] = sources + [data.ioSourceId] }
            return (nil, removed)
        }
        return (route, removed)
    }

    /// Enters a route returned as added by ``apply(_:)``.
    mutating func enter(_ route: String, ioSourceId: CoatyUUID) {
        routes[route] = [ioSourceId]
    }
}

/// What an IO point's publisher or observer shares: the Associate events of its context, its
/// association state, and the signal that stops its run.
final class AssociationFollower: Sendable {
    let associates: EventObservation<AssociateEvent>
    let state = StateBroadcast(false)
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
