import CoatyCore
import PropertyBased
import Testing

@Suite("ObjectMatcher: properties over random values")
struct ObjectMatcherPropertyTests {
    static let values = Generator<JSONValue, Shrink.None<JSONValue>> { rng in
        ObjectFilterCodingTests.randomJSON(&rng, depth: 2)
    }

    static func holds(_ value: JSONValue, _ expression: ObjectFilterExpression) -> Bool {
        ObjectMatcher.matches(["p": value], filter: .where("p", expression))
    }

    @Test func equalsAndNotEqualsAreComplementary() async {
        await propertyCheck(count: 300, input: Self.values, Self.values) { value, operand in
            #expect(Self.holds(value, .equals(operand)) != Self.holds(value, .notEquals(operand)))
            #expect(Self.holds(value, .equals(operand)) == ObjectMatcher.equals(value, operand))
            #expect(Self.holds(value, .equals(value)))
        }
    }

    @Test func containsAndNotContainsAreComplementaryUnlessCoatyJSThrows() async {
        await propertyCheck(count: 300, input: Self.values, Self.values) { value, operand in
            let contains = Self.holds(value, .contains(operand))
            let notContains = Self.holds(value, .notContains(operand))
            #expect(!(contains && notContains))
            if contains { #expect(ObjectMatcher.contains(value, operand)) }
            // Everything contains itself, except objects holding null somewhere (a TypeError in Coaty JS).
            if case .object = value, !"\(value)".contains("null") { #expect(ObjectMatcher.contains(value, value)) }
        }
    }

    @Test func inAndNotInAreComplementary() async {
        await propertyCheck(count: 300, input: Self.values, Self.values.array(of: 0...4)) { value, candidates in
            #expect(Self.holds(value, .in(candidates)) != Self.holds(value, .notIn(candidates)))
            #expect(Self.holds(value, .in(candidates + [value])))
        }
    }

    @Test func betweenIgnoresTheOrderOfNumericBounds() async {
        // (With bounds of mixed types JavaScript's comparisons are not symmetric, nor is Coaty JS.)
        await propertyCheck(count: 300, input: Self.values, Gen.int(in: -5...5), Gen.double(in: -5...5)) {
            value,
            a,
            b in
            let (lower, upper) = (JSONValue.int(Int64(a)), JSONValue.double(b))
            #expect(Self.holds(value, .between(lower, upper)) == Self.holds(value, .between(upper, lower)))
            #expect(Self.holds(value, .notBetween(lower, upper)) == Self.holds(value, .notBetween(upper, lower)))
        }
    }

    @Test func numbersCompareNumerically() async {
        await propertyCheck(count: 300, input: Gen.double(in: -1e6...1e6), Gen.int(in: -1000...1000)) { d, i in
            let value = JSONValue.double(d)
            let operand = JSONValue.int(Int64(i))
            #expect(Self.holds(value, .lessThan(operand)) == (d < Double(i)))
            #expect(Self.holds(value, .lessThanOrEqual(operand)) == (d <= Double(i)))
            #expect(Self.holds(value, .greaterThan(operand)) == (d > Double(i)))
            #expect(Self.holds(value, .greaterThanOrEqual(operand)) == (d >= Double(i)))
            #expect(
                Self.holds(value, .between(operand, 0))
                    == (Swift.min(0, Double(i))...Swift.max(0, Double(i))).contains(d)
            )
            #expect(Self.holds(value, .notBetween(operand, 0)) != Self.holds(value, .between(operand, 0)))
        }
    }

    @Test func stringsCompareByCollation() async {
        let strings = Gen.element(of: Array("aAbB _-9é€")).compactMap { $0 }.string(of: 0...4)
        await propertyCheck(count: 300, input: strings, strings) { s, t in
            let c = CoatyCollation.compare(s, t)
            #expect(Self.holds(.string(s), .lessThan(.string(t))) == (c < 0))
            #expect(Self.holds(.string(s), .greaterThanOrEqual(.string(t))) == (c >= 0))
            #expect(Self.holds(.string(s), .between(.string(t), .string(t))) == (c == 0))
            #expect(Self.holds(.string(s), .notBetween(.string(t), .string(t))) == (c != 0))
        }
    }

    @Test func applySelectsOrdersAndPages() async {
        let objects = Generator<[JSONValue], Shrink.None<[JSONValue]>> { rng in
            (0..<Int.random(in: 0...20, using: &rng)).map { i in
                var object: JSONObject = ["i": .int(Int64(i))]
                if Bool.random(using: &rng) { object["n"] = .int(Int64.random(in: 0...5, using: &rng)) }
                object["s"] = .string(["a", "B", "b", "_", "1"].randomElement(using: &rng) ?? "a")
                return .object(object)
            }
        }
        await propertyCheck(count: 200, input: objects, Gen.int(in: 0...5), Gen.int(in: 0...6)) { objects, skip, take in
            let filter = ObjectFilter.where("n", .greaterThan(1)).or("s", .equals("a"))
                .orderBy("n").orderBy("s", .descending).skip(skip).take(take)
            let result = ObjectMatcher.apply(filter, to: objects)
            let matching = objects.filter { ObjectMatcher.matches($0, filter: filter) }
            let expectedCount =
                take == 0 ? Swift.max(0, matching.count - skip) : Swift.min(take, Swift.max(0, matching.count - skip))
            #expect(result.count == expectedCount)
            for object in result { #expect(ObjectMatcher.matches(object, filter: filter)) }
            // The full ordering is a permutation of the matches, sorted by n (undefined first) then s descending.
            let all = ObjectMatcher.apply(
                ObjectFilter(conditions: filter.conditions, orderByProperties: filter.orderByProperties),
                to: objects
            )
            #expect(all.count == matching.count)
            for (x, y) in zip(all, all.dropFirst()) {
                let nx = x["n"]?.intValue ?? -1
                let ny = y["n"]?.intValue ?? -1
                #expect(nx <= ny)
                if nx == ny, let sx = x["s"]?.stringValue, let sy = y["s"]?.stringValue {
                    #expect(CoatyCollation.compare(sx, sy) >= 0)
                }
            }
            #expect(Array(all.dropFirst(skip).prefix(take == 0 ? Int.max : take)) == result)
        }
    }
}
