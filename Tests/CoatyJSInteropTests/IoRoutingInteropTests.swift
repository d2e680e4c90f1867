import CoatyKit
import CoatyTesting
import Foundation
import Testing

extension CoatyJSInterop {
    /// IO routing driven by the real Coaty JS 2.4.1: its `publishUpdate` of a CoatyKit router's
    /// IO context (as a Coaty JS app changes the context of a Coaty JS `IoRouter`).
    @Suite("IO routing with Coaty JS")
    struct IoRoutingInteropTests {
        @Test("Coaty JS updates a CoatyKit router's IoContext: the router completes it and re-runs its rules")
        func coatyJSUpdatesIoContext() async throws {
            try await withBroker { broker in
                try await withAgents(on: broker, names: ["kit router", "kit points"]) { agents in
                    try await route(broker: broker, routerAgent: agents[0], points: agents[1])
                }
            }
        }

        private func route(
            broker: MosquittoBroker,
            routerAgent: CommunicationManager,
            points: CommunicationManager
        ) async throws {
            let context = IoContext(name: "interop-io", custom: ["mode": "idle"])
            let whenRunning = IoAssociationRule(name: "running") { $0.context.custom["mode"] == "running" }
            let router = IoRouter(communicationManager: routerAgent, ioContext: context, rules: [whenRunning])
            let source = IoSource(name: "speed", valueType: "interop.Speed", updateRate: 200)
            let actor = IoActor(name: "gauge", valueType: "interop.Speed", updateRate: 500)
            var sourceStates = points.observeIoState(for: source).makeAsyncIterator()
            var actorStates = points.observeIoState(for: actor).makeAsyncIterator()
            #expect(await sourceStates.next() == IoState())
            #expect(await actorStates.next() == IoState())

            let (routing, advertised) = try await runRouter(router, seenBy: points)
            #expect(advertised?.json["mode"] == "idle")
            try await points.addIoNode(IoNode(name: "interop-io", ioSources: [source], ioActors: [actor]))
            let deadline = ContinuousClock.now + .seconds(30)
            while router.managedIoNodes.isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(router.associations.isEmpty)

            // What a Coaty JS app sends: the context object with a changed property.
            var running = try AnyCoatyObject(context).json
            running["mode"] = "running"
            let peer = try await runCoatyJS(
                "update",
                ["--object", jsonText(.object(running)), "--count", "1"],
                on: broker
            )
            let complete = try #require(try peer.events("Complete").first, "\(peer.diagnostics)")
            #expect(complete["sourceId"] == .string(routerAgent.identity.objectId.uuidString))
            #expect(complete.at("data.object.objectId") == .string(context.objectId.uuidString))
            #expect(complete.at("data.object.coreType") == "IoContext")
            #expect(complete.at("data.object.parentObjectId") == .string(routerAgent.identity.objectId.uuidString))
            #expect(complete.at("data.object.mode") == "running")
            #expect(await sourceStates.next() == IoState(hasAssociations: true, updateRate: 500))
            #expect(await actorStates.next() == IoState(hasAssociations: true))
            #expect(router.ioContext.custom["mode"] == "running")

            var idle = running
            idle["mode"] = "idle"
            let stopped = try await runCoatyJS(
                "update",
                ["--object", jsonText(.object(idle)), "--count", "1"],
                on: broker
            )
            #expect(try stopped.events("Complete").first?.at("data.object.mode") == "idle")
            #expect(await sourceStates.next() == IoState())
            #expect(await actorStates.next() == IoState())

            router.stop()
            try await routing.value
        }
    }
}
