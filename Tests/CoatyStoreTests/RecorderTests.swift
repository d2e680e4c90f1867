import CoatyCore
import CoatySQLite
import CoatyTesting
import Foundation
import GRDB
import Testing
import Tracing

@testable import CoatyStore
@testable import CoatyRecording

// MARK: - Fixtures

/// The backends the recorder is tested against.
enum RecorderBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case inMemory
    case sqlite

    var testDescription: String { rawValue }

    /// A fresh storage and a way to read its rows back.
    func makeStorage() throws -> (
        storage: any RecorderStorage, rows: @Sendable () async throws -> [StoreRow],
        indexing: (any JSONPropertyIndexing)?
    ) {
        switch self {
        case .inMemory:
            let connection = InMemoryDatabase().makeConnection()
            return (ConnectionRecorderStorage(connection), { try await Self.rows(connection) }, nil)
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("coaty-recorder-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let connection = try SQLiteDatabase(path: directory + "/recorder.sqlite").makeConnection()
            return (ConnectionRecorderStorage(connection), { try await Self.rows(connection) }, connection)
        }
    }

    static func rows(_ connection: some ConnectionType) async throws -> [StoreRow] {
        try await connection.read { tx in try await tx.rows(matching: StoreQuery(scope: .coatyObjects)) }
    }
}

/// Objects for queries: numbers, strings, booleans, arrays and relations by objectId.
enum RecorderFixtures {
    static let objectType = "com.example.recorder.Item"

    static func objectId(_ i: Int) -> String {
        "10000000-0000-4000-8000-\(String(repeating: "0", count: 12 - String(i).count))\(i)"
    }

    static func json(_ i: Int) -> JSONObject {
        [
            "objectId": .string(objectId(i)),
            "name": .string("Item \(i % 7) \(i)"),
            "coreType": "CoatyObject",
            "objectType": .string(objectType),
            "externalId": .string("ext-\(i)"),
            "rank": .int(Int64((i * 37) % 23)),
            "label": .string(i % 3 == 0 ? "Abc" : (i % 3 == 1 ? "abc" : "ABc")),
            "flag": .bool(i % 2 == 0),
            "tags": .array([.string("t\(i % 4)"), .int(Int64(i % 5))]),
            "ownerId": .string(objectId((i % 10) + 1)),
            "memberIds": .array([.string(objectId(i)), .string(objectId((i % 30) + 1)), "missing"]),
        ]
    }

    static func objects(_ count: Int = 30) throws -> [AnyCoatyObject] {
        try (1...count).map { try CoatyObjectRegistry().decode(json($0)) }
    }
}

/// A recorder on an in-process broker with a client agent beside it.
struct RecorderHarness {
    let broker: InProcessBroker
    let agent: CommunicationManager
    let client: CommunicationManager
    let recorder: CoatyRecorder
    let rows: @Sendable () async throws -> [StoreRow]
    let indexing: (any JSONPropertyIndexing)?
    let run: Task<Void, any Error>

    static func start(
        _ backend: RecorderBackend,
        configuration: CoatyRecorder.Configuration = .init(),
        wrap: (any RecorderStorage) -> any RecorderStorage = { $0 },
        observerBufferLimit: Int = 10_000,
        tracer: (any Tracer)? = nil
    ) async throws -> RecorderHarness {
        let broker = InProcessBroker()
        let (storage, rows, indexing) = try backend.makeStorage()
        let agentIdentity = Identity(name: "recorder")
        let agent = try CommunicationManager(
            transport: broker.makeTransport(clientId: "recorder"),
            identity: agentIdentity,
            options: .init(observerBufferLimit: observerBufferLimit),
            tracer: tracer
        )
        let client = try CommunicationManager(
            transport: broker.makeTransport(clientId: "client"),
            identity: Identity(name: "client")
        )
        let recorder = CoatyRecorder(
            manager: agent,
            storage: wrap(storage),
            configuration: configuration,
            indexing: indexing
        )
        let run = Task { try await recorder.run() }
        try await agent.start()
        try await client.start()
        await recorder.ready()
        return RecorderHarness(
            broker: broker,
            agent: agent,
            client: client,
            recorder: recorder,
            rows: rows,
            indexing: indexing,
            run: run
        )
    }

    /// Stops the recorder (it flushes) and both agents.
    func stop() async throws {
        recorder.stop()
        try await run.value
        await client.stop()
        await agent.stop()
    }

    /// Rows of one object type.
    func rows(objectType: String) async throws -> [StoreRow] {
        try await rows().filter { $0.index.collection == objectType }
    }

    /// Waits (without a clock) until the recorder committed `count` stores of objects that are
    /// not identities (agents advertise their identities on start; the recorder stores them too).
    static func awaitStored(_ count: Int, in events: RecorderEvents) async {
        var stored = 0
        for await event in events {
            if case .stored(_, let objectType, _) = event, objectType != CoreType.identity.objectType { stored += 1 }
            if stored >= count { return }
        }
    }
}

/// What Coaty's in-memory evaluation gives for a filter and joins over a set of objects.
func expectedResult(_ filter: ObjectFilter?, joins: [ObjectJoinCondition], over objects: [AnyCoatyObject])
    -> [JSONValue]
{
    let all = objects.map(\.jsonValue)
    return ObjectMatcher.resolveJoins(joins, in: ObjectMatcher.apply(filter, to: all), candidates: all)
}

// MARK: - Tests

@Suite("Recorder on the in-process broker", .timeLimit(.minutes(2)))
struct RecorderTests {
    @Test("N advertised objects become N rows with receipt metadata", arguments: RecorderBackend.allCases)
    func advertisedObjectsAreStored(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(backend)
        let events = harness.recorder.events()
        let objects = try RecorderFixtures.objects(40)
        for object in objects { try await harness.client.publishAdvertise(object) }
        var task = CoatyTask(name: "a task", status: .pending, creatorId: CoatyUUID(), creationTimestamp: 1)
        task.externalId = "task-1"
        try await harness.client.publishAdvertise(task)
        await RecorderHarness.awaitStored(objects.count + 1, in: events)
        await harness.recorder.flush()

        let rows = try await harness.rows(objectType: RecorderFixtures.objectType)
        #expect(rows.count == objects.count)
        #expect(Set(rows.map(\.object)) == Set(objects.map(\.jsonValue)))
        for row in rows {
            let receipt = try JSONValueDecoder().decode(ReceiptMetadata.self, from: try #require(row.metadata))
            #expect(receipt.sourceId == harness.client.identity.objectId)
            #expect(receipt.eventType == "Advertise")
            #expect(receipt.topic.hasPrefix("coaty/3/-/ADV:CoatyObject/\(harness.client.identity.objectId)"))
            #expect(row.object["receivedAt"] == nil, "receipt data must not be mixed into the object")
        }
        let tasks = try await harness.rows(objectType: "coaty.Task")
        #expect(tasks.count == 1)
        #expect(tasks.first?.index.key == task.objectId.uuidString)
        try await harness.stop()
        #expect(harness.recorder.statistics.stored >= objects.count + 1)
        #expect(harness.recorder.statistics.failedWrites == 0)
    }

    @Test("Channel events on configured channels are stored; others are not", arguments: RecorderBackend.allCases)
    func channelEvents(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(
            backend,
            configuration: .init(coreTypes: [], channelIds: ["feed"])
        )
        let events = harness.recorder.events()
        let objects = try RecorderFixtures.objects(5)
        try await harness.client.publishChannel("other", objects: Array(objects.prefix(2)))
        try await harness.client.publishChannel("feed", objects: objects)
        await RecorderHarness.awaitStored(objects.count, in: events)
        await harness.recorder.flush()
        let rows = try await harness.rows()
        #expect(Set(rows.map(\.object)) == Set(objects.map(\.jsonValue)))
        let receipt = try JSONValueDecoder().decode(ReceiptMetadata.self, from: try #require(rows.first?.metadata))
        #expect(receipt.eventType == "Channel")
        #expect(receipt.topic.hasPrefix("coaty/3/-/CHN:feed/"))
        try await harness.stop()
    }

    @Test("Deadvertise removes the objects and their descendants", arguments: RecorderBackend.allCases)
    func deadvertiseRemovesDescendants(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(backend)
        let events = harness.recorder.events()
        func object(_ name: String, parent: CoatyUUID?) throws -> AnyCoatyObject {
            var json: JSONObject = [
                "objectId": .string(CoatyUUID().uuidString), "name": .string(name),
                "coreType": "CoatyObject", "objectType": "com.example.Node",
            ]
            if let parent { json["parentObjectId"] = .string(parent.uuidString) }
            return try CoatyObjectRegistry().decode(json)
        }
        let root = try object("root", parent: nil)
        let child = try object("child", parent: root.objectId)
        let sibling = try object("sibling", parent: root.objectId)
        let grandchild = try object("grandchild", parent: child.objectId)
        let unrelated = try object("unrelated", parent: nil)
        let orphanOfOther = try object("other child", parent: unrelated.objectId)
        for item in [root, child, sibling, grandchild, unrelated, orphanOfOther] {
            try await harness.client.publishAdvertise(item)
        }
        try await harness.client.publishDeadvertise([root.objectId])
        var removed: [String] = []
        for await event in events {
            if case .removed(let ids) = event {
                removed = ids
                break
            }
        }
        #expect(Set(removed) == Set([root, child, sibling, grandchild].map(\.objectId.uuidString)))
        let names = Set(
            try await harness.rows(objectType: "com.example.Node").compactMap { $0.object["name"]?.stringValue }
        )
        #expect(names == ["unrelated", "other child"])
        try await harness.stop()
        #expect(harness.recorder.statistics.removed == 4)
    }

    static let queryCases: [(String, ObjectFilter?, [ObjectJoinCondition])] = [
        ("no filter", nil, []),
        (
            "rank > 10 ordered by rank desc then name",
            {
                var filter = ObjectFilter.where("rank", .greaterThan(10))
                filter.orderByProperties = [ObjectFilterOrdering("rank", .descending), ObjectFilterOrdering("name")]
                return filter
            }(), []
        ),
        (
            "collation order, skip 3 take 5",
            {
                var filter = ObjectFilter()
                filter.orderByProperties = [
                    ObjectFilterOrdering("label"), ObjectFilterOrdering("objectId", .descending),
                ]
                filter.skip = 3
                filter.take = 5
                return filter
            }(), []
        ),
        ("like and flag", ObjectFilter.where("name", .like("Item 3%")).and("flag", .equals(true)), []),
        ("contains in array, or", ObjectFilter.where("tags", .contains(["t1"])).or("tags", .contains([3])), []),
        (
            "one-to-one join and array join",
            {
                var filter = ObjectFilter.where("rank", .lessThan(8))
                filter.orderByProperties = [ObjectFilterOrdering("rank")]
                return filter
            }(),
            [
                ObjectJoinCondition(localProperty: "ownerId", asProperty: "owner", isOneToOneRelation: true),
                ObjectJoinCondition(localProperty: "memberIds", asProperty: "members", isLocalPropertyArray: true),
            ]
        ),
        ("nothing matches", ObjectFilter.where("rank", .greaterThan(1000)), []),
    ]

    @Test(
        "A Query over the wire is answered with what ObjectMatcher gives over the same objects",
        arguments: RecorderBackend.allCases,
        queryCases.indices
    )
    func queryMatchesObjectMatcher(backend: RecorderBackend, caseIndex: Int) async throws {
        let (_, filter, joins) = Self.queryCases[caseIndex]
        let harness = try await RecorderHarness.start(backend)
        let objects = try RecorderFixtures.objects(30)
        for object in objects { try await harness.client.publishAdvertise(object) }
        // No waiting: the recorder commits what it received before it answers.
        let query = QueryEventData(
            objectTypes: [RecorderFixtures.objectType],
            objectFilter: filter,
            objectJoinConditions: joins.isEmpty ? nil : ObjectJoinConditionList(joins)
        )
        // A generous timeout for loaded machines; "exactly one" is the recorder's own count.
        let retrieve = try #require(try await harness.client.publishQuery(query).first(timeout: .seconds(30)))
        #expect(retrieve.sourceId == harness.agent.identity.objectId)
        #expect(retrieve.data.objects.map(\.jsonValue) == expectedResult(filter, joins: joins, over: objects))
        try await harness.stop()
        #expect(harness.recorder.statistics.answeredQueries == 1, "exactly one Retrieve per Query")
    }

    @Test(
        "An ordered Query of one object type creates an index on its ordering property, once, up to the limit",
        arguments: [0, 1]
    )
    func automaticIndexes(limit: Int) async throws {
        let harness = try await RecorderHarness.start(
            .sqlite,
            configuration: .init(automaticIndexesPerObjectType: limit)
        )
        let objects = try RecorderFixtures.objects(30)
        for object in objects { try await harness.client.publishAdvertise(object) }
        let indexing = try #require(harness.indexing)
        for property in ["rank", "rank", "externalId"] {
            let filter = ObjectFilter.where("rank", .lessThan(10)).orderBy(ObjectFilterProperty(property), .descending)
                .take(5)
            let query = QueryEventData(objectTypes: [RecorderFixtures.objectType], objectFilter: filter)
            let retrieve = try #require(try await harness.client.publishQuery(query).first(timeout: .seconds(30)))
            #expect(retrieve.data.objects.map(\.jsonValue) == expectedResult(filter, joins: [], over: objects))
        }
        // A Query of several object types, or by core type, indexes nothing.
        let byCoreType = QueryEventData(coreTypes: [.coatyObject], objectFilter: ObjectFilter().orderBy("name").take(1))
        _ = try await harness.client.publishQuery(byCoreType).first(timeout: .seconds(30))
        #expect(indexing.hasIndex(collection: RecorderFixtures.objectType, property: "rank") == (limit >= 1))
        #expect(!indexing.hasIndex(collection: RecorderFixtures.objectType, property: "externalId"))
        #expect(!indexing.hasIndex(collection: "coaty.CoatyObject", property: "name"))
        try await harness.stop()
    }

    @Test(
        "A Query searching a property creates its index; promoted columns, mixed or-ed lists and other operators do not"
    )
    func automaticIndexesForConditions() async throws {
        let harness = try await RecorderHarness.start(.sqlite)
        let objects = try RecorderFixtures.objects(30)
        for object in objects { try await harness.client.publishAdvertise(object) }
        let indexing = try #require(harness.indexing)
        let filters = [
            ObjectFilter.where("rank", .between(5, 12)).take(5),
            ObjectFilter.where("externalId", .equals("ext-4")),
            ObjectFilter(conditions: .or([.init("label", .equals("x")), .init("rank", .equals(3))])),
            ObjectFilter.where("label", .contains("x")),
        ]
        for filter in filters {
            let query = QueryEventData(objectTypes: [RecorderFixtures.objectType], objectFilter: filter)
            let retrieve = try #require(try await harness.client.publishQuery(query).first(timeout: .seconds(30)))
            #expect(retrieve.data.objects.map(\.jsonValue) == expectedResult(filter, joins: [], over: objects))
        }
        #expect(indexing.hasIndex(collection: RecorderFixtures.objectType, property: "rank"))
        #expect(!indexing.hasIndex(collection: RecorderFixtures.objectType, property: "externalId"))
        #expect(!indexing.hasIndex(collection: RecorderFixtures.objectType, property: "label"))
        try await harness.stop()
        #expect(
            CoatyRecorder.indexedSearchProperties(
                of: .or([.init("tag", .in(["a", "b"])), .init("tag", .equals("c"))])
            ) == ["tag"]
        )
        #expect(CoatyRecorder.indexedSearchProperties(of: .condition(.init("n", .notEquals(1)))).isEmpty)
    }

    @Test("A Query of 1000 or-ed conditions is answered like any other", arguments: RecorderBackend.allCases)
    func queryOfManyConditions(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(backend)
        let objects = try RecorderFixtures.objects(30)
        for object in objects { try await harness.client.publishAdvertise(object) }
        let conditions = (0..<1000).map { ObjectFilterCondition("externalId", .equals(.string("ext-\($0 * 2)"))) }
        let filter = ObjectFilter(conditions: .or(conditions))
        let query = QueryEventData(objectTypes: [RecorderFixtures.objectType], objectFilter: filter)
        let retrieve = try #require(try await harness.client.publishQuery(query).first(timeout: .seconds(30)))
        #expect(retrieve.data.objects.map(\.jsonValue) == expectedResult(filter, joins: [], over: objects))
        #expect(retrieve.data.objects.count == 15)
        try await harness.stop()
        #expect(harness.recorder.statistics.failedAnswers == 0)
    }

    @Test("A Query by core type retrieves only that core type", arguments: RecorderBackend.allCases)
    func queryByCoreType(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(backend)
        try await harness.client.publishAdvertise(try RecorderFixtures.objects(3)[0])
        let task = CoatyTask(name: "t", status: .done, creatorId: CoatyUUID(), creationTimestamp: 5)
        try await harness.client.publishAdvertise(task)
        let retrieve = try #require(
            try await harness.client.publishQuery(QueryEventData(coreTypes: [.task])).first(timeout: .seconds(30))
        )
        #expect(retrieve.data.objects.map(\.objectId) == [task.objectId])
        try await harness.stop()
    }

    @Test("A Discover is resolved with the object's text as it was advertised", arguments: RecorderBackend.allCases)
    func discoverResolvesWithTheAdvertisedText(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(backend)
        let id = RecorderFixtures.objectId(77)
        // Members out of the usual order, spacing, escapes, a number written long, unknown members.
        let text = Array(
            #"{ "name" : "Caf\u00e9 \"77\"", "extra": [1, 2.50, {"k": null}],"objectType":"\#(RecorderFixtures.objectType)","#
                .utf8
        ) + Array(#" "coreType":"CoatyObject" , "objectId":"\#(id)", "externalId":"ext-77"}"#.utf8)
        guard case .object(let json) = try JSONValue(parsing: text) else { Issue.record("not an object"); return }
        let object = try CoatyObjectRegistry().decode(json, text: text)
        #expect(object.receivedText == text)
        try await harness.client.publishAdvertise(object)

        let objectId = try #require(CoatyUUID(id))
        let resolve = try #require(
            try await harness.client.publishDiscover(.objectId(objectId)).first(timeout: .seconds(30))
        )
        let resolved = try #require(resolve.data.object)
        #expect(resolved == object)
        #expect(resolved.name == "Café \"77\"")
        // The store kept the text, and the Resolve carries it byte for byte.
        #expect(resolved.receivedText == text)
        try await harness.stop()
        #expect(harness.recorder.statistics.answeredDiscovers == 1)
    }

    @Test("Discover by objectId and by externalId (with type restrictions)", arguments: RecorderBackend.allCases)
    func discover(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(backend)
        let objects = try RecorderFixtures.objects(5)
        for object in objects { try await harness.client.publishAdvertise(object) }
        let target = objects[3]

        let byId = try #require(
            try await harness.client.publishDiscover(.objectId(target.objectId)).first(timeout: .seconds(30))
        )
        #expect(byId.data.object == target)
        #expect(byId.sourceId == harness.agent.identity.objectId)

        let byExternal = try #require(
            try await harness.client.publishDiscover(
                .externalId("ext-4", objectTypes: [RecorderFixtures.objectType])
            ).first(timeout: .seconds(30))
        )
        #expect(byExternal.data.object == target)

        let byExternalCore = try #require(
            try await harness.client.publishDiscover(.externalId("ext-2", coreTypes: [.coatyObject]))
                .first(timeout: .seconds(30))
        )
        #expect(byExternalCore.data.object == objects[1])

        // A type restriction that excludes the object: no Resolve from the recorder.
        let wrongType = try await harness.client.publishDiscover(.externalId("ext-4", coreTypes: [.task]))
            .responses(timeout: .milliseconds(500)).collect()
        #expect(wrongType.isEmpty)
        try await harness.stop()
        #expect(harness.recorder.statistics.answeredDiscovers == 3)
    }

    @Test(
        "Update of a stored object is applied and completed; of an unknown one ignored",
        arguments: RecorderBackend.allCases
    )
    func updateComplete(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(backend, configuration: .init(acceptUpdates: true))
        let objects = try RecorderFixtures.objects(3)
        for object in objects { try await harness.client.publishAdvertise(object) }
        var changed = objects[1].json
        changed["rank"] = 999
        changed["note"] = "updated"
        let updated = try CoatyObjectRegistry().decode(changed)

        let complete = try #require(try await harness.client.publishUpdate(updated).first(timeout: .seconds(30)))
        #expect(complete.data.object == updated)
        let row = try #require(try await harness.rows().first { $0.index.key == updated.objectId.uuidString })
        #expect(row.object == updated.jsonValue)
        let receipt = try JSONValueDecoder().decode(ReceiptMetadata.self, from: try #require(row.metadata))
        #expect(receipt.eventType == "Update")

        var unknown = changed
        unknown["objectId"] = .string(CoatyUUID().uuidString)
        let none = try await harness.client.publishUpdate(try CoatyObjectRegistry().decode(unknown))
            .responses(timeout: .milliseconds(500)).collect()
        #expect(none.isEmpty)
        try await harness.stop()
        #expect(harness.recorder.statistics.completedUpdates == 1)
        #expect(harness.recorder.statistics.ignoredUpdates == 1)
        #expect(try await harness.rows(objectType: RecorderFixtures.objectType).count == 3)
    }

    @Test("Malformed input and a failing write do not stop the recorder", arguments: RecorderBackend.allCases)
    func malformedInput(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(backend, wrap: { PoisonStorage(base: $0) })
        let raw = harness.broker.makeTransport(clientId: "garbage")
        try await raw.connect(will: nil)
        let source = CoatyUUID()
        let garbage: [(String, String)] = [
            ("coaty/3/-/ADV:Task/\(source)", "not json"),
            ("coaty/3/-/ADV:Task/\(source)", #"{"object":{"name":"no ids"}}"#),
            ("coaty/3/-/ADV:Task/not-a-uuid", #"{"object":{}}"#),
            ("coaty/3/-/DAD/\(source)", #"{"objectIds":"nope"}"#),
            ("coaty/3/-/QRY/\(source)/\(CoatyUUID())", #"{"objectFilter":{"conditions":7}}"#),
            ("coaty/3/-/QRY/\(source)/\(CoatyUUID())", #"{"coreTypes":["Task"],"objectTypes":["x"]}"#),
            ("coaty/3/-/DSC/\(source)/\(CoatyUUID())", #"{"objectId":17}"#),
        ]
        for (topic, payload) in garbage { try await raw.publish(topic: topic, payload: Array(payload.utf8)) }
        var poison = try RecorderFixtures.objects(1)[0].json
        poison["objectId"] = .string(CoatyUUID().uuidString)
        poison["name"] = "poison"
        let objects = try RecorderFixtures.objects(4)
        let events = harness.recorder.events()
        try await harness.client.publishAdvertise(objects[0])
        try await harness.client.publishAdvertise(try CoatyObjectRegistry().decode(poison))
        for object in objects.dropFirst() { try await harness.client.publishAdvertise(object) }

        await RecorderHarness.awaitStored(objects.count, in: events)
        let retrieve = try #require(
            try await harness.client.publishQuery(QueryEventData(objectTypes: [RecorderFixtures.objectType]))
                .first(timeout: .seconds(30))
        )
        #expect(Set(retrieve.data.objects) == Set(objects))
        try await harness.stop()
        #expect(harness.recorder.statistics.failedWrites == 1)
        #expect(harness.agent.statistics.invalidPayloads + harness.agent.statistics.invalidTopics >= garbage.count)
    }

    @Test("A burst of 10 000 Advertise events into a slow database loses nothing", arguments: RecorderBackend.allCases)
    func burstWithSlowDatabase(backend: RecorderBackend) async throws {
        let count = 10_000
        let configuration = CoatyRecorder.Configuration(
            coreTypes: [.coatyObject],
            queueCapacity: 256,
            maxBatchSize: 128,
            eventBufferLimit: count + 100
        )
        let harness = try await RecorderHarness.start(
            backend,
            configuration: configuration,
            wrap: { SlowStorage(base: $0) },
            observerBufferLimit: count + 100
        )
        let events = harness.recorder.events()
        let template = try RecorderFixtures.objects(1)[0].json
        for i in 0..<count {
            var json = template
            json["objectId"] = .string(CoatyUUID().uuidString)
            json["rank"] = .int(Int64(i))
            try await harness.client.publishAdvertise(try CoatyObjectRegistry().decode(json))
        }
        await RecorderHarness.awaitStored(count, in: events)
        let retrieve = try #require(
            try await harness.client.publishQuery(
                QueryEventData(
                    objectTypes: [RecorderFixtures.objectType],
                    objectFilter: .where("rank", .greaterThanOrEqual(0))
                )
            ).first(timeout: .seconds(30))
        )
        #expect(retrieve.data.objects.count == count)
        try await harness.stop()
        let statistics = harness.recorder.statistics
        #expect(try await harness.rows(objectType: RecorderFixtures.objectType).count == count)
        #expect(statistics.failedWrites == 0)
        #expect(statistics.peakQueueDepth <= configuration.queueCapacity)
        #expect(statistics.backPressureWaits > 0, "the slow database must have pushed back")
        #expect(statistics.batches < count, "objects are committed in batches")
        #expect(harness.agent.statistics.observerOverflow == 0)
    }

    @Test("Stopping flushes: everything received is committed when run() returns", arguments: RecorderBackend.allCases)
    func stopFlushes(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(
            backend,
            configuration: .init(coreTypes: [.coatyObject], batchInterval: .seconds(3600)),
            wrap: { SlowStorage(base: $0) }
        )
        let objects = try RecorderFixtures.objects(20)
        for object in objects { try await harness.client.publishAdvertise(object) }
        // Wait until all 20 were received (not necessarily committed), then stop.
        while harness.recorder.statistics.received < objects.count { await Task.yield() }
        try await harness.stop()
        #expect(try await harness.rows(objectType: RecorderFixtures.objectType).count == objects.count)
    }

    @Test(
        "Stopping also stores what the observers still held, behind a full queue",
        arguments: RecorderBackend.allCases
    )
    func stopHandsOverWhatTheObserversHold(backend: RecorderBackend) async throws {
        let harness = try await RecorderHarness.start(
            backend,
            configuration: .init(coreTypes: [.coatyObject], queueCapacity: 1, maxBatchSize: 1),
            wrap: { SlowStorage(base: $0) }
        )
        // A second observer on the recorder's manager: the manager routes each message to every
        // observer of it at once, so when this one has all of them, the recorder's has too.
        let witness = try harness.agent.observeAdvertise(coreType: .coatyObject)
        await witness.subscribed()
        // 40: enough that most wait at the stop, few enough that a loaded machine (where each 2 ms
        // commit can take far longer) hands them over within the stop's bound.
        let objects = try RecorderFixtures.objects(40)
        for object in objects { try await harness.client.publishAdvertise(object) }
        var routed = 0
        for await _ in witness {
            routed += 1
            if routed == objects.count { break }
        }
        // Most of them still wait behind the one-slot queue of a store that takes 2 ms per commit.
        #expect(harness.recorder.statistics.stored < objects.count, "the slow store must still be behind")
        try await harness.stop()
        #expect(try await harness.rows(objectType: RecorderFixtures.objectType).count == objects.count)
    }

    /// On SQLite the writer requests each transaction before the previous one ended, and the
    /// transaction takes its batch when it begins. A batch that fails (a real SQLite error: a
    /// trigger aborts one insert) is written one mutation at a time, and the transaction already
    /// requested behind it takes nothing meanwhile: the rows' insertion order is the publication
    /// order, the bad object is the one failed write, nothing else is lost.
    @Test("SQLite: a failing batch is written one by one before any later batch, none overtakes it")
    func failingBatchIsNotOvertaken() async throws {
        let path = TemporaryDirectory().file("poison.sqlite")
        let connection = try SQLiteDatabase(path: path).makeConnection()
        let admin = try DatabaseQueue(path: path)
        try await admin.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER poison BEFORE INSERT ON coaty_rows WHEN NEW.name = 'poison'
                    BEGIN SELECT RAISE(ABORT, 'poisoned'); END
                    """
            )
        }
        try admin.close()
        let harness = try await RecorderHarness.start(
            .inMemory,
            configuration: .init(coreTypes: [.coatyObject], queueCapacity: 16, maxBatchSize: 16),
            wrap: { _ in ConnectionRecorderStorage(connection) }
        )
        let events = harness.recorder.events()
        let count = 300
        let poisoned = 100
        let template = try RecorderFixtures.objects(1)[0].json
        for i in 0..<count {
            var json = template
            json["objectId"] = .string(CoatyUUID().uuidString)
            json["rank"] = .int(Int64(i))
            if i == poisoned { json["name"] = "poison" }
            try await harness.client.publishAdvertise(try CoatyObjectRegistry().decode(json))
        }
        await RecorderHarness.awaitStored(count - 1, in: events)
        try await harness.stop()
        let ranks = try await RecorderBackend.rows(connection)
            .filter { $0.index.collection == RecorderFixtures.objectType }
            .compactMap { $0.object["rank"]?.int64Value }
        #expect(ranks == (0..<count).filter { $0 != poisoned }.map { Int64($0) })
        #expect(harness.recorder.statistics.failedWrites == 1)
        #expect(harness.recorder.statistics.stored >= count - 1)
    }

    @Test("run() twice at once is refused")
    func runTwice() async throws {
        let harness = try await RecorderHarness.start(.inMemory)
        await #expect(throws: RecorderError.alreadyRunning) { try await harness.recorder.run() }
        try await harness.stop()
    }
}

// MARK: - Storage doubles

/// Delays every transaction, as a slow disk would.
struct SlowStorage: RecorderStorage {
    let base: any RecorderStorage

    func apply(_ mutations: [RecorderMutation]) async throws -> [RecorderMutationOutcome] {
        try await Task.sleep(for: .milliseconds(2))
        return try await base.apply(mutations)
    }
    func objects(in scope: StoreScope, filter: ObjectFilter?, joins: [ObjectJoinCondition]) async throws -> [JSONValue]
    {
        try await base.objects(in: scope, filter: filter, joins: joins)
    }
    func objects(where property: String, equals value: String) async throws -> [JSONValue] {
        try await base.objects(where: property, equals: value)
    }
    func update(_ object: AnyCoatyObject, receipt: ReceiptMetadata) async throws -> JSONValue? {
        try await base.update(object, receipt: receipt)
    }
}

/// Fails every transaction that stores an object named `poison`.
struct PoisonStorage: RecorderStorage {
    struct Poisoned: Error {}
    let base: any RecorderStorage

    func apply(_ mutations: [RecorderMutation]) async throws -> [RecorderMutationOutcome] {
        for case .store(let object, _) in mutations where object.name == "poison" { throw Poisoned() }
        return try await base.apply(mutations)
    }
    func objects(in scope: StoreScope, filter: ObjectFilter?, joins: [ObjectJoinCondition]) async throws -> [JSONValue]
    {
        try await base.objects(in: scope, filter: filter, joins: joins)
    }
    func objects(where property: String, equals value: String) async throws -> [JSONValue] {
        try await base.objects(where: property, equals: value)
    }
    func update(_ object: AnyCoatyObject, receipt: ReceiptMetadata) async throws -> JSONValue? {
        try await base.update(object, receipt: receipt)
    }
}
