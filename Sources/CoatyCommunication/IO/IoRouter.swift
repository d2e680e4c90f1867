import CoatyFilter
public import CoatyModel
import CoatySync
public import Logging
public import ServiceLifecycle
import Synchronization

/// Routes IO values within one ``IoContext``: associates IoSources with IoActors of the IoNodes
/// of that context by publishing Associate events, following Coaty JS's rule-based IO router.
///
/// While it runs, the router
/// - advertises its IO context (with `parentObjectId` set to the agent's identity) and answers
///   Discovers of it;
/// - accepts Update events of its IO context (core type IoContext, the context's objectId) from
///   any agent: it takes the updated context (as ``updateContext(_:)``), re-advertises it,
///   re-evaluates its rules (publishing the changed associations), then answers with a Complete
///   carrying the context it now has;
/// - manages every IoNode advertised (or resolved to its initial Discover of core type IoNode)
///   whose `name` is the context's name; a node advertised without sources and actors, or
///   deadvertised, is no longer managed;
/// - after each change evaluates its ``IoAssociationRule``s over every value-compatible pair of
///   a managed source and a managed actor, publishes an Associate for each new pair (and for a
///   kept pair whose update rate changed) and a disassociate (no route) for each pair no longer
///   associated;
/// - when it stops, disassociates every pair it associated.
///
/// All associations of one source use one route: the source's `externalRoute`, else its Coaty
/// route `coaty/3/<namespace>/IOV/<ioSourceId>`; the route is kept while the source stays
/// managed. The update rate of an association is the larger of the source's and the actor's
/// `updateRate`, and then the largest over all associations of the source.
///
/// ```swift
/// let router = IoRouter.basic(communicationManager: manager, ioContext: IoContext(name: "kitchen"))
/// let group = ServiceGroup(services: [manager, router], logger: logger)
/// try await group.run()
/// ```
public final class IoRouter: Service, Sendable {
    /// The manager the router publishes and observes with.
    public let communicationManager: CommunicationManager
    /// Whether an IoSource and an IoActor may be associated at all (checked before the rules).
    public let valueTypesCompatible: @Sendable (IoSource, IoActor) -> Bool
    private let logger: Logger
    private let state: CoatyMutex<RouterState>

    /// Creates a rule-based router; nothing happens until ``run()``.
    ///
    /// - Parameters:
    ///   - communicationManager: the agent's manager.
    ///   - ioContext: the IO context whose IoNodes are routed (its `name` is the nodes' name).
    ///   - rules: the association rules; no rule means no association.
    ///   - valueTypesCompatible: the compatibility check; by default ``valueTypesMatch(_:_:)``.
    ///   - logger: where to log; the manager's logger when `nil`.
    public init(
        communicationManager: CommunicationManager,
        ioContext: IoContext,
        rules: [IoAssociationRule],
        valueTypesCompatible: @escaping @Sendable (IoSource, IoActor) -> Bool = IoRouter.valueTypesMatch,
        logger: Logger? = nil
    ) {
        self.communicationManager = communicationManager
        self.valueTypesCompatible = valueTypesCompatible
        self.logger = logger ?? communicationManager.logger
        var context = ioContext
        context.parentObjectId = communicationManager.identity.objectId
        self.state = CoatyMutex(RouterState(context: context, rules: rules))
    }

    /// Creates the basic router: every value-compatible pair of the context is associated.
    ///
    /// - Parameters:
    ///   - communicationManager: the agent's manager.
    ///   - ioContext: the IO context.
    ///   - logger: where to log; the manager's logger when `nil`.
    /// - Returns: a router with the single rule ``IoAssociationRule/anyCompatiblePair``.
    public static func basic(
        communicationManager: CommunicationManager,
        ioContext: IoContext,
        logger: Logger? = nil
    ) -> IoRouter {
        IoRouter(
            communicationManager: communicationManager,
            ioContext: ioContext,
            rules: [.anyCompatiblePair],
            logger: logger
        )
    }

    /// The IO context (its `parentObjectId` is the agent's identity).
    public var ioContext: IoContext { state.withLock { $0.context } }

    /// The IoNodes currently managed, in the order they were first managed.
    public var managedIoNodes: [IoNode] { state.withLock { $0.nodes } }

    /// The associations currently held (what the router last published).
    public var associations: [IoAssociation] { state.withLock { $0.associations } }

    /// The rules.
    public var rules: [IoAssociationRule] { state.withLock { $0.rules } }

    /// Replaces the rules; a running router re-evaluates its associations.
    /// - Parameter rules: the new rules.
    public func defineRules(_ rules: [IoAssociationRule]) {
        let inputs = state.withLock { state in
            state.rules = rules
            return state.inputs
        }
        inputs?.yield(.reevaluate)
    }

    /// Replaces the IO context (keeping its `name` routes the same nodes; a new name drops none of
    /// the managed nodes until they are deadvertised); a running router re-advertises it and
    /// re-evaluates its associations. Another agent does the same with an Update of the context
    /// (``CommunicationManager/publishUpdate(_:)``), which the router completes.
    /// - Parameter context: the new context.
    public func updateContext(_ context: IoContext) {
        let inputs = state.withLock { state in
            state.context = ownContext(context)
            return state.inputs
        }
        inputs?.yield(.contextChanged)
    }

    /// The context with its `parentObjectId` set to the agent's identity.
    private func ownContext(_ context: IoContext) -> IoContext {
        var context = context
        context.parentObjectId = communicationManager.identity.objectId
        return context
    }

    /// Ends ``run()``: the router disassociates every pair it associated and returns.
    public func stop() {
        let inputs = state.withLock { state in
            state.stopped = true
            return state.inputs
        }
        inputs?.finish()
    }

    /// Routes until graceful shutdown, ``stop()`` or cancellation, then disassociates every pair.
    ///
    /// - Throws: ``CommunicationError`` when the context's name cannot be a topic level or the
    ///   observations cannot be made.
    public func run() async throws {
        let contextName = ioContext.name
        _ = try communicationManager.topic(.associate(ioContextName: contextName))
        let advertises = try communicationManager.observeAdvertise(coreType: .ioNode)
        let deadvertises = try communicationManager.observeDeadvertise()
        let discovers = try communicationManager.observeDiscover()
        let updates = try communicationManager.observeUpdate(coreType: .ioContext)
        let (inputs, continuation) = AsyncStream.makeStream(of: RouterInput.self)
        let alreadyStopped = state.withLock { state -> Bool in
            guard !state.stopped else { return true }
            state.inputs = continuation
            return false
        }
        if alreadyStopped { return }

        await withDiscardingTaskGroup { group in
            group.addTask {
                for await event in advertises {
                    if let node = event.object.as(IoNode.self) { continuation.yield(.advertised(node)) }
                }
            }
            group.addTask {
                for await event in deadvertises { continuation.yield(.deadvertised(event.objectIds)) }
            }
            group.addTask {
                for await event in discovers { continuation.yield(.discover(event)) }
            }
            group.addTask {
                for await event in updates { continuation.yield(.updated(event)) }
            }
            group.addTask { [communicationManager] in
                await advertises.subscribed()
                await deadvertises.subscribed()
                await discovers.subscribed()
                await updates.subscribed()
                continuation.yield(.contextChanged)
                do {
                    for try await resolve in communicationManager.publishDiscover(.coreTypes([.ioNode])) {
                        if let node = resolve.data.object?.as(IoNode.self) { continuation.yield(.advertised(node)) }
                    }
                } catch {
                    // The Discover ends with the router (cancellation); nothing to route then.
                }
            }
            await withGracefulShutdownHandler {
                for await input in inputs {
                    await self.handle(input)
                }
            } onGracefulShutdown: {
                continuation.finish()
            }
            group.cancelAll()
        }
        await disassociateAll()
    }

    // MARK: Handling inputs

    private func handle(_ input: RouterInput) async {
        switch input {
        case .advertised(let node):
            guard node.name == ioContext.name else { return }
            if node.ioSources.isEmpty && node.ioActors.isEmpty {
                _ = state.withLock { $0.unmanage([node.objectId], readvertised: nil) }
            } else {
                state.withLock { state in
                    _ = state.unmanage([node.objectId], readvertised: node)
                    state.nodes.append(node)
                }
            }
            await evaluate()
        case .deadvertised(let ids):
            let changed = state.withLock { $0.unmanage(ids, readvertised: nil) }
            if changed { await evaluate() }
        case .discover(let event):
            let context = ioContext
            guard let object = try? AnyCoatyObject(context), event.data.matches(object) else { return }
            do {
                try await event.resolve(object: context)
            } catch {
                logger.warning("IO router failed to resolve its IO context", metadata: ["error": "\(error)"])
            }
        case .contextChanged:
            await contextChanged()
        case .updated(let update):
            // Coaty JS's IoRouter: take the context, re-advertise it, re-evaluate, then complete.
            guard update.object.objectId == ioContext.objectId else { return }
            guard let context = update.object.as(IoContext.self) else {
                logger.warning("IO router received an Update of its IO context it cannot read")
                return
            }
            state.withLock { $0.context = ownContext(context) }
            await contextChanged()
            do {
                try await update.complete(object: ioContext)
            } catch {
                logger.warning(
                    "IO router failed to complete an Update of its IO context",
                    metadata: ["error": "\(error)"]
                )
            }
        case .reevaluate:
            await evaluate()
        }
    }

    /// Advertises the changed context and re-evaluates the associations (Coaty JS's
    /// `onIoContextChanged` of its rule-based router).
    private func contextChanged() async {
        do {
            try await communicationManager.publishAdvertise(ioContext)
        } catch {
            logger.warning("IO router failed to advertise its IO context", metadata: ["error": "\(error)"])
        }
        await evaluate()
    }

    /// Matches the rules, resolves update rates and publishes the differences (Coaty JS's
    /// match → resolve → act).
    private func evaluate() async {
        let (nodes, rules, context) = state.withLock { ($0.nodes, $0.rules, $0.context) }
        let wanted = resolve(match(nodes: nodes, rules: rules, context: context))
        let current = state.withLock { $0.associations }

        var kept: [IoAssociation] = []
        var published: [AssociateEventData] = []
        var remaining = wanted
        for association in current {
            let key = PairKey(association.ioSourceId, association.ioActorId)
            guard let index = remaining.firstIndex(where: { $0.key == key }) else {
                published.append(
                    AssociateEventData(ioSourceId: association.ioSourceId, ioActorId: association.ioActorId)
                )
                continue
            }
            let pair = remaining.remove(at: index)
            let updated = IoAssociation(
                ioSourceId: association.ioSourceId,
                ioActorId: association.ioActorId,
                route: association.route,
                updateRate: pair.updateRate
            )
            if pair.updateRate != association.updateRate { published.append(updated.eventData) }
            kept.append(updated)
        }
        for pair in remaining {
            guard let route = route(for: pair.source) else { continue }
            let association = IoAssociation(
                ioSourceId: pair.source.objectId,
                ioActorId: pair.actor.objectId,
                route: route,
                updateRate: pair.updateRate
            )
            published.append(association.eventData)
            kept.append(association)
        }
        state.withLock { $0.associations = kept }
        for data in published { await publish(data, contextName: context.name) }
    }

    private func match(nodes: [IoNode], rules: [IoAssociationRule], context: IoContext) -> [WantedPair] {
        var sources: [(IoSource, IoNode)] = []
        var actors: [(IoActor, IoNode)] = []
        for node in nodes {
            for source in node.ioSources where !sources.contains(where: { $0.0.objectId == source.objectId }) {
                sources.append((source, node))
            }
            for actor in node.ioActors where !actors.contains(where: { $0.0.objectId == actor.objectId }) {
                actors.append((actor, node))
            }
        }
        let typedRules = Dictionary(grouping: rules.filter { $0.valueType != nil }, by: { $0.valueType ?? "" })
        let globalRules = rules.filter { $0.valueType == nil }
        var pairs: [WantedPair] = []
        for (source, sourceNode) in sources {
            let applicable = typedRules[source.valueType] ?? globalRules
            for (actor, actorNode) in actors where valueTypesCompatible(source, actor) {
                let candidate = IoAssociationCandidate(
                    source: source,
                    sourceNode: sourceNode,
                    actor: actor,
                    actorNode: actorNode,
                    context: context,
                    router: self
                )
                if applicable.contains(where: { $0.condition(candidate) }) {
                    let rate = Self.cumulatedUpdateRate(source.updateRate, actor.updateRate)
                    pairs.append(WantedPair(source: source, actor: actor, updateRate: rate))
                }
            }
        }
        return pairs
    }

    /// Gives every association of one source the largest rate over them.
    private func resolve(_ pairs: [WantedPair]) -> [WantedPair] {
        var rates: [CoatyUUID: Double] = [:]
        for pair in pairs {
            if let rate = Self.cumulatedUpdateRate(pair.updateRate, rates[pair.source.objectId]) {
                rates[pair.source.objectId] = rate
            }
        }
        return pairs.map { WantedPair(source: $0.source, actor: $0.actor, updateRate: rates[$0.source.objectId]) }
    }

    /// The route of a source: kept while the source stays managed.
    private func route(for source: IoSource) -> String? {
        if let route = state.withLock({ $0.sourceRoutes[source.objectId] }) { return route }
        let route: String
        if let external = source.externalRoute {
            route = external
        } else {
            do {
                route = try communicationManager.ioValueTopic(ioSourceId: source.objectId)
            } catch {
                logger.warning("IO router cannot route an IoSource", metadata: ["ioSourceId": "\(source.objectId)"])
                return nil
            }
        }
        state.withLock { $0.sourceRoutes[source.objectId] = route }
        return route
    }

    private func publish(_ data: AssociateEventData, contextName: String) async {
        do {
            try await communicationManager.publishAssociate(ioContextName: contextName, data: data)
        } catch {
            logger.warning(
                "IO router failed to publish an Associate",
                metadata: ["ioSourceId": "\(data.ioSourceId)", "ioActorId": "\(data.ioActorId)", "error": "\(error)"]
            )
        }
    }

    private func disassociateAll() async {
        let (associations, name) = state.withLock { state in
            defer {
                state.associations = []
                state.nodes = []
                state.sourceRoutes = [:]
                state.inputs = nil
                state.stopped = true
            }
            return (state.associations, state.context.name)
        }
        for association in associations {
            await publish(
                AssociateEventData(ioSourceId: association.ioSourceId, ioActorId: association.ioActorId),
                contextName: name
            )
        }
    }
}

extension IoAssociation {
    fileprivate var eventData: AssociateEventData {
        AssociateEventData(
            ioSourceId: ioSourceId,
            ioActorId: ioActorId,
            associatingRoute: route,
            updateRate: updateRate
        )
    }
}

private struct PairKey: Hashable {
    let source: CoatyUUID
    let actor: CoatyUUID
    init(_ source: CoatyUUID, _ actor: CoatyUUID) {
        self.source = source
        self.actor = actor
    }
}

private struct WantedPair {
    let source: IoSource
    let actor: IoActor
    let updateRate: Double?
    var key: PairKey { PairKey(source.objectId, actor.objectId) }
}

private enum RouterInput: Sendable {
    case advertised(IoNode)
    case deadvertised([CoatyUUID])
    case discover(DiscoverEvent)
    case updated(UpdateEvent<AnyCoatyObject>)
    case contextChanged
    case reevaluate
}

private struct RouterState {
    var context: IoContext
    var rules: [IoAssociationRule]
    var nodes: [IoNode] = []
    var sourceRoutes: [CoatyUUID: String] = [:]
    var associations: [IoAssociation] = []
    var inputs: AsyncStream<RouterInput>.Continuation?
    var stopped = false

    init(context: IoContext, rules: [IoAssociationRule]) {
        self.context = context
        self.rules = rules
    }

    /// Stops managing nodes; forgets the routes of their sources unless a re-advertised node
    /// keeps them. Returns whether a managed node was removed.
    mutating func unmanage(_ ids: [CoatyUUID], readvertised: IoNode?) -> Bool {
        var removed = false
        for id in ids {
            guard let index = nodes.firstIndex(where: { $0.objectId == id }) else { continue }
            let node = nodes.remove(at: index)
            removed = true
            for source in node.ioSources
            where !(readvertised?.ioSources.contains { $0.objectId == source.objectId } ?? false) {
                sourceRoutes[source.objectId] = nil
            }
        }
        return removed
    }
}
