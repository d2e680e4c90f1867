import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import InMemoryTracing
import Testing
import Tracing

@testable import CoatyCommunication

/// The trace context of requests carried in MQTT 5 user properties: requester and responder each have their own
/// in-memory tracer (two processes), on one in-process broker that speaks MQTT 5 or, for the default, MQTT 3.1.1.
@Suite("Trace context across agents")
struct TraceContextPropagationTests {
    struct Agents {
        let broker: InProcessBroker
        let requester: CommunicationManager
        let responder: CommunicationManager
        let requesterTracer: InMemoryTracer
        let responderTracer: InMemoryTracer
    }

    func agents(mqtt5: Bool, tracingRequester: Bool = true) throws -> Agents {
        let broker = InProcessBroker(configuration: .init(carriesUserProperties: mqtt5))
        let requesterTracer = InMemoryTracer()
        let responderTracer = InMemoryTracer()
        let requester = try CommunicationManager(
            transport: broker.makeTransport(clientId: "requester"),
            identity: Identity(name: "requester"),
            tracer: tracingRequester ? requesterTracer : NoOpTracer()
        )
        let responder = try CommunicationManager(
            transport: broker.makeTransport(clientId: "responder"),
            identity: Identity(name: "responder"),
            tracer: responderTracer
        )
        return Agents(broker: broker, requester: requester, responder: responder, requesterTracer: requesterTracer,
                      responderTracer: responderTracer)
    }

    /// Answers one Discover for `externalId` with a Resolve; the task ends after it.
    func resolveOne(_ responder: CommunicationManager, externalId: String) async throws -> Task<Void, any Error> {
        let discovers = try responder.observeDiscover()
        await discovers.subscribed()
        return Task {
            for await discover in discovers where discover.data.externalId == externalId {
                var light = Identity(name: "light")
                light.externalId = externalId
                try await discover.resolve(object: light)
                return
            }
        }
    }

    /// The first finished "Discover process" span that ended with a response, waiting up to 10 s for it.
    func answered(_ tracer: InMemoryTracer) async -> FinishedInMemorySpan? {
        let deadline = ContinuousClock.now + .seconds(10)
        repeat {
            let span = tracer.finishedSpans.first {
                $0.operationName == "Discover process" && $0.string(RequestSpan.Key.outcome) == "response"
            }
            if let span { return span }
            try? await Task.sleep(for: .milliseconds(5))
        } while ContinuousClock.now < deadline
        return nil
    }

    func userProperties(_ broker: InProcessBroker, eventLevel: String) -> [[MQTTUserProperty]] {
        broker.publications.filter { $0.message.topic.contains("/\(eventLevel)/") }.map(\.message.userProperties)
    }

    @Test("over MQTT 5 the handled Discover's span is a child of the requester's, in its trace; the Resolve carries the responder's context back")
    func mqtt5JoinsOneTrace() async throws {
        let agents = try agents(mqtt5: true)
        try await agents.responder.start()
        try await agents.requester.start()
        let handler = try await resolveOne(agents.responder, externalId: "light-1")
        let resolve = try await agents.requester.publishDiscover(.externalId("light-1")).first(timeout: .seconds(120))
        #expect(resolve != nil)
        try await handler.value
        let sent = try #require(await agents.requesterTracer.finishedSpan(named: "Discover send"))
        let handled = try #require(await agents.responderTracer.finishedSpan(named: "Discover process"))
        #expect(handled.traceID == sent.traceID)
        #expect(handled.parentSpanID == sent.spanID)
        #expect(handled.string(RequestSpan.Key.outcome) == "response")
        // On the wire: the Discover carries the request span's context, the Resolve the handling span's.
        let discoverProperties = try #require(userProperties(agents.broker, eventLevel: "DSC").first)
        #expect(discoverProperties.contains(MQTTUserProperty(name: InMemoryTracer.traceIDKey, value: sent.traceID)))
        #expect(discoverProperties.contains(MQTTUserProperty(name: InMemoryTracer.spanIDKey, value: sent.spanID)))
        let resolveProperties = try #require(userProperties(agents.broker, eventLevel: "RSV").first)
        #expect(resolveProperties.contains(MQTTUserProperty(name: InMemoryTracer.spanIDKey, value: handled.spanID)))
        // The request span links the response's span.
        let link = try #require(sent.links.first)
        #expect(link.context.inMemorySpanContext?.spanID == handled.spanID)
        #expect(link.context.inMemorySpanContext?.traceID == sent.traceID)
        await agents.requester.stop()
        await agents.responder.stop()
    }

    @Test("a request made while handling one joins the trace across a third agent")
    func nestedRequestAcrossAgents() async throws {
        let agents = try agents(mqtt5: true)
        let thirdTracer = InMemoryTracer()
        let third = try CommunicationManager(
            transport: agents.broker.makeTransport(clientId: "third"),
            identity: Identity(name: "third"),
            tracer: thirdTracer
        )
        try await third.start()
        try await agents.responder.start()
        try await agents.requester.start()
        let inner = try await resolveOne(third, externalId: "inner")
        let discovers = try agents.responder.observeDiscover()
        await discovers.subscribed()
        let outer = Task {
            for await discover in discovers where discover.data.externalId == "outer" {
                try await discover.withTraceContext {
                    _ = try await agents.responder.publishDiscover(.externalId("inner")).first(timeout: .seconds(120))
                    var light = Identity(name: "light")
                    light.externalId = "outer"
                    try await discover.resolve(object: light)
                }
                return
            }
        }
        let resolve = try await agents.requester.publishDiscover(.externalId("outer")).first(timeout: .seconds(120))
        #expect(resolve != nil)
        try await outer.value
        try await inner.value
        let root = try #require(await agents.requesterTracer.finishedSpan(named: "Discover send"))
        // Every agent observing Discovers handles each one (an unanswered one ends 'not answered'): the answered
        // ones are the chain.
        let handled = try #require(await answered(agents.responderTracer))
        let nested = try #require(await agents.responderTracer.finishedSpan(named: "Discover send"))
        let innerHandled = try #require(await answered(thirdTracer))
        #expect(root.parentSpanID == nil)
        #expect(handled.parentSpanID == root.spanID)
        #expect(nested.parentSpanID == handled.spanID)
        #expect(innerHandled.parentSpanID == nested.spanID)
        #expect(Set([root.traceID, handled.traceID, nested.traceID, innerHandled.traceID]).count == 1)
        await agents.requester.stop()
        await agents.responder.stop()
        await third.stop()
    }

    @Test("over MQTT 3.1.1 nothing is added to the messages: each agent's spans stay in its own trace")
    func mqtt311AddsNothing() async throws {
        let agents = try agents(mqtt5: false)
        try await agents.responder.start()
        try await agents.requester.start()
        let handler = try await resolveOne(agents.responder, externalId: "light-2")
        let resolve = try await agents.requester.publishDiscover(.externalId("light-2")).first(timeout: .seconds(120))
        #expect(resolve != nil)
        try await handler.value
        let sent = try #require(await agents.requesterTracer.finishedSpan(named: "Discover send"))
        let handled = try #require(await agents.responderTracer.finishedSpan(named: "Discover process"))
        #expect(handled.parentSpanID == nil)
        #expect(sent.links.isEmpty)
        let publications = agents.broker.publications
        #expect(publications.count > 2 && publications.allSatisfy { $0.message.userProperties.isEmpty })
        await agents.requester.stop()
        await agents.responder.stop()
    }

    @Test("a requester that does not trace sends no context; the responder's span is a root")
    func untracedRequesterSendsNothing() async throws {
        let agents = try agents(mqtt5: true, tracingRequester: false)
        try await agents.responder.start()
        try await agents.requester.start()
        let handler = try await resolveOne(agents.responder, externalId: "light-3")
        let resolve = try await agents.requester.publishDiscover(.externalId("light-3")).first(timeout: .seconds(120))
        #expect(resolve != nil)
        try await handler.value
        let handled = try #require(await agents.responderTracer.finishedSpan(named: "Discover process"))
        #expect(handled.parentSpanID == nil)
        let discoverProperties = userProperties(agents.broker, eventLevel: "DSC")
        #expect(!discoverProperties.isEmpty && discoverProperties.allSatisfy { $0.isEmpty })
        // The responder still sends its own context with the Resolve (its span records).
        #expect(userProperties(agents.broker, eventLevel: "RSV").first?.isEmpty == false)
        await agents.requester.stop()
        await agents.responder.stop()
    }
}
