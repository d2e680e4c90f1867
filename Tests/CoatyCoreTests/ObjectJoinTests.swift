import CoatyCore
import Testing

@Suite("ObjectMatcher: join conditions")
struct ObjectJoinTests {
    static let location1: JSONValue = ["objectId": "L1", "name": "Hall"]
    static let location2: JSONValue = ["objectId": "L2", "name": "Lab"]
    static let user1: JSONValue = ["objectId": "U1", "name": "Ann"]
    static let store: [JSONValue] = [location1, location2, user1]

    static func lookup(_ id: String) -> JSONValue? {
        store.first { $0["objectId"] == .string(id) }
    }

    @Test func oneToManyByDefault() {
        let task: JSONValue = ["objectId": "T1", "locationId": "L1"]
        let join = ObjectJoinCondition(localProperty: "locationId", asProperty: "locations")
        let joined = ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup)
        #expect(joined == ["objectId": "T1", "locationId": "L1", "locations": [Self.location1]])
        #expect(joined.objectValue?.keys == ["objectId", "locationId", "locations"])
    }

    @Test func oneToOnePutsTheObject() {
        let task: JSONValue = ["objectId": "T1", "locationId": "L2"]
        let join = ObjectJoinCondition(localProperty: "locationId", asProperty: "location", isOneToOneRelation: true)
        #expect(
            ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup)
                == ["objectId": "T1", "locationId": "L2", "location": Self.location2]
        )
    }

    @Test func oneToOneWithoutMatchRemovesTheProperty() {
        let task: JSONValue = ["objectId": "T1", "locationId": "L9", "location": "stale"]
        let join = ObjectJoinCondition(localProperty: "locationId", asProperty: "location", isOneToOneRelation: true)
        #expect(
            ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup) == ["objectId": "T1", "locationId": "L9"]
        )
    }

    @Test func oneToManyWithoutMatchIsAnEmptyArray() {
        let task: JSONValue = ["objectId": "T1"]
        let join = ObjectJoinCondition(localProperty: "locationId", asProperty: "locations")
        #expect(
            ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup) == ["objectId": "T1", "locations": []]
        )
    }

    @Test func localPropertyArrayResolvesEachElement() {
        let task: JSONValue = ["objectId": "T1", "ids": ["L2", "X", "U1", 5, nil, "L2"]]
        let join = ObjectJoinCondition(localProperty: "ids", asProperty: "related", isLocalPropertyArray: true)
        #expect(
            ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup)["related"]
                == [Self.location2, Self.user1, Self.location2]
        )
    }

    @Test func localPropertyArrayWithOneToOneStillGivesAnArray() {
        let task: JSONValue = ["objectId": "T1", "ids": ["L1", "L2"]]
        let join = ObjectJoinCondition(
            localProperty: "ids",
            asProperty: "related",
            isLocalPropertyArray: true,
            isOneToOneRelation: true
        )
        #expect(
            ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup)["related"] == [
                Self.location1, Self.location2,
            ]
        )
    }

    @Test func localPropertyArrayThatIsNotAnArrayJoinsNothing() {
        let task: JSONValue = ["objectId": "T1", "ids": "L1"]
        let join = ObjectJoinCondition(localProperty: "ids", asProperty: "related", isLocalPropertyArray: true)
        #expect(ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup)["related"] == [])
    }

    @Test func nonStringLocalValueJoinsNothing() {
        let task: JSONValue = ["objectId": "T1", "locationId": ["L1"]]
        let join = ObjectJoinCondition(localProperty: "locationId", asProperty: "locations")
        #expect(ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup)["locations"] == [])
    }

    @Test func localPropertyIsAKeyNotAPath() {
        let task: JSONValue = ["objectId": "T1", "a.b": "L1", "a": ["b": "L2"]]
        let join = ObjectJoinCondition(localProperty: "a.b", asProperty: "x", isOneToOneRelation: true)
        #expect(ObjectMatcher.resolveJoins([join], in: task, lookup: Self.lookup)["x"] == Self.location1)
    }

    @Test func severalConditionsApplyInOrderAndOverwrite() {
        let task: JSONValue = ["objectId": "T1", "locationId": "L1", "creatorId": "U1", "creator": 0]
        let joins = [
            ObjectJoinCondition(localProperty: "locationId", asProperty: "location", isOneToOneRelation: true),
            ObjectJoinCondition(localProperty: "creatorId", asProperty: "creator", isOneToOneRelation: true),
        ]
        let joined = ObjectMatcher.resolveJoins(joins, in: task, lookup: Self.lookup)
        #expect(joined["location"] == Self.location1)
        #expect(joined["creator"] == Self.user1)
        #expect(joined.objectValue?.keys == ["objectId", "locationId", "creatorId", "creator", "location"])
    }

    @Test func joinedObjectsAreNotJoinedThemselves() {
        let a: JSONValue = ["objectId": "A", "next": "B"]
        let b: JSONValue = ["objectId": "B", "next": "A"]
        let join = ObjectJoinCondition(localProperty: "next", asProperty: "nextObject", isOneToOneRelation: true)
        let joined = ObjectMatcher.resolveJoins([join], in: [a, b], candidates: [a, b])
        #expect(joined[0]["nextObject"] == b)
        #expect(joined[1]["nextObject"] == a)
    }

    @Test func candidatesVariantIndexesByObjectId() {
        let tasks: [JSONValue] = [["objectId": "T1", "locationId": "L2"], ["objectId": "T2", "locationId": "L1"], 42]
        let join = ObjectJoinCondition(localProperty: "locationId", asProperty: "location", isOneToOneRelation: true)
        let duplicate: JSONValue = ["objectId": "L2", "name": "Other"]
        let joined = ObjectMatcher.resolveJoins([join], in: tasks, candidates: Self.store + [duplicate])
        #expect(joined[0]["location"] == Self.location2)
        #expect(joined[1]["location"] == Self.location1)
        #expect(joined[2] == 42)
    }

    @Test func noConditionsLeaveObjectsUnchanged() {
        let tasks: [JSONValue] = [["objectId": "T1", "locationId": "L2"]]
        #expect(ObjectMatcher.resolveJoins([], in: tasks, candidates: Self.store) == tasks)
    }

    @Test func filterThenJoin() {
        let tasks: [JSONValue] = [
            ["objectId": "T1", "name": "b", "locationId": "L2"],
            ["objectId": "T2", "name": "a", "locationId": "L1"],
            ["objectId": "T3", "name": "c"],
        ]
        let filter = ObjectFilter.where("locationId", .exists).orderBy("name")
        let join = ObjectJoinCondition(localProperty: "locationId", asProperty: "location", isOneToOneRelation: true)
        let result = ObjectMatcher.resolveJoins([join], in: ObjectMatcher.apply(filter, to: tasks), lookup: Self.lookup)
        #expect(result.map { $0["location"]?["name"] } == ["Hall", "Lab"])
    }
}
