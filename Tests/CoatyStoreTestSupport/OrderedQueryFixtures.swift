public import CoatyCore
public import CoatyStore
import Testing

/// Rows and ordered filters that exercise ordering and numeric comparisons pushed into SQL over
/// an indexed property (`rank` in collection `c1`), and their fall-back (strings at `rank` in `c2`).
public enum OrderedQueryFixtures {
    /// Rows of collection `c1` whose `rank` is a number (ints, doubles, duplicates) or missing,
    /// with a `value` to filter on; a few rows of `c2` have strings at `rank`.
    public static func rows(_ random: inout SplitMix64, count: Int = 400) -> [StoreRow] {
        (0..<count).map { i in
            var object: JSONObject = ["i": .int(Int64(i)), "value": .int(Int64.random(in: 0..<100, using: &random))]
            switch Int.random(in: 0..<10, using: &random) {
            case 0: break  // missing
            case 1..<4: object["rank"] = .double(Double(Int.random(in: -50..<50, using: &random)) / 4)
            default: object["rank"] = .int(Int64.random(in: -20..<20, using: &random))
            }
            if Bool.random(using: &random) { object["value"] = .string("v\(i % 7)") }
            let collection = i % 5 == 4 ? "c2" : "c1"
            if collection == "c2" { object["rank"] = .string("r\(i % 13)") }
            return StoreRow(index: StoreIndex(collection, "k\(i)"), object: .object(object))
        }
    }

    public static func randomOrderedFilter(_ random: inout SplitMix64) -> ObjectFilter {
        var filter = ObjectFilter()
        let bound = JSONValue.int(Int64.random(in: -20..<20, using: &random))
        switch Int.random(in: 0..<8, using: &random) {
        case 4: filter.conditions = .condition(ObjectFilterCondition("rank", .lessThan(bound)))
        case 5: filter.conditions = .condition(ObjectFilterCondition("rank", .between(bound, .double(2.5))))
        case 6:
            filter.conditions = .and([
                ObjectFilterCondition("rank", .notEquals(bound)), ObjectFilterCondition("value", .greaterThan(30)),
            ])
        case 7:
            filter.conditions = .or([
                ObjectFilterCondition("rank", .equals(bound)), ObjectFilterCondition("i", .lessThan(9)),
            ])
        case 0:
            filter.conditions = .condition(
                ObjectFilterCondition("value", .lessThan(.int(Int64.random(in: 0..<100, using: &random))))
            )
        case 1: filter.conditions = .condition(ObjectFilterCondition("value", .like("v%")))
        case 2: filter.conditions = .condition(ObjectFilterCondition("rank", .exists))
        default: break
        }
        filter.orderByProperties = [
            ObjectFilterOrdering("rank", Bool.random(using: &random) ? .descending : .ascending)
        ]
        if Bool.random(using: &random) { filter.orderByProperties!.append(ObjectFilterOrdering("i", .descending)) }
        if Int.random(in: 0..<3, using: &random) > 0 { filter.take = Int.random(in: -1..<15, using: &random) }
        if Bool.random(using: &random) { filter.skip = Int.random(in: -1..<30, using: &random) }
        return filter
    }

}

extension StoreContract {
    /// Random ordered, paged queries with numeric conditions over ``OrderedQueryFixtures`` rows:
    /// the backend (with an index on `rank` of `c1` and `c2` when `indexing` is given) returns
    /// exactly the rows, in the order, that the in-memory backend (``CoatyCore/ObjectMatcher``) does.
    /// - Parameters:
    ///   - connection: a connection to an empty database of the backend.
    ///   - indexing: where to declare the indexes; `nil` for none.
    ///   - seed: the random seed.
    public static func orderedQueriesAgreeWithTheMatcher(
        _ connection: some ConnectionType,
        indexing: (any JSONPropertyIndexing)?,
        seed: UInt64
    ) async throws {
        var random = SplitMix64(seed: seed)
        if let indexing {
            try await indexing.createIndex(collection: "c1", property: "rank")
            try await indexing.createIndex(collection: "c2", property: "rank")
        }
        let memory = InMemoryDatabase().makeConnection()
        let rows = OrderedQueryFixtures.rows(&random)
        try await load(rows, removing: [StoreIndex("c1", "k3")], into: memory)
        try await load(rows, removing: [StoreIndex("c1", "k3")], into: connection)
        for round in 0..<300 {
            let scope = [StoreScope.collection("c1"), .collections(["c1"]), .collection("c2"), .all][round % 4]
            let query = StoreQuery(scope: scope, filter: OrderedQueryFixtures.randomOrderedFilter(&random))
            let expected = try await memory.read { tx in tx.rows(matching: query) }
            let actual = try await connection.read { tx in try await tx.rows(matching: query) }
            #expect(actual.map(\.index) == expected.map(\.index), "\(query)")
            let count = try await connection.read { tx in try await tx.count(matching: query) }
            #expect(count == expected.count, "\(query)")
        }
    }
}
