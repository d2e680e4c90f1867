import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyRecording
import CoatyTesting
import Foundation
import Testing

private let mosquittoInstalled = MosquittoBroker.findExecutable() != nil

@Suite(
    "Recorder over a real mosquitto into SQLite",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: mosquittoInstalled, "mosquitto is not installed (apt-get install mosquitto)")
)
struct RecorderIntegrationTests {
    /// A Task as Coaty JS publishes it, with a field CoatyKit does not know.
    static func taskJSON(_ i: Int, objectId: CoatyUUID, creatorId: CoatyUUID) -> String {
        #"""
        {"object":{"name":"Task \#(i)","objectType":"coaty.Task","coreType":"Task",\#
        "objectId":"\#(objectId)","status":\#(i % 3),"creatorId":"\#(creatorId)",\#
        "creationTimestamp":\#(1_700_000_000_000 + i),"priority":\#(i % 5),"vendor":{"seq":\#(i)}}}
        """#
    }

    @Test("A foreign client's Advertise events become rows in a SQLite file; a Query over the wire is answered")
    func foreignAdvertiseThenQuery() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-recorder-it-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/recorder.sqlite"

        let agent = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "recorder"))
        let recorder = CoatyRecorder(manager: agent, connection: try SQLiteDatabase(path: path).makeConnection())
        let events = recorder.events()
        let run = Task { try await recorder.run() }
        try await agent.start()
        await recorder.ready()

        // A plain MQTT client publishes Coaty JS-shaped Advertise events.
        let count = 300
        let foreignId = CoatyUUID()
        let foreign = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "foreign-js-agent"))
        try await foreign.connect()
        var published: [JSONValue] = []
        for i in 0..<count {
            let payload = Self.taskJSON(i, objectId: CoatyUUID(), creatorId: foreignId)
            published.append(try #require(try JSONValue(parsing: Array(payload.utf8))["object"]))
            try await foreign.publish("coaty/3/-/ADV:Task/\(foreignId)", payload: Array(payload.utf8))
        }
        var stored = 0
        for await event in events {
            if case .stored(_, "coaty.Task", let receipt) = event, receipt.sourceId == foreignId { stored += 1 }
            if stored == count { break }
        }

        // Another process would see the committed rows: open the file on its own.
        let reader = try SQLiteDatabase(path: path).makeConnection()
        let rows = try await reader.read { tx in try await CoatyTask.read(tx).withMetadata.all() }
        #expect(rows.count == count)
        #expect(rows.allSatisfy { $0.metadata?.sourceId == foreignId && $0.metadata?.eventType == "Advertise" })
        #expect(rows.first?.item.custom["vendor"] != nil, "unknown fields are kept")

        // A Query over the wire from a CoatyKit agent.
        let client = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "client"))
        try await client.start()
        var filter = ObjectFilter.where("status", .equals(1)).and("priority", .lessThan(3))
        filter.orderByProperties = [ObjectFilterOrdering("creationTimestamp", .descending)]
        filter.skip = 2
        filter.take = 25
        // The first answer ends the wait (a generous bound: the sanitizer jobs run this 5–15 × slower, beside
        // other tests); that the recorder answers a Query once is the recorder group tests' concern.
        let retrieves = try await client.publishQuery(QueryEventData(coreTypes: [.task], objectFilter: filter))
            .responses(limit: 1, timeout: .seconds(30)).collect()
        #expect(retrieves.count == 1)
        let objects = try #require(retrieves.first).data.objects.map(\.jsonValue)
        #expect(objects == ObjectMatcher.apply(filter, to: published))
        #expect(objects.count == 25)

        // Deadvertise over the wire, then a Discover no longer finds the object.
        let gone = try #require(published.first?["objectId"]?.stringValue.flatMap(CoatyUUID.init))
        let found = try await client.publishDiscover(.objectId(gone)).first(timeout: .seconds(5))
        #expect(found?.data.object?.objectId == gone)
        try await client.publishDeadvertise([gone])
        for await event in events {
            if case .removed(let ids) = event, ids.contains(gone.uuidString) { break }
        }
        #expect(try await reader.read { tx in try await CoatyTask.read(tx).byKey(gone.uuidString) } == nil)

        recorder.stop()
        try await run.value
        await foreign.disconnect()
        await client.stop()
        await agent.stop()
        #expect(recorder.statistics.failedWrites == 0)
        #expect(recorder.statistics.answeredQueries == 1)
    }
}
