import CoatyKit
import CoatyRecording
import CoatySQLite
import CoatyStore
import CoatyTesting
import CommunicationTestSupport
import Foundation
import InMemoryTracing
import Testing
import Tracing

private let mosquittoInstalled = MosquittoBroker.findExecutable() != nil

/// One trace across three agents over a real mosquitto speaking MQTT 5: a requester's Discover, handled by a
/// second agent that asks a recorder (SQLite) a Query while handling it. Each agent has its own tracer, as three
/// processes would; the trace context travels in the messages' user properties only.
@Suite(
    "One trace across agents over MQTT 5",
    .timeLimit(.minutes(3)),
    .enabled(if: mosquittoInstalled, "mosquitto is not installed (apt-get install mosquitto)")
)
struct TraceAcrossAgentsTests {
    static func agent(_ name: String, on broker: MosquittoBroker, tracer: InMemoryTracer) throws -> CommunicationManager {
        let identity = Identity(name: name)
        var configuration = try MQTTConfiguration.coaty(url: broker.url, identityId: identity.objectId)
        configuration.protocolVersion = .v5
        return try CommunicationManager(
            transport: MQTTTransport(configuration: configuration),
            identity: identity,
            tracer: tracer
        )
    }

    /// The first finished span named `name` that ended with a response, waiting up to 30 s for it.
    static func answered(_ name: String, in tracer: InMemoryTracer) async -> FinishedInMemorySpan? {
        let deadline = ContinuousClock.now + .seconds(30)
        repeat {
            let span = tracer.finishedSpans.first { $0.operationName == name && $0.string("coaty.request.outcome") == "response" }
            if let span { return span }
            try? await Task.sleep(for: .milliseconds(10))
        } while ContinuousClock.now < deadline
        return nil
    }

    @Test("requester → agent → recorder: the Discover, its handling, the nested Query, its handling and the recorder's SQL are one trace")
    func discoverThenNestedQueryToTheRecorder() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-trace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let requesterTracer = InMemoryTracer()
        let agentTracer = InMemoryTracer()
        let recorderTracer = InMemoryTracer()
        let requester = try Self.agent("requester", on: broker, tracer: requesterTracer)
        let agent = try Self.agent("agent", on: broker, tracer: agentTracer)
        let recorderAgent = try Self.agent("recorder", on: broker, tracer: recorderTracer)
        let recorder = CoatyRecorder(
            manager: recorderAgent,
            connection: try SQLiteDatabase(path: directory.appendingPathComponent("trace.sqlite").path).makeConnection()
        )
        let events = recorder.events()
        let run = Task { try await recorder.run() }
        try await recorderAgent.start()
        await recorder.ready()
        try await agent.start()
        try await requester.start()

        // Something to find: two tasks, advertised by the requester and stored by the recorder.
        let tasks = (0..<2).map {
            CoatyTask(name: "task \($0)", status: .done, creatorId: requester.identity.objectId, creationTimestamp: 1e12)
        }
        for task in tasks { try await requester.publishAdvertise(task) }
        var stored = 0
        for await event in events {
            if case .stored = event { stored += 1 }
            if stored == tasks.count { break }
        }

        let discovers = try agent.observeDiscover()
        await discovers.subscribed()
        let handler = Task {
            for await discover in discovers where discover.data.externalId == "report" {
                try await discover.withTraceContext {
                    let retrieve = try await agent.publishQuery(QueryEventData(objectTypes: [CoatyTask.objectType]))
                        .first(timeout: .seconds(60))
                    var report = Identity(name: "report of \(retrieve?.data.objects.count ?? 0) tasks")
                    report.externalId = "report"
                    try await discover.resolve(object: report)
                }
                return
            }
        }
        let resolve = try await requester.publishDiscover(.externalId("report")).first(timeout: .seconds(60))
        #expect(resolve?.data.object?.name == "report of 2 tasks")
        try await handler.value

        let root = try #require(await requesterTracer.finishedSpan(named: "Discover send"))
        let handled = try #require(await Self.answered("Discover process", in: agentTracer))
        let query = try #require(await agentTracer.finishedSpan(named: "Query send"))
        let answered = try #require(await Self.answered("Query process", in: recorderTracer))
        let sql = try #require(
            recorderTracer.finishedSpans.first { $0.operationName == "coaty.record store query" }
        )
        #expect(root.parentSpanID == nil)
        #expect(handled.parentSpanID == root.spanID)
        #expect(query.parentSpanID == handled.spanID)
        #expect(answered.parentSpanID == query.spanID)
        #expect(sql.parentSpanID == answered.spanID)
        #expect(Set([root, handled, query, answered, sql].map(\.traceID)).count == 1, "one trace")
        // Each request span links the span of the response it got first.
        #expect(root.links.first?.context.inMemorySpanContext?.spanID == handled.spanID)
        #expect(query.links.first?.context.inMemorySpanContext?.spanID == answered.spanID)

        await requester.stop()
        await agent.stop()
        run.cancel()
        _ = try? await run.value
        await recorderAgent.stop()
        await broker.stop()
    }
}
