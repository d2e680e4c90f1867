import CoatyCore
import Testing

/// A pair of JSON values and the expected result of a deep operation on them.
struct DeepCase: Sendable, CustomTestStringConvertible {
    let a: JSONValue
    let b: JSONValue
    let expected: Bool
    /// Coaty JS throws a TypeError here; Contains and NotContains then both fail to match.
    let throwsInJS: Bool

    init(_ a: JSONValue, _ b: JSONValue, _ expected: Bool, throwsInJS: Bool = false) {
        self.a = a
        self.b = b
        self.expected = expected
        self.throwsInJS = throwsInJS
    }

    var testDescription: String { "(\(a), \(b)) → \(expected)" }
}

@Suite("ObjectMatcher: deep equals, contains, includes (Coaty JS util.spec.ts)")
struct ObjectMatcherDeepTests {
    /// util.spec.ts "Deep equality checks" (`equals(null, undefined)` has no JSON form; see
    /// the undefined cases of the matcher tests), plus further cases.
    static let equalsCases: [DeepCase] = [
        DeepCase(nil, nil, true),
        DeepCase(42, 42, true),
        DeepCase(42, "42", false),
        DeepCase([], [], true),
        DeepCase([42, 41], [42, 41], true),
        DeepCase([42, 41], [41, 42], false),
        DeepCase(["a": [2, 3], "b": [4]], ["a": [2, 3], "b": [4]], true),
        DeepCase(["x": 5, "y": [6]], ["x": 5, "y": 6], false),
        // further cases
        DeepCase(42, 42.0, true),
        DeepCase(nil, false, false),
        DeepCase(0, false, false),
        DeepCase("", nil, false),
        DeepCase([:], [], false),
        DeepCase([:], [:], true),
        DeepCase(["a": 1, "b": 2], ["b": 2, "a": 1], true),
        DeepCase(["a": 1], ["a": 1, "b": nil], false),
        DeepCase(["a": nil], ["b": nil], false),
        DeepCase([[1, [2]]], [[1, [2]]], true),
        DeepCase([[1, [2]]], [[1, [3]]], false),
        DeepCase("é", "e\u{301}", false),
    ]

    /// util.spec.ts "Deep contains checks", plus further cases.
    static let containsCases: [DeepCase] = [
        DeepCase("foo", "foo", true),
        DeepCase([1, 2, 3], [], true),
        DeepCase([1, 2, 3], [3], true),
        DeepCase([1, 2, 3], 3, true),
        DeepCase([1, 2, 3], [3, 1], true),
        DeepCase([1, 2, 3], [3, 1, 3, 1], true),
        DeepCase([1, 2, 3], [3, 1, 5], false),
        DeepCase([1, [2, 3, 4], 3], [3, [3, 2]], true),
        DeepCase([1, [2, 3, 4], 3], [3, [3, 1]], false),
        DeepCase(["foo": 1, "bar": 2], ["bar": 2], true),
        DeepCase(["foo": 1, "bar": 2], ["bar": 2, "foo": 1], true),
        DeepCase(["foo": 1, "bar": 2], ["bar": 2, "foo": 2], false),
        DeepCase(["foo": ["bar": "baz"]], ["foo": [:]], true),
        DeepCase(["foo": ["bar": "baz"]], ["bar": "baz"], false),
        DeepCase([1, ["foo": [["bar": [1, 2, 3]], 2, 3]]], [["foo": [["bar": [3]]]]], true),
        // further cases
        DeepCase("foo", "fo", false),
        DeepCase(nil, nil, true),
        DeepCase(1, 1.0, true),
        DeepCase([1, [2]], 2, false),
        DeepCase([1, [2]], [[2]], true),
        DeepCase([1, nil], nil, true),
        DeepCase([["a": 1]], ["a": 1], false),
        DeepCase([["a": 1, "b": 2]], [["a": 1]], true),
        DeepCase(["a": 1], 1, false),
        DeepCase(["a": 1], nil, false, throwsInJS: true),
        DeepCase([["a": 1]], [nil], false, throwsInJS: true),
        DeepCase([1, ["a": 1]], [1, nil], false, throwsInJS: true),
        DeepCase([1, ["a": 1]], [nil, 2], false, throwsInJS: true),
        DeepCase([1, ["a": 1]], [2, nil], false),
        DeepCase([nil, ["a": 1]], [nil], true),
        DeepCase(["0": 7, "1": 8], [7, 8], true),
        DeepCase(["0": 7], [8], false),
        DeepCase(1, [1], false),
        DeepCase([], [], true),
        DeepCase([], 1, false),
    ]

    /// util.spec.ts "Deep includes checks", plus further cases.
    static let includesCases: [DeepCase] = [
        DeepCase([1, 46, true, "foo"], true, true),
        DeepCase([1, 46, true, "foo"], false, false),
        DeepCase([1, 46, 47, "foo"], 47, true),
        DeepCase([1, 46, "47", "foo"], 47, false),
        DeepCase([1, 46, ["foo": 47], "foo"], ["foo": 47], true),
        DeepCase([1, 46, ["foo": 47, "bar": 42], "foo"], ["foo": 47], false),
        // further cases
        DeepCase([], nil, false),
        DeepCase([nil], nil, true),
        DeepCase([[1, 2]], [1, 2], true),
        DeepCase([[1, 2]], [2, 1], false),
    ]

    @Test(arguments: equalsCases)
    func deepEquals(_ c: DeepCase) {
        #expect(ObjectMatcher.equals(c.a, c.b) == c.expected)
        #expect(ObjectMatcher.equals(c.b, c.a) == c.expected)
        // Through the Equals and NotEquals operators on a property.
        let object: JSONValue = ["p": c.a]
        #expect(ObjectMatcher.matches(object, filter: .where("p", .equals(c.b))) == c.expected)
        #expect(ObjectMatcher.matches(object, filter: .where("p", .notEquals(c.b))) == !c.expected)
    }

    @Test(arguments: containsCases)
    func deepContains(_ c: DeepCase) {
        #expect(ObjectMatcher.contains(c.a, c.b) == c.expected)
        let object: JSONValue = ["p": c.a]
        #expect(ObjectMatcher.matches(object, filter: .where("p", .contains(c.b))) == c.expected)
        #expect(ObjectMatcher.matches(object, filter: .where("p", .notContains(c.b))) == (!c.expected && !c.throwsInJS))
    }

    @Test(arguments: includesCases)
    func deepIncludes(_ c: DeepCase) throws {
        let array = try #require(c.a.arrayValue)
        #expect(ObjectMatcher.includes(array, c.b) == c.expected)
        let object: JSONValue = ["p": c.b]
        #expect(ObjectMatcher.matches(object, filter: .where("p", .in(array))) == c.expected)
        #expect(ObjectMatcher.matches(object, filter: .where("p", .notIn(array))) == !c.expected)
    }
}
