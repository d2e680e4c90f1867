import CoatyCore
import PropertyBased
import Testing

/// A string, a LIKE pattern, and whether the string matches.
struct LikeCase: Sendable, CustomTestStringConvertible {
    let value: String
    let pattern: String
    let expected: Bool

    init(_ value: String, _ pattern: String, _ expected: Bool) {
        self.value = value
        self.pattern = pattern
        self.expected = expected
    }

    var testDescription: String { "\(value.debugDescription) LIKE \(pattern.debugDescription) → \(expected)" }
}

/// Two strings and the sign of their collation order.
struct CollationCase: Sendable, CustomTestStringConvertible {
    let a: String
    let b: String
    let sign: Int

    init(_ a: String, _ b: String, _ sign: Int) {
        self.a = a
        self.b = b
        self.sign = sign
    }

    var testDescription: String { "\(a.debugDescription) vs \(b.debugDescription) → \(sign)" }
}

@Suite("ObjectMatcher: Like, collation and JavaScript comparisons")
struct ObjectMatcherOperatorTests {
    static let likeCases: [LikeCase] = [
        LikeCase("Abc", "Abc", true),
        LikeCase("Abc", "abc", false),
        LikeCase("Abc", "A_c", true),
        LikeCase("Abc", "A__c", false),
        LikeCase("Abc", "%", true),
        LikeCase("", "%", true),
        LikeCase("", "%%", true),
        LikeCase("", "_", false),
        LikeCase("", "", true),
        LikeCase("a", "", false),
        LikeCase("abc", "a%", true),
        LikeCase("abc", "%b%", true),
        LikeCase("abc", "%d%", false),
        LikeCase("abcabc", "%abc", true),
        LikeCase("abcab", "%abc", false),
        LikeCase("aXbXc", "a%b%c", true),
        LikeCase("aXbXcX", "a%b%c", false),
        LikeCase("a_c", "a\\_c", true),
        LikeCase("abc", "a\\_c", false),
        LikeCase("a%c", "a\\%c", true),
        LikeCase("abc", "a\\%c", false),
        LikeCase("a\\c", "a\\\\c", true),
        LikeCase("a\\c", "a\\c", false),
        LikeCase("abc", "a\\bc", true),
        LikeCase("abc", "abc\\", true),
        LikeCase("a.c", "a.c", true),
        LikeCase("abc", "a.c", false),
        LikeCase("a*c", "a*c", true),
        LikeCase("aac", "a*c", false),
        LikeCase("x^y$", "x^y$", true),
        LikeCase("(a|b)", "(a|b)", true),
        LikeCase("a", "(a|b)", false),
        LikeCase("a\nb", "a_b", false),
        LikeCase("a\nb", "a%b", false),
        LikeCase("a\rb", "a%", false),
        LikeCase("a\u{2028}b", "a_b", false),
        LikeCase("a\nb", "a\nb", true),
        LikeCase("a\nb", "a\n%", true),
        LikeCase("a\tb", "a_b", true),
        LikeCase("😀", "_", false),
        LikeCase("😀", "__", true),
        LikeCase("😀", "😀", true),
        LikeCase("é", "_", true),
        LikeCase("e\u{301}", "__", true),
        LikeCase("é", "e\u{301}", false),
        LikeCase("hello abc\\d_", "%a_c\\\\d\\_", true),
        LikeCase("acc\\d_", "%a_c\\\\d\\_", true),
        LikeCase("hello abc\\d_world", "%a_c\\\\d\\_", false),
        LikeCase(String(repeating: "a", count: 100), "%" + String(repeating: "a", count: 70) + "%", true),
        LikeCase(String(repeating: "a", count: 100), "%" + String(repeating: "_", count: 101), false),
        LikeCase(String(repeating: "ab", count: 40), String(repeating: "a_", count: 39) + "a%", true),
        LikeCase(String(repeating: "ab", count: 40), String(repeating: "a_", count: 39) + "b%", false),
    ]

    @Test(arguments: likeCases)
    func like(_ c: LikeCase) {
        let object: JSONValue = ["s": .string(c.value)]
        #expect(ObjectMatcher.matches(object, filter: .where("s", .like(c.pattern))) == c.expected)
    }

    static let collationCases: [CollationCase] = [
        CollationCase("Abc", "ABc", -1),
        CollationCase("Abc", "abc", 1),
        CollationCase("abc", "Abc", -1),
        CollationCase("Abc", "Abce", -1),
        CollationCase("Abc", "Abc", 0),
        CollationCase("", "", 0),
        CollationCase("", "a", -1),
        CollationCase("a", "B", -1),
        CollationCase("B", "a", 1),
        CollationCase("abc", "ABD", -1),
        CollationCase(" ", "_", -1),
        CollationCase("_", "-", -1),
        CollationCase("-", ",", -1),
        CollationCase("%", "`", -1),
        CollationCase("~", "$", -1),
        CollationCase("$", "0", -1),
        CollationCase("9", "a", -1),
        CollationCase("10", "9", -1),
        CollationCase("a b", "ab", -1),
        CollationCase("a\u{0}b", "ab", 0),
        CollationCase("e", "é", -1),
        CollationCase("é", "f", -1),
        CollationCase("é", "E", 1),
        CollationCase("É", "é", 1),
        CollationCase("e\u{301}", "é", 0),
        CollationCase("ss", "ß", -1),
        CollationCase("ß", "st", -1),
        CollationCase("Z", "ä", 1),
        CollationCase("o", "ø", -1),
        CollationCase("ø", "p", -1),
        CollationCase("z", "þ", -1),
        CollationCase("α", "z", 1),
        CollationCase("α", "Β", -1),
        CollationCase("résumé", "resume", 1),
        CollationCase("résumé", "resumf", -1),
        CollationCase("Äpfel", "apfel", 1),
        CollationCase("Äpfel", "Apfel", 1),
        CollationCase("Äpfel", "Bpfel", -1),
        CollationCase("€", "$", 1),
        CollationCase("€", "0", -1),
        CollationCase("٣", "3", 0),
        CollationCase("a\u{2003}b", "a b", 1),
    ]

    @Test(arguments: collationCases)
    func collation(_ c: CollationCase) {
        #expect(CoatyCollation.compare(c.a, c.b).signum() == c.sign)
        #expect(CoatyCollation.compare(c.b, c.a).signum() == -c.sign)
        #expect(CoatyCollation.sortKey(c.a).compare(to: CoatyCollation.sortKey(c.b)) == c.sign)
        // The relational operators agree with the collation on strings.
        let object: JSONValue = ["s": .string(c.a)]
        let operand = JSONValue.string(c.b)
        #expect(ObjectMatcher.matches(object, filter: .where("s", .lessThan(operand))) == (c.sign < 0))
        #expect(ObjectMatcher.matches(object, filter: .where("s", .lessThanOrEqual(operand))) == (c.sign <= 0))
        #expect(ObjectMatcher.matches(object, filter: .where("s", .greaterThan(operand))) == (c.sign > 0))
        #expect(ObjectMatcher.matches(object, filter: .where("s", .greaterThanOrEqual(operand))) == (c.sign >= 0))
    }

    static let asciiPrintable = Gen.element(of: (32..<127).map { Character(Unicode.Scalar(UInt8($0))) }).compactMap {
        $0
    }
    static let mixedCharacters = Gen.element(of: Array("aAbBzZ09 _-.,éÉèøßαΩ€$\u{301}\u{0}😀")).compactMap { $0 }

    @Test func collationIsAntisymmetricAndMatchesSortKeysOnASCII() async {
        await propertyCheck(
            count: 300,
            input: Self.asciiPrintable.string(of: 0...8),
            Self.asciiPrintable.string(of: 0...8)
        ) {
            a,
            b in
            let c = CoatyCollation.compare(a, b)
            #expect(c.signum() == -CoatyCollation.compare(b, a).signum())
            #expect(c.signum() == CoatyCollation.sortKey(a).compare(to: CoatyCollation.sortKey(b)))
            if a == b { #expect(c == 0) }
        }
    }

    @Test func collationIsAntisymmetricOnMixedText() async {
        await propertyCheck(
            count: 300,
            input: Self.mixedCharacters.string(of: 0...6),
            Self.mixedCharacters.string(of: 0...6)
        ) {
            a,
            b in
            let c = CoatyCollation.compare(a, b)
            #expect(c.signum() == -CoatyCollation.compare(b, a).signum())
            #expect(c.signum() == CoatyCollation.sortKey(a).compare(to: CoatyCollation.sortKey(b)))
        }
    }

    @Test func collationIsTransitiveOnSortedSamples() async {
        await propertyCheck(count: 100, input: Self.mixedCharacters.string(of: 0...5).array(of: 2...12)) { strings in
            let sorted = strings.sorted { CoatyCollation.compare($0, $1) < 0 }
            for (x, y) in zip(sorted, sorted.dropFirst()) {
                #expect(CoatyCollation.compare(x, y) <= 0)
            }
            if let first = sorted.first, let last = sorted.last {
                #expect(CoatyCollation.compare(first, last) <= 0)
            }
        }
    }

    /// JavaScript's `<` on mixed types, as the relational operators apply it.
    static let mixedComparisons: [(JSONValue, ObjectFilterExpression, Bool)] = [
        ("10", .lessThan(9), false),
        ("10", .greaterThan(9), true),
        ("1e1", .equals(10), false),
        ("1e1", .greaterThanOrEqual(10), true),
        ("1e1", .lessThanOrEqual(10), true),
        ("  12\n", .greaterThan(11), true),
        ("0b11", .greaterThan(2), true),
        ("0o17", .lessThan(16), true),
        ("Infinity", .greaterThan(1e308), true),
        ("-Infinity", .lessThan(-1e308), true),
        ("1_000", .greaterThan(0), false),
        ("1_000", .lessThanOrEqual(0), false),
        (".5", .lessThan(1), true),
        ("5.", .greaterThan(4), true),
        ("+5", .greaterThan(4), true),
        ("0x", .lessThan(1), false),
        (nil, .lessThan(1), true),
        (nil, .greaterThanOrEqual(0), true),
        (true, .between(0.5, 1.5), true),
        (false, .lessThan(true), true),
        ([2], .equals(2), false),
        ([2], .lessThan(3), true),
        ([1, 2], .lessThan(3), false),
        ([1, 2], .greaterThanOrEqual(3), false),
        ([], .lessThan(1), true),
        ([1.5, nil, [true]], .lessThan("1.5,,tru"), false),
        ([1.5, nil, [true]], .greaterThan("1.5,,tru"), true),
        ([1e21], .lessThan("1e+22"), true),
        ([1e-7], .greaterThan("1e-8"), false),
        ([0.000001], .lessThanOrEqual("0.000001"), true),
        ([0.000001], .greaterThanOrEqual("0.000001"), true),
        ([1e-7], .greaterThanOrEqual("1e-7"), true),
        ([1e21], .greaterThanOrEqual("1e+21"), true),
        ([1e20], .greaterThanOrEqual("100000000000000000000"), true),
        ([123.0, -1.5, 0.1, 1.25e-5], .greaterThanOrEqual("123,-1.5,0.1,0.0000125"), true),
        ([123.0, -1.5, 0.1, 1.25e-5], .lessThanOrEqual("123,-1.5,0.1,0.0000125"), true),
        ([1.5e300], .greaterThanOrEqual("1.5e+300"), true),
        (["a": 1], .greaterThan("[object"), true),
        (9_007_199_254_740_993, .greaterThan(9_007_199_254_740_992), true),
    ]

    @Test func javaScriptMixedComparisons() {
        for (index, (value, expression, expected)) in Self.mixedComparisons.enumerated() {
            let object: JSONValue = ["v": value]
            let result = ObjectMatcher.matches(object, filter: .where("v", expression))
            #expect(result == expected, "case \(index): \(value) \(expression.operator)")
        }
    }

    /// JavaScript `===` on strings compares code units: canonically equivalent spellings differ
    /// (Swift's `==` would equate them), equal bytes are equal at any length and in any script.
    @Test func equalsComparesStringsByCodeUnits() {
        let cases: [(value: String, operand: String, equal: Bool)] = [
            ("caf\u{E9}", "cafe\u{301}", false),
            ("cafe\u{301}", "cafe\u{301}", true),
            ("com.example.bench.Sensor3", "com.example.bench.Sensor3", true),
            ("com.example.bench.Sensor3", "com.example.bench.Sensor4", false),
            ("com.example.bench.Sensor3", "com.example.bench.Sensor", false),
            ("", "", true),
            ("\u{1F600} B7-4.12 \u{4E2D}\u{6587}", "\u{1F600} B7-4.12 \u{4E2D}\u{6587}", true),
            ("\u{1F600} B7-4.12 \u{4E2D}\u{6587}", "\u{1F600} B7-4.12 \u{4E2D}\u{6588}", false),
        ]
        for (value, operand, equal) in cases {
            let object: JSONValue = ["v": .string(value)]
            #expect(ObjectMatcher.matches(object, filter: .where("v", .equals(.string(operand)))) == equal)
            #expect(ObjectMatcher.matches(object, filter: .where("v", .notEquals(.string(operand)))) == !equal)
            let parsed = try! JSONValue(parsing: Array(#"{"v":"\#(value)"}"#.utf8))
            let compiled = CompiledObjectFilter(ObjectFilter.where("v", .equals(.string(operand))))
            #expect(compiled.matches(parsed) == equal)
        }
    }
}
