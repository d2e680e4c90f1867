import CoatyCore
import CoatyStore
import CoatyRecording
import CoatyStoreTestSupport
import Testing

@testable import CoatyPostgres

/// Runs `body` with a connection to a new, empty database on the suite's server.
func withPostgres<T: Sendable>(
    _ body: (PostgresDatabase, PostgresStoreConnection) async throws -> T
) async throws -> T {
    let server = try #require(PostgresTestServer.current, "the suite has no PostgreSQL server")
    let url = try server.makeDatabase()
    return try await PostgresDatabase.withDatabase(url: url) { database in
        try await body(database, try await database.makeConnection())
    }
}

/// The shared store contract, and the PostgreSQL backend's own facts, against a real server.
@Suite(
    "PostgreSQL backend",
    .serialized,
    .enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason)),
    .postgresServer
)
struct PostgresBackendTests {
    // MARK: The shared contract

    @Test func coatyDatabaseSpec() async throws {
        try await withPostgres { _, connection in try await StoreContract.spec(objectRepository(connection)) }
    }

    @Test func failedWriteRollsBack() async throws {
        try await withPostgres { _, connection in try await StoreContract.rollback(connection) }
    }

    @Test func manyRowsWrittenAtOnce() async throws {
        try await withPostgres { _, connection in try await StoreContract.manyRows(connection) }
    }

    @Test func transactionBodiesAwait() async throws {
        try await withPostgres { _, connection in try await StoreContract.awaitingBodies(connection) }
    }

    @Test func localKeyValueStore() async throws {
        try await withPostgres { _, connection in try await StoreContract.local(connection) }
    }

    @Test func receiptMetadataIsStoredBesideTheObject() async throws {
        try await withPostgres { _, connection in try await StoreContract.receipts(connection) }
    }

    @Test func typedItemsRoundTrip() async throws {
        try await withPostgres { _, connection in try await StoreContract.typed(connection) }
    }

    @Test func repositoryOfPersistableType() async throws {
        try await withPostgres { _, connection in try await StoreContract.persistableRepository(connection) }
    }

    @Test func repositoryScopedLikeAQuery() async throws {
        try await withPostgres { _, connection in try await StoreContract.scoped(connection) }
    }

    @Test func concurrentWritersLoseNothing() async throws {
        try await withPostgres { _, connection in try await StoreContract.concurrent(connection) }
    }

    // MARK: PostgreSQL's own facts

    @Test func reopeningKeepsTheData() async throws {
        let server = try #require(PostgresTestServer.current)
        let url = try server.makeDatabase()
        try await PostgresDatabase.withDatabase(url: url) { database in
            try await StoreContract.writeDataToReopen(database.makeConnection())
        }
        try await PostgresDatabase.withDatabase(url: url) { database in
            try await StoreContract.expectReopenedData(database.makeConnection())
            #expect(try await database.appliedMigrations() == PostgresDatabase.migrationNames)
        }
    }

    /// A database made with the first schemas (versions 1 and 2 replayed, rows and a local value
    /// inserted as they wrote them) is upgraded and keeps every row and value.
    @Test func aDatabaseOfTheFirstSchemaIsUpgradedWithEveryRow() async throws {
        let server = try #require(PostgresTestServer.current)
        let url = try server.makeDatabase()
        var statements = [
            "CREATE TABLE coaty_schema_version (version integer PRIMARY KEY, name text NOT NULL,"
                + " applied_at timestamptz NOT NULL DEFAULT now())"
        ]
        statements += PostgresDatabase.migrationTexts[0] + PostgresDatabase.migrationTexts[1]
        statements.append("INSERT INTO coaty_schema_version (version, name) VALUES (1, 'v1-rows')")
        statements.append("INSERT INTO coaty_schema_version (version, name) VALUES (2, 'v2-local-context')")
        statements.append(#"INSERT INTO coaty_local (key, value) VALUES ('agent', '{"name":"recorder"}'::jsonb)"#)
        for i in 1...12 {
            let id = SpecObjects.objectId(i)
            let object =
                #"{"objectType":"com.example.Fixture","coreType":"CoatyObject","objectId":"\#(id)","name":"Fixture \#(i)","rank":\#(i * 10)}"#
            statements.append(
                "INSERT INTO coaty_rows (collection, key, object, metadata, \"objectId\", \"objectType\", \"coreType\", name)"
                    + " VALUES ('com.example.Fixture', '\(id)', '\(object)'::jsonb,"
                    + " '{\"eventType\":\"Advertise\",\"topic\":\"coaty/3/-/ADV:CoatyObject/x\",\"receivedAt\":1793527200000}'::jsonb,"
                    + " '\(id)', 'com.example.Fixture', 'CoatyObject', 'Fixture \(i)')"
            )
        }
        try server.execute(statements.joined(separator: ";\n"), in: url)
        try await PostgresDatabase.withDatabase(url: url) { database in
            #expect(try await database.appliedMigrations() == ["v1-rows", "v2-local-context"])
            let connection = try await database.makeConnection()  // brings the schema up to date
            #expect(try await database.appliedMigrations() == PostgresDatabase.migrationNames)
            let objects = try await connection.read { tx in try await AnyCoatyObject.read(tx).all() }
            #expect(objects.map(\.name) == (1...12).map { "Fixture \($0)" })
            let ranked = try await ConnectionRecorderStorage(connection).objects(
                in: .collections(["com.example.Fixture"]),
                filter: ObjectFilter.where("rank", .greaterThan(90)),
                joins: []
            )
            #expect(ranked.count == 3)
            // Version 2's local values are in the default store.
            #expect(try await LocalStore(connection).get("agent") == ["name": "recorder"])
            try await LocalStore(connection, name: "other").set("agent", true)
            #expect(try await LocalStore(connection).get("agent") == ["name": "recorder"])
        }
    }

    /// Ordering, paging and numeric comparisons pushed into SQL over a declared `jsonb` index
    /// agree with the matcher (with and without the index); an indexed numeric property makes the
    /// comparison exact, a string among its values does not.
    @Test(arguments: [false, true])
    func orderedQueriesAgreeWithTheMatcher(indexed: Bool) async throws {
        try await withPostgres { database, connection in
            try await StoreContract.orderedQueriesAgreeWithTheMatcher(
                connection,
                indexing: indexed ? database : nil,
                seed: indexed ? 5 : 6
            )
            let between = StoreQuery(scope: .collection("c1"), filter: .where("rank", .between(-3, 3)))
            let exact = try await connection.read { tx in try await tx.plan(for: between).isExact }
            #expect(exact == indexed)
            let strings = StoreQuery(scope: .collection("c2"), filter: .where("rank", .between(-3, 3)))
            #expect(try await connection.read { tx in try await tx.plan(for: strings).isExact } == false)
            #expect(database.hasIndex(collection: "c1", property: "rank") == indexed)
            let page = StoreQuery(scope: .collection("c1"), filter: ObjectFilter().orderBy("rank", .descending).take(5))
            let pushed = try await connection.read { tx in try await tx.orderedRows(page, tx.plan(for: page)) != nil }
            #expect(pushed == indexed)
        }
    }

    /// EXPLAIN shows the declared index serving an ordered page and a numeric range (sequential
    /// scans off: on a test-sized table the planner would rather read it all).
    @Test func declaredIndexIsUsed() async throws {
        try await withPostgres { database, connection in
            try await database.createIndex(collection: "com.example.Light", property: "luminance")
            let name = JSONIndexDeclarations.Key(collection: "com.example.Light", property: "luminance").indexName
            let plans = try await connection.read { tx in
                _ = try await tx.fetch("SET LOCAL enable_seqscan = off")
                let page = StoreQuery(
                    scope: .collection("com.example.Light"),
                    filter: ObjectFilter().orderBy("luminance", .descending).take(10)
                )
                let pagePlan = try await tx.plan(for: page)
                let ordered = try await tx.explain(
                    "SELECT id FROM coaty_rows WHERE \(pagePlan.whereClause)"
                        + " ORDER BY (object -> 'luminance') DESC NULLS LAST, id LIMIT 10",
                    pagePlan.sql
                )
                let range = StoreQuery(
                    scope: .collection("com.example.Light"),
                    filter: .where("luminance", .greaterThan(0.5))
                )
                let rangePlan = try await tx.plan(for: range)
                let ranged = try await tx.explain(
                    "SELECT id FROM coaty_rows WHERE \(rangePlan.whereClause)",
                    rangePlan.sql
                )
                return (ordered, ranged, rangePlan.isExact)
            }
            #expect(plans.0.contains(name), "\(plans.0)")
            #expect(plans.1.contains(name), "\(plans.1)")
            #expect(plans.2, "an empty collection holds only numbers: the comparison is exact")
        }
    }

    @Test func sqlReadsReturnTypedItems() async throws {
        try await withPostgres { _, connection in
            try await StoreContract.sqlReadsReturnTypedItems(
                connection,
                condition: "(object->>'luminance')::float8 < (object->>'minimum')::float8 * $1",
                orderBy: "(object->>'luminance')::float8 DESC",
                nameIs: "object->>'name' = $1"
            )
        }
    }

    @Test func migrationsAreRecordedOnceInOrder() async throws {
        try await withPostgres { database, _ in
            #expect(try await database.appliedMigrations() == PostgresDatabase.migrationNames)
            try await database.migrate()
            #expect(try await database.appliedMigrations() == PostgresDatabase.migrationNames)
        }
    }

    @Test func aFailedStatementRollsTheTransactionBack() async throws {
        try await withPostgres { _, connection in
            try await [Note(id: 1, text: "kept")].write(to: connection)
            // PostgreSQL refuses `\u0000` in jsonb; the body swallows the error, the commit must not.
            await #expect(throws: CoatyPostgresError.self) {
                try await connection.write { tx in
                    try await Note(id: 2, text: "new").write(to: tx)
                    _ = try? await Note(id: 3, text: "nul \u{0}").write(to: tx)
                }
            }
            let notes = try await connection.read { tx in try await Note.read(tx).all() }
            #expect(notes == [Note(id: 1, text: "kept")])
        }
    }

    @Test func readTransactionsCannotWrite() async throws {
        try await withPostgres { _, connection in
            await #expect(throws: CoatyPostgresError.self) {
                try await connection.read { tx in
                    try await (tx as any WriteTransactionType).setLocalValue(1, forKey: "k")
                }
            }
            let value = try await LocalStore(connection).get("k")
            #expect(value == nil)
        }
    }

    struct ContainmentCase: Sendable, CustomTestStringConvertible {
        let label: String
        let value: JSONValue
        let operand: JSONValue
        var testDescription: String { label }
    }

    /// Values and operands where PostgreSQL's `@>` and Coaty's deep Contains could disagree.
    static let containmentCases: [ContainmentCase] = [
        .init(label: "array holds a string", value: ["a", "b"], operand: "a"),
        .init(label: "nested array holds a string", value: [["a"]], operand: "a"),
        .init(label: "object and a string", value: ["a": "a"], operand: "a"),
        .init(label: "equal strings", value: "a", operand: "a"),
        .init(label: "string and an array", value: "a", operand: ["a"]),
        .init(label: "string and an empty array", value: "a", operand: []),
        .init(label: "array and an empty array", value: ["x"], operand: []),
        .init(label: "object and an empty array", value: ["k": 1], operand: []),
        .init(label: "object by index keys", value: ["0": "a", "1": "b"], operand: ["a", "b"]),
        .init(label: "object by index keys, nested array", value: ["0": ["a"]], operand: ["a"]),
        .init(label: "array of arrays and a flat array", value: [["a"], "b"], operand: ["a"]),
        .init(label: "array subset in any order", value: ["a", "b", true], operand: [true, "a"]),
        .init(label: "object member holds an array", value: ["k": ["s"]], operand: ["k": "s"]),
        .init(label: "nested object", value: ["k": ["m": "s", "n": "t"]], operand: ["k": ["m": "s"]]),
        .init(label: "empty object in object", value: ["k": "v"], operand: [:]),
        .init(label: "empty object in array", value: ["k"], operand: [:]),
        .init(label: "empty object in string", value: "k", operand: [:]),
        .init(label: "booleans", value: [true], operand: true),
        .init(label: "boolean and string", value: "true", operand: true),
    ]

    /// Each pushed-down containment selects exactly what ``ObjectMatcher`` selects.
    @Test(arguments: containmentCases)
    func containmentAgreesWithTheMatcher(_ c: ContainmentCase) async throws {
        try await withPostgres { _, connection in
            let row = StoreRow(index: StoreIndex("c", "1"), object: ["v": c.value])
            try await StoreContract.load([row], removing: [], into: connection)
            for op in [ObjectFilterOperator.contains, .notContains] {
                let query = StoreQuery(scope: .all, filter: .where("v", ObjectFilterExpression(op, c.operand)))
                #expect(PostgresPlan(query).isExact)
                let expected = ObjectMatcher.apply(query.filter, to: [row]) { $0.object }
                let actual = try await connection.read { tx in try await tx.rows(matching: query) }
                #expect(actual == expected, "\(op) \(c.operand.serializedString()) on \(c.value.serializedString())")
            }
        }
    }

    static let planCases: [PlanCase] = [
        PlanCase(label: "promoted equals", filter: .where("name", .equals("x")), isExact: true),
        PlanCase(label: "json member equals string", filter: .where("color", .equals("red")), isExact: true),
        PlanCase(
            label: "odd key exists",
            filter: .allOf([ObjectFilterCondition(ObjectFilterProperty(path: ["a-b.c"]), .exists)]),
            isExact: true
        ),
        PlanCase(label: "notEquals string", filter: .where("externalId", .notEquals("1")), isExact: true),
        PlanCase(label: "equals boolean", filter: .where("on", .equals(true)), isExact: true),
        PlanCase(label: "in strings", filter: .where("objectType", .in(["a", "b"])), isExact: true),
        PlanCase(label: "notIn strings", filter: .where("objectType", .notIn(["a"])), isExact: true),
        PlanCase(label: "exists / notExists", filter: .where("a", .exists).and("b", .notExists), isExact: true),
        PlanCase(label: "or of exact", filter: .where("a", .exists).or("name", .equals("n")), isExact: true),
        PlanCase(label: "contains object", filter: .where("a", .contains(["k": "v"])), isExact: true),
        PlanCase(label: "contains strings", filter: .where("tags", .contains(["x", "y"])), isExact: true),
        PlanCase(
            label: "paging without order",
            filter: ObjectFilter.where("a", .exists).skip(2).take(3),
            isExact: true
        ),
        PlanCase(label: "contains a number", filter: .where("a", .contains([1])), isExact: false),
        PlanCase(label: "contains a nested array", filter: .where("a", .contains([["x"]])), isExact: false),
        PlanCase(label: "contains null", filter: .where("a", .contains(["k": nil])), isExact: false),
        PlanCase(label: "number comparison", filter: .where("n", .greaterThan(3)), isExact: false),
        PlanCase(label: "in with a number", filter: .where("n", .in([1, "2"])), isExact: false),
        PlanCase(label: "nested property", filter: .where("a.b", .equals("x")), isExact: false),
        PlanCase(label: "like", filter: .where("name", .like("a%")), isExact: false),
        PlanCase(label: "string with NUL", filter: .where("name", .equals("a\u{0}")), isExact: false),
        PlanCase(label: "ordering", filter: ObjectFilter.where("name", .equals("x")).orderBy("name"), isExact: false),
        PlanCase(label: "negative take", filter: ObjectFilter().take(-1), isExact: false),
    ]

    @Test(arguments: planCases)
    func pushdownIsExactOnlyWhereSafe(_ c: PlanCase) {
        #expect(PostgresPlan(StoreQuery(scope: .all, filter: c.filter)).isExact == c.isExact)
    }

    /// Filters beyond PostgreSQL's limits (thousands of conditions, 20 000 In values) are answered.
    @Test func largeFiltersAreAnswered() async throws {
        try await withPostgres { _, postgres in try await StoreContract.largeFiltersAreAnswered(postgres) }
    }

    /// Random objects of mixed member types and random filters over them: the PostgreSQL backend
    /// (SQL pushdown plus matcher) selects exactly the rows, in the order, that the in-memory
    /// backend (``ObjectMatcher`` only) selects.
    @Test(arguments: [UInt64(1), 2, 3])
    func pushdownAgreesWithTheMatcher(seed: UInt64) async throws {
        try await withPostgres { _, postgres in
            try await StoreContract.pushdownAgreesWithTheMatcher(seed: seed, postgres) { PostgresPlan($0).isExact }
        }
    }
}
