import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import InMemoryTracing
import Synchronization
import Testing
import Tracing

@testable import CoatyCommunication

/// A tracer that samples nothing: every span it starts is a non-recording one (as swift-otel's with a sampler that
/// said no); it counts the spans asked for, and what it would inject is visible on the wire.
final class UnsampledTracer: Tracer, Sendable {
    let started = Mutex(0)

    func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> ServiceContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> NoOpTracer.NoOpSpan {
        started.withLock { $0 += 1 }
        return NoOpTracer.NoOpSpan(context: context())
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        injector.inject("unsampled", forKey: "unsampled", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {}
}

/// The spans of one-way events: only while tracing, only when sampled, one trace from publisher to observer over
/// MQTT 5 (in-process broker that speaks it).
@Suite("One-way event spans")
struct OneWayEventTracingTests {
    /// A publisher and an observer of Lights, each with its tracer, started on an in-process broker that speaks
    /// MQTT 5; the observation is subscribed.
    func agents(
        _ publisherTracer: any Tracer,
        _ observerTracer: any Tracer
    ) async throws -> (InProcessBroker, CommunicationManager, CommunicationManager, EventObservation<AdvertiseEvent<AnyCoatyObject>>) {
        let broker = InProcessBroker(configuration: .init(carriesUserProperties: true))
        let publisher = try CommunicationManager(
            transport: broker.makeTransport(clientId: "publisher"), identity: Identity(name: "publisher"),
            tracer: publisherTracer
        )
        let observer = try CommunicationManager(
            transport: broker.makeTransport(clientId: "observer"), identity: Identity(name: "observer"),
            tracer: observerTracer
        )
        try await observer.start()
        try await publisher.start()
        let advertises = try observer.observeAdvertise(objectType: Light.objectType)
        await advertises.subscribed()
        return (broker, publisher, observer, advertises)
    }

    @Test("an Advertise sampled: a producer span at the publisher, a consumer span at the observer, its child")
    func sampledAdvertise() async throws {
        let publisherTracer = InMemoryTracer()
        let observerTracer = InMemoryTracer()
        let (broker, publisher, observer, advertises) = try await agents(publisherTracer, observerTracer)
        var iterator = advertises.makeAsyncIterator()
        let light = Light(name: "light", isOn: true)
        try await publisherTracer.withSpan("switch on") { _ in try await publisher.publishAdvertise(light) }
        let received = await iterator.next()
        #expect(received?.object.objectId == light.objectId)
        let parent = try #require(await publisherTracer.finishedSpan(named: "switch on"))
        let sent = try #require(await publisherTracer.finishedSpan(named: "Advertise send"))
        let receive = try #require(await observerTracer.finishedSpan(named: "Advertise receive"))
        #expect(sent.kind == .producer)
        #expect(sent.parentSpanID == parent.spanID)
        #expect(sent.string(RequestSpan.Key.operationType) == "send")
        #expect(sent.string(RequestSpan.Key.destination)?.hasPrefix("coaty/3/-/ADV:CoatyObject/") == true)
        #expect(receive.kind == .consumer)
        #expect(receive.traceID == sent.traceID)
        #expect(receive.parentSpanID == sent.spanID)
        #expect(receive.string(RequestSpan.Key.operationType) == "receive")
        #expect(receive.string(HandledRequestSpan.Key.sourceId) == publisher.identity.objectId.description)
        // One span for the Advertise, though it goes out on two topics (core type and object type).
        #expect(publisherTracer.finishedSpans.filter { $0.operationName == "Advertise send" }.count == 1)
        let advertised = broker.publications.filter { $0.message.topic.contains("/ADV:CoatyObject/") || $0.message.topic.contains("/ADV::com.example.Light/") }
        #expect(advertised.count == 2)
        #expect(advertised.allSatisfy { $0.message.userProperties.contains { $0.value == sent.spanID } })
        await publisher.stop()
        await observer.stop()
    }

    @Test("tracesUnparentedOneWayEvents off: a publication outside any trace asks nothing, one inside a span is traced")
    func unparentedPublicationsUntraced() async throws {
        let tracer = InMemoryTracer()
        let broker = InProcessBroker(configuration: .init(carriesUserProperties: true))
        var options = CommunicationManager.Options()
        options.tracesUnparentedOneWayEvents = false
        let publisher = try CommunicationManager(
            transport: broker.makeTransport(clientId: "publisher"), identity: Identity(name: "publisher"),
            options: options, tracer: tracer
        )
        try await publisher.start()
        try await publisher.publishAdvertise(Light(name: "outside", isOn: false))
        #expect(tracer.finishedSpans.isEmpty && tracer.activeSpans.isEmpty, "no span asked for outside a trace")
        let outside = broker.publications.filter { $0.message.topic.contains("/ADV:CoatyObject/") || $0.message.topic.contains("/ADV::com.example.Light/") }
        #expect(outside.count == 2 && outside.allSatisfy { $0.message.userProperties.isEmpty })
        broker.clearPublications()
        try await tracer.withSpan("switch on") { _ in
            try await publisher.publishAdvertise(Light(name: "inside", isOn: true))
        }
        let parent = try #require(await tracer.finishedSpan(named: "switch on"))
        let sent = try #require(await tracer.finishedSpan(named: "Advertise send"))
        #expect(sent.parentSpanID == parent.spanID)
        let inside = broker.publications.filter { $0.message.topic.contains("/ADV:CoatyObject/") || $0.message.topic.contains("/ADV::com.example.Light/") }
        #expect(inside.count == 2 && inside.allSatisfy { $0.message.userProperties.contains { $0.value == sent.spanID } })
        await publisher.stop()
    }

    @Test("not sampled: the publisher's tracer is asked once, nothing is recorded or sent, the observer asks nothing")
    func unsampledAdvertise() async throws {
        let tracer = UnsampledTracer()
        let (broker, publisher, observer, advertises) = try await agents(tracer, tracer)
        var iterator = advertises.makeAsyncIterator()
        let before = tracer.started.withLock { $0 }
        try await publisher.publishAdvertise(Light(name: "light", isOn: false))
        #expect(await iterator.next() != nil)
        // The publisher asks its sampler once; the observer, given no sampled context, asks nothing.
        #expect(tracer.started.withLock { $0 } - before == 1, "one span asked for, at the publisher")
        let advertised = broker.publications.filter { $0.message.topic.contains("/ADV:CoatyObject/") || $0.message.topic.contains("/ADV::com.example.Light/") }
        #expect(advertised.count == 2)
        #expect(advertised.allSatisfy { $0.message.userProperties.isEmpty })
        await publisher.stop()
        await observer.stop()
    }
}
