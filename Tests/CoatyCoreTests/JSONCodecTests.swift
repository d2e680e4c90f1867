import CoatyCore
import Testing

/// Structural equality: like `==` but an integer never equals a double, `-0.0` differs from `0.0`,
/// and object key order matters.
func jsonIdentical(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.null, .null): return true
    case (.bool(let x), .bool(let y)): return x == y
    case (.int(let x), .int(let y)): return x == y
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern || (x.isNaN && y.isNaN)
    case (.string(let x), .string(let y)): return x == y
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { jsonIdentical($0, $1) }
    case (.object(let x), .object(let y)):
        return x.keys == y.keys && zip(x.values, y.values).allSatisfy { jsonIdentical($0, $1) }
    default: return false
    }
}

@Suite("JSON parser")
struct JSONParserCodecTests {
    struct Case: Sendable, CustomStringConvertible {
        let text: String
        let expected: JSONValue
        var description: String { text }
    }

    static let valid: [Case] = [
        Case(text: "null", expected: .null),
        Case(text: "true", expected: .bool(true)),
        Case(text: " false ", expected: .bool(false)),
        Case(text: "0", expected: .int(0)),
        Case(text: "-0", expected: .double(-0.0)),
        Case(text: "-0.0", expected: .double(-0.0)),
        Case(text: "42", expected: .int(42)),
        Case(text: "-17", expected: .int(-17)),
        Case(text: "1.0", expected: .double(1.0)),
        Case(text: "1.5", expected: .double(1.5)),
        Case(text: "1e3", expected: .double(1000)),
        Case(text: "1E+3", expected: .double(1000)),
        Case(text: "25e-1", expected: .double(2.5)),
        Case(text: "0.1", expected: .double(0.1)),
        Case(text: "123.456e-7", expected: .double(123.456e-7)),
        Case(text: "9223372036854775807", expected: .int(.max)),
        Case(text: "-9223372036854775808", expected: .int(.min)),
        Case(text: "9223372036854775808", expected: .double(9_223_372_036_854_775_808.0)),
        Case(text: "12345678901234567890123", expected: .double(12345678901234567890123.0)),
        Case(text: "1.7976931348623157e308", expected: .double(.greatestFiniteMagnitude)),
        Case(text: "5e-324", expected: .double(.leastNonzeroMagnitude)),
        Case(text: "0.30000000000000004", expected: .double(0.30000000000000004)),
        Case(text: "1700000000123", expected: .int(1_700_000_000_123)),
        Case(text: #""""#, expected: .string("")),
        Case(text: #""abc""#, expected: .string("abc")),
        Case(text: #""\"\\\/\b\f\n\r\t""#, expected: .string("\"\\/\u{8}\u{C}\n\r\t")),
        Case(text: #""\u0041\u00e9\u20AC""#, expected: .string("Aé€")),
        Case(text: #""\ud83d\ude00""#, expected: .string("😀")),
        Case(text: #""x\ud83dy""#, expected: .string("x\u{FFFD}y")),
        Case(text: #""\ude00""#, expected: .string("\u{FFFD}")),
        Case(text: "\"héllo wörld 😀\"", expected: .string("héllo wörld 😀")),
        Case(text: "[]", expected: .array([])),
        Case(text: "[1, \"a\" ,null,[true]]", expected: [1, "a", nil, [true]]),
        Case(text: "{}", expected: .object([:])),
        Case(text: #"{"b":1,"a":{"c":[]}}"#, expected: ["b": 1, "a": ["c": []]]),
        Case(text: #" { "a" : 1 , "a" : 2 , "b" : 3 } "#, expected: ["a": 2, "b": 3]),
        Case(text: "\n\t\r [ 1 ]\n", expected: [1]),
    ]

    @Test(arguments: valid)
    func parsesValidInput(_ c: Case) throws {
        let parsed = try JSONValue(parsing: c.text)
        #expect(jsonIdentical(parsed, c.expected), "\(parsed) vs \(c.expected)")
    }

    @Test func keepsKeyOrderAndDuplicateKeyPosition() throws {
        let parsed = try JSONValue(parsing: #"{"z":1,"y":2,"z":3}"#)
        #expect(parsed.objectValue?.keys == ["z", "y"])
        #expect(parsed["z"] == 3)
    }

    @Test func duplicateKeysInLargeObjectsKeepFirstPosition() throws {
        var members = (0..<40).map { "\"k\($0)\":\($0)" }
        members.append("\"k3\":\"last\"")
        let parsed = try JSONValue(parsing: "{" + members.joined(separator: ",") + "}")
        let object = try #require(parsed.objectValue)
        #expect(object.count == 40)
        #expect(object.keys[3] == "k3")
        #expect(object["k3"] == "last")
    }

    struct Bad: Sendable, CustomStringConvertible {
        let text: String
        let reason: JSONParseError.Reason
        let offset: Int
        var description: String { text }
    }

    static let invalid: [Bad] = [
        Bad(text: "", reason: .unexpectedEnd, offset: 0),
        Bad(text: "   ", reason: .unexpectedEnd, offset: 3),
        Bad(text: "[1,2", reason: .unexpectedEnd, offset: 4),
        Bad(text: #"{"a":"#, reason: .unexpectedEnd, offset: 5),
        Bad(text: #""abc"#, reason: .unexpectedEnd, offset: 4),
        Bad(text: "tru", reason: .unexpectedEnd, offset: 3),
        Bad(text: "nul!", reason: .unexpectedCharacter(UInt8(ascii: "!")), offset: 3),
        Bad(text: "[1,]", reason: .unexpectedCharacter(UInt8(ascii: "]")), offset: 3),
        Bad(text: #"{"a":1,}"#, reason: .unexpectedCharacter(UInt8(ascii: "}")), offset: 7),
        Bad(text: "{a:1}", reason: .unexpectedCharacter(UInt8(ascii: "a")), offset: 1),
        Bad(text: #"{"a" 1}"#, reason: .unexpectedCharacter(UInt8(ascii: "1")), offset: 5),
        Bad(text: "[1 2]", reason: .unexpectedCharacter(UInt8(ascii: "2")), offset: 3),
        Bad(text: "1 2", reason: .trailingGarbage, offset: 2),
        Bad(text: "{} x", reason: .trailingGarbage, offset: 3),
        Bad(text: "01", reason: .invalidNumber, offset: 0),
        Bad(text: "-", reason: .unexpectedEnd, offset: 1),
        Bad(text: "-a", reason: .invalidNumber, offset: 0),
        Bad(text: "1.", reason: .invalidNumber, offset: 0),
        Bad(text: "1.e5", reason: .invalidNumber, offset: 0),
        Bad(text: "1e", reason: .invalidNumber, offset: 0),
        Bad(text: "1e+", reason: .invalidNumber, offset: 0),
        Bad(text: ".5", reason: .unexpectedCharacter(UInt8(ascii: ".")), offset: 0),
        Bad(text: "+1", reason: .unexpectedCharacter(UInt8(ascii: "+")), offset: 0),
        Bad(text: "1e400", reason: .invalidNumber, offset: 0),
        Bad(text: "NaN", reason: .unexpectedCharacter(UInt8(ascii: "N")), offset: 0),
        Bad(text: #""\x""#, reason: .invalidEscape, offset: 1),
        Bad(text: #""ab\u12G4""#, reason: .invalidEscape, offset: 3),
        Bad(text: #""\u12"#, reason: .unexpectedEnd, offset: 5),
        Bad(text: "\"a\u{1}b\"", reason: .controlCharacterInString, offset: 2),
        Bad(text: "\"a\nb\"", reason: .controlCharacterInString, offset: 2),
        Bad(text: "'a'", reason: .unexpectedCharacter(UInt8(ascii: "'")), offset: 0),
    ]

    @Test(arguments: invalid)
    func rejectsMalformedInputWithOffset(_ c: Bad) {
        #expect(throws: JSONParseError(c.reason, at: c.offset)) {
            try JSONValue(parsing: c.text)
        }
    }

    @Test func rejectsInvalidUTF8() {
        let bytes: [UInt8] = [UInt8(ascii: "\""), 0xC3, 0x28, UInt8(ascii: "\"")]
        #expect(throws: JSONParseError(.invalidUTF8, at: 1)) { try JSONValue(parsing: bytes) }
        let escaped: [UInt8] = Array(#""\n"#.utf8) + [0xFF, UInt8(ascii: "\"")]
        #expect(throws: JSONParseError(.invalidUTF8, at: 1)) { try JSONValue(parsing: escaped) }
    }

    @Test(arguments: ["[", "{\"a\":"])
    func deepNestingIsAnErrorNotACrash(_ opener: String) {
        let text = String(repeating: opener, count: 10_000) + "1"
        #expect(throws: JSONParseError(.tooDeep(limit: 512), at: 512 * opener.utf8.count)) {
            try JSONValue(parsing: text)
        }
    }

    @Test func nestingUpToTheLimitIsAccepted() throws {
        let text = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        var value = try JSONValue(parsing: text)
        var depth = 0
        while case .array(let inner) = value, let first = inner.first {
            value = first
            depth += 1
        }
        #expect(depth == 511)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: "[" + text + "]") }
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: "[[1]]", maximumDepth: 1) }
    }

    @Test func errorDescriptionNamesOffset() {
        let error = JSONParseError(.trailingGarbage, at: 7)
        #expect(error.description.contains("byte 7"))
    }
}

@Suite("JSON serializer")
struct JSONSerializerCodecTests {
    struct Case: Sendable, CustomStringConvertible {
        let value: JSONValue
        let text: String
        var description: String { text }
    }

    static let cases: [Case] = [
        Case(value: .null, text: "null"),
        Case(value: true, text: "true"),
        Case(value: .int(0), text: "0"),
        Case(value: .int(-12), text: "-12"),
        Case(value: .int(.min), text: "-9223372036854775808"),
        Case(value: .int(.max), text: "9223372036854775807"),
        Case(value: .double(1.0), text: "1.0"),
        Case(value: .double(-0.0), text: "-0.0"),
        Case(value: .double(0.1), text: "0.1"),
        Case(value: .double(1e100), text: "1e+100"),
        Case(value: .double(.nan), text: "null"),
        Case(value: .double(.infinity), text: "null"),
        Case(value: "a\"b\\c/d", text: #""a\"b\\c/d""#),
        Case(value: "\n\r\t\u{8}\u{C}\u{1}\u{1F}", text: #""\n\r\t\b\f\u0001\u001f""#),
        Case(value: "é😀\u{2028}", text: "\"é😀\u{2028}\""),
        Case(value: [1, [2, []], [:]], text: "[1,[2,[]],{}]"),
        Case(value: ["b": 1, "a": ["x": nil]], text: #"{"b":1,"a":{"x":null}}"#),
    ]

    @Test(arguments: cases)
    func serializesCompactly(_ c: Case) {
        #expect(c.value.serializedString() == c.text)
        #expect(c.value.serializedBytes() == Array(c.text.utf8))
    }

    @Test(
        arguments: cases.filter { c in
            if case .double(let d) = c.value { return d.isFinite }
            return true
        }
    )
    func serializedTextParsesBackIdentically(_ c: Case) throws {
        #expect(jsonIdentical(try JSONValue(parsing: c.value.serializedBytes()), c.value))
    }

    /// Every byte that needs escaping is escaped in every position of a string (runs of plain bytes
    /// are copied in one piece), and nothing else is.
    @Test func everyByteIsEscapedAsNeededInEveryPosition() throws {
        func reference(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case "\u{08}": out += "\\b"
                case "\u{0C}": out += "\\f"
                case let c where c.value < 0x20:
                    out += "\\u00" + (c.value < 0x10 ? "0" : "") + String(c.value, radix: 16)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        let specials: [Unicode.Scalar] =
            (0..<0x20).map { Unicode.Scalar($0)! } + [
                "\"", "\\", " ", "!", "#", "[", "]", "~", "\u{7F}", "é", "€", "😀",
            ]
        for length in [1, 7, 8, 9, 15, 16, 17, 24] {
            for position in 0..<length {
                for special in specials {
                    var scalars = String.UnicodeScalarView(repeating: "a", count: length)
                    scalars.replaceSubrange(
                        scalars.index(
                            scalars.startIndex,
                            offsetBy: position
                        )..<scalars.index(scalars.startIndex, offsetBy: position + 1),
                        with: [special]
                    )
                    let text = String(scalars)
                    let serialized = JSONValue.string(text).serializedString()
                    #expect(serialized == reference(text), "\(Array(text.utf8))")
                    #expect(try JSONValue(parsing: serialized) == .string(text))
                }
            }
        }
    }

    @Test func serializeIntoAppends() {
        var buffer = Array("x=".utf8)
        JSONValue.array([1, 2]).serialize(into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == "x=[1,2]")
    }
}
