import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import InMemoryTracing
import Testing
import Tracing

@testable import CoatyCommunication

/// The spans of requests sent, with swift-distributed-tracing's in-memory tracer given to the requester.
@Suite("Request spans")
struct RequestTracingTests {
    func agents(tracer: InMemoryTracer) throws -> (InProcessBroker, CommunicationManager, CommunicationManager) {
        let broker = InProcessBroker()
        let requester = try CommunicationManager(
            transport: broker.makeTransport(clientId: "requester"),
            identity: Identity(name: "requester"),
            tracer: tracer
        )
        let responder = try CommunicationManager(
            transport: broker.makeTransport(clientId: "responder"),
            identity: Identity(name: "responder")
        )
        return (broker, requester, responder)
    }


    @Test("a Discover answered: one producer span, a child of the caller's, ended at the first response, with the messaging and Coaty attributes")
    func answeredRequest() async throws {
        let tracer = InMemoryTracer()
        let (_, requester, responder) = try agents(tracer: tracer)
        try await responder.start()
        try await requester.start()
        let resolve = try await tracer.withSpan("handle a click") { _ in
            try await requester.publishDiscover(.objectId(responder.identity.objectId)).first(timeout: .seconds(10))
        }
        #expect(resolve != nil)
        let spans = tracer.finishedSpans
        let request = try #require(spans.first { $0.operationName == "Discover send" })
        let parent = try #require(spans.first { $0.operationName == "handle a click" })
        #expect(request.kind == .producer)
        #expect(request.traceID == parent.traceID)
        #expect(request.parentSpanID == parent.spanID)
        #expect(request.string(RequestSpan.Key.system) == "mqtt")
        #expect(request.string(RequestSpan.Key.operationType) == "send")
        #expect(request.string(RequestSpan.Key.operationName) == "Discover")
        #expect(request.string(RequestSpan.Key.eventType) == "Discover")
        #expect(request.string(RequestSpan.Key.agentId) == requester.identity.objectId.description)
        #expect(request.string(RequestSpan.Key.namespace) == "-")
        #expect(request.string(RequestSpan.Key.outcome) == "response")
        #expect(request.int(RequestSpan.Key.responses) == 1)
        let topic = try #require(request.string(RequestSpan.Key.destination))
        let correlationId = try #require(request.string(RequestSpan.Key.correlationId))
        #expect(topic == "coaty/3/-/DSC/\(requester.identity.objectId)/\(correlationId)")
        #expect(request.string(RequestSpan.Key.conversation) == correlationId)
        #expect(request.status == nil)
        await requester.stop()
        await responder.stop()
    }

    @Test("a request nobody answers: its span ends with the timeout, outcome 'no response'")
    func unansweredRequest() async throws {
        let tracer = InMemoryTracer()
        let (_, requester, _) = try agents(tracer: tracer)
        try await requester.start()
        let clock = ContinuousClock()
        let start = clock.now
        let answers = try await requester.publishQuery(QueryEventData(objectTypes: ["com.example.Nothing"]))
            .responses(timeout: .milliseconds(200)).collect()
        #expect(answers.isEmpty)
        #expect(clock.now - start >= .milliseconds(200))
        let request = try #require(tracer.finishedSpans.first { $0.operationName == "Query send" })
        #expect(request.string(RequestSpan.Key.outcome) == "no response")
        #expect(request.int(RequestSpan.Key.responses) == 0)
        #expect(request.parentSpanID == nil)
        #expect(tracer.activeSpans.isEmpty)
        await requester.stop()
    }

    @Test("a request that cannot be published: its span records the error")
    func failedRequest() async throws {
        let tracer = InMemoryTracer()
        let broker = InProcessBroker()
        let requester = try CommunicationManager(
            transport: RefusingRequests(base: broker.makeTransport(clientId: "requester")),
            identity: Identity(name: "requester"),
            tracer: tracer
        )
        try await requester.start()
        await #expect(throws: CommunicationError.self) {
            _ = try await requester.publishDiscover(.coreTypes([.identity])).responses(timeout: .seconds(1)).collect()
        }
        let request = try #require(tracer.finishedSpans.first { $0.operationName == "Discover send" })
        #expect(request.string(RequestSpan.Key.outcome) == "failed")
        #expect(request.status?.code == .error)
        #expect(request.errors.count == 1)
        await requester.stop()
    }

    @Test("with no tracer given or bootstrapped, a request's span does not record")
    func noTracer() throws {
        let span = RequestSpan(
            tracer: NoOpTracer(),
            event: .discover,
            correlationIds: [CoatyUUID()],
            agentId: CoatyUUID(),
            namespace: "-"
        )
        #expect(!span.isRecording)
        span.published(on: "coaty/3/-/DSC/x/y")
        span.responded()
        span.finished(responses: 3)
    }
}


/// An in-process transport whose publications on topics containing `refused` (requests: `/DSC/`, responses:
/// `/RSV/`) fail with a transport error (not "not connected", which defers them).
struct RefusingRequests: CoatyTransport {
    struct Refused: Error {}
    let base: InProcessTransport
    var refused = "/DSC/"

    func publish(_ message: TransportMessage) async throws {
        if message.topic.contains(refused) { throw Refused() }
        try await base.publish(message)
    }

    func subscribeNow(
        _ filter: String,
        qos: TransportQoS,
        acknowledged: @escaping @Sendable ((any Error)?) -> Void
    ) -> Bool { base.subscribeNow(filter, qos: qos, acknowledged: acknowledged) }
    func unsubscribeNow(_ filter: String, acknowledged: @escaping @Sendable ((any Error)?) -> Void) {
        base.unsubscribeNow(filter, acknowledged: acknowledged)
    }
    func deliverMessages(to handler: @escaping @Sendable ([TransportMessage]) -> Void) {
        base.deliverMessages(to: handler)
    }
    func setReceivingPaused(_ paused: Bool) { base.setReceivingPaused(paused) }
    var acknowledgementDue: UInt64? { base.acknowledgementDue }
    var deliveredCount: UInt64 { base.deliveredCount }
    func acknowledge(through: UInt64) { base.acknowledge(through: through) }
    func onAcknowledgementDue(_ handler: @escaping @Sendable () -> Void) { base.onAcknowledgementDue(handler) }
    func closeIntake() async { await base.closeIntake() }
    var deliveryExecutor: (any TaskExecutor)? { base.deliveryExecutor }
    var connectionState: TransportConnectionState { base.connectionState }
    func connectionStates() -> InProcessTransport.ConnectionStates { base.connectionStates() }
    func connect(will: TransportMessage?) async throws { try await base.connect(will: will) }
    func updateWill(_ will: TransportMessage?) async throws { try await base.updateWill(will) }
    func subscribe(_ filter: String, qos: TransportQoS) async throws { try await base.subscribe(filter, qos: qos) }
    func unsubscribe(_ filter: String) async throws { try await base.unsubscribe(filter) }
    func disconnect() async { await base.disconnect() }
}
