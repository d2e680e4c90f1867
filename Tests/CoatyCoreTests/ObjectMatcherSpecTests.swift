import CoatyCore
import Testing

/// The object of Coaty JS's `object.spec.ts` ("Object filters"), as JSON. Its `filterUndefined`
/// member (`undefined` in JavaScript) cannot exist in JSON, so it is absent here as after a
/// round trip through JSON.
let coatySpecObject: JSONValue = [
    "name": "TestObjectFilter",
    "coreType": "CoatyObject",
    "objectType": "coaty.CoatyObject",
    "objectId": "6c2d9b4e-7a9c-4e51-a0a3-0d8e4c1f2b3a",
    "filterBoolean": true,
    "filterNumber": 42,
    "filterString": "Abc",
    "filterLikeString": "hello abc\\d_",
    "filterLikeString1": ".*+?^${}()|[]",
    "filterArray": [42, [43, 44], [[45, 46]]],
    "filterObject": ["foo": 42, "bar": [42, 43], "baz": ["mumble": [42, 45]]],
    "filterObject1": ["foo": 42],
    " ": "blank",
    "": ["": ["": 1]],
    ".": [".": [".": 2]],
]

/// One filter condition and whether it matches ``coatySpecObject``.
struct MatchCase: Sendable, CustomTestStringConvertible {
    let condition: ObjectFilterCondition
    let expected: Bool
    /// Coaty JS throws a TypeError on this condition (we answer "no match").
    let throwsInJS: Bool

    init(
        _ property: ObjectFilterProperty,
        _ expression: ObjectFilterExpression,
        _ expected: Bool = true,
        throwsInJS: Bool = false
    ) {
        condition = ObjectFilterCondition(property, expression)
        self.expected = expected
        self.throwsInJS = throwsInJS
    }

    var testDescription: String {
        let e = condition.expression
        let operands = [e.operand1, e.operand2].compactMap { $0.map { "\($0)" } }.joined(separator: ", ")
        return "\(condition.property) \(e.operator)(\(operands)) → \(expected)"
    }
}

/// Every condition of Coaty JS's `object.spec.ts` (both published versions of the spec); each
/// matches the spec object.
let coatySpecConditions: [MatchCase] = [
    MatchCase("foo", .notExists),
    MatchCase("foo.bar", .notExists),
    MatchCase("filterUndefined", .notExists),
    MatchCase("filterBoolean", .exists),
    MatchCase("filterBoolean", .equals(true)),
    MatchCase("filterBoolean", .notEquals(false)),
    MatchCase("filterNumber", .equals(42)),
    MatchCase("filterNumber", .notEquals(43)),
    MatchCase("filterString", .equals("Abc")),
    MatchCase("filterString", .notEquals("abc")),
    MatchCase("filterArray", .equals([42, [43, 44], [[45, 46]]])),
    MatchCase("filterArray", .notEquals([42, [43, 44], [[45, 47]]])),
    MatchCase("filterObject", .equals(["foo": 42, "bar": [42, 43], "baz": ["mumble": [42, 45]]])),
    MatchCase("filterObject", .notEquals(["foo": 42, "bar": [42, 43], "baz": ["mumble": [43, 45]]])),
    MatchCase("filterObject.foo", .equals(42)),
    MatchCase("filterObject.bar", .equals([42, 43])),
    MatchCase("filterObject.baz", .equals(["mumble": [42, 45]])),
    MatchCase("filterObject.baz.mumble", .equals([42, 45])),
    MatchCase(" ", .equals("blank")),
    MatchCase("", .equals(["": ["": 1]])),
    MatchCase(".", .equals(["": 1])),
    MatchCase("..", .equals(1)),
    MatchCase(ObjectFilterProperty(path: ["."]), .equals([".": [".": 2]])),
    MatchCase(ObjectFilterProperty(path: [".", "."]), .equals([".": 2])),
    MatchCase(ObjectFilterProperty(path: [".", ".", "."]), .equals(2)),
    MatchCase("filterNumber", .lessThan(43)),
    MatchCase("filterNumber", .lessThan("43")),
    MatchCase("filterString", .lessThan("Abce")),
    MatchCase("filterNumber", .lessThanOrEqual(42)),
    MatchCase("filterNumber", .lessThanOrEqual("42")),
    MatchCase("filterString", .lessThanOrEqual("ABc")),
    MatchCase("filterNumber", .greaterThan(41)),
    MatchCase("filterNumber", .greaterThan("41")),
    MatchCase("filterString", .greaterThan("abc")),
    MatchCase("filterNumber", .greaterThanOrEqual(42)),
    MatchCase("filterNumber", .greaterThanOrEqual("42")),
    MatchCase("filterString", .greaterThanOrEqual("Abc")),
    MatchCase("filterNumber", .between(42, 42)),
    MatchCase("filterNumber", .between(41, 43)),
    MatchCase("filterNumber", .between(43, 41)),
    MatchCase("filterString", .between("Abc", "Abc")),
    MatchCase("filterString", .between("Abb", "Abd")),
    MatchCase("filterString", .between("Abd", "Abb")),
    MatchCase("filterNumber", .notBetween(43, 47)),
    MatchCase("filterNumber", .notBetween(47, 43)),
    MatchCase("filterNumber", .notBetween(41, 41)),
    MatchCase("filterString", .notBetween("Abd", "Abf")),
    MatchCase("filterString", .notBetween("Abf", "Abd")),
    MatchCase("filterString", .notBetween("Abb", "Abb")),
    MatchCase("filterString", .like("Abc")),
    MatchCase("filterString", .like("Ab_")),
    MatchCase("filterString", .like("_b_")),
    MatchCase("filterString", .like("___")),
    MatchCase("filterString", .like("%")),
    MatchCase("filterString", .like("%_")),
    MatchCase("filterString", .like("%__")),
    MatchCase("filterString", .like("%___")),
    MatchCase("filterString", .like("_%_")),
    MatchCase("filterString", .like("__%_")),
    MatchCase("filterString", .like("_%")),
    MatchCase("filterString", .like("__%")),
    MatchCase("filterString", .like("___%")),
    MatchCase("filterString", .like("A%bc")),
    MatchCase("filterString", .like("A%c")),
    MatchCase("filterString", .like("A%")),
    MatchCase("filterString", .like("%c")),
    MatchCase("filterString", .like("%%")),
    MatchCase("filterLikeString", .like("%a_c\\\\d\\_")),
    MatchCase("filterLikeString1", .like(".*+?^${}()|[]")),
    MatchCase("filterArray", .contains(42)),
    MatchCase("filterArray", .contains([42, [43], [[46]]])),
    MatchCase("filterObject", .contains(["foo": 42, "bar": [42], "baz": ["mumble": [45]]])),
    MatchCase("filterArray", .notContains(43)),
    MatchCase("filterArray", .notContains([41, [45], [[43]]])),
    MatchCase("filterObject", .notContains(["foo": 43])),
    MatchCase("filterObject", .notContains(["bar": [44]])),
    MatchCase("filterObject", .notContains(["baz": ["mumble": [43]]])),
    MatchCase("filterObject", .notContains(["mumble": [45]])),
    MatchCase("filterNumber", .in([43, 42, "42"])),
    MatchCase("filterString", .in([43, 42, "Abc"])),
    MatchCase("filterBoolean", .in([43, true, "Abc"])),
    MatchCase("filterObject1", .in([["bar": 43], ["foo": 42]])),
    MatchCase("filterNumber", .notIn([43, 41, "42"])),
    MatchCase("filterString", .notIn([43, 42, "abc"])),
    MatchCase("filterBoolean", .notIn([43, false, "Abc"])),
    MatchCase("filterObject1", .notIn([["foo": 42, "bar": 43]])),
]

/// Further conditions on the spec object, derived from the Coaty JS matcher's rules; many do not match.
let derivedConditions: [MatchCase] = [
    // Undefined values: only NotExists is true.
    MatchCase("filterUndefined", .exists, false),
    MatchCase("foo", .notEquals(1), false),
    MatchCase("foo", .notIn([1]), false),
    MatchCase("foo", .notContains(1), false),
    MatchCase("foo", .notBetween(1, 2), false),
    MatchCase("foo", .like("%"), false),
    MatchCase("foo", .equals(nil), false),
    MatchCase("filterNumber.foo", .notExists),
    MatchCase("filterString.length", .notExists),
    MatchCase("filterNumber", .notExists, false),
    // Paths: array indexes, length, the object itself.
    MatchCase("filterArray.0", .equals(42)),
    MatchCase("filterArray.1.1", .equals(44)),
    MatchCase("filterArray.2.0.1", .equals(46)),
    MatchCase("filterArray.3", .notExists),
    MatchCase("filterArray.01", .notExists),
    MatchCase("filterArray.-1", .notExists),
    MatchCase("filterArray.length", .equals(3)),
    MatchCase(ObjectFilterProperty(path: []), .exists),
    MatchCase(ObjectFilterProperty(path: []), .contains(["filterNumber": 42, "filterObject1": [:]])),
    MatchCase("..", .equals(2), false),
    MatchCase(ObjectFilterProperty(path: ["filterObject", "baz", "mumble", "1"]), .equals(45)),
    // Relational operators.
    MatchCase("filterNumber", .lessThan(42), false),
    MatchCase("filterNumber", .lessThan("42"), false),
    MatchCase("filterNumber", .greaterThan(42), false),
    MatchCase("filterNumber", .lessThanOrEqual(41.5), false),
    MatchCase("filterNumber", .greaterThanOrEqual(42.0)),
    MatchCase("filterNumber", .lessThan(42.5)),
    MatchCase("filterString", .lessThan("ABc")),
    MatchCase("filterString", .greaterThan("ABc"), false),
    MatchCase("filterString", .lessThan("abc"), false),
    MatchCase("filterString", .greaterThanOrEqual("abc")),
    MatchCase("filterString", .lessThan("b")),
    MatchCase("filterString", .greaterThan("9")),
    MatchCase("filterString", .greaterThan("Ab")),
    MatchCase("filterNumber", .lessThan(nil), false),
    MatchCase("filterNumber", .greaterThan(nil)),
    MatchCase("filterBoolean", .greaterThan(0)),
    MatchCase("filterBoolean", .lessThan(1), false),
    MatchCase("filterNumber", .lessThan("abc"), false),
    MatchCase("filterNumber", .greaterThanOrEqual("abc"), false),
    MatchCase("filterNumber", .lessThan(" 43 ")),
    MatchCase("filterNumber", .lessThan("0x2B")),
    MatchCase("filterNumber", .lessThan(""), false),
    MatchCase("filterNumber", .greaterThan("")),
    MatchCase("filterArray", .lessThan("5")),
    MatchCase("filterArray", .greaterThan("42,43,44,45,45")),
    MatchCase("filterObject", .lessThan("[object Object]"), false),
    MatchCase("filterObject", .lessThanOrEqual("[object Object]")),
    MatchCase("filterString", .lessThan(50), false),
    MatchCase("filterString", .greaterThanOrEqual(50), false),
    MatchCase("filterNumber", ObjectFilterExpression(.lessThan), false),
    MatchCase("filterNumber", ObjectFilterExpression(.greaterThanOrEqual), false),
    // Between and NotBetween.
    MatchCase("filterNumber", .between(43, 50), false),
    MatchCase("filterNumber", .between(50, 43), false),
    MatchCase("filterNumber", .notBetween(41, 43), false),
    MatchCase("filterNumber", .notBetween(43, 41), false),
    MatchCase("filterNumber", .notBetween(42, 42), false),
    MatchCase("filterNumber", .between("41", "43")),
    MatchCase("filterNumber", .between(41.9, 42.1)),
    MatchCase("filterString", .between("Abd", "Abz"), false),
    MatchCase("filterString", .between("abc", "ABc")),
    MatchCase("filterString", .between("ABc", "abc")),
    MatchCase("filterString", .notBetween("abc", "ABc"), false),
    MatchCase("filterString", .notBetween("B", "C")),
    MatchCase("filterString", .between(1, 5), false),
    MatchCase("filterString", .notBetween(1, 5), false),
    MatchCase("filterNumber", ObjectFilterExpression(.between, 41), false),
    // Like.
    MatchCase("filterString", .like("abc"), false),
    MatchCase("filterString", .like("Ab"), false),
    MatchCase("filterString", .like("_"), false),
    MatchCase("filterString", .like("____"), false),
    MatchCase("filterString", .like("%d"), false),
    MatchCase("filterString", .like("_%__%_"), false),
    MatchCase("filterNumber", .like("42"), false),
    MatchCase("filterNumber", .like("%"), false),
    MatchCase("filterArray", .like("%"), false),
    MatchCase("filterString", ObjectFilterExpression(.like, 42), false),
    MatchCase("filterLikeString", .like("%a_c\\\\d\\_x"), false),
    MatchCase("filterLikeString1", .like(".*+?^${}()|["), false),
    MatchCase("filterLikeString1", .like(".%]")),
    // Equality.
    MatchCase("filterString", .equals("abc"), false),
    MatchCase("filterNumber", .equals("42"), false),
    MatchCase("filterNumber", .equals(42.0)),
    MatchCase("filterArray", .equals([42, [44, 43], [[45, 46]]]), false),
    MatchCase("filterArray", .equals([42, [43, 44]]), false),
    MatchCase("filterObject", .equals(["baz": ["mumble": [42, 45]], "bar": [42, 43], "foo": 42])),
    MatchCase("filterObject", .equals(["foo": 42, "bar": [42, 43]]), false),
    MatchCase("filterObject1", .notEquals(["foo": 42]), false),
    MatchCase("filterNumber", ObjectFilterExpression(.notEquals)),
    MatchCase("filterNumber", ObjectFilterExpression(.equals), false),
    // Containment.
    MatchCase("filterArray", .contains(43), false),
    MatchCase("filterArray", .contains([[45]]), false),
    MatchCase("filterArray", .contains([[[46]]])),
    MatchCase("filterArray", .contains([])),
    MatchCase("filterArray", .contains([42, 42])),
    MatchCase("filterArray", .contains(["42"]), false),
    MatchCase("filterObject", .contains(["foo": 43]), false),
    MatchCase("filterObject", .contains(["mumble": [45]]), false),
    MatchCase("filterObject", .contains(["baz": [:]])),
    MatchCase("filterObject", .contains([:])),
    MatchCase("filterObject", .contains(42), false),
    MatchCase("filterObject", .contains(nil), false, throwsInJS: true),
    MatchCase("filterObject", .notContains(nil), false, throwsInJS: true),
    MatchCase("filterObject", .contains(["baz": nil]), false, throwsInJS: true),
    MatchCase("filterObject", .contains(["quux": 1, "baz": nil]), false),
    MatchCase("filterObject", .notContains(["quux": 1, "baz": nil])),
    MatchCase("filterObject", .contains(["0": 1, "baz": nil]), false),
    MatchCase("filterObject", .notContains(["foo": 42]), false),
    MatchCase("filterString", .contains("Abc")),
    MatchCase("filterString", .contains("Ab"), false),
    MatchCase("filterArray", .notContains(42), false),
    // In and NotIn.
    MatchCase("filterNumber", .in(["42"]), false),
    MatchCase("filterNumber", .in([]), false),
    MatchCase("filterNumber", .notIn([])),
    MatchCase("filterObject1", .in([["foo": 42, "bar": 43]]), false),
    MatchCase("filterArray", .in([[42, [43, 44], [[45, 46]]]])),
    MatchCase("filterNumber", .notIn([42]), false),
    MatchCase("filterNumber", ObjectFilterExpression(.in, 42), false, throwsInJS: true),
    MatchCase("filterNumber", ObjectFilterExpression(.notIn, 42), false, throwsInJS: true),
    MatchCase("foo", ObjectFilterExpression(.notIn, 42), false),
]

@Suite("ObjectMatcher: Coaty JS object.spec.ts")
struct ObjectMatcherSpecTests {
    @Test("each spec condition alone", arguments: coatySpecConditions)
    func specConditionAlone(_ c: MatchCase) {
        let filter = ObjectFilter(conditions: .condition(c.condition))
        #expect(ObjectMatcher.matches(coatySpecObject, filter: filter) == c.expected)
        #expect(CompiledObjectFilter(filter).matches(coatySpecObject) == c.expected)
        #expect(ObjectMatcher.matches(coatySpecObject, contextFilter: filter.contextFilter) == c.expected)
    }

    @Test("derived conditions alone", arguments: derivedConditions)
    func derivedConditionAlone(_ c: MatchCase) {
        let filter = ObjectFilter(conditions: .condition(c.condition))
        #expect(ObjectMatcher.matches(coatySpecObject, filter: filter) == c.expected)
        // Alone in an AND and in an OR, the result is the same.
        #expect(ObjectMatcher.matches(coatySpecObject, filter: .allOf([c.condition])) == c.expected)
        #expect(ObjectMatcher.matches(coatySpecObject, filter: .anyOf([c.condition])) == c.expected)
    }

    @Test func allSpecConditionsUnderAnd() {
        let filter = ObjectFilter.allOf(coatySpecConditions.map(\.condition))
        #expect(coatySpecConditions.count == 86)
        #expect(ObjectMatcher.matches(coatySpecObject, filter: filter))
    }

    @Test func allSpecConditionsUnderOr() {
        let filter = ObjectFilter.anyOf(coatySpecConditions.map(\.condition))
        #expect(ObjectMatcher.matches(coatySpecObject, filter: filter))
    }

    @Test func andFailsWhenOneConditionFails() throws {
        let failing = try #require(derivedConditions.first { !$0.expected })
        let filter = ObjectFilter.allOf(coatySpecConditions.map(\.condition) + [failing.condition])
        #expect(!ObjectMatcher.matches(coatySpecObject, filter: filter))
    }

    @Test func orHoldsWhenOneConditionHolds() {
        let failing = derivedConditions.filter { !$0.expected && !$0.throwsInJS }.map(\.condition)
        #expect(failing.count > 50)
        #expect(!ObjectMatcher.matches(coatySpecObject, filter: .anyOf(failing)))
        #expect(ObjectMatcher.matches(coatySpecObject, filter: .anyOf(failing + [coatySpecConditions[0].condition])))
    }

    /// Where Coaty JS throws, the whole filter fails, unless an OR has matched before.
    @Test func conditionsThatThrowInCoatyJS() throws {
        let throwing = try #require(derivedConditions.first { $0.throwsInJS }).condition
        let holding = coatySpecConditions[0].condition
        let failing = try #require(derivedConditions.first { !$0.expected && !$0.throwsInJS }).condition
        #expect(!ObjectMatcher.matches(coatySpecObject, filter: .anyOf([throwing, holding])))
        #expect(!ObjectMatcher.matches(coatySpecObject, filter: .anyOf([failing, throwing, holding])))
        #expect(ObjectMatcher.matches(coatySpecObject, filter: .anyOf([holding, throwing])))
        #expect(!ObjectMatcher.matches(coatySpecObject, filter: .allOf([holding, throwing])))
        #expect(!ObjectMatcher.matches(coatySpecObject, filter: .allOf([failing, throwing])))
    }

    @Test func filterAndObjectPresence() {
        #expect(!ObjectMatcher.matches(nil, filter: nil))
        #expect(!ObjectMatcher.matches(nil, filter: ObjectFilter()))
        #expect(ObjectMatcher.matches(coatySpecObject, filter: nil))
        #expect(ObjectMatcher.matches(coatySpecObject, filter: ObjectFilter()))
        #expect(!ObjectMatcher.matches(nil, contextFilter: ContextFilter()))
        #expect(ObjectMatcher.matches(coatySpecObject, contextFilter: nil))
        #expect(!CompiledObjectFilter(ObjectFilter()).matches(nil))
    }

    /// Coaty JS's CallEventData.matchesFilter rule.
    @Test func callContextRule() {
        let context: JSONValue = ["building": 33, "floor": 7]
        let matching = ContextFilter.where("floor", .between(6, 8)).and("building", .equals(33))
        let other = ContextFilter.where("floor", .between(1, 3))
        #expect(ObjectMatcher.handlesCall(filter: matching, context: context))
        #expect(!ObjectMatcher.handlesCall(filter: other, context: context))
        #expect(!ObjectMatcher.handlesCall(filter: nil, context: context))
        #expect(ObjectMatcher.handlesCall(filter: other, context: nil))
        #expect(ObjectMatcher.handlesCall(filter: nil, context: nil))
        #expect(ObjectMatcher.handlesCall(filter: ContextFilter(), context: context))
    }

    @Test func emptyCombinations() {
        #expect(ObjectMatcher.matches(coatySpecObject, filter: .allOf([])))
        #expect(!ObjectMatcher.matches(coatySpecObject, filter: .anyOf([])))
    }

    @Test func primitiveRootsMatchOnlyTheWholeValue() {
        #expect(ObjectMatcher.matches(42, filter: .where(ObjectFilterProperty(path: []), .equals(42))))
        #expect(!ObjectMatcher.matches(42, filter: .where("a", .exists)))
        #expect(ObjectMatcher.matches(nil as JSONValue?, filter: .where("a", .notExists)) == false)
        #expect(ObjectMatcher.matches(.null, filter: .where("a", .notExists)))
    }
}
