import CoatyCore
import Testing

@Suite("ObjectFilter: ordering, skip and take")
struct ObjectFilterOrderingTests {
    static func object(_ id: Int, _ members: [(String, JSONValue)]) -> JSONValue {
        .object(JSONObject([("id", .int(Int64(id)))] + members))
    }

    static let objects: [JSONValue] = [
        object(0, [("name", "beta"), ("value", 3), ("on", true)]),
        object(1, [("name", "Alpha"), ("value", 10), ("on", false)]),
        object(2, [("name", "alpha"), ("value", 2.5)]),
        object(3, [("value", 3), ("on", true)]),
        object(4, [("name", "Beta"), ("value", -1), ("on", false)]),
        object(5, [("name", "_x"), ("value", 3)]),
        object(6, [("name", "10"), ("on", true)]),
        object(7, [("name", "9"), ("value", 7)]),
    ]

    static func ids(_ result: [JSONValue]) -> [Int] {
        result.map { $0["id"]?.intValue ?? -1 }
    }

    struct OrderCase: Sendable, CustomTestStringConvertible {
        let filter: ObjectFilter
        let ids: [Int]
        let label: String
        var testDescription: String { label }
    }

    static let cases: [OrderCase] = [
        OrderCase(filter: ObjectFilter(), ids: [0, 1, 2, 3, 4, 5, 6, 7], label: "no ordering keeps input order"),
        OrderCase(
            filter: ObjectFilter().orderBy("name"),
            ids: [3, 5, 6, 7, 2, 1, 0, 4],
            label: "names ascending: undefined, punctuation, digits, letters lowercase first"
        ),
        OrderCase(
            filter: ObjectFilter().orderBy("name", .descending),
            ids: [4, 0, 1, 2, 7, 6, 5, 3],
            label: "names descending: undefined last"
        ),
        OrderCase(
            filter: ObjectFilter().orderBy("value"),
            ids: [6, 4, 2, 0, 3, 5, 7, 1],
            label: "numbers ascending, stable for equal values"
        ),
        OrderCase(
            filter: ObjectFilter().orderBy("value", .descending),
            ids: [1, 7, 0, 3, 5, 2, 4, 6],
            label: "numbers descending, stable for equal values"
        ),
        OrderCase(
            filter: ObjectFilter().orderBy("on"),
            ids: [2, 5, 7, 1, 4, 0, 3, 6],
            label: "booleans: undefined, false, true"
        ),
        OrderCase(
            filter: ObjectFilter().orderBy("value").orderBy("name", .descending),
            ids: [6, 4, 2, 0, 5, 3, 7, 1],
            label: "two criteria"
        ),
        OrderCase(
            filter: ObjectFilter().orderBy(ObjectFilterProperty(path: ["value"])).skip(2).take(3),
            ids: [2, 0, 3],
            label: "array-form property, skip and take"
        ),
        OrderCase(filter: ObjectFilter().skip(6), ids: [6, 7], label: "skip without ordering"),
        OrderCase(filter: ObjectFilter().skip(8), ids: [], label: "skip everything"),
        OrderCase(filter: ObjectFilter().skip(100).take(2), ids: [], label: "skip beyond the end"),
        OrderCase(filter: ObjectFilter().take(2), ids: [0, 1], label: "take"),
        OrderCase(filter: ObjectFilter().take(100), ids: [0, 1, 2, 3, 4, 5, 6, 7], label: "take more than there is"),
        OrderCase(filter: ObjectFilter().take(0), ids: [0, 1, 2, 3, 4, 5, 6, 7], label: "take 0 is unlimited"),
        OrderCase(filter: ObjectFilter().take(-1), ids: [], label: "negative take selects nothing"),
        OrderCase(filter: ObjectFilter().skip(-3).take(2), ids: [0, 1], label: "negative skip counts as 0"),
        OrderCase(
            filter: ObjectFilter.where("value", .greaterThanOrEqual(3)).orderBy("value", .descending).skip(1).take(2),
            ids: [7, 0],
            label: "filter, then order, then skip and take"
        ),
        OrderCase(
            filter: ObjectFilter.where("on", .exists).or("name", .like("%lpha")).orderBy("name"),
            ids: [3, 6, 2, 1, 0, 4],
            label: "filter with OR, then order"
        ),
    ]

    @Test(arguments: cases)
    func apply(_ c: OrderCase) {
        #expect(Self.ids(ObjectMatcher.apply(c.filter, to: Self.objects)) == c.ids)
        #expect(Self.ids(CompiledObjectFilter(c.filter).apply(to: Self.objects)) == c.ids)
    }

    @Test func applyOnItemsCallsJSONOncePerItem() {
        struct Stored {
            let key: Int
            let json: JSONValue
        }
        let items = Self.objects.enumerated().map { Stored(key: $0.offset, json: $0.element) }
        var calls = 0
        let result = ObjectMatcher.apply(ObjectFilter().orderBy("name").take(3), to: items) { item in
            calls += 1
            return item.json
        }
        #expect(result.map(\.key) == [3, 5, 6])
        #expect(calls == items.count)
    }

    @Test func nilFilterReturnsInputUnchanged() {
        #expect(Self.ids(ObjectMatcher.apply(nil, to: Self.objects)) == [0, 1, 2, 3, 4, 5, 6, 7])
    }

    @Test func mixedTypesOrderAsV8Does() {
        // Coaty JS's comparer is not a total order on mixed types; the result is what V8's
        // Array.prototype.sort makes of it (Node.js 20).
        let values: [JSONValue] = [
            ["v": "b"], ["v": 2], ["v": nil], ["v": true], ["v": [1]], [:], ["v": "a"], ["v": 1],
        ]
        let positions = Array(values.indices)
        let ascending = ObjectMatcher.apply(ObjectFilter().orderBy("v"), to: positions) { values[$0] }
        let descending = ObjectMatcher.apply(ObjectFilter().orderBy("v", .descending), to: positions) { values[$0] }
        #expect(ascending == [5, 0, 2, 3, 4, 7, 1, 6])
        #expect(descending == [0, 1, 3, 6, 4, 7, 2, 5])
    }

    @Test func largeStableSort() {
        let many: [JSONValue] = (0..<1000).map { i in ["i": .int(Int64(i)), "k": .int(Int64(i % 7))] }
        let sorted = ObjectMatcher.apply(ObjectFilter().orderBy("k"), to: many)
        #expect(sorted.count == 1000)
        for (x, y) in zip(sorted, sorted.dropFirst()) {
            let kx = x["k"]?.intValue ?? 0
            let ky = y["k"]?.intValue ?? 0
            #expect(kx < ky || (kx == ky && (x["i"]?.intValue ?? 0) < (y["i"]?.intValue ?? 0)))
        }
    }
}
