import CoatyCore
import Testing

/// The cases of Coaty JS's `db-in-memory.spec.ts` that concern filtering, ordering, paging and
/// joining: 100 test objects, counts and orders as the in-memory database gives them.
@Suite("ObjectFilter: Coaty JS db-in-memory.spec.ts")
struct ObjectFilterDatabaseSpecTests {
    /// The spec's objects after its insert and update steps (names end in ".updated", the first
    /// one also got ".1").
    static let objects: [JSONValue] = (1...100).map { i in
        let n = JSONValue.int(Int64(i))
        let values: JSONValue = [n, .int(Int64(i + 1)), .int(Int64(i + 2)), "foo"]
        return [
            "objectId": .string("00000000-0000-4000-8000-\(String(repeating: "0", count: 12 - String(i).count))\(i)"),
            "name": .string("Test Object \(i)" + (i == 1 ? ".1" : "") + ".updated"),
            "coreType": "CoatyObject",
            "objectType": "coaty.test.DbTestObject",
            "externalId": .string("\(100 + i)"),
            "testId": n,
            "testValue": values,
            "testText": .string("\(i)"),
            "testBool": .bool(i % 2 == 0),
            "testObj": [
                "": n,
                "name": .string("Test SubObject \(i)"),
                "testId": n,
                "testValue": values,
                "testText": .string("\(i)"),
                "testBool": .bool(i % 2 == 0),
            ],
            " ": "blank",
            "": ["": ["": n]],
            ".": [".": [".": n]],
            "testUpdate": "set",
        ]
    }

    struct CountCase: Sendable, CustomTestStringConvertible {
        let label: String
        let filter: ObjectFilter
        let count: Int
        var testDescription: String { label }
    }

    static let undefinedOperand = ObjectFilterExpression(.equals)
    static let notUndefinedOperand = ObjectFilterExpression(.notEquals)

    static let countCases: [CountCase] = [
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
            label: "string between on two properties",
            filter: .allOf([
                ObjectFilterCondition("testText", .between("3", "20")),
                ObjectFilterCondition("testObj.testText", .between("3", "20")),
            ]),
            count: 11
        ),
        CountCase(
            label: "undefined properties match no operator but NotExists",
            filter: .allOf([
                ObjectFilterCondition("testObj.noname", .notEquals(6)),
                ObjectFilterCondition("testObj.noname", undefinedOperand),
                ObjectFilterCondition("testObj.noname", notUndefinedOperand),
                ObjectFilterCondition("testObj.noname", .notEquals(["foo": 42])),
                ObjectFilterCondition("testObj.noname", .notEquals([1, 2, 3])),
                ObjectFilterCondition("testobj.name", .notEquals(6)),
                ObjectFilterCondition("testobj.name", undefinedOperand),
                ObjectFilterCondition("testobj.name", notUndefinedOperand),
                ObjectFilterCondition("testobj.name", .notEquals(["foo": 42])),
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
                ObjectFilterCondition(ObjectFilterProperty(path: ["testObj", "name"]), .like("Test SubObject %")),
                ObjectFilterCondition("testObj.", .exists),
                ObjectFilterCondition("testobj.name", .notExists),
                ObjectFilterCondition("testObj.noname.noname", .notExists),
                ObjectFilterCondition(" ", .exists),
                ObjectFilterCondition(" ", .equals("blank")),
                ObjectFilterCondition("", .exists),
                ObjectFilterCondition(".", .exists),
                ObjectFilterCondition("..", .exists),
                ObjectFilterCondition("..", .between(10, 19)),
                ObjectFilterCondition(ObjectFilterProperty(path: ["."]), .exists),
                ObjectFilterCondition(ObjectFilterProperty(path: [".", "."]), .exists),
                ObjectFilterCondition(ObjectFilterProperty(path: [".", ".", "."]), .exists),
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
            label: "contains, equals, notEquals undefined",
            filter: .allOf([
                ObjectFilterCondition("testValue", .contains(["foo"])),
                ObjectFilterCondition("testValue", .equals([13, 14, 15, "foo"])),
                ObjectFilterCondition("testId", .equals(13)),
                ObjectFilterCondition("testId", notUndefinedOperand),
                ObjectFilterCondition("testObj.testValue", .contains(["foo"])),
                ObjectFilterCondition("testObj.testValue", .equals([13, 14, 15, "foo"])),
                ObjectFilterCondition("testObj.testId", .equals(13)),
                ObjectFilterCondition("testObj.testId", notUndefinedOperand),
            ]),
            count: 1
        ),
        CountCase(
            label: "contains in any order",
            filter: .allOf([
                ObjectFilterCondition("testValue", .contains([12, 11, "foo"])),
                ObjectFilterCondition("testId", .equals(11)),
                ObjectFilterCondition("testObj.testValue", .contains([12, 11, "foo"])),
                ObjectFilterCondition("testObj.testId", .equals(11)),
            ]),
            count: 1
        ),
        CountCase(
            label: "notContains and notBetween",
            filter: .allOf([
                ObjectFilterCondition("testValue", .notContains([12, 11])),
                ObjectFilterCondition("testId", .notBetween(1, 3)),
                ObjectFilterCondition("testObj.testValue", .notContains([12, 11])),
                ObjectFilterCondition("testObj.testId", .notBetween(1, 3)),
            ]),
            count: 100 - 2 - 3
        ),
        CountCase(
            label: "or of contains and between",
            filter: .anyOf([
                ObjectFilterCondition("testValue", .contains([12, 11])),
                ObjectFilterCondition("testId", .between(1, 3)),
                ObjectFilterCondition("testObj.testValue", .contains([12, 11])),
                ObjectFilterCondition("testObj.testId", .between(1, 3)),
            ]),
            count: 2 + 3
        ),
        CountCase(
            label: "in and notIn",
            filter: .allOf([
                ObjectFilterCondition("testId", .in([1, "2", 4, 3])),
                ObjectFilterCondition("testId", .in([3, 4, "5"])),
                ObjectFilterCondition("testId", .notIn([4, 5])),
                ObjectFilterCondition("testObj.testId", .in([1, "2", 4, 3])),
                ObjectFilterCondition("testObj.testId", .in([3, 4, "5"])),
                ObjectFilterCondition("testObj.testId", .notIn([4, 5])),
            ]),
            count: 1
        ),
        CountCase(
            label: "empty result",
            filter: .allOf([ObjectFilterCondition("testId", .between(100000, 200000))]),
            count: 0
        ),
    ]

    @Test(arguments: countCases)
    func counts(_ c: CountCase) {
        #expect(Self.objects.filter { ObjectMatcher.matches($0, filter: c.filter) }.count == c.count)
        #expect(ObjectMatcher.apply(c.filter, to: Self.objects).count == c.count)
    }

    @Test func iteratedInOrderWithSkipAndTake() {
        let firstTestId = 100 - 20 - 1
        let filter = ObjectFilter(
            conditions: .and([ObjectFilterCondition("testId", .between(.int(Int64(firstTestId)), 0))]),
            orderByProperties: [ObjectFilterOrdering("testId", .descending)],
            skip: 10,
            take: 50
        )
        let result = ObjectMatcher.apply(filter, to: Self.objects)
        #expect(
            result.compactMap { $0["testId"]?.intValue }
                == Array(((firstTestId - 10 - 49)...(firstTestId - 10)).reversed())
        )
    }

    /// "Join related objects" and "Objects are queried by Query-Retrieve event pattern": the
    /// application relates each join condition's local property to a property of the related
    /// objects (here a self join, as in the spec).
    static let fromProperty = ["testId": "testId", "externalId": "externalId", "testValue": "testId"]

    static func related(_ condition: ObjectJoinCondition, _ value: JSONValue) -> [JSONValue] {
        guard let key = fromProperty[condition.localProperty] else { return [] }
        return objects.filter { $0[key].map { ObjectMatcher.equals($0, value) } ?? false }
    }

    static let joinConditions = [
        ObjectJoinCondition(localProperty: "testId", asProperty: "resolvedTestObjects"),
        ObjectJoinCondition(
            localProperty: "externalId",
            asProperty: "resolvedExternalObject",
            isOneToOneRelation: true
        ),
        ObjectJoinCondition(localProperty: "testValue", asProperty: "resolvedTestValues", isLocalPropertyArray: true),
    ]

    @Test func joinRelatedObjects() throws {
        let filter = ObjectFilter.allOf([ObjectFilterCondition("testId", .between(10, 20))])
            .orderBy("testObj.testId").take(3)
        let result = ObjectMatcher.resolveJoins(
            Self.joinConditions,
            in: ObjectMatcher.apply(filter, to: Self.objects),
            related: Self.related
        )
        #expect(result.count == 3)
        for (index, object) in result.enumerated() {
            #expect(object["testId"] == .int(Int64(10 + index)))
            let resolved = try #require(object["resolvedTestObjects"]?.arrayValue)
            #expect(resolved.count == 1)
            #expect(resolved.first?["objectId"] == object["objectId"])
            #expect(object["resolvedExternalObject"]?["objectId"] == object["objectId"])
            let values = try #require(object["resolvedTestValues"]?.arrayValue)
            #expect(values.count == 3)
            #expect(values.contains { $0["objectId"] == object["objectId"] })
        }
    }

    @Test func queryRetrieveWithJoins() throws {
        let firstTestId = 100 - 20 - 1
        let filter = ObjectFilter(
            conditions: .and([ObjectFilterCondition("testId", .between(.int(Int64(firstTestId)), 0))]),
            orderByProperties: [ObjectFilterOrdering("testObj.testId", .descending)],
            skip: 10,
            take: 50
        )
        let result = ObjectMatcher.resolveJoins(
            Self.joinConditions,
            in: ObjectMatcher.apply(filter, to: Self.objects),
            related: Self.related
        )
        #expect(result.count == 50)
        for (index, object) in result.enumerated() {
            #expect(object["testId"] == .int(Int64(firstTestId - 10 - index)))
            #expect(object["resolvedTestObjects"]?.arrayValue?.count == 1)
            #expect(object["resolvedExternalObject"]?["externalId"] == object["externalId"])
            #expect(object["resolvedTestValues"]?.arrayValue?.count == 3)
        }
    }
}
