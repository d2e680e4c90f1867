public import CoatyCore
public import CoatyStore
import CoatyRecording
public import Testing

/// A filter and whether a backend's SQL plan for it is exact (selects exactly Coaty's rows, so
/// ``CoatyCore/ObjectMatcher`` need not filter again).
public struct PlanCase: Sendable, CustomTestStringConvertible {
    /// What the case shows.
    public let label: String
    /// The filter.
    public let filter: ObjectFilter
    /// Whether the plan must be exact.
    public let isExact: Bool

    /// A case.
    /// - Parameters:
    ///   - label: what the case shows.
    ///   - filter: the filter.
    ///   - isExact: whether the plan must be exact.
    public init(label: String, filter: ObjectFilter, isExact: Bool) {
        self.label = label
        self.filter = filter
        self.isExact = isExact
    }

    /// The label.
    public var testDescription: String { label }
}

extension StoreContract {
    /// Writes the first ten spec objects and a local value; ``expectReopenedData(_:)`` checks them
    /// through a connection to the reopened database.
    /// - Parameter connection: the connection.
    public static func writeDataToReopen(_ connection: some ConnectionType) async throws {
        try await SpecObjects.all().prefix(10).write(to: connection)
        try await LocalStore(connection).set("agent", ["name": "recorder"])
    }

    /// Checks what ``writeDataToReopen(_:)`` wrote, through a connection to the reopened database.
    /// - Parameter connection: the connection.
    public static func expectReopenedData(_ connection: some ConnectionType) async throws {
        let objects = try await connection.read { tx in try await AnyCoatyObject.read(tx).all() }
        #expect(objects.map(\.objectId.uuidString) == (1...10).map(SpecObjects.objectId))
        #expect(objects.first?.json["testObj"]?["name"] == "Test SubObject 1")
        #expect(try await LocalStore(connection).get("agent") == ["name": "recorder"])
    }

    /// Random objects of mixed member types and random filters over them: a backend (SQL
    /// pushdown plus matcher) selects exactly the rows, in the order, that the in-memory backend
    /// (``CoatyCore/ObjectMatcher`` only) selects, counts them alike, and removes the same rows.
    /// - Parameters:
    ///   - seed: the random seed.
    ///   - connection: a connection to an empty database of the backend.
    ///   - isExact: whether the backend's plan for a query is exact (both paths must be exercised).
    public static func pushdownAgreesWithTheMatcher(
        seed: UInt64,
        _ connection: some ConnectionType,
        isExact: (StoreQuery) -> Bool
    ) async throws {
        var random = SplitMix64(seed: seed)
        let memory = InMemoryDatabase().makeConnection()
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
        try await load(rows, removing: removals, into: memory)
        try await load(rows, removing: removals, into: connection)
        var exactCount = 0
        var nonEmpty = 0
        for _ in 0..<400 {
            let query = StoreQuery(
                scope: [StoreScope.all, .collection("c1"), .coatyObjects, .coreTypes(["Task"])].randomElement(
                    using: &random
                )!,
                filter: RandomValues.filter(&random)
            )
            if isExact(query) { exactCount += 1 }
            let expected = try await memory.read { tx in tx.rows(matching: query) }
            let actual = try await connection.read { tx in try await tx.rows(matching: query) }
            #expect(actual.map(\.index) == expected.map(\.index), "\(query)")
            #expect(actual == expected)
            let count = try await connection.read { tx in try await tx.count(matching: query) }
            #expect(count == expected.count, "\(query)")
            if !expected.isEmpty { nonEmpty += 1 }
        }
        // The random filters exercise both paths.
        #expect(exactCount > 40)
        #expect(exactCount < 360)
        #expect(nonEmpty > 40)

        // Removing by query removes the same rows.
        let removal = StoreQuery(scope: .all, filter: .where("name", .in(["alpha", "beta"])))
        let removedInMemory = try await memory.write { tx in try await tx.removeRows(matching: removal) }
        let removedInBackend = try await connection.write { tx in try await tx.removeRows(matching: removal) }
        #expect(Set(removedInBackend) == Set(removedInMemory))
        #expect(!removedInMemory.isEmpty)
    }
}

extension StoreContract {
    /// Filters beyond a backend's SQL limits are answered exactly: 1, 1000 and 10 000 and-ed and
    /// or-ed conditions, an In of 20 000 strings, and a removal of 5000 keys at once, each giving
    /// what ``CoatyCore/ObjectMatcher`` gives over the same rows (SQLite refuses expression depths
    /// beyond 1000 and more than 32 766 arguments; PostgreSQL more than 65 535).
    /// - Parameter connection: a connection to an empty database of the backend.
    public static func largeFiltersAreAnswered(_ connection: some ConnectionType) async throws {
        let rows = (0..<200).map { i in
            StoreRow(index: StoreIndex("c", "k\(i)"), object: ["n": .int(Int64(i)), "s": .string("v\(i)")])
        }
        try await load(rows, removing: [], into: connection)
        let objects = rows.map(\.object)
        for count in [1, 1000, 10_000] {
            let lower = (0..<count).map { ObjectFilterCondition("n", .greaterThanOrEqual(.int(Int64(-$0)))) }
            var filters: [ObjectFilter] = [
                ObjectFilter(conditions: .and(lower + [ObjectFilterCondition("n", .lessThan(50))])),
                ObjectFilter(
                    conditions: .or((0..<count).map { ObjectFilterCondition("s", .equals(.string("v\($0 * 3)"))) })
                ),
                ObjectFilter(
                    conditions: .and((0..<count).map { ObjectFilterCondition("s", .notEquals(.string("x\($0)"))) })
                ),
            ]
            filters[1].orderByProperties = [ObjectFilterOrdering("n", .descending)]
            filters[1].take = 7
            for filter in filters {
                let query = StoreQuery(scope: .collection("c"), filter: filter)
                let actual = try await connection.read { tx in try await tx.rows(matching: query) }.map(\.object)
                #expect(actual == ObjectMatcher.apply(filter, to: objects), "\(count) conditions")
                #expect(!actual.isEmpty)
            }
        }
        let many = ObjectFilter.where("s", .in((0..<20_000).map { JSONValue.string("v\($0 * 2)") }))
        let inQuery = StoreQuery(scope: .collection("c"), filter: many)
        let selected = try await connection.read { tx in try await tx.rows(matching: inQuery) }.map(\.object)
        #expect(selected == ObjectMatcher.apply(many, to: objects))
        #expect(selected.count == 100)
        let keys = (0..<5000).map { "k\($0)" }
        let byKeys = try await connection.read { tx in
            try await tx.rows(matching: StoreQuery(scope: .collection("c"), keys: keys))
        }
        #expect(byKeys.count == 200)
    }
}

extension StoreContract {
    /// The SQL escape hatch returns typed items: lights whose luminance is below a multiple of
    /// their `minimum` (two members compared: an `ObjectFilter` cannot say it), in the order the
    /// SQL says, only from the reader's scope, bound arguments never spliced; a refused statement
    /// fails with the backend's error.
    /// - Parameters:
    ///   - connection: a connection to an empty database of the backend.
    ///   - condition: in the backend's dialect: luminance < minimum × the one argument.
    ///   - orderBy: in the backend's dialect: luminance descending.
    ///   - nameIs: in the backend's dialect: the name equals the one argument.
    public static func sqlReadsReturnTypedItems(
        _ connection: some ConnectionType,
        condition: String,
        orderBy: String,
        nameIs: String
    ) async throws {
        let registry = CoatyObjectRegistry([Light.self])
        var lights: [AnyCoatyObject] = []
        for (i, (luminance, minimum)) in [(0.2, 0.5), (0.9, 0.5), (0.4, 0.3), (0.1, 0.05), (0.5, 0.4)].enumerated() {
            var json = try AnyCoatyObject(Light(name: "l\(i)", isOn: true, luminance: luminance)).json
            json["minimum"] = .double(minimum)
            lights.append(try registry.decode(json))
        }
        try await lights.write(to: connection)
        // Another collection with the same members is out of the reader's scope.
        var other = lights[0].json
        other["objectType"] = "com.example.Other"
        other["objectId"] = .string(CoatyUUID().uuidString)
        try await [try registry.decode(other)].write(to: connection)
        let dim = try await connection.read { tx in
            try await Light.read(tx).matchingSQL(
                condition,
                arguments: [1.5],
                orderBySQL: orderBy
            )
        }
        // luminance < 1.5 × minimum: l0 (0.2 < 0.75), l2 (0.4 < 0.45), l4 (0.5 < 0.6); not l1, l3.
        #expect(dim.map(\.name) == ["l4", "l2", "l0"])
        let limited = try await connection.read { tx in
            try await Light.read(tx).matchingSQL(
                condition,
                arguments: [1.5],
                orderBySQL: orderBy,
                limit: 1
            )
        }
        #expect(limited.map(\.name) == ["l4"])
        // An argument is bound, never spliced: a quote in it is just a string.
        let none = try await connection.read { tx in
            try await Light.read(tx).matchingSQL(nameIs, arguments: ["l0' OR '1'='1"])
        }
        #expect(none.isEmpty)
        let named = try await connection.read { tx in try await Light.read(tx).matchingSQL(nameIs, arguments: ["l3"]) }
        #expect(named.map(\.luminance) == [0.1])
        #expect(try await connection.read { tx in try await AnyCoatyObject.read(tx).all() }.count == 6)
        await #expect(throws: (any Error).self) {
            try await connection.read { tx in
                try await AnyCoatyObject.read(tx).matchingSQL("no_such_column > 1")
            }
        }
    }
}
