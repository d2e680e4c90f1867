import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import InMemoryTracing
import Testing
import Tracing

@testable import CoatyCommunication

/// The spans of requests handled by observer loops, with swift-distributed-tracing's in-memory tracer given to the
/// responder.
@Suite("Handled request spans")
struct HandledRequestTracingTests {
    /// A requester without a tracer and a responder with `tracer`, on one in-process broker.
    func agents(
        tracer: InMemoryTracer,
        responderTransport: (InProcessBroker) -> any CoatyTransport = { $0.makeTransport(clientId: "responder") }
    ) throws -> (CommunicationManager, CommunicationManager) {
        let broker = InProcessBroker()
        let requester = try CommunicationManager(
            transport: broker.makeTransport(clientId: "requester"),
            identity: Identity(name: "requester")
        )
        let responder = try CommunicationManager(
            transport: responderTransport(broker),
            identity: Identity(name: "responder"),
            tracer: tracer
        )
        return (requester, responder)
    }


    @Test("a Discover handled by an observer loop: a consumer span to the Resolve published; a Query made in its trace context is its child")
    func handledDiscover() async throws {
        let tracer = InMemoryTracer()
        let (requester, responder) = try agents(tracer: tracer)
        try await responder.start()
        try await requester.start()
        let discovers = try responder.observeDiscover()
        await discovers.subscribed()
        let handler = Task {
            for await discover in discovers where discover.data.externalId == "light-1" {
                try await discover.withTraceContext {
                    _ = try await responder.publishQuery(QueryEventData(objectTypes: ["com.example.Light"]))
                        .responses(timeout: .milliseconds(50)).collect()
                    var light = Identity(name: "light")
                    light.externalId = "light-1"  // a Resolve must match the Discover's external id
                    try await discover.resolve(object: light)
                }
                return
            }
        }
        // A generous bound: under the whole suite on 2 cores an in-process answer was seen more than 10 s late (the test then took 72 s).
        let resolve = try await requester.publishDiscover(.externalId("light-1")).first(timeout: .seconds(120))
        #expect(resolve != nil)
        try await handler.value
        let handled = try #require(await tracer.finishedSpan(named: "Discover process"))
        let nested = try #require(await tracer.finishedSpan(named: "Query send"))
        #expect(handled.kind == .consumer)
        #expect(handled.parentSpanID == nil)
        #expect(handled.string(RequestSpan.Key.system) == "mqtt")
        #expect(handled.string(RequestSpan.Key.operationType) == "process")
        #expect(handled.string(RequestSpan.Key.eventType) == "Discover")
        #expect(handled.string(RequestSpan.Key.agentId) == responder.identity.objectId.description)
        #expect(handled.string(HandledRequestSpan.Key.sourceId) == requester.identity.objectId.description)
        #expect(handled.string(RequestSpan.Key.namespace) == "-")
        #expect(handled.string(RequestSpan.Key.outcome) == "response")
        let correlationId = try #require(handled.string(RequestSpan.Key.correlationId))
        #expect(
            handled.string(RequestSpan.Key.destination)
                == "coaty/3/-/DSC/\(requester.identity.objectId)/\(correlationId)"
        )
        #expect(
            handled.string(HandledRequestSpan.Key.responseTopic)
                == "coaty/3/-/RSV/\(responder.identity.objectId)/\(correlationId)"
        )
        #expect(nested.traceID == handled.traceID)
        #expect(nested.parentSpanID == handled.spanID)
        #expect(nested.startInstant.nanosecondsSinceEpoch >= handled.startInstant.nanosecondsSinceEpoch)
        #expect(nested.endInstant.nanosecondsSinceEpoch <= handled.endInstant.nanosecondsSinceEpoch)
        await requester.stop()
        await responder.stop()
    }

    @Test("a request released unanswered: its span ends 'not answered'")
    func releasedUnanswered() throws {
        let tracer = InMemoryTracer()
        let requester = CoatyUUID()
        let correlationId = CoatyUUID()
        let topic = try CoatyTopic(
            event: .call(operation: "switchOn"),
            namespace: "-",
            sourceId: requester,
            correlationId: correlationId
        )
        do {
            let span = HandledRequestSpan.start(
                tracer: tracer,
                event: .call,
                topic: topic,
                correlationId: correlationId,
                agentId: CoatyUUID()
            )
            #expect(span != nil)
            #expect(tracer.activeSpans.count == 1)
        }
        let handled = try #require(tracer.finishedSpans.first)
        #expect(handled.operationName == "Call process")
        #expect(handled.string(RequestSpan.Key.outcome) == "not answered")
        #expect(handled.string(HandledRequestSpan.Key.sourceId) == requester.description)
        #expect(handled.string(RequestSpan.Key.destination) == topic.name)
        #expect(handled.string(HandledRequestSpan.Key.responseTopic) == nil)
        #expect(handled.status == nil)
        #expect(tracer.activeSpans.isEmpty)
    }

    @Test("a response that cannot be published: the handled span records the error")
    func failedResponse() async throws {
        let tracer = InMemoryTracer()
        let (requester, responder) = try agents(tracer: tracer) { broker in
            RefusingRequests(base: broker.makeTransport(clientId: "responder"), refused: "/RTV/")
        }
        try await responder.start()
        try await requester.start()
        let queries = try responder.observeQuery()
        await queries.subscribed()
        let handler = Task {
            for await query in queries {
                await #expect(throws: CommunicationError.self) { try await query.retrieve(objects: []) }
                return
            }
        }
        _ = try await requester.publishQuery(QueryEventData(objectTypes: ["com.example.Light"]))
            .responses(timeout: .milliseconds(200)).collect()
        await handler.value
        let handled = try #require(await tracer.finishedSpan(named: "Query process"))
        #expect(handled.string(RequestSpan.Key.outcome) == "failed")
        #expect(handled.status?.code == .error)
        #expect(handled.errors.count == 1)
        await requester.stop()
        await responder.stop()
    }

    @Test("with the no-op tracer, a handled request gets no span")
    func noTracer() throws {
        let topic = try CoatyTopic(
            event: .discover,
            namespace: "-",
            sourceId: CoatyUUID(),
            correlationId: CoatyUUID()
        )
        let span = HandledRequestSpan.start(
            tracer: NoOpTracer(),
            event: .discover,
            topic: topic,
            correlationId: CoatyUUID(),
            agentId: CoatyUUID()
        )
        #expect(span == nil)
    }
}
