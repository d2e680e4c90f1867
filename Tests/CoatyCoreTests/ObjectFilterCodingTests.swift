import CoatyCore
import Foundation
import PropertyBased
import Testing

/// Encodes with sorted keys so the text is deterministic (Coaty's own key order happens to be sorted
/// for filters: conditions, orderByProperties, skip, take).
func filterJSONText<T: Encodable>(_ value: T) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

func decodeFilterJSON<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
    try JSONDecoder().decode(T.self, from: Data(text.utf8))
}

/// A filter and its exact Coaty JS wire text.
struct WireCase: Sendable, CustomTestStringConvertible {
    let json: String
    let filter: ObjectFilter
    var testDescription: String { json }
}

@Suite("ObjectFilter: Codable wire form")
struct ObjectFilterCodingTests {
    static let wireCases: [WireCase] = [
        WireCase(json: "{}", filter: ObjectFilter()),
        WireCase(json: #"{"conditions":["name",[6,"Light%"]]}"#, filter: .where("name", .like("Light%"))),
        WireCase(
            json:
                #"{"conditions":{"and":[["name",[6,"Light%"]],["value",[4,1,5]]]},"orderByProperties":[["name","Desc"]],"skip":20,"take":10}"#,
            filter: ObjectFilter.where("name", .like("Light%")).and("value", .between(1, 5))
                .orderBy("name", .descending).skip(20).take(10)
        ),
        WireCase(
            json: #"{"conditions":{"or":[[["a.b","c"],[7,{"x":1}]],["d",[10]]]}}"#,
            filter: ObjectFilter.where(ObjectFilterProperty(path: ["a.b", "c"]), .equals(["x": 1])).or("d", .notExists)
        ),
        WireCase(json: #"{"conditions":["",[7,null]]}"#, filter: .where("", .equals(nil))),
        WireCase(json: #"{"conditions":[[],[9]]}"#, filter: .where(ObjectFilterProperty(path: []), .exists)),
        WireCase(
            json: #"{"conditions":["v",[13,[1,"a",true,null,2.5,[],{}]]]}"#,
            filter: .where("v", .in([1, "a", true, nil, 2.5, [], [:]]))
        ),
        WireCase(json: #"{"conditions":["v",[4,null,5]]}"#, filter: .where("v", .between(nil, 5))),
        WireCase(json: #"{"conditions":["v",[5,"a","b"]]}"#, filter: .where("v", .notBetween("a", "b"))),
        WireCase(json: #"{"conditions":["v",[0,-1.5]]}"#, filter: .where("v", .lessThan(-1.5))),
        WireCase(json: #"{"conditions":["v",[1,"x/y"]]}"#, filter: .where("v", .lessThanOrEqual("x/y"))),
        WireCase(json: #"{"conditions":["v",[2,0]]}"#, filter: .where("v", .greaterThan(0))),
        WireCase(json: #"{"conditions":["v",[3,1e+21]]}"#, filter: .where("v", .greaterThanOrEqual(1e21))),
        WireCase(json: #"{"conditions":["v",[8,false]]}"#, filter: .where("v", .notEquals(false))),
        WireCase(json: #"{"conditions":["v",[11,[1]]]}"#, filter: .where("v", .contains([1]))),
        WireCase(json: #"{"conditions":["v",[12,{"a":[1]}]]}"#, filter: .where("v", .notContains(["a": [1]]))),
        WireCase(json: #"{"conditions":["v",[14,[]]]}"#, filter: .where("v", .notIn([]))),
        WireCase(json: #"{"conditions":{"and":[]}}"#, filter: .allOf([])),
        WireCase(json: #"{"conditions":{"or":[]}}"#, filter: .anyOf([])),
        WireCase(
            json: #"{"orderByProperties":[[["x.y"],"Asc"],["z.w","Desc"]]}"#,
            filter: ObjectFilter().orderBy(ObjectFilterProperty(path: ["x.y"])).orderBy("z.w", .descending)
        ),
        WireCase(json: #"{"skip":0,"take":0}"#, filter: ObjectFilter().skip(0).take(0)),
    ]

    @Test(arguments: wireCases)
    func encodesExactly(_ c: WireCase) throws {
        #expect(try filterJSONText(c.filter) == c.json)
    }

    @Test(arguments: wireCases)
    func decodesExactly(_ c: WireCase) throws {
        let decoded = try decodeFilterJSON(ObjectFilter.self, c.json)
        #expect(decoded == c.filter)
        #expect(try filterJSONText(decoded) == c.json)
    }

    /// With CoatyKit's own JSON codec, key order (including inside operands) survives, so a
    /// filter re-encodes to the very text Coaty JS sent.
    @Test(arguments: [
        #"{"conditions":["a",[7,{"z":1,"a":[2,{"y":null,"b":true}]}]]}"#,
        #"{"conditions":{"or":[["b",[11,{"k":1,"c":2}]],[["x.y"],[13,[{"q":1,"p":2}]]]]},"orderByProperties":[["b","Desc"]],"skip":2,"take":1}"#,
        #"{"conditions":["v",[4,1.5,-2]],"take":5}"#,
    ])
    func ownCodecKeepsCoatyTextExactly(_ json: String) throws {
        let filter = try JSONValueDecoder().decode(ObjectFilter.self, from: json)
        #expect(try JSONValueEncoder().encodeToString(filter) == json)
        // And through a JSONValue tree.
        let tree = try JSONValue(parsing: json)
        #expect(try JSONValueEncoder().encode(try JSONValueDecoder().decode(ObjectFilter.self, from: tree)) == tree)
    }

    @Test func ownCodecReportsMalformedFilters() {
        for json in Self.malformedFilters {
            #expect(throws: (any Error).self, "\(json)") {
                try JSONValueDecoder().decode(ObjectFilter.self, from: json)
            }
        }
    }

    @Test func descriptionIsTheWireJSON() {
        let filter = ObjectFilter.where("name", .like("Light%")).orderBy("name", .descending).take(10)
        #expect("\(filter)" == #"{"conditions":["name",[6,"Light%"]],"orderByProperties":[["name","Desc"]],"take":10}"#)
        #expect("\(ContextFilter.where("floor", .between(6, 8)))" == #"{"conditions":["floor",[4,6,8]]}"#)
    }

    @Test func absentFirstOperandBeforeASecondIsWrittenAsNull() throws {
        // As JavaScript's JSON.stringify writes [4, undefined, 5].
        let filter = ObjectFilter.where("v", ObjectFilterExpression(.between, nil, 5))
        #expect(try filterJSONText(filter) == #"{"conditions":["v",[4,null,5]]}"#)
        #expect(
            try filterJSONText(ObjectFilter.where("v", ObjectFilterExpression(.between)))
                == #"{"conditions":["v",[4]]}"#
        )
    }

    @Test func propertyKeepsItsForm() throws {
        let dotted = try decodeFilterJSON(ObjectFilterProperty.self, #""a.b""#)
        let array = try decodeFilterJSON(ObjectFilterProperty.self, #"["a","b"]"#)
        #expect(dotted.path == ["a", "b"])
        #expect(array.path == ["a", "b"])
        #expect(dotted != array)
        #expect(try filterJSONText(dotted) == #""a.b""#)
        #expect(try filterJSONText(array) == #"["a","b"]"#)
        #expect(ObjectFilterProperty("").path == [""])
        #expect(ObjectFilterProperty("a.").path == ["a", ""])
        #expect(ObjectFilterProperty("..").path == ["", "", ""])
    }

    @Test func emptyConditionsObjectMatchesEverything() throws {
        let filter = try decodeFilterJSON(ObjectFilter.self, #"{"conditions":{}}"#)
        #expect(filter.conditions == .and([]))
        #expect(ObjectMatcher.matches(["a": 1], filter: filter))
    }

    @Test func contextFilterWireForm() throws {
        let filter = ContextFilter.where("floor", .between(6, 8)).and("building", .equals(33))
        let text = #"{"conditions":{"and":[["floor",[4,6,8]],["building",[7,33]]]}}"#
        #expect(try filterJSONText(filter) == text)
        #expect(try decodeFilterJSON(ContextFilter.self, text) == filter)
        #expect(try filterJSONText(ContextFilter()) == "{}")
        #expect(try decodeFilterJSON(ContextFilter.self, "{}") == ContextFilter())
        // An ObjectFilter's extra fields are ignored when read as a context filter.
        let fromQuery = try decodeFilterJSON(ContextFilter.self, #"{"conditions":["a",[9]],"take":3}"#)
        #expect(fromQuery == .where("a", .exists))
    }

    @Test func joinConditionWireForm() throws {
        let plain = ObjectJoinCondition(localProperty: "locationId", asProperty: "location")
        #expect(try filterJSONText(plain) == #"{"asProperty":"location","localProperty":"locationId"}"#)
        let flagged = ObjectJoinCondition(
            localProperty: "ids",
            asProperty: "x",
            isLocalPropertyArray: true,
            isOneToOneRelation: false
        )
        let flaggedText =
            #"{"asProperty":"x","isLocalPropertyArray":true,"isOneToOneRelation":false,"localProperty":"ids"}"#
        #expect(try filterJSONText(flagged) == flaggedText)
        #expect(try decodeFilterJSON(ObjectJoinCondition.self, flaggedText) == flagged)

        let single = try decodeFilterJSON(ObjectJoinConditionList.self, #"{"asProperty":"a","localProperty":"b"}"#)
        #expect(single.isSingleObject)
        #expect(single.conditions == [ObjectJoinCondition(localProperty: "b", asProperty: "a")])
        #expect(try filterJSONText(single) == #"{"asProperty":"a","localProperty":"b"}"#)
        let list = try decodeFilterJSON(ObjectJoinConditionList.self, #"[{"asProperty":"a","localProperty":"b"}]"#)
        #expect(!list.isSingleObject)
        #expect(list.conditions == single.conditions)
        #expect(try filterJSONText(list) == #"[{"asProperty":"a","localProperty":"b"}]"#)
    }

    static let malformedFilters: [String] = [
        #"{"conditions":["a",[15]]}"#,
        #"{"conditions":["a",[-1]]}"#,
        #"{"conditions":["a",["7"]]}"#,
        #"{"conditions":["a",[7.5]]}"#,
        #"{"conditions":["a",[null]]}"#,
        #"{"conditions":["a",[]]}"#,
        #"{"conditions":["a",[7,1,2,3]]}"#,
        #"{"conditions":["a",7]}"#,
        #"{"conditions":["a"]}"#,
        #"{"conditions":[]}"#,
        #"{"conditions":["a",[7],1]}"#,
        #"{"conditions":[1,[7]]}"#,
        #"{"conditions":[null,[7]]}"#,
        #"{"conditions":[["a",1],[7]]}"#,
        #"{"conditions":{"and":[["a",[7]]],"or":[]}}"#,
        #"{"conditions":{"and":["a",[7]]}}"#,
        #"{"conditions":{"and":null}}"#,
        #"{"conditions":{"or":{}}}"#,
        #"{"conditions":"a"}"#,
        #"{"conditions":42}"#,
        #"{"orderByProperties":[["a","Up"]]}"#,
        #"{"orderByProperties":[["a","asc"]]}"#,
        #"{"orderByProperties":["a","Asc"]}"#,
        #"{"orderByProperties":[["a"]]}"#,
        #"{"orderByProperties":[["a","Asc","Desc"]]}"#,
        #"{"orderByProperties":{}}"#,
        #"{"skip":"1"}"#,
        #"{"take":1.5}"#,
        #"{"take":true}"#,
        #"[]"#,
        #""x""#,
        #"null"#,
    ]

    @Test(arguments: malformedFilters)
    func malformedFilterIsADecodingError(_ json: String) {
        #expect(throws: DecodingError.self) { try decodeFilterJSON(ObjectFilter.self, json) }
    }

    @Test(arguments: [
        #"{"localProperty":1,"asProperty":"x"}"#,
        #"{"asProperty":"x"}"#,
        #"{"localProperty":"x"}"#,
        #"{"localProperty":"a","asProperty":"x","isOneToOneRelation":"yes"}"#,
        #"[1]"#,
    ])
    func malformedJoinIsADecodingError(_ json: String) {
        #expect(throws: DecodingError.self) { try decodeFilterJSON(ObjectJoinConditionList.self, json) }
    }

    @Test func operatorNumbersAreCoatys() {
        #expect(ObjectFilterOperator.allCases.map(\.rawValue) == Array(0...14))
        #expect(ObjectFilterOperator.lessThan.rawValue == 0)
        #expect(ObjectFilterOperator.like.rawValue == 6)
        #expect(ObjectFilterOperator.equals.rawValue == 7)
        #expect(ObjectFilterOperator.exists.rawValue == 9)
        #expect(ObjectFilterOperator.notIn.rawValue == 14)
    }

    // MARK: Property-based round trips

    static let keys = ["a", "b.c", "", ".", "name", "x y", "ü", "0"]

    static func randomJSON(_ rng: inout any SeededRandomNumberGenerator, depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth > 0 ? 7 : 5), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: -1_000_000...1_000_000, using: &rng))
        case 3: return .double([0.5, -2.25, 1e21, 3.125e-7, 1e300].randomElement(using: &rng) ?? 0.5)
        case 4: return .string(keys.randomElement(using: &rng) ?? "")
        case 5:
            return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in randomJSON(&rng, depth: depth - 1) })
        default:
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                object[keys.randomElement(using: &rng) ?? "k"] = randomJSON(&rng, depth: depth - 1)
            }
            return .object(object)
        }
    }

    static func randomProperty(_ rng: inout any SeededRandomNumberGenerator) -> ObjectFilterProperty {
        let names = (0..<Int.random(in: 0...3, using: &rng)).map { _ in keys.randomElement(using: &rng) ?? "" }
        return Bool.random(using: &rng)
            ? ObjectFilterProperty(names.joined(separator: ".")) : ObjectFilterProperty(path: names)
    }

    static func randomCondition(_ rng: inout any SeededRandomNumberGenerator) -> ObjectFilterCondition {
        let op = ObjectFilterOperator.allCases.randomElement(using: &rng) ?? .equals
        let count = Int.random(in: 0...2, using: &rng)
        let operand1: JSONValue? = count >= 1 ? randomJSON(&rng, depth: 2) : nil
        let operand2: JSONValue? = count == 2 ? randomJSON(&rng, depth: 2) : nil
        return ObjectFilterCondition(randomProperty(&rng), ObjectFilterExpression(op, operand1, operand2))
    }

    static let filters = Generator<ObjectFilter, Shrink.None<ObjectFilter>> { rng in
        var filter = ObjectFilter()
        let conditions = (0..<Int.random(in: 0...4, using: &rng)).map { _ in randomCondition(&rng) }
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: filter.conditions = nil
        case 1: filter.conditions = conditions.first.map { .condition($0) }
        case 2: filter.conditions = .and(conditions)
        default: filter.conditions = .or(conditions)
        }
        if Bool.random(using: &rng) {
            filter.orderByProperties = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                ObjectFilterOrdering(randomProperty(&rng), Bool.random(using: &rng) ? .ascending : .descending)
            }
        }
        if Bool.random(using: &rng) { filter.skip = Int.random(in: 0...100, using: &rng) }
        if Bool.random(using: &rng) { filter.take = Int.random(in: 0...100, using: &rng) }
        return filter
    }

    @Test func randomFiltersRoundTrip() async {
        await propertyCheck(count: 300, input: Self.filters) { filter in
            // Foundation's coders: the same filter (object operands compared ignoring key order).
            let text = try filterJSONText(filter)
            let decoded = try decodeFilterJSON(ObjectFilter.self, text)
            #expect(decoded == filter)
            #expect(try filterJSONText(decoded) == text)
            // Our wire coders keep every object operand's key order, so the wire text comes back
            // exactly and matching the decoded filter gives the original's answer. (Foundation's
            // decoder does not keep key order, and Contains evaluates an object operand's keys in
            // order, as JavaScript does: where one of them makes Coaty JS throw, the answer depends
            // on that order.)
            let wire = try JSONValueEncoder().encodeToString(filter)
            let fromWire = try JSONValueDecoder().decode(ObjectFilter.self, from: wire)
            #expect(fromWire == filter)
            #expect(try JSONValueEncoder().encodeToString(fromWire) == wire)
            #expect(
                ObjectMatcher.matches(coatySpecObject, filter: fromWire)
                    == ObjectMatcher.matches(coatySpecObject, filter: filter)
            )
        }
    }

    @Test func randomFiltersNeverCrashTheMatcher() async {
        let objects: [JSONValue] = [coatySpecObject, ["a": ["b.c": 1]], [:], 7, ["": [nil, "x"]]]
        await propertyCheck(count: 200, input: Self.filters) { filter in
            let compiled = CompiledObjectFilter(filter)
            let selected = compiled.apply(to: objects)
            #expect(selected.count <= objects.count)
            for object in selected { #expect(compiled.matches(object)) }
        }
    }
}
