import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import Testing

/// An Associate (with a route) or a disassociate (without) of the context `ctx`.
private func associate(
    _ source: CoatyUUID,
    _ actor: CoatyUUID,
    route: String? = nil,
    rate: Double? = nil
) -> AssociateEventData {
    AssociateEventData(ioSourceId: source, ioActorId: actor, associatingRoute: route, updateRate: rate)
}

private let notAssociated = IoState()

@Suite("IO states and IO context updates on the in-process broker", .timeLimit(.minutes(1)))
struct IoStateTests {
    @Test("observeIoState follows the Associate events of the agent's own points as Coaty JS derives them")
    func statesFromAssociateEvents() async throws {
        let world = try await IoWorld()
        let points = world.sourceAgent.manager
        let router = world.routerAgent.manager
        let source = IoSource(name: "s", valueType: "test.Temperature")
        let actor = IoActor(name: "a", valueType: "test.Temperature")
        let node = IoNode(name: IoWorld.context, ioSources: [source], ioActors: [actor])
        let (x1, x2, x3, s1, s2) = (CoatyUUID(), CoatyUUID(), CoatyUUID(), CoatyUUID(), CoatyUUID())

        var sourceStates = points.observeIoState(for: source).makeAsyncIterator()
        var actorStates = points.observeIoState(for: actor).makeAsyncIterator()
        #expect(await sourceStates.next() == notAssociated)
        #expect(await actorStates.next() == notAssociated)
        try await points.addIoNode(node)

        func send(_ data: AssociateEventData) async throws {
            try await router.publishAssociate(ioContextName: IoWorld.context, data: data)
        }
        // Source: each Associate gives the source its route and rate.
        try await send(associate(source.objectId, x1, route: "r1", rate: 100))
        #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 100))
        try await send(associate(source.objectId, x2, route: "r1", rate: 200))
        #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 200))
        // x2 is left on r1: still associated, the rate kept (nothing is yielded).
        try await send(associate(source.objectId, x1))
        // Points of other agents change nothing.
        try await send(associate(CoatyUUID(), CoatyUUID(), route: "r9", rate: 9))
        // A new route replaces the actors of the old one (x2 is gone with r1).
        try await send(associate(source.objectId, x3, route: "r2", rate: 300))
        #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 300))

        // An observation made now starts with the current state.
        var lateStates = points.observeIoState(for: source).makeAsyncIterator()
        #expect(await lateStates.next() == IoState(hasAssociations: true, updateRate: 300))

        try await send(associate(source.objectId, x3))
        #expect(await sourceStates.next() == notAssociated)
        #expect(await lateStates.next() == notAssociated)

        // Actor: associated while any source is, on any route; never an update rate.
        try await send(associate(s1, actor.objectId, route: "r1", rate: 500))
        #expect(await actorStates.next() == IoState(hasAssociations: true))
        try await send(associate(s2, actor.objectId, route: "r2", rate: 500))
        try await send(associate(s1, actor.objectId))
        try await send(associate(s2, actor.objectId, route: "r3"))
        try await send(associate(s2, actor.objectId))
        #expect(await actorStates.next() == notAssociated)

        // Removing the node ends its points' associations at once; stopping the manager too.
        try await send(associate(source.objectId, x1, route: "r1", rate: 50))
        try await send(associate(s1, actor.objectId, route: "r1"))
        #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 50))
        #expect(await actorStates.next() == IoState(hasAssociations: true))
        try await points.removeIoNode(objectId: node.objectId)
        #expect(await sourceStates.next() == notAssociated)
        #expect(await actorStates.next() == notAssociated)
        // Added again, the node's points start afresh (x1 is forgotten).
        try await points.addIoNode(node)
        try await send(associate(source.objectId, x2, route: "r1", rate: 70))
        #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 70))
        try await send(associate(source.objectId, x2))
        #expect(await sourceStates.next() == notAssociated)
        try await send(associate(source.objectId, x3, route: "r1", rate: 80))
        #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 80))
        await points.stop()
        #expect(await sourceStates.next() == notAssociated)
    }

    @Test("the Associate events of the router give sources their rate and actors their state")
    func statesFromRouter() async throws {
        let world = try await IoWorld()
        let router = world.basicRouter()
        let source = IoSource(name: "t", valueType: "test.Temperature", updateRate: 100)
        let actor = IoActor(name: "display", valueType: "test.Temperature", updateRate: 250)
        let actorNode = IoNode(name: IoWorld.context, ioSources: [], ioActors: [actor])
        var sourceStates = world.sourceAgent.manager.observeIoState(for: source).makeAsyncIterator()
        var actorStates = world.actorAgent.manager.observeIoState(for: actor).makeAsyncIterator()

        try await world.withRouter(router) {
            #expect(await sourceStates.next() == notAssociated)
            #expect(await actorStates.next() == notAssociated)
            try await world.sourceAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [source], ioActors: [])
            )
            try await world.actorAgent.manager.addIoNode(actorNode)
            #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 250))
            #expect(await actorStates.next() == IoState(hasAssociations: true))

            // The actor's node is deadvertised: the router disassociates the source.
            try await world.actorAgent.manager.removeIoNode(objectId: actorNode.objectId)
            #expect(await actorStates.next() == notAssociated)
            #expect(await sourceStates.next() == notAssociated)
        }
    }

    @Test("an Update of the router's IO context is completed and re-runs the association rules")
    func contextUpdateReevaluatesRules() async throws {
        let world = try await IoWorld()
        let context = IoContext(name: IoWorld.context, custom: ["routing": "off"])
        let whenRoutingIsOn = IoAssociationRule(name: "routing on") { candidate in
            candidate.context.custom["routing"] == "on"
        }
        let router = IoRouter(
            communicationManager: world.routerAgent.manager,
            ioContext: context,
            rules: [whenRoutingIsOn]
        )
        let source = IoSource(name: "t", valueType: "test.Temperature", updateRate: 100)
        let actor = IoActor(name: "display", valueType: "test.Temperature")
        let requester = world.actorAgent.manager
        let advertised = try requester.observeAdvertise(coreType: .ioContext)
        await advertised.subscribed()
        var contexts = advertised.makeAsyncIterator()
        var sourceStates = world.sourceAgent.manager.observeIoState(for: source).makeAsyncIterator()

        // Its waits have no bound of their own; the watchdog names the one that hangs (the suite's limit is 60 s).
        try await withStepWatchdog(.seconds(40)) { steps in try await world.withRouter(router) {
            steps.at("the router's context advertised (routing off)")
            #expect(await contexts.next()?.object.json["routing"] == "off")
            steps.at("the source's first state")
            #expect(await sourceStates.next() == notAssociated)
            try await world.sourceAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [source], ioActors: [])
            )
            try await world.actorAgent.manager.addIoNode(
                IoNode(name: IoWorld.context, ioSources: [], ioActors: [actor])
            )
            steps.at("the router managing both nodes")
            await waitUntil { router.managedIoNodes.count == 2 }
            #expect(router.associations.isEmpty)

            // An Update of another IO context is not the router's to complete.
            steps.at("no Complete for a foreign context")
            let foreign = try requester.publishUpdate(IoContext(name: IoWorld.context, custom: ["routing": "on"]))
            #expect(try await foreign.first(timeout: .milliseconds(200)) == nil)

            var on = context
            on.custom["routing"] = "on"
            on.custom["extra"] = ["kept": true]
            steps.at("the Complete of routing on")
            let complete = try #require(try await requester.publishUpdate(on).first(timeout: .seconds(20)))
            #expect(complete.sourceId == world.routerAgent.id)
            #expect(complete.data.object.objectId == context.objectId)
            #expect(complete.data.object.parentObjectId == world.routerAgent.id)
            #expect(complete.data.object.json["routing"] == "on")
            #expect(complete.data.object.json["extra"] == ["kept": true])
            #expect(router.ioContext.custom["routing"] == "on")
            steps.at("the context advertised again (routing on)")
            #expect(await contexts.next()?.object.json["routing"] == "on")
            steps.at("the source associated")
            #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 100))
            #expect(router.associations.map(\.ioActorId) == [actor.objectId])

            var off = on
            off.custom["routing"] = "off"
            steps.at("the Complete of routing off")
            _ = try #require(try await requester.publishUpdate(off).first(timeout: .seconds(20)))
            steps.at("the source disassociated")
            #expect(await sourceStates.next() == notAssociated)
            #expect(router.associations.isEmpty)
            // One Complete per Update of its own context, none for the foreign one (the router
            // handles its inputs in order, so that one would have come before these).
            let completes = world.routerAgent.publishedTopics(world.broker).filter { $0.contains("/CPL/") }
            #expect(completes.count == 2)
            steps.at("the router's stop")
        } }
    }
}
