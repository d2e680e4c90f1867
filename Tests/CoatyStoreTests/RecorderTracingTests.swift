import CoatyCore
import CommunicationTestSupport
import InMemoryTracing
import Testing
import Tracing

@testable import CoatyCommunication
@testable import CoatyRecording

/// The spans of the recorder's answers: each request handled is a consumer span with the recorder's steps
/// (settle, the store's lookup or query, decode) as its children, on both backends.
@Suite("Recorder spans", .timeLimit(.minutes(2)))
struct RecorderTracingTests {



    @Test("a Discover and a Query answered by the recorder: the steps are children of the handled request's span",
          arguments: RecorderBackend.allCases)
    func answeredRequests(backend: RecorderBackend) async throws {
        let tracer = InMemoryTracer()
        let harness = try await RecorderHarness.start(backend, tracer: tracer)
        let events = harness.recorder.events()
        let objects = try RecorderFixtures.objects(3)
        for object in objects { try await harness.client.publishAdvertise(object) }
        await RecorderHarness.awaitStored(objects.count, in: events)
        // Ingest: each committed batch a root span with its size and what it stored.
        let batches = tracer.finishedSpans.filter { $0.operationName == "coaty.record ingest batch" }
        #expect(!batches.isEmpty)
        #expect(batches.allSatisfy { $0.parentSpanID == nil && ($0.int("coaty.batch.size") ?? 0) >= 1 })
        #expect(batches.compactMap { $0.int("coaty.batch.stored") }.reduce(0, +) >= Int64(objects.count))

        // Generous bounds: under the whole suite on 2 cores the in-process answer came more than 10 s late.
        let resolve = try await harness.client.publishDiscover(.objectId(objects[1].objectId))
            .first(timeout: .seconds(120))
        #expect(resolve?.data.object?.objectId == objects[1].objectId)
        let discover = try #require(await tracer.finishedSpan(named: "Discover process"))
        #expect(discover.string(RequestSpan.Key.outcome) == "response")
        for step in ["coaty.record settle", "coaty.record store lookup", "coaty.record decode"] {
            let child = try #require(await tracer.finishedSpan(named: step))
            #expect(child.traceID == discover.traceID, "\(step)")
            #expect(child.parentSpanID == discover.spanID, "\(step)")
        }
        let lookup = try #require(await tracer.finishedSpan(named: "coaty.record store lookup"))
        #expect(lookup.int("coaty.store.rows") == 1)

        let retrieve = try await harness.client.publishQuery(QueryEventData(objectTypes: [RecorderFixtures.objectType]))
            .first(timeout: .seconds(120))
        #expect(retrieve?.data.objects.count == 3)
        let query = try #require(await tracer.finishedSpan(named: "Query process"))
        #expect(query.string(RequestSpan.Key.outcome) == "response")
        let sql = try #require(
            tracer.finishedSpans.first { $0.operationName == "coaty.record store query" && $0.traceID == query.traceID }
        )
        #expect(sql.parentSpanID == query.spanID)
        #expect(sql.int("coaty.store.rows") == 3)
        #expect(sql.startInstant.nanosecondsSinceEpoch >= query.startInstant.nanosecondsSinceEpoch)
        #expect(sql.endInstant.nanosecondsSinceEpoch <= query.endInstant.nanosecondsSinceEpoch)
        try await harness.stop()
    }
}
