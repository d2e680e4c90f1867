import AgentProcessTestSupport
import CoatyKit
import CoatyTesting
import CommunicationTestSupport
import Foundation
import InMemoryTracing
import Testing
import Tracing

extension CoatyJSInterop {
    /// A CoatyKit agent speaking MQTT 5 with tracing on, beside the real Coaty JS 2.4.1 on MQTT 3.1.1: the trace
    /// context travels in user properties, which the broker drops for Coaty JS, so Coaty JS sees what it always saw.
    @Suite("MQTT 5 with tracing beside Coaty JS")
    struct TracedMQTT5InteropTests {
        /// Runs `body` with a started CoatyKit agent over MQTT 5 whose spans go to `tracer`.
        private func withTracedAgent(
            on broker: MosquittoBroker,
            tracer: InMemoryTracer,
            _ body: (CommunicationManager) async throws -> Void
        ) async throws {
            let identity = Identity(name: "traced kit")
            var configuration = try MQTTConfiguration.coaty(url: broker.url, identityId: identity.objectId)
            configuration.protocolVersion = .v5
            let agent = try CommunicationManager(
                transport: MQTTTransport(configuration: configuration),
                identity: identity,
                registry: interopRegistry(),
                tracer: tracer
            )
            try await agent.start()
            do {
                try await body(agent)
            } catch {
                await agent.stop()
                throw error
            }
            await agent.stop()
        }

        @Test("CoatyKit (MQTT 5, traced) → Coaty JS: the Discover is answered; Coaty JS got the same Discover")
        func tracedRequesterToCoatyJS() async throws {
            let tracer = InMemoryTracer()
            try await withBroker { broker in
                try await withTracedAgent(on: broker, tracer: tracer) { agent in
                    let respond = ["--objects", try jsonArgument(sampleLamps)]
                    try await withCoatyJS("respond", respond, on: broker, timeout: 20) { peer in
                        let jsId = try await peer.identityId()
                        let lamp = sampleLamps[1]
                        let resolve = try #require(
                            try await agent.publishDiscover(.objectId(lamp.objectId)).first(timeout: .seconds(10))
                        )
                        #expect(resolve.sourceId == jsId)
                        #expect(resolve.data.object?.as(Lamp.self) == lamp)
                        let discovers = try await peer.wait(for: "Discover")
                        #expect(discovers.first?.at("data.objectId") == .string(lamp.objectId.uuidString))
                        #expect(discovers.first?["sourceId"] == .string(agent.identity.objectId.uuidString))
                    }
                }
            }
            let sent = try #require(await tracer.finishedSpan(named: "Discover send"))
            #expect(sent.string("coaty.request.outcome") == "response")
            #expect(sent.links.isEmpty, "Coaty JS's Resolve carries no trace context")
        }

        @Test("Coaty JS → CoatyKit (MQTT 5, traced): the Resolve reaches Coaty JS; the handled span is a root")
        func coatyJSToTracedResponder() async throws {
            let tracer = InMemoryTracer()
            try await withBroker { broker in
                try await withTracedAgent(on: broker, tracer: tracer) { agent in
                    let lamp = try AnyCoatyObject(sampleLamps[2])
                    let discovers = try agent.observeDiscover()
                    await discovers.subscribed()
                    let responder = Task {
                        for await discover in discovers where discover.data.matches(lamp) {
                            try? await discover.resolve(object: lamp)
                        }
                    }
                    defer { responder.cancel() }
                    let peer = try await runCoatyJS(
                        "discover",
                        ["--object-id", lamp.objectId.uuidString, "--count", "1"],
                        on: broker
                    )
                    let resolve = try #require(try peer.events("Resolve").first)
                    #expect(resolve["sourceId"] == .string(agent.identity.objectId.uuidString))
                    #expect(resolve.at("data.object") == sampleLamps[2].json)
                }
            }
            let handled = try #require(await tracer.finishedSpan(named: "Discover process"))
            #expect(handled.parentSpanID == nil, "Coaty JS's Discover carries no trace context")
            #expect(handled.string("coaty.request.outcome") == "response")
        }
    }
}
