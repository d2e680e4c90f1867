import CoatyCore
import CoatyStore
import Testing

@testable import CoatySQLite

@Suite("SQLite backend")
struct SQLiteBackendTests {
    @Test func reopeningTheFileKeepsTheData() async throws {
        let path = TemporaryDirectory().file("reopen.sqlite")
        do {
            let connection = try SQLiteDatabase(path: path).makeConnection()
            try await SpecObjects.all().prefix(10).write(to: connection)
            try await LocalStore(connection).set("agent", ["name": "recorder"])
        }
        let reopened = try SQLiteDatabase(path: path).makeConnection()
        let objects = try await reopened.read { tx in try AnyCoatyObject.read(tx).all() }
        #expect(objects.map(\.objectId.uuidString) == (1...10).map(SpecObjects.objectId))
        #expect(objects.first?.json["testObj"]?["name"] == "Test SubObject 1")
        #expect(try await LocalStore(reopened).get("agent") == ["name": "recorder"])
    }

    @Test func migrationsAreRecordedInOrder() async throws {
        let path = TemporaryDirectory().file("migrations.sqlite")
        let database = try SQLiteDatabase(path: path)
        #expect(try await database.appliedMigrations() == SQLiteDatabase.migrationNames)
        // Opening again applies nothing twice.
        #expect(try await SQLiteDatabase(path: path).appliedMigrations() == SQLiteDatabase.migrationNames)
    }

    @Test func openingADirectoryFailsWithAClearError() {
        let directory = TemporaryDirectory().path
        #expect(throws: CoatySQLiteError.self) { try SQLiteDatabase(path: directory) }
    }

    struct PlanCase: Sendable, CustomTestStringConvertible {
        let label: String
        let filter: ObjectFilter
        let isExact: Bool
        var testDescription: String { label }
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
        var random = SplitMix64(seed: seed)
        let memory = InMemoryDatabase().makeConnection()
        let sqlite = try SQLiteDatabase(path: TemporaryDirectory().file("random.sqlite")).makeConnection()
        var rows: [StoreRow] = []
        for i in 0..<300 {
            let object = RandomValues.object(&random)
            rows.append(
                StoreRow(index: StoreIndex(["c1", "c2"].randomElement(using: &random)!, "k\(i % 250)"), object: object)
            )
        }
        let removals = (0..<20).map { _ in
            StoreIndex(["c1", "c2"].randomElement(using: &random)!, "k\(Int.random(in: 0..<250, using: &random))")
        }
        let snapshot = rows
        for connection in [memory, sqlite] as [any ConnectionType] {
            try await Self.load(snapshot, removing: removals, into: connection)
        }
        var exactCount = 0
        var nonEmpty = 0
        for _ in 0..<400 {
            let query = StoreQuery(
                scope: [StoreScope.all, .collection("c1"), .coatyObjects, .coreTypes(["Task"])].randomElement(
                    using: &random
                )!,
                filter: RandomValues.filter(&random)
            )
            if SQLPlan(query).isExact { exactCount += 1 }
            let expected = try await memory.read { tx in tx.rows(matching: query) }
            let actual = try await sqlite.read { tx in try tx.rows(matching: query) }
            #expect(actual.map(\.index) == expected.map(\.index), "\(query)")
            #expect(actual == expected)
            let count = try await sqlite.read { tx in try tx.count(matching: query) }
            #expect(count == expected.count, "\(query)")
            if !expected.isEmpty { nonEmpty += 1 }
        }
        // The random filters exercise both paths.
        #expect(exactCount > 40)
        #expect(exactCount < 360)
        #expect(nonEmpty > 40)

        // Removing by query removes the same rows.
        let removal = StoreQuery(scope: .all, filter: .where("name", .in(["alpha", "beta"])))
        let removedInMemory = try await memory.write { tx in try tx.removeRows(matching: removal) }
        let removedInSQLite = try await sqlite.write { tx in try tx.removeRows(matching: removal) }
        #expect(Set(removedInSQLite) == Set(removedInMemory))
        #expect(!removedInMemory.isEmpty)
    }

    static func load(_ rows: [StoreRow], removing removals: [StoreIndex], into connection: some ConnectionType)
        async throws
    {
        try await connection.write { tx in
            for row in rows { try tx.write(row, mode: .upsert) }
            for index in removals { try tx.removeRow(at: index) }
        }
    }
}

/// Random JSON objects and filters mixing the member types Coaty compares differently.
enum RandomValues {
    static let strings: [JSONValue] = ["alpha", "beta", "Alpha", "", "10", "9", "1e3", "ä", "x y", "null"]
    static let numbers: [JSONValue] = [0, 1, -1, 9, 10, 2.5, -0.5, 1000, .int(1 << 60), .double(1.5e16)]
    static let keys = ["name", "externalId", "objectType", "n", "s", "b", "missing", "tags", "nested", "coreType"]

    static func scalar(_ random: inout SplitMix64) -> JSONValue {
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<4: strings.randomElement(using: &random)!
        case 4..<8: numbers.randomElement(using: &random)!
        case 8: .bool(Bool.random(using: &random))
        default: .null
        }
    }

    static func value(_ random: inout SplitMix64) -> JSONValue? {
        switch Int.random(in: 0..<12, using: &random) {
        case 0: nil
        case 1: .array((0..<Int.random(in: 0..<3, using: &random)).map { _ in scalar(&random) })
        case 2: ["x": scalar(&random)]
        default: scalar(&random)
        }
    }

    static func object(_ random: inout SplitMix64) -> JSONValue {
        var object = JSONObject()
        if Int.random(in: 0..<5, using: &random) > 0 {
            object["objectId"] = .string(CoatyUUID(randomUsing: &random).uuidString)
            object["objectType"] = ["t.A", "t.B", "coaty.Task"].randomElement(using: &random).map(JSONValue.string)
            object["coreType"] = ["CoatyObject", "Task"].randomElement(using: &random).map(JSONValue.string)
        }
        for key in keys where key != "objectType" && key != "coreType" {
            if let value = value(&random) { object[key] = value }
        }
        return .object(object)
    }

    static func expression(_ random: inout SplitMix64) -> ObjectFilterExpression {
        let op = ObjectFilterOperator.allCases.randomElement(using: &random)!
        func operand() -> JSONValue {
            switch Int.random(in: 0..<6, using: &random) {
            case 0..<3: scalar(&random)
            case 3:
                .array((0..<Int.random(in: 0..<4, using: &random)).map { _ in strings.randomElement(using: &random)! })
            case 4: .array((0..<Int.random(in: 0..<3, using: &random)).map { _ in scalar(&random) })
            default: numbers.randomElement(using: &random)!
            }
        }
        switch op {
        case .exists, .notExists: return ObjectFilterExpression(op)
        case .between, .notBetween:
            return ObjectFilterExpression(op, numbers.randomElement(using: &random)!, operand())
        case .like: return .like(["a%", "%a", "_", "%"].randomElement(using: &random)!)
        default: return ObjectFilterExpression(op, operand())
        }
    }

    static func condition(_ random: inout SplitMix64) -> ObjectFilterCondition {
        var key = keys.randomElement(using: &random)!
        if Int.random(in: 0..<8, using: &random) == 0 { key += ".x" }
        return ObjectFilterCondition(ObjectFilterProperty(key), expression(&random))
    }

    static func filter(_ random: inout SplitMix64) -> ObjectFilter {
        var filter = ObjectFilter()
        let count = Int.random(in: 0..<4, using: &random)
        let conditions = (0..<count).map { _ in condition(&random) }
        switch Int.random(in: 0..<3, using: &random) {
        case 0 where count == 1: filter.conditions = .condition(conditions[0])
        case 1: filter.conditions = .or(conditions)
        default: filter.conditions = count == 0 ? nil : .and(conditions)
        }
        if Int.random(in: 0..<4, using: &random) == 0 {
            filter.orderByProperties = [
                ObjectFilterOrdering(ObjectFilterProperty(keys.randomElement(using: &random)!), .descending)
            ]
        }
        if Int.random(in: 0..<3, using: &random) == 0 { filter.skip = Int.random(in: -1..<20, using: &random) }
        if Int.random(in: 0..<3, using: &random) == 0 { filter.take = Int.random(in: -1..<20, using: &random) }
        return filter
    }
}
