import CoatyFilter
public import CoatyModel
import CoatySync

/// The association state of one of the agent's IoSources or IoActors (Coaty JS's
/// `IoStateEventData`), as ``CommunicationManager/observeIoState(for:)-(IoSource)`` yields it.
public struct IoState: Sendable, Hashable {
    /// Whether at least one IoActor (for a source) or IoSource (for an actor) is associated.
    public var hasAssociations: Bool
    /// The recommended update rate in milliseconds for publishing the source's values, from its
    /// latest Associate event; `nil` while not associated, when the router gave none, and always
    /// for an actor.
    public var updateRate: Double?

    /// Creates a state; by default not associated.
    /// - Parameters:
    ///   - hasAssociations: whether the point is associated.
    ///   - updateRate: the recommended update rate in milliseconds.
    public init(hasAssociations: Bool = false, updateRate: Double? = nil) {
        self.hasAssociations = hasAssociations
        self.updateRate = updateRate
    }
}

/// The IO states of one IO point, as an `AsyncSequence`: the current state first, then every
/// change (a consumer that falls behind skips to the newest states). It ends when the iterating
/// task is cancelled.
public typealias IoStates = UpdateSequence<IoState>

/// The association tables of the agent's own IO points, fed by the Associate events of the IO
/// contexts of its IoNodes, and the IO state broadcast of each observed point.
final class IoStateTable: Sendable {
    private struct Table {
        var sources: [CoatyUUID: SourceAssociations] = [:]
        var actors: [CoatyUUID: ActorAssociations] = [:]
        var broadcasts: [CoatyUUID: StateBroadcast<IoState>] = [:]
        /// The Associate route of each IO context with an IoNode of the agent, by name.
        var contextTokens: [String: Int] = [:]

        /// The state of a point: as a source if it is associated as one, else as an actor
        /// (which never has an update rate).
        func state(of pointId: CoatyUUID) -> IoState {
            if let source = sources[pointId], source.route != nil { return source.ioState }
            return IoState(hasAssociations: actors[pointId]?.isAssociated ?? false)
        }

        func publish(_ pointIds: some Sequence<CoatyUUID>) {
            for id in pointIds { broadcasts[id]?.set(state(of: id)) }
        }
    }

    private let table = CoatyMutex(Table())

    /// The states of a point: the current one first, then every change.
    func states(of pointId: CoatyUUID) -> IoStates {
        let broadcast = table.withLock { table in
            if let broadcast = table.broadcasts[pointId] { return broadcast }
            let broadcast = StateBroadcast(table.state(of: pointId))
            table.broadcasts[pointId] = broadcast
            return broadcast
        }
        return IoStates(broadcast.stream())
    }

    /// Applies an Associate event to those of its points the agent's `nodes` hold (Coaty JS's
    /// `_handleAssociate`).
    func apply(_ data: AssociateEventData, nodes: [IoNode]) {
        let ownsSource = nodes.contains { node in node.ioSources.contains { $0.objectId == data.ioSourceId } }
        let ownsActor = nodes.contains { node in node.ioActors.contains { $0.objectId == data.ioActorId } }
        guard ownsSource || ownsActor else { return }
        table.withLock { table in
            if ownsSource {
                table.sources[data.ioSourceId, default: SourceAssociations()].apply(data)
                if table.sources[data.ioSourceId]?.route == nil { table.sources[data.ioSourceId] = nil }
                table.publish([data.ioSourceId])
            }
            if ownsActor {
                var actor = table.actors[data.ioActorId] ?? ActorAssociations()
                if let route = actor.apply(data).added { actor.enter(route, ioSourceId: data.ioSourceId) }
                table.actors[data.ioActorId] = actor.isAssociated ? actor : nil
                table.publish([data.ioActorId])
            }
        }
    }

    /// Forgets the associations of the points the agent's `nodes` no longer hold (their states
    /// become not associated), or of every point when `nodes` is `nil`.
    func forget(pointsNotIn nodes: [IoNode]?) {
        table.withLock { table in
            let kept = Set((nodes ?? []).flatMap { $0.ioSources.map(\.objectId) + $0.ioActors.map(\.objectId) })
            let dropped = Set(table.sources.keys).union(table.actors.keys).subtracting(kept)
            for id in dropped {
                table.sources[id] = nil
                table.actors[id] = nil
            }
            table.publish(dropped)
        }
    }

    /// Records the IO contexts that have an IoNode of the agent; returns the contexts new to it
    /// (with a fresh route token each) and the tokens of those it no longer has.
    func setContexts(
        _ names: Set<String>,
        makeToken: () -> Int
    ) -> (added: [(name: String, token: Int)], removed: [(name: String, token: Int)]) {
        table.withLock { table in
            let removed = table.contextTokens.filter { !names.contains($0.key) }.map { (name: $0.key, token: $0.value) }
            for (name, _) in removed { table.contextTokens[name] = nil }
            var added: [(name: String, token: Int)] = []
            for name in names.sorted() where table.contextTokens[name] == nil {
                let token = makeToken()
                table.contextTokens[name] = token
                added.append((name, token))
            }
            return (added, removed)
        }
    }
}

// MARK: - Observing IO states

extension CommunicationManager {
    /// Observes the association state of one of this agent's IoSources (Coaty JS's
    /// `observeIoState`): whether an IoActor is associated with it, and the update rate an IO
    /// router recommends for publishing its values.
    ///
    /// The manager follows the Associate events of the IO context of each IoNode added with
    /// ``addIoNode(_:)`` from the moment it is added, so the first state yielded is the current
    /// one, whenever this is called (not associated for a source of no IoNode of the agent).
    ///
    /// ```swift
    /// for await state in manager.observeIoState(for: thermometer) {
    ///     if state.hasAssociations { startSampling(every: state.updateRate) } else { stopSampling() }
    /// }
    /// ```
    ///
    /// - Parameter source: the IoSource (held by one of the agent's IoNodes).
    /// - Returns: the current state, then every change; when the manager stops, not associated.
    public func observeIoState(for source: IoSource) -> IoStates {
        ioStateTable.states(of: source.objectId)
    }

    /// Observes the association state of one of this agent's IoActors (Coaty JS's
    /// `observeIoState`): whether at least one IoSource is associated with it. Its
    /// ``IoState/updateRate`` is always `nil`.
    ///
    /// - Parameter actor: the IoActor (held by one of the agent's IoNodes).
    /// - Returns: the current state, then every change; when the manager stops, not associated.
    public func observeIoState(for actor: IoActor) -> IoStates {
        ioStateTable.states(of: actor.objectId)
    }

    /// Changes the agent's IoNodes and, in the same critical section (so concurrent changes
    /// cannot reorder), subscribes the Associate events of each IO context that gained its first
    /// IoNode and unsubscribes those of each context that lost its last one; then forgets the
    /// associations of points no node holds any more and waits until the new subscriptions are
    /// established, so the router's Associate events for a node advertised next are seen.
    ///
    /// - Parameter change: the change of the agent's IoNodes; returns whether it changed any.
    /// - Returns: what `change` returned.
    @discardableResult
    func changeIoNodes(_ change: (inout [IoNode]) -> Bool) async -> Bool {
        let table = ioStateTable
        let (changed, subscribed, unsubscribed, nodes) = state.withLock { state in
            let changed = change(&state.ioNodes)
            let contexts = table.setContexts(Set(state.ioNodes.map(\.name))) { state.makeToken() }
            var subscribed: [String] = []
            for (name, token) in contexts.added {
                let event = CoatyTopic.Event.associate(ioContextName: name)
                guard let filter = try? subscriptionFilter(event) else { continue }
                let sink: EventSink = { [weak self] incoming in
                    guard let self, case .associate(let data) = incoming.payload else { return }
                    table.apply(data, nodes: self.ioNodes)
                }
                state.refCounts[filter, default: 0] += 1
                state.setRoute(event.level, token: token, sink: sink)
                subscribed.append(filter)
            }
            var unsubscribed: [String] = []
            for (name, token) in contexts.removed {
                let event = CoatyTopic.Event.associate(ioContextName: name)
                guard let filter = try? subscriptionFilter(event) else { continue }
                state.setRoute(event.level, token: token, sink: nil)
                let count = state.refCounts[filter] ?? 0
                state.refCounts[filter] = count > 1 ? count - 1 : nil
                unsubscribed.append(filter)
            }
            return (changed, subscribed, unsubscribed, state.ioNodes)
        }
        table.forget(pointsNotIn: nodes)
        for filter in subscribed + unsubscribed { spawnReconcile(filter) }
        for filter in subscribed { await awaitEstablished(filter) }
        return changed
    }
}
