import CoatyCore
import CoatyStore
import CoatyRecording
import CoatyStoreTestSupport
import Foundation
import GRDB
import Testing

@testable import CoatyCommunication
@testable import CoatySQLite

@Suite("SQLite backend")
struct SQLiteBackendTests {
    /// Cancelling a read interrupts the statement SQLite is running (a query that would never end
    /// on its own): the read throws `CancellationError`, and the connection serves the next read.
    @Test(.timeLimit(.minutes(1)))
    func cancellingAReadInterruptsItsStatement() async throws {
        let connection = try SQLiteDatabase(path: TemporaryDirectory().file("cancel.sqlite")).makeConnection()
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        let endless = Task {
            try await connection.read { tx in
                signal.yield()
                return try Int.fetchOne(
                    tx.db,
                    sql: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
                )
            }
        }
        for await _ in started { break }
        try await Task.sleep(for: .milliseconds(200))  // the statement runs by now
        endless.cancel()
        await #expect(throws: CancellationError.self) { try await endless.value }
        let one = try await connection.read { tx in try Int.fetchOne(tx.db, sql: "SELECT 1") }
        #expect(one == 1)
    }

    /// `synchronous`, `mmap_size` and `wal_autocheckpoint` of a connection, and whether it is in WAL mode.
    static func settings(_ db: Database) throws -> [Int] {
        try ["synchronous", "mmap_size", "wal_autocheckpoint"].map { try Int.fetchOne(db, sql: "PRAGMA \($0)") ?? -1 }
            + [try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal" ? 1 : 0]
    }

    /// A raw GRDB connection that runs ``SQLiteDatabase/pragmas`` has the settings of the
    /// database's own connections (what the benchmarks' raw baselines rely on).
    @Test func theSettingsArePublicAndAreTheConnectionsOwn() async throws {
        let path = TemporaryDirectory().file("settings.sqlite")
        let connection = try SQLiteDatabase(path: path).makeConnection()
        let ours = try await connection.read { tx in try Self.settings(tx.db) }
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            for pragma in SQLiteDatabase.pragmas { try db.execute(sql: pragma) }
        }
        let raw = try await DatabasePool(path: path, configuration: configuration).read { db in try Self.settings(db) }
        let expected: [Int] = [1, SQLiteDatabase.mmapSize, SQLiteDatabase.walAutocheckpointPages, 1]
        #expect(raw == expected)
        // The database's readers run the same statements; only the checkpoint size may differ (its writer checkpoints).
        let same: [Int] = [raw[0], raw[1], raw[3]]
        #expect([ours[0], ours[1], ours[3]] == same)
    }

    @Test func reopeningTheFileKeepsTheData() async throws {
        let path = TemporaryDirectory().file("reopen.sqlite")
        try await StoreContract.writeDataToReopen(SQLiteDatabase(path: path).makeConnection())
        try await StoreContract.expectReopenedData(SQLiteDatabase(path: path).makeConnection())
    }

    /// A Discover's lookup by objectId or externalId (``PromotedLookup``: a fixed statement, no
    /// planning) selects the rows the matcher selects, in the same order: Coaty objects only,
    /// the same objectId in several collections, metadata read or not.
    @Test func promotedLookupsAgreeWithTheMatcher() async throws {
        let sqlite = try SQLiteDatabase(path: TemporaryDirectory().file("lookup.sqlite")).makeConnection()
        let memory = InMemoryDatabase().makeConnection()
        var rows: [StoreRow] = []
        for i in 0..<60 {
            var object: JSONObject = ["objectId": .string(SpecObjects.objectId(i % 20)), "n": .int(Int64(i))]
            if i % 3 != 0 {  // every third row is no Coaty object (no coreType)
                object["objectType"] = .string("com.example.T\(i % 4)")
                object["coreType"] = "CoatyObject"
            }
            if i % 5 == 0 { object["externalId"] = .string("ext-\(i % 10)") }
            if i % 7 == 0 { object["externalId"] = .int(7) }  // not a string: never equal to one
            rows.append(
                StoreRow(
                    index: StoreIndex("c\(i % 3)", "k\(i)"),
                    object: .object(object),
                    metadata: ["i": .int(Int64(i))]
                )
            )
        }
        try await StoreContract.load(rows, removing: [], into: sqlite)
        try await StoreContract.load(rows, removing: [], into: memory)
        var lookups: [(String, String)] = (0..<21).map { ("objectId", SpecObjects.objectId($0)) }
        lookups += (0..<11).map { ("externalId", "ext-\($0)") } + [("externalId", "7")]
        for (property, value) in lookups {
            for metadata in [true, false] {
                let query = StoreQuery(
                    scope: .coatyObjects,
                    filter: .where(ObjectFilterProperty(path: [property]), .equals(.string(value))),
                    includesMetadata: metadata
                )
                #expect(PromotedLookup(query) != nil)
                let expected = try await memory.read { tx in tx.rows(matching: query) }
                let actual = try await sqlite.readBriefly { tx in try tx.rows(matching: query) }
                #expect(actual.map(\.index) == expected.map(\.index), "\(property) \(value)")
                #expect(actual.map(\.object) == expected.map(\.object))
                if metadata { #expect(actual.map(\.metadata) == expected.map(\.metadata)) }
                // The lookup on the calling thread (its own connection) and the default one agree.
                let looked = try await sqlite.lookUpRows(matching: query)
                #expect(looked.map(\.index) == expected.map(\.index), "\(property) \(value)")
                #expect(looked.map(\.object) == expected.map(\.object))
                if metadata { #expect(looked.map(\.metadata) == expected.map(\.metadata)) }
                #expect(try await memory.lookUpRows(matching: query).map(\.index) == expected.map(\.index))
                // The same rows as their stored texts, parsed only when read.
                let texts = try await sqlite.lookUpRowTexts(matching: query)
                #expect(texts.allSatisfy { $0.isObjectDeferred })
                #expect(texts.map(\.objectText) == looked.map(\.objectText))
                #expect(texts == looked, "\(property) \(value)")
                if metadata { #expect(texts.map(\.metadata) == expected.map(\.metadata)) }
                #expect(try await memory.lookUpRowTexts(matching: query) == expected)
            }
        }
        // Anything more than one string equality takes the general path.
        let ordered = ObjectFilter.where("objectId", .equals(.string("x"))).orderBy("n")
        #expect(PromotedLookup(StoreQuery(scope: .coatyObjects, filter: ordered)) == nil)
        #expect(PromotedLookup(StoreQuery(scope: .all, filter: .where("objectId", .equals(.string("x"))))) == nil)
        #expect(PromotedLookup(StoreQuery(scope: .coatyObjects, filter: .where("name", .equals(.string("x"))))) == nil)
    }

    /// A received object is stored as its text arrived (no second serialization); every column
    /// and every read agrees with that text, and a row without text is serialized as before.
    @Test func aReceivedObjectIsStoredAsItsText() async throws {
        let path = TemporaryDirectory().file("text.sqlite")
        let connection = try SQLiteDatabase(path: path).makeConnection()
        let id = CoatyUUID()
        let text =
            #"{ "name" : "as sent", "objectType":"com.example.Text","coreType":"CoatyObject","#
            + #""objectId":"\#(id)", "externalId":"ext-1", "n" : 1.50 }"#
        let payload = Array(#"{"object":\#(text)}"#.utf8)
        let event = try AdvertiseEventData(receivedBytes: payload, registry: CoatyObjectRegistry())
        #expect(event.object.receivedText == Array(text.utf8))
        let receipt = ReceiptMetadata(sourceId: nil, eventType: "Advertise", topic: "t")
        let built = try AnyCoatyObject(BaseObject(objectType: "com.example.Text", name: "built"))
        try await connection.write { tx in
            try await AnyCoatyObject.writer(tx).write(event.object, metadata: receipt)
            try await AnyCoatyObject.writer(tx).write(built, metadata: receipt)
        }
        let rows = try DatabaseQueue(path: path).read { db in
            try Row.fetchAll(db, sql: "SELECT object, externalId, name FROM coaty_rows ORDER BY id")
        }
        #expect(rows.map { $0["object"] as String } == [text, built.json.description])
        #expect(rows.first?["externalId"] == "ext-1")
        #expect(rows.first?["name"] == "as sent")
        let read = try await connection.read { tx in try await AnyCoatyObject.read(tx).byKey(id.uuidString) }
        #expect(read?.json == event.object.json)
        #expect(read?.json["n"] == 1.5)
    }

    /// The writer's WAL hook: a checkpoint starts in the background at the limit, none starts
    /// while it runs, the writer copies what it left when that is little (or when the WAL outgrew
    /// four limits), and it checkpoints itself once the background connection cannot be opened.
    @Test func checkpointsAreDecidedAsDocumented() {
        let checkpointer = SQLiteCheckpointer(path: "/nonexistent/c.sqlite", limit: 100)
        #expect(checkpointer.committed(walFrames: 99) == .none)
        #expect(checkpointer.committed(walFrames: 100) == .checkpointInBackground)
        #expect(checkpointer.committed(walFrames: 500) == .none)  // one runs
        checkpointer.finished(copied: 100)
        #expect(checkpointer.committed(walFrames: 150) == .checkpointHere)  // 50 left
        #expect(checkpointer.committed(walFrames: 160) == .checkpointInBackground)  // nothing copied known
        checkpointer.finished(copied: 160)
        #expect(checkpointer.committed(walFrames: 40) == .none)  // the WAL started again
        #expect(checkpointer.committed(walFrames: 170) == .checkpointInBackground)  // not 10 left: restarted
        checkpointer.finished(copied: 170)
        #expect(checkpointer.committed(walFrames: 300) == .checkpointInBackground)  // 130 left
        checkpointer.finished(copied: 300)
        #expect(checkpointer.committed(walFrames: 420) == .checkpointHere)  // 120 left, but 4 limits
        #expect(checkpointer.committed(walFrames: 430) == .checkpointInBackground)
        checkpointer.finished(copied: nil)
        #expect(checkpointer.committed(walFrames: 99) == .none)
        #expect(checkpointer.committed(walFrames: 100) == .checkpointHere)
        #expect(checkpointer.completedCount == 5)
    }

    /// Over a real file: many commits past a small WAL limit are checkpointed in the background,
    /// the WAL starts again (it stays a fraction of the data written), and every row is there
    /// and intact when read through a fresh connection.
    @Test func theWALIsCheckpointedInTheBackgroundAndStaysBounded() async throws {
        let path = TemporaryDirectory().file("wal.sqlite")
        let database = try SQLiteDatabase(path: path, walCheckpointPages: 64)
        let connection = database.makeConnection()
        let text = String(repeating: "x", count: 400)
        var written = 0
        for batch in 0..<60 {
            let rows = (0..<200).map { i in
                StoreRow(
                    index: StoreIndex("c", "k\(batch)-\(i)"),
                    object: ["objectId": .string(CoatyUUID().uuidString), "text": .string(text)]
                )
            }
            try await connection.write { tx in for row in rows { try tx.write(row, mode: .upsert) } }
            written += rows.count
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while database.checkpointer.completedCount == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(database.checkpointer.completedCount > 0)
        let attributes = { (file: String) in
            (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        }
        let (databaseSize, walSize) = (attributes(path), attributes(path + "-wal"))
        // 12 000 rows of ~500 bytes (and their index entries): the checkpoints copied them into the
        // file, and the WAL was reused from its beginning instead of growing with them.
        #expect(databaseSize > 4_000_000)
        #expect(walSize < databaseSize / 2, "WAL \(walSize) bytes, database \(databaseSize)")
        let count = try await DatabaseQueue(path: path).read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM coaty_rows") ?? 0,
                try String.fetchOne(db, sql: "PRAGMA integrity_check") ?? ""
            )
        }
        #expect(count.0 == written)
        #expect(count.1 == "ok")
    }

    @Test func migrationsAreRecordedInOrder() async throws {
        let path = TemporaryDirectory().file("migrations.sqlite")
        let database = try SQLiteDatabase(path: path)
        #expect(try await database.appliedMigrations() == SQLiteDatabase.migrationNames)
        // Opening again applies nothing twice.
        #expect(try await SQLiteDatabase(path: path).appliedMigrations() == SQLiteDatabase.migrationNames)
    }

    /// A file written by the first schema (`Fixtures/schema-v1.sqlite`: migration v1-rows only,
    /// twelve Coaty objects with receipts and two rows of another collection, made with SQLite
    /// exactly as v1 wrote them) opens, is upgraded, and every row reads back, by every path.
    @Test func aFileOfTheFirstSchemaIsUpgradedWithEveryRow() async throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/schema-v1.sqlite").path
        let path = TemporaryDirectory().file("upgraded.sqlite")
        try FileManager.default.copyItem(atPath: fixture, toPath: path)
        let database = try SQLiteDatabase(path: path)
        #expect(try await database.appliedMigrations() == SQLiteDatabase.migrationNames)
        let connection = database.makeConnection()
        let stored = try await connection.read { tx in try await AnyCoatyObject.read(tx).withMetadata.all() }
        #expect(stored.map(\.item.name) == (1...12).map { "Fixture \($0)" })
        #expect(stored[3].item.json["tags"] == ["a", 4])
        #expect(stored.allSatisfy { $0.metadata?.eventType == "Advertise" })
        let settings = try await connection.read { tx in try tx.keys(in: "settings") }
        #expect(settings == ["volume", "theme"])
        // Queries, lookups, indexes and the local store (v2, v3) work on the upgraded file.
        let storage = ConnectionRecorderStorage(connection)
        let ranked = try await storage.objects(
            in: .collections(["com.example.Fixture"]),
            filter: ObjectFilter.where("rank", .greaterThan(50)).orderBy("rank", .descending),
            joins: []
        )
        #expect(ranked.compactMap { $0["rank"]?.intValue } == [120, 110, 100, 90, 80, 70, 60])
        try await database.createIndex(collection: "com.example.Fixture", property: "rank")
        let again = try await storage.objects(
            in: .collections(["com.example.Fixture"]),
            filter: ObjectFilter.where("rank", .greaterThan(50)).orderBy("rank", .descending),
            joins: []
        )
        #expect(again == ranked)
        let found = try await storage.objects(where: "externalId", equals: "fx-7")
        #expect(found.first?["name"] == "Fixture 7")
        try await LocalStore(connection).set("upgraded", true)
        #expect(try await LocalStore(connection).get("upgraded") == true)
        let removed = try await storage.apply([.remove(objectIds: [SpecObjects.objectId(1)])])
        #expect(removed == [.removed((1...12).map { SpecObjects.objectId($0) })])
    }

    /// Local values written by schema v2 (one unnamed store) are in the default store after v4.
    @Test func localValuesOfTheSecondSchemaMoveToTheDefaultStore() async throws {
        let path = TemporaryDirectory().file("v2.sqlite")
        do {
            let pool = try DatabasePool(path: path)
            try SQLiteDatabase.migrator.migrate(pool, upTo: "v2-local-context")
            try await pool.write { db in
                try db.execute(sql: #"INSERT INTO coaty_local (key, value) VALUES ('agent', '{"name":"recorder"}')"#)
            }
        }
        let connection = try SQLiteDatabase(path: path).makeConnection()
        #expect(try await LocalStore(connection).get("agent") == ["name": "recorder"])
        #expect(try await LocalStore.names(in: connection) == [""])
    }

    /// Brief reads (one read-only connection, on the calling thread) see every committed write,
    /// also after the schema changed under them.
    @Test func briefReadsSeeEveryCommit() async throws {
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("brief.sqlite"))
        let connection = database.makeConnection()
        func lookup(_ id: String) async throws -> [String] {
            try await connection.readBriefly { tx in
                try tx.rows(matching: StoreQuery(scope: .all, filter: .where("objectId", .equals(.string(id)))))
                    .compactMap { $0.object["name"]?.stringValue }
            }
        }
        let id = SpecObjects.objectId(1)
        #expect(try await lookup(id).isEmpty)
        let row = StoreRow(index: StoreIndex("c", id), object: ["objectId": .string(id), "name": "first"])
        try await connection.write { tx in _ = try tx.write(row, mode: .upsert) }
        #expect(try await lookup(id) == ["first"])
        try await database.createIndex(collection: "c", property: "rank")
        let renamed = StoreRow(index: row.index, object: ["objectId": .string(id), "name": "second", "rank": 1])
        try await connection.write { tx in _ = try tx.write(renamed, mode: .upsert) }
        #expect(try await lookup(id) == ["second"])
    }

    /// Lookups of a promoted column (``SQLiteConnection/lookUpRows(matching:)``: their own
    /// read-only connection, on the calling thread) see every committed write, removals too;
    /// any other query takes the brief read and returns what a read returns.
    @Test func lookupsSeeEveryCommit() async throws {
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("lookup.sqlite"))
        let connection = database.makeConnection()
        let id = SpecObjects.objectId(1)
        let byId = StoreQuery(scope: .coatyObjects, filter: .where("objectId", .equals(.string(id))))
        #expect(PromotedLookup(byId) != nil)
        func names(_ query: StoreQuery) async throws -> [String] {
            try await connection.lookUpRows(matching: query).compactMap { $0.object["name"]?.stringValue }
        }
        #expect(try await names(byId).isEmpty)
        @Sendable func object(_ name: String) -> JSONValue {
            ["objectId": .string(id), "objectType": "com.example.L", "coreType": "CoatyObject", "name": .string(name)]
        }
        let row = StoreRow(index: StoreIndex("com.example.L", id), object: object("first"))
        try await connection.write { tx in _ = try tx.write(row, mode: .upsert) }
        #expect(try await names(byId) == ["first"])
        let renamed = StoreRow(index: row.index, object: object("second"))
        try await connection.write { tx in _ = try tx.write(renamed, mode: .upsert) }
        #expect(try await names(byId) == ["second"])
        // Not a promoted lookup (a property without its column): the brief read's answer.
        let byName = StoreQuery(scope: .coatyObjects, filter: .where("name", .equals(.string("second"))))
        #expect(PromotedLookup(byName) == nil)
        #expect(try await names(byName) == ["second"])
        try await connection.write { tx in _ = try tx.removeRow(at: row.index) }
        #expect(try await names(byId).isEmpty)
        #expect(try await names(byName).isEmpty)
    }

    /// A row's texts are bound from one buffer (without SQLite's copy): an empty string stays an
    /// empty string, not NULL, beside a missing member's NULL, in every write mode and in a batch.
    @Test func emptyAndMissingColumnsAreWrittenAsSuch() async throws {
        let database = try SQLiteDatabase(path: TemporaryDirectory().file("columns.sqlite"))
        let connection = database.makeConnection()
        func object(_ id: Int, name: String, externalId: String?) -> JSONValue {
            var object: JSONObject = [
                "objectId": .string(SpecObjects.objectId(id)), "objectType": "com.example.L", "coreType": "CoatyObject",
                "name": .string(name),
            ]
            if let externalId { object["externalId"] = .string(externalId) }
            return .object(object)
        }
        let rows = (0..<3).map { i in
            StoreRow(index: StoreIndex("com.example.L", "\(i)"), object: object(i, name: "", externalId: i == 0 ? "" : nil))
        }
        _ = try await connection.write { tx in try tx.writeRows(rows, mode: .upsert) }
        let byEmpty = StoreQuery(scope: .coatyObjects, filter: .where("externalId", .equals(.string(""))))
        #expect(try await connection.lookUpRows(matching: byEmpty).map(\.index.key) == ["0"])
        let counts = try await connection.read { tx in
            try tx.rows(in: .all, whereSQL: "name = '' AND externalId IS NULL", arguments: [], orderBySQL: nil, limit: nil)
        }
        #expect(counts.map(\.index.key) == ["1", "2"])
        // The other modes bind the same way (an update puts the index last).
        let renamed = StoreRow(index: rows[1].index, object: object(1, name: "x", externalId: ""))
        _ = try await connection.write { tx in try tx.write(renamed, mode: .update) }
        _ = try await connection.write { tx in try tx.write(rows[0], mode: .insert) }
        #expect(try await connection.lookUpRows(matching: byEmpty).map(\.index.key) == ["0", "1"])
        let stored = try await connection.read { tx in try tx.row(at: rows[1].index) }
        #expect(stored?.object == renamed.object)
    }

    @Test func sqlReadsReturnTypedItems() async throws {
        try await StoreContract.sqlReadsReturnTypedItems(
            SQLiteDatabase(path: TemporaryDirectory().file("sql.sqlite")).makeConnection(),
            condition: "json_extract(object, '$.luminance') < json_extract(object, '$.minimum') * ?",
            orderBy: "json_extract(object, '$.luminance') DESC",
            nameIs: "json_extract(object, '$.name') = ?"
        )
        // The in-memory backend reads no SQL, and says so.
        let memory = InMemoryDatabase().makeConnection()
        await #expect(throws: SQLReadingUnsupported.self) {
            try await memory.read { tx in try await AnyCoatyObject.read(tx).matchingSQL("1") }
        }
    }

    @Test func openingADirectoryFailsWithAClearError() {
        let directory = TemporaryDirectory().path
        #expect(throws: CoatySQLiteError.self) { try SQLiteDatabase(path: directory) }
    }

    static let planCases: [PlanCase] = [
        PlanCase(label: "promoted equals", filter: .where("name", .equals("x")), isExact: true),
        PlanCase(label: "json member equals string", filter: .where("color", .equals("red")), isExact: true),
        PlanCase(label: "notEquals string", filter: .where("externalId", .notEquals("1")), isExact: true),
        PlanCase(label: "in strings", filter: .where("objectType", .in(["a", "b"])), isExact: true),
        PlanCase(label: "notIn strings", filter: .where("objectType", .notIn(["a"])), isExact: true),
        PlanCase(label: "exists / notExists", filter: .where("a", .exists).and("b", .notExists), isExact: true),
        PlanCase(label: "or of exact", filter: .where("a", .exists).or("name", .equals("n")), isExact: true),
        PlanCase(
            label: "paging without order",
            filter: ObjectFilter.where("a", .exists).skip(2).take(3),
            isExact: true
        ),
        PlanCase(label: "number comparison", filter: .where("n", .greaterThan(3)), isExact: false),
        PlanCase(label: "in with a number", filter: .where("n", .in([1, "2"])), isExact: false),
        PlanCase(label: "nested property", filter: .where("a.b", .equals("x")), isExact: false),
        PlanCase(label: "key with a dash", filter: .where("a-b", .exists), isExact: false),
        PlanCase(label: "like", filter: .where("name", .like("a%")), isExact: false),
        PlanCase(label: "ordering", filter: ObjectFilter.where("name", .equals("x")).orderBy("name"), isExact: false),
        PlanCase(label: "negative take", filter: ObjectFilter().take(-1), isExact: false),
    ]

    @Test(arguments: planCases)
    func pushdownIsExactOnlyWhereSafe(_ c: PlanCase) {
        #expect(SQLPlan(StoreQuery(scope: .all, filter: c.filter)).isExact == c.isExact)
    }

    /// Random objects of mixed member types and random filters over them: the SQLite backend
    /// (SQL pushdown plus matcher) selects exactly the rows, in the order, that the in-memory
    /// backend (``ObjectMatcher`` only) selects.
    @Test(arguments: [UInt64(1), 2, 3])
    func pushdownAgreesWithTheMatcher(seed: UInt64) async throws {
        let sqlite = try SQLiteDatabase(path: TemporaryDirectory().file("random.sqlite")).makeConnection()
        try await StoreContract.pushdownAgreesWithTheMatcher(seed: seed, sqlite) { SQLPlan($0).isExact }
    }
}
