import CoatyKit
import CoatySQLite
import CoatyStore
import CoatyRecording
import CoatySync
import CoatyTesting
import Foundation
import Testing

private let mosquittoInstalled = MosquittoBroker.findExecutable() != nil

/// The recorder's SQLite storage, holding the reads of large filters until the test opens a gate:
/// a Query being answered stays in the middle of its answer for as long as the test wants.
private struct GatedStorage: RecorderStorage {
    let base: any RecorderStorage
    /// Settled when a large filter's read began (and waits).
    let entered = OneShot<Void>()
    /// The large filter's read goes on once this is settled.
    let gate = OneShot<Void>()

    static func isLarge(_ filter: ObjectFilter?) -> Bool {
        guard case .and(let list)? = filter?.conditions else { return false }
        return list.count > 1000
    }

    func apply(_ mutations: [RecorderMutation]) async throws -> [RecorderMutationOutcome] {
        try await base.apply(mutations)
    }

    func objects(in scope: StoreScope, filter: ObjectFilter?, joins: [ObjectJoinCondition]) async throws
        -> [JSONValue]
    {
        if Self.isLarge(filter) {
            entered.settle(.success(()))
            try await gate.value()
        }
        return try await base.objects(in: scope, filter: filter, joins: joins)
    }

    func objects(where property: String, equals value: String) async throws -> [JSONValue] {
        try await base.objects(where: property, equals: value)
    }

    func update(_ object: AnyCoatyObject, receipt: ReceiptMetadata) async throws -> JSONValue? {
        try await base.update(object, receipt: receipt)
    }
}

@Suite(
    "Recorder answering a Query of many conditions",
    .serialized,
    .timeLimit(.minutes(3)),
    .enabled(if: mosquittoInstalled, "mosquitto is not installed (apt-get install mosquitto)")
)
struct RecorderLargeQueryTests {
    static let objectType = "com.example.Reading"

    /// 10 000 and-ed conditions: `value < 15 + k` (k = 0 …), `name != "other k"`, and last
    /// `name != "Object 3"`, so objects 0…14 except 3 match; the conditions the backend pushes into
    /// SQL are the first, and the last one only the matcher checks.
    static func largeFilter() -> ObjectFilter {
        var conditions: [ObjectFilterCondition] = []
        for k in 0..<9_999 {
            conditions.append(
                k % 2 == 0
                    ? ObjectFilterCondition(ObjectFilterProperty("value"), .lessThan(.int(Int64(15 + k))))
                    : ObjectFilterCondition(ObjectFilterProperty("name"), .notEquals(.string("other \(k)")))
            )
        }
        conditions.append(ObjectFilterCondition(ObjectFilterProperty("name"), .notEquals("Object 3")))
        var filter = ObjectFilter(conditions: .and(conditions))
        filter.orderByProperties = [ObjectFilterOrdering("value", .ascending)]
        return filter
    }

    @Test(
        "A Query of 10 000 conditions is answered from SQLite with exactly its objects, and a Query sent while it is being answered is answered meanwhile"
    )
    func largeQueryIsAnsweredAndDoesNotHoldUpOthers() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-large-query-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let database = try SQLiteDatabase(path: directory + "/recorder.sqlite")
        let storage = GatedStorage(base: ConnectionRecorderStorage(database.makeConnection()))
        let agent = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "recorder"))
        // The SQLite database as its indexing: the Query's numeric conditions create an index on
        // `value` first, as `coaty record` does (the SQL planner then faces an indexed property).
        let recorder = CoatyRecorder(manager: agent, storage: storage, indexing: database)
        let events = recorder.events()
        let run = Task { try await recorder.run() }
        try await agent.start()
        await recorder.ready()

        let client = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "client"))
        try await client.start()
        let registry = CoatyObjectRegistry()
        var published: [JSONValue] = []
        for i in 0..<20 {
            let json: JSONValue = [
                "objectType": .string(Self.objectType), "coreType": "CoatyObject",
                "objectId": .string(CoatyUUID().uuidString), "name": .string("Object \(i)"), "value": .int(Int64(i)),
            ]
            published.append(json)
            try await client.publishAdvertise(try registry.decode(json))
        }
        var stored = 0
        for await event in events {
            if case .stored(_, Self.objectType, _) = event { stored += 1 }
            if stored == published.count { break }
        }

        let filter = Self.largeFilter()
        let large = Task {
            try await client.publishQuery(QueryEventData(objectTypes: [Self.objectType], objectFilter: filter))
                .first(timeout: .seconds(120))
        }
        try await storage.entered.value()

        // The large Query is being answered (its read waits at the gate): another is answered now.
        let normal = try await client.publishQuery(
            QueryEventData(objectTypes: [Self.objectType], objectFilter: .where("value", .lessThan(2)))
        ).first(timeout: .seconds(60))
        storage.gate.settle(.success(()))
        let normalIds = normal?.data.objects.map(\.objectId.uuidString).sorted()
        #expect(normalIds == published[0..<2].compactMap { $0["objectId"]?.stringValue }.sorted())

        let retrieved = try #require(try await large.value, "the large Query was not answered")
        let objects = retrieved.data.objects.map(\.jsonValue)
        #expect(objects.compactMap { $0["name"]?.stringValue } == (0..<15).filter { $0 != 3 }.map { "Object \($0)" })
        #expect(objects == ObjectMatcher.apply(filter, to: published))

        recorder.stop()
        try await run.value
        await client.stop()
        await agent.stop()
        #expect(recorder.statistics.answeredQueries == 2)
        #expect(recorder.statistics.failedAnswers == 0)
    }
}
