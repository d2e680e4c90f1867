import AgentProcessTestSupport
import CoatyKit
import Testing

/// Polls until `condition` holds, for up to `seconds` (only against hangs: the test's
/// expectations say what must have happened).
private func poll(_ seconds: Double = 30, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
}

@Suite(
    "IO routing over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: BrokerAvailability.shouldRun)
)
struct IoRoutingIntegrationTests {
    @Test(
        "Updates of the router's IoContext over MQTT are completed and switch the associations; IO states and values follow"
    )
    func contextUpdatesOverMQTT() async throws {
        try await withBroker { broker in
            try await withAgents(on: broker, names: ["router", "sensor", "display"]) { agents in
                try await route(routerAgent: agents[0], sensor: agents[1], display: agents[2])
            }
        }
    }

    private func route(
        routerAgent: CommunicationManager,
        sensor: CommunicationManager,
        display: CommunicationManager
    ) async throws {
        let context = IoContext(name: "plant", custom: ["active": false])
        let whenActive = IoAssociationRule(name: "active") { $0.context.custom["active"] == true }
        let router = IoRouter(communicationManager: routerAgent, ioContext: context, rules: [whenActive])
        let source = IoSource(name: "temperature", valueType: "test.Temperature", updateRate: 50)
        let actor = IoActor(name: "panel", valueType: "test.Temperature")
        let observer = try IoActorObserver(communicationManager: display, actor: actor, ioContextName: "plant")
        let observing = Task { try await observer.run() }
        await observer.subscribed()
        var sourceStates = sensor.observeIoState(for: source).makeAsyncIterator()
        var actorStates = display.observeIoState(for: actor).makeAsyncIterator()
        #expect(await sourceStates.next() == IoState())
        #expect(await actorStates.next() == IoState())

        let (routing, advertised) = try await runRouter(router, seenBy: display)
        #expect(advertised?.parentObjectId == routerAgent.identity.objectId)
        try await sensor.addIoNode(IoNode(name: "plant", ioSources: [source], ioActors: []))
        try await display.addIoNode(IoNode(name: "plant", ioSources: [], ioActors: [actor]))
        try await poll { router.managedIoNodes.count == 2 }
        #expect(router.managedIoNodes.count == 2)
        #expect(router.associations.isEmpty)

        var active = context
        active.custom["active"] = true
        let complete = try #require(try await display.publishUpdate(active).first(timeout: .seconds(30)))
        #expect(complete.sourceId == routerAgent.identity.objectId)
        #expect(complete.data.object.objectId == context.objectId)
        #expect(complete.data.object.json["active"] == true)
        #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 50))
        #expect(await actorStates.next() == IoState(hasAssociations: true))

        // A value takes the associating route once the observer follows it.
        try await poll { observer.isAssociated }
        var values = observer.values.makeAsyncIterator()
        try await sensor.publishIoValue(.double(21.5), ioSourceId: source.objectId)
        let value = try #require(await values.next())
        #expect(try value.value() == .double(21.5))
        #expect(value.ioSourceIds == [source.objectId])

        var inactive = active
        inactive.custom["active"] = false
        #expect(try await display.publishUpdate(inactive).first(timeout: .seconds(30)) != nil)
        #expect(await sourceStates.next() == IoState())
        #expect(await actorStates.next() == IoState())
        #expect(router.ioContext.custom["active"] == false)

        router.stop()
        observer.stop()
        try await routing.value
        try await observing.value
    }
}
