public import CoatyCore
public import CoatyStore
import CoatyRecording
import Foundation
import Testing

/// The one contract every backend meets: the cases of Coaty JS's `db-in-memory.spec.ts` (its
/// facts and expected counts), transactions, metadata, the local store, scopes, concurrency and
/// the typed API. Each step is a generic function over a connection (or a repository), so that
/// every backend's test target runs the same steps.
public enum StoreContract {
    public static func spec(_ repository: AnyRepository<AnyCoatyObject>) async throws {
        var objects = try SpecObjects.all()

        // New objects are inserted.
        let inserted = try await repository.save(objects, mode: .insert)
        #expect(inserted.count == 100)
        #expect(try await repository.count() == 100)

        // Inserted object replaces existing one.
        objects[0] = try SpecObjects.renamed(objects[0], suffix: ".1")
        let replaced = try await repository.save([objects[0]], mode: .upsert)
        #expect(replaced == [objects[0].objectId.uuidString])

        // Inserted object is skipped.
        let skipped = try await repository.save([try SpecObjects.renamed(objects[0], suffix: ".2")], mode: .insert)
        #expect(skipped.isEmpty)
        #expect(try await repository.fetch(id: objects[0].objectId.uuidString)?.name == "Test Object 1.1")

        // Updating existing objects.
        objects = try objects.map { try SpecObjects.renamed($0, suffix: ".updated") }
        #expect(try await repository.save(objects, mode: .update).count == 100)

        // Updating a property value of existing objects.
        for object in objects {
            try await repository.write(object) { object in
                var json = object.json
                json["testUpdate"] = "set"
                object = try SpecObjects.object(json)
            }
        }
        let all = try await repository.fetchAll()
        #expect(all.count == 100)
        #expect(all.allSatisfy { $0.json["testUpdate"] == "set" })
        #expect(all.map(\.json["testId"]) == (1...100).map { JSONValue.int(Int64($0)) })
        #expect(all[0].name == "Test Object 1.1.updated")

        // No update of non-existing objects.
        let nonExisting = try SpecObjects.object([
            "name": "Test object xxxxx", "objectId": "00102092-5869-4e2d-ad3f-1d7a161f419c",
            "coreType": "CoatyObject", "objectType": "coaty.CoatyObject",
        ])
        #expect(try await repository.save([nonExisting], mode: .update).isEmpty)
        #expect(try await repository.count() == 100)

        // Object is found by object ID and by external ID.
        let byId = try #require(try await repository.fetch(id: SpecObjects.objectId(1)))
        #expect(byId.objectType == SpecObjects.objectType)
        #expect(byId.coreType == .coatyObject)
        #expect(byId.json["testId"] == 1)
        let byExternal = try await repository.fetch(FetchOptions(filter: .where("externalId", .equals("101"))))
        #expect(byExternal.map(\.objectId.uuidString) == [SpecObjects.objectId(1)])

        // Join related objects (relations by objectId).
        let joinFilter = ObjectFilter.allOf([ObjectFilterCondition("testId", .between(10, 20))]).orderBy(
            "testObj.testId"
        ).take(3)
        let joins = [
            ObjectJoinCondition(localProperty: "relatedId", asProperty: "resolvedTestObjects"),
            ObjectJoinCondition(
                localProperty: "relatedId",
                asProperty: "resolvedExternalObject",
                isOneToOneRelation: true
            ),
            ObjectJoinCondition(
                localProperty: "relatedIds",
                asProperty: "resolvedTestValues",
                isLocalPropertyArray: true
            ),
        ]
        let joined = try await repository.fetchJSON(FetchOptions(filter: joinFilter, joins: joins))
        #expect(joined.count == 3)
        for (index, object) in joined.enumerated() {
            #expect(object["testId"] == .int(Int64(10 + index)))
            #expect(object["resolvedTestObjects"]?.arrayValue?.count == 1)
            #expect(object["resolvedTestObjects"]?[0]?["objectId"] == object["objectId"])
            #expect(object["resolvedExternalObject"]?["testId"] == object["testId"])
            #expect(object["resolvedTestValues"]?.arrayValue?.count == 3)
        }
        let joinedTyped = try await repository.fetch(FetchOptions(filter: joinFilter, joins: joins))
        #expect(joinedTyped.first?.json["resolvedTestValues"]?.arrayValue?.count == 3)

        // Found objects are iterated one by one, and as batches.
        let firstTestId = 100 - 20 - 1
        let pagedFilter = ObjectFilter(
            conditions: .and([ObjectFilterCondition("testId", .between(.int(Int64(firstTestId)), 0))]),
            orderByProperties: [ObjectFilterOrdering("testId", .descending)],
            skip: 10,
            take: 50
        )
        let expectedIds = Array(((firstTestId - 10 - 49)...(firstTestId - 10)).reversed()).map {
            JSONValue.int(Int64($0))
        }
        #expect(try await repository.fetch(FetchOptions(filter: pagedFilter)).map(\.json["testId"]) == expectedIds)
        var batches: [[AnyCoatyObject]] = []
        for try await batch in repository.pages(FetchOptions(filter: pagedFilter), pageSize: 13) {
            batches.append(batch)
        }
        #expect(batches.count == 4)
        #expect(batches.map(\.count) == [13, 13, 13, 11])
        #expect(batches.flatMap { $0 }.map(\.json["testId"]) == expectedIds)

        // Objects are counted.
        for c in CountCase.cases {
            #expect(try await repository.count(c.filter) == c.count, "\(c.label)")
        }

        // Object properties are aggregated.
        let tenToTwenty = ObjectFilter.allOf([
            ObjectFilterCondition("testId", .between(10, 20)),
            ObjectFilterCondition("testObj.testId", .between(10, 20)),
        ])
        #expect(try await repository.aggregate(.sum, of: "testId", filter: tenToTwenty) == 165)
        #expect(try await repository.aggregate(.sum, of: "testObj.testId", filter: tenToTwenty) == 165)
        #expect(try await repository.aggregate(.sum, of: "..", filter: tenToTwenty) == 165)
        #expect(
            try await repository.aggregate(.sum, of: ObjectFilterProperty(path: [".", ".", "."]), filter: tenToTwenty)
                == 165
        )
        #expect(try await repository.aggregate(.max, of: "testId", filter: tenToTwenty) == 20)
        #expect(try await repository.aggregate(.min, of: "testId", filter: tenToTwenty) == 10)
        #expect(try await repository.aggregate(.average, of: "testId", filter: tenToTwenty) == 15)
        let wrongCase = ObjectFilter.allOf([
            ObjectFilterCondition("testid", .between(10, 20)),
            ObjectFilterCondition("testobj.testId", .between(10, 20)),
        ])
        #expect(try await repository.aggregate(.max, of: "testId", filter: wrongCase) == nil)
        let trueOnes = ObjectFilter.allOf([
            ObjectFilterCondition("testBool", .equals(true)), ObjectFilterCondition("testObj.testBool", .equals(true)),
        ])
        #expect(try await repository.aggregate(.every, of: "testBool", filter: trueOnes) == true)
        let falseOnes = ObjectFilter.allOf([
            ObjectFilterCondition("testBool", .notEquals(true)),
            ObjectFilterCondition("testObj.testBool", .notEquals(true)),
        ])
        #expect(try await repository.aggregate(.some, of: "testBool", filter: falseOnes) == false)
        let none = ObjectFilter.allOf([
            ObjectFilterCondition("testId", .equals(-1)), ObjectFilterCondition("testObj.testId", .equals(-1)),
        ])
        #expect(try await repository.aggregate(.average, of: "testBool", filter: none) == nil)

        // Objects are deleted by object ID.
        let deleteIds = [SpecObjects.objectId(100), SpecObjects.objectId(99)]
        #expect(Set(try await repository.delete(ids: deleteIds)) == Set(deleteIds))
        #expect(try await repository.count() == 98)

        // Objects are deleted by filter.
        let byFilter = ObjectFilter.allOf([
            ObjectFilterCondition("testId", .equals(97)), ObjectFilterCondition("testObj.testId", .equals(97)),
        ])
        #expect(try await repository.delete(matching: byFilter) == 1)
        #expect(try await repository.count() == 97)

        // Collection is cleared.
        #expect(try await repository.deleteAll() == 97)
        #expect(try await repository.count() == 0)
    }

    /// The error a test body throws to abort a transaction.
    public struct Abort: Error {
        /// An abort.
        public init() {}
    }

    /// A write whose body throws changes nothing.
    /// - Parameter connection: a connection to an empty database.
    public static func rollback<C: ConnectionType>(_ connection: C) async throws {
        try await [Note(id: 1, text: "kept")].write(to: connection)
        await #expect(throws: Abort.self) {
            try await connection.write { tx in
                try await Note(id: 2, text: "new").write(to: tx)
                try await Note(id: 1, text: "changed").write(to: tx)
                try await tx.setLocalValue("x", forKey: "k")
                #expect(try await Note.read(tx).all().count == 2)
                throw Abort()
            }
        }
        let notes = try await connection.read { tx in try await Note.read(tx).all() }
        #expect(notes == [Note(id: 1, text: "kept")])
        #expect(try await LocalStore(connection).get("k") == nil)
    }

    /// Many rows written at once (``WriteTransactionType/writeRows(_:mode:)``) have the effect of
    /// writing each in turn: more rows than one PostgreSQL statement takes, an existing row
    /// upserted in its place, a row given as text, `.insert` skipping what exists, a repeated
    /// index (the last write wins), `.update` writing only what exists; all in insertion order.
    /// - Parameter connection: a connection to an empty database.
    public static func manyRows<C: ConnectionType>(_ connection: C) async throws {
        try await Note(id: 1, text: "old").write(to: connection)
        let count = 1_200
        let written = try await connection.write { tx in
            let writer = Note.writer(tx)
            var rows = try (1...count).map { try writer.row(for: Note(id: $0, text: "note \($0)")) }
            // As a received object's text, spaced differently: stored as given, read as the same JSON.
            rows[6].objectText = Array(#"{ "id" : 7,  "text" : "note 7" }"#.utf8)
            return try await tx.writeRows(rows, mode: .upsert)
        }
        #expect(written == count)
        var notes = try await connection.read { tx in try await Note.read(tx).all() }
        #expect(notes.map(\.id) == Array(1...count))
        #expect(notes.map(\.text) == (1...count).map { "note \($0)" })

        let (inserted, repeated, updated) = try await connection.write { tx in
            let writer = Note.writer(tx)
            return (
                try await tx.writeRows(
                    [try writer.row(for: Note(id: 2, text: "changed")), try writer.row(for: Note(id: count + 1, text: "new"))],
                    mode: .insert
                ),
                try await tx.writeRows(
                    [try writer.row(for: Note(id: 3, text: "first")), try writer.row(for: Note(id: 3, text: "second"))],
                    mode: .upsert
                ),
                try await tx.writeRows(
                    [try writer.row(for: Note(id: 4, text: "updated")), try writer.row(for: Note(id: 99_999, text: "absent"))],
                    mode: .update
                )
            )
        }
        #expect((inserted, repeated, updated) == (1, 2, 1))
        notes = try await connection.read { tx in try await Note.read(tx).all() }
        #expect(notes.map(\.id) == Array(1...count + 1))
        #expect(notes.prefix(4).map(\.text) == ["note 1", "note 2", "second", "updated"])
        #expect(notes.last?.text == "new")
    }

    /// A task-local value a transaction body must see (the body runs in the calling task).
    @TaskLocal static var caller: String?

    /// Transaction bodies that await: a write whose body suspends between its writes commits both,
    /// one that suspends and then throws rolls back everything, a read running while a write is
    /// suspended sees all of that write or none of it, and a body sees the caller's task-local
    /// values.
    /// - Parameter connection: a connection to an empty database.
    public static func awaitingBodies<C: ConnectionType>(_ connection: C) async throws {
        let seen = try await $caller.withValue("test") {
            try await connection.write { tx in
                try await Note(id: 1, text: "before").write(to: tx)
                await Task.yield()
                try await Task.sleep(for: .milliseconds(5))
                try await Note(id: 2, text: "after").write(to: tx)
                return caller
            }
        }
        #expect(seen == "test")
        #expect(try await connection.read { tx in try await Note.read(tx).all().map(\.id) } == [1, 2])

        await #expect(throws: Abort.self) {
            try await connection.write { tx in
                try await Note(id: 3, text: "rolled back").write(to: tx)
                try await Task.sleep(for: .milliseconds(5))
                try await tx.setLocalValue("x", forKey: "k")
                await Task.yield()
                throw Abort()
            }
        }
        #expect(try await connection.read { tx in try await Note.read(tx).all().map(\.id) } == [1, 2])
        #expect(try await LocalStore(connection).get("k") == nil)

        // A write suspended between two writes: a read meanwhile sees both or neither.
        let (written, writtenSignal) = AsyncStream.makeStream(of: Void.self)
        let (gate, opener) = AsyncStream.makeStream(of: Void.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await connection.write { tx in
                    try await Note(id: 4, text: "first").write(to: tx)
                    writtenSignal.yield()
                    for await _ in gate { break }
                    try await Note(id: 5, text: "second").write(to: tx)
                }
            }
            for await _ in written { break }
            group.addTask {
                let ids = try await connection.read { tx in try await Note.read(tx).byKeys(["4", "5"]).map(\.id) }
                #expect(ids == [] || ids == [4, 5], "a read saw part of a write: \(ids)")
            }
            try await Task.sleep(for: .milliseconds(20))
            opener.yield()
            try await group.waitForAll()
        }
        #expect(try await connection.read { tx in try await Note.read(tx).count() } == 4)
    }

    /// Metadata of another type than an item type's own.
    struct Who: Codable, Sendable, Equatable { var changedBy: String }

    /// A typed value of a local store.
    struct Room: Codable, Equatable {
        var floor: Int
        var name: String
        var since: Date
    }

    public static func local<C: ConnectionType>(_ connection: C) async throws {
        let local = LocalStore(connection)
        #expect(try await local.keys().isEmpty)
        try await local.set("b", ["nested": [1, 2.5, "x", nil, true]])
        try await local.set("a", 42)
        try await local.set("a", "replaced")
        #expect(try await local.get("a") == "replaced")
        #expect(try await local.get("b") == ["nested": [1, 2.5, "x", nil, true]])
        #expect(try await local.keys() == ["a", "b"])
        try await local.remove("a")
        #expect(try await local.get("a") == nil)
        #expect(try await local.keys() == ["b"])

        // Named stores keep the same keys apart; typed values round-trip.
        let settings = LocalStore(connection, name: "settings")
        let room = Room(floor: 4, name: "B7-4.12", since: Date(timeIntervalSince1970: 1_700_000_000.25))
        try await settings.set("room", value: room)
        try await settings.set("b", "settings' own b")
        #expect(try await settings.get("room", as: Room.self) == room)
        #expect(try await settings.get("missing", as: Room.self) == nil)
        #expect(try await settings.get("b") == "settings' own b")
        #expect(try await local.get("b") == ["nested": [1, 2.5, "x", nil, true]])
        #expect(try await settings.keys() == ["b", "room"])
        #expect(try await settings.values()["b"] == "settings' own b")
        #expect(try await LocalStore.names(in: connection) == ["", "settings"])
        await #expect(throws: (any Error).self) { try await settings.get("b", as: Room.self) }
        #expect(try await settings.clear() == 2)
        #expect(try await settings.keys().isEmpty)
        #expect(try await LocalStore.names(in: connection) == [""])
        #expect(try await local.keys() == ["b"])
    }

    public static func receipts<C: ConnectionType>(_ connection: C) async throws {
        let object = try SpecObjects.object(SpecObjects.json(7))
        let source = CoatyUUID()
        let receipt = ReceiptMetadata(
            sourceId: source,
            eventType: "Advertise",
            topic: "coaty/3/-/ADV:CoatyObject/\(source)",
            receivedAt: .init(timeIntervalSince1970: 1_700_000_000.123)
        )
        try await object.write(to: connection, metadata: receipt)
        let stored = try await connection.read { tx in
            try await AnyCoatyObject.read(tx).withMetadata.byKey(object.objectId.uuidString)
        }
        let found = try #require(stored)
        #expect(found.item == object)
        #expect(found.item.json["topic"] == nil)
        #expect(found.metadata?.sourceId == source)
        #expect(found.metadata?.topic == receipt.topic)
        #expect(found.metadata?.receivedAt == receipt.receivedAt)
        #expect(found.index == StoreIndex(SpecObjects.objectType, object.objectId.uuidString))
    }

    public static func typed<C: ConnectionType>(_ connection: C) async throws {
        let lights = [
            Light(name: "a", isOn: true, luminance: 0.9), Light(name: "b", isOn: false, luminance: 0.1),
            Light(name: "c", isOn: true, luminance: 0.5),
        ]
        try await lights.write(to: connection)
        try await Setting(id: "volume", value: 3).write(to: connection, metadata: .init(changedBy: "alice"))
        try await [Note(id: 1, text: "one"), Note(id: 2, text: "two")].write(to: connection)

        let result = try await connection.read { tx in
            await (
                all: try Light.read(tx).all(),
                bright: try Light.read(tx).matching(.where("luminance", .greaterThan(0.4)).orderBy("luminance")),
                byKeys: try Light.read(tx).byKeys([
                    lights[2].objectId.uuidString, "missing", lights[0].objectId.uuidString,
                ]),
                existing: try Note.read(tx).existingKeys(["2", "3", "1"]),
                filtered: try Note.read(tx).filterExisting(["2", "3", "1"]),
                setting: try Setting.read(tx).withMetadata.byKey("volume"),
                any: try AnyCoatyObject.read(tx).all().count,
                atIndexes: try Note.read(tx).atIndexes([StoreIndex("notes", "2"), StoreIndex("lights", "2")]),
                baseObjects: try BaseObject.read(tx).all().count
            )
        }
        #expect(result.all == lights)
        #expect(result.bright.map(\.name) == ["c", "a"])
        #expect(result.byKeys.map(\.name) == ["c", "a"])
        #expect(result.existing == ["2", "1"])
        #expect(result.filtered.items == [Note(id: 2, text: "two"), Note(id: 1, text: "one")])
        #expect(result.filtered.missingKeys == ["3"])
        #expect(result.setting?.item == Setting(id: "volume", value: 3))
        #expect(result.setting?.metadata == Setting.Audit(changedBy: "alice"))
        #expect(result.any == 3)
        #expect(result.atIndexes == [Note(id: 2, text: "two")])
        #expect(result.baseObjects == 3)

        #expect(try await lights[1].remove(from: connection))
        #expect(try await !lights[1].remove(from: connection))
        let remaining = try await connection.write { tx in
            let count = try await Light.read(tx).count()
            try await Light.removeAll(from: tx)
            return count
        }
        #expect(remaining == 2)
        #expect(try await connection.read { tx in try await Light.read(tx).all() }.isEmpty)
        #expect(try await connection.read { tx in try await Note.read(tx).count() } == 2)

        // The seeds' API on a connection: each read its own transaction.
        #expect(try await Note.read(connection).byKey("2") == Note(id: 2, text: "two"))
        #expect(try await Note.read(connection).all().map(\.id) == [1, 2])
        let (found, missing) = try await Note.read(connection).filterExisting(["2", "9"])
        #expect(found == [Note(id: 2, text: "two")] && missing == ["9"])
        #expect(try await Note.read(connection).count() == 2)
        #expect(try await Note.read(connection).matching(.where("text", .equals("one"))).map(\.id) == [1])
        #expect(try await Setting.read(connection).withMetadata.byKey("volume")?.metadata?.changedBy == "alice")
        // Metadata of another type per call: the same rows read with any Codable metadata type.
        #expect(
            try await Setting.read(connection).withMetadata(Who.self).all().map(\.metadata) == [Who(changedBy: "alice")]
        )
        try await connection.write { tx in
            _ = try await Note.writer(tx).withMetadata(Who.self).write(
                Note(id: 7, text: "audited"),
                metadata: Who(changedBy: "bob")
            )
        }
        let audited = try await connection.read { tx in try await Note.read(tx).withMetadata(Who.self).byKey("7") }
        #expect(audited?.metadata == Who(changedBy: "bob"))
        // Curried steps, composed in one transaction.
        try await connection.write(Note(id: 5, text: "five").write())
        try await connection.write { tx in
            try await Note(id: 6, text: "six").write()(tx)
            _ = try await Note(id: 5, text: "five").remove()(tx)
        }
        #expect(try await connection.read(Note.readByKey("6")) == Note(id: 6, text: "six"))
        #expect(try await connection.read(Note.readByKey("5")) == nil)
        #expect(try await connection.read(Note.readAll()).map(\.id) == [1, 2, 7, 6])
    }

    public static func persistableRepository<C: ConnectionType>(_ connection: C) async throws {
        let notes = AnyRepository(StoreRepository(connection: connection, for: Note.self))
        try await notes.save([Note(id: 1, text: "a"), Note(id: 2, text: "b"), Note(id: 3, text: "c")])
        let updated = try await notes.write(Note(id: 2, text: "ignored")) { $0.text += "!" }
        #expect(updated == Note(id: 2, text: "b!"))
        #expect(try await notes.fetch(id: "2") == Note(id: 2, text: "b!"))
        #expect(try await notes.fetch(FetchOptions(filter: .where("text", .in(["a", "c"])))).map(\.id) == [1, 3])
        await #expect(throws: Abort.self) {
            try await notes.write(Note(id: 1, text: "")) { note in
                note.text = "never"
                throw Abort()
            }
        }
        #expect(try await notes.fetch(id: "1")?.text == "a")
        #expect(try await notes.count(nil) == 3)
    }

    public static func scoped<C: ConnectionType>(_ connection: C) async throws {
        let task = try CoatyObjectRegistry().decode(
            [
                "objectId": "5b5a5b39-4b3a-4c8b-9a4f-7a1d6f3f9e01", "name": "Task 1", "objectType": "com.example.Job",
                "coreType": "Task", "creatorId": "5b5a5b39-4b3a-4c8b-9a4f-7a1d6f3f9e02",
                "creationTimestamp": 1_700_000_000_000,
                "status": 0, "priority": 7,
            ] as JSONValue
        )
        let lights = [Light(name: "a", isOn: true, luminance: 0.9), Light(name: "b", isOn: false, luminance: 0.1)]
        try await lights.write(to: connection)
        try await task.write(to: connection)
        try await Note(id: 1, text: "not a Coaty object").write(to: connection)

        var byCoreType = AnyCoatyObject.storeCoding
        byCoreType.scope = .coreTypes(["Task"])
        let tasks = AnyRepository(StoreRepository(connection: connection, coding: byCoreType))
        #expect(try await tasks.fetchAll().map(\.objectId) == [task.objectId])
        #expect(try await tasks.fetch(FetchOptions(filter: .where("priority", .greaterThan(5)))).count == 1)
        #expect(try await tasks.fetch(FetchOptions(filter: .where("priority", .lessThan(5)))).isEmpty)

        var byObjectType = AnyCoatyObject.storeCoding
        byObjectType.scope = .collections(["com.example.Light"])
        let anyLights = AnyRepository(StoreRepository(connection: connection, coding: byObjectType))
        #expect(try await anyLights.count() == 2)
        #expect(try await anyLights.fetch(id: task.objectId.uuidString) == nil)
        #expect(try await anyLights.fetch(id: lights[0].objectId.uuidString)?.as(Light.self) == lights[0])

        let everything = objectRepository(connection)
        #expect(try await everything.count() == 3)
        let typedTasks = try await connection.read { tx in try await CoatyTask.read(tx).all() }
        #expect(typedTasks.map(\.objectId) == [task.objectId])
        #expect(typedTasks.first?.custom["priority"] == 7)
        #expect(typedTasks.first?.objectType == "com.example.Job")
    }

    public static func concurrent<C: ConnectionType>(_ connection: C) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for i in 0..<25 {
                        try await Note(id: writer * 100 + i, text: "w\(writer)").write(to: connection)
                    }
                }
            }
            try await group.waitForAll()
        }
        let count = try await connection.read { tx in try await Note.read(tx).count() }
        #expect(count == 200)
        let fromWriterThree = try await connection.read { tx in
            try await Note.read(tx).matching(.where("text", .equals("w3")))
        }
        #expect(fromWriterThree.map(\.id) == (300..<325).map { $0 })
    }
}

/// Coaty JS `db-in-memory.spec.ts` "Objects are counted" (after its insert and update steps).
public struct CountCase: Sendable {
    /// What it counts.
    public let label: String
    /// The filter.
    public let filter: ObjectFilter
    /// The expected count.
    public let count: Int

    static let undefinedOperand = ObjectFilterExpression(.equals)
    static let notUndefinedOperand = ObjectFilterExpression(.notEquals)

    /// The cases.
    public static let cases: [CountCase] = [
        CountCase(label: "all objects", filter: ObjectFilter(), count: 100),
        CountCase(
            label: "between on two properties",
            filter: .allOf([
                ObjectFilterCondition("testId", .between(10, 15)),
                ObjectFilterCondition("testObj.testId", .between(10, 15)),
            ]),
            count: 6
        ),
        CountCase(label: "string between, reversed bounds", filter: .where("testText", .between("3", "20")), count: 11),
        CountCase(
            label: "undefined properties match no operator but NotExists",
            filter: .allOf([
                ObjectFilterCondition("testObj.noname", .notEquals(6)),
                ObjectFilterCondition("testObj.noname", undefinedOperand),
                ObjectFilterCondition("testObj.noname", notUndefinedOperand),
                ObjectFilterCondition("testobj.name", .notEquals(6)),
                ObjectFilterCondition("testobj.name", .notEquals([1, 2, 3])),
            ]),
            count: 0
        ),
        CountCase(
            label: "like, exists and odd property names",
            filter: .allOf([
                ObjectFilterCondition("name", .like("Test % 1_.%")),
                ObjectFilterCondition("unknown", .notExists),
                ObjectFilterCondition("testObj.name", .like("Test SubObject %")),
                ObjectFilterCondition("testObj.", .exists),
                ObjectFilterCondition("testobj.name", .notExists),
                ObjectFilterCondition(" ", .equals("blank")),
                ObjectFilterCondition("", .exists),
                ObjectFilterCondition("..", .between(10, 19)),
                ObjectFilterCondition(ObjectFilterProperty(path: [".", ".", "."]), .between(10, 19)),
            ]),
            count: 10
        ),
        CountCase(
            label: "array equality",
            filter: .allOf([
                ObjectFilterCondition("testValue", .equals([10, 11, 12, "foo"])),
                ObjectFilterCondition("testObj.testValue", .equals([10, 11, 12, "foo"])),
            ]),
            count: 1
        ),
        CountCase(
            label: "contains in any order",
            filter: .allOf([
                ObjectFilterCondition("testValue", .contains([12, 11, "foo"])),
                ObjectFilterCondition("testId", .equals(11)),
            ]),
            count: 1
        ),
        CountCase(
            label: "notContains and notBetween",
            filter: .allOf([
                ObjectFilterCondition("testValue", .notContains([12, 11])),
                ObjectFilterCondition("testId", .notBetween(1, 3)),
            ]),
            count: 100 - 2 - 3
        ),
        CountCase(
            label: "or of contains and between",
            filter: .anyOf([
                ObjectFilterCondition("testValue", .contains([12, 11])),
                ObjectFilterCondition("testId", .between(1, 3)),
            ]),
            count: 2 + 3
        ),
        CountCase(
            label: "in and notIn",
            filter: .allOf([
                ObjectFilterCondition("testId", .in([1, "2", 4, 3])),
                ObjectFilterCondition("testId", .in([3, 4, "5"])),
                ObjectFilterCondition("testId", .notIn([4, 5])),
            ]),
            count: 1
        ),
        CountCase(label: "empty result", filter: .where("testId", .between(100000, 200000)), count: 0),
        CountCase(label: "promoted string equality", filter: .where("externalId", .in(["101", "150", "x"])), count: 2),
        CountCase(
            label: "promoted notEquals",
            filter: .where("objectType", .notEquals(.string(SpecObjects.objectType))),
            count: 0
        ),
        CountCase(label: "exists on a promoted column", filter: .where("externalId", .exists), count: 100),
        CountCase(label: "paged count", filter: ObjectFilter().skip(95).take(10), count: 5),
    ]
}
