import CoatyCore
import Foundation
import PropertyBased
import Testing

@testable import CoatyCommunication
@testable import CoatyFilter
@testable import CoatyModel

/// Random JSON values: every kind, deep-ish nesting, strings with escapes and astral characters,
/// integers over the full range, finite doubles from bit patterns and from decimals.
enum RandomJSON {
    static let generator = Generator<JSONValue, Shrink.None<JSONValue>>(run: { rng in value(&rng, depth: 0) })

    static func value<R: RandomNumberGenerator>(_ rng: inout R, depth: Int) -> JSONValue {
        // The root is always a container; containers get rarer with depth; depth 6 is all leaves.
        let kind: Int
        if depth == 0 {
            kind = Int.random(in: 6...7, using: &rng)
        } else if depth < 6 && Int.random(in: 0..<(depth + 1), using: &rng) == 0 {
            kind = Int.random(in: 6...7, using: &rng)
        } else {
            kind = Int.random(in: 0..<6, using: &rng)
        }
        switch kind {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(integer(&rng))
        case 3: return .double(double(&rng))
        case 4, 5: return .string(string(&rng))
        case 6:
            let count = Int.random(in: 0...6, using: &rng)
            return .array((0..<count).map { _ in value(&rng, depth: depth + 1) })
        default:
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...6, using: &rng) {
                object[string(&rng)] = value(&rng, depth: depth + 1)
            }
            return .object(object)
        }
    }

    static func integer<R: RandomNumberGenerator>(_ rng: inout R) -> Int64 {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: return Int64.random(in: -10...10, using: &rng)
        case 1: return Int64.random(in: -1_000_000...1_000_000, using: &rng)
        case 2: return [Int64.min, Int64.max, 0, -1, 1 << 53, -(1 << 53) - 1].randomElement(using: &rng)!
        default: return Int64.random(in: .min ... .max, using: &rng)
        }
    }

    static func double<R: RandomNumberGenerator>(_ rng: inout R) -> Double {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0:
            while true {
                let d = Double(bitPattern: UInt64.random(in: .min ... .max, using: &rng))
                if d.isFinite { return d }
            }
        case 1: return Double(Int.random(in: -100_000...100_000, using: &rng)) / 100
        case 2: return Double(Int.random(in: -1000...1000, using: &rng))  // integral doubles keep their form
        case 3:
            return [-0.0, 0.0, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 0.1, 1e21, 1e-7].randomElement(
                using: &rng
            )!
        default: return Double.random(in: -1e6...1e6, using: &rng)
        }
    }

    static let pools: [[Unicode.Scalar]] = [
        Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.".unicodeScalars),
        Array("\"\\/\n\r\t\u{8}\u{C}\u{0}\u{1}\u{1F}\u{7F}".unicodeScalars),
        Array("éüß€→\u{2028}\u{2029}\u{FEFF}中文".unicodeScalars),
        Array("😀𝄞🇩🇪\u{10FFFF}\u{1F600}".unicodeScalars),
    ]

    static func string<R: RandomNumberGenerator>(_ rng: inout R) -> String {
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &rng) {
            if Int.random(in: 0..<10, using: &rng) == 0 {
                // Any scalar outside the surrogate range.
                var v = UInt32.random(in: 0...0x10FFFF, using: &rng)
                if v >= 0xD800 && v < 0xE000 { v -= 0x800 }
                scalars.append(Unicode.Scalar(v)!)
            } else {
                let pool = pools.randomElement(using: &rng)!
                scalars.append(pool.randomElement(using: &rng)!)
            }
        }
        return String(scalars)
    }
}

/// JSON equality where an integer equals a double that rounds to it: Foundation's decoder reads
/// `-8.958751118682584e+18` as the Int64 `-8958751118682584000`, whose nearest double is the original.
func numericallyEqual(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.int(let x), .double(let y)), (.double(let y), .int(let x)): return Double(x) == y
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { numericallyEqual($0, $1) }
    case (.object(let x), .object(let y)):
        return x.count == y.count
            && x.allSatisfy { member in y[member.key].map { numericallyEqual(member.value, $0) } ?? false }
    default: return a == b
    }
}

@Suite("JSON codec properties")
struct JSONCodecPropertyTests {
    @Test func parseOfSerializeIsIdentity() async {
        await propertyCheck(count: 500, input: RandomJSON.generator) { value in
            let bytes = value.serializedBytes()
            let parsed = try JSONValue(parsing: bytes)
            #expect(jsonIdentical(parsed, value), "\(value.serializedString())")
        }
    }

    @Test func serializeOfParseIsIdentityOnText() async {
        await propertyCheck(count: 200, input: RandomJSON.generator) { value in
            let text = value.serializedBytes()
            let reparsed = try JSONValue(parsing: text)
            #expect(reparsed.serializedBytes() == text)
        }
    }

    /// Garbage never crashes the parser: mutated JSON either parses (and re-serializes to text
    /// that parses to the same value) or fails with an offset inside the input.
    @Test func mutatedInputParsesOrFailsCleanly() async {
        let mutated = Generator<[UInt8], Shrink.None<[UInt8]>>(run: { rng in
            var bytes = RandomJSON.value(&rng, depth: 0).serializedBytes()
            let alphabet = Array("{}[]\",:\\-+.eE0123456789truefalsn \u{1}\u{7F}".utf8) + [0xC3, 0xFF, 0xED, 0xA0]
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let position = Int.random(in: 0...bytes.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0 where position < bytes.count: bytes.remove(at: position)
                case 1 where position < bytes.count: bytes[position] = alphabet.randomElement(using: &rng)!
                default: bytes.insert(alphabet.randomElement(using: &rng)!, at: position)
                }
            }
            if Bool.random(using: &rng) { bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &rng))) }
            return bytes
        })
        await propertyCheck(count: 1000, input: mutated) { bytes in
            do throws(JSONParseError) {
                let value = try JSONValue(parsing: bytes)
                let again = try JSONValue(parsing: value.serializedBytes())
                #expect(jsonIdentical(again, value))
            } catch {
                #expect(error.offset >= 0 && error.offset <= bytes.count)
            }
        }
    }

    /// The parser's own UTF-8 check accepts exactly what the standard library's does: random
    /// byte strings biased towards multi-byte leads, continuations and the edge values.
    @Test func utf8CheckAgreesWithTheStandardLibrary() async {
        let edges: [UInt8] = [
            0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5,
            0xFF,
        ]
        let bytes = Generator<[UInt8], Shrink.None<[UInt8]>>(run: { rng in
            (0..<Int.random(in: 0...8, using: &rng)).map { _ in
                Bool.random(using: &rng) ? edges.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
            }
        })
        await propertyCheck(count: 20_000, input: bytes) { bytes in
            let ours = bytes.withUnsafeBufferPointer { JSONParser.isValidUTF8($0) }
            #expect(ours == (String(validating: bytes, as: UTF8.self) != nil), "\(bytes)")
        }
        for scalar in [0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF] {
            let utf8 = Array(String(Unicode.Scalar(UInt32(scalar))!).utf8)
            #expect(utf8.withUnsafeBufferPointer { JSONParser.isValidUTF8($0) }, "U+\(String(scalar, radix: 16))")
        }
    }

    @Test func valueCodableBridgeIsIdentity() async {
        await propertyCheck(count: 200, input: RandomJSON.generator) { value in
            let decoded = try JSONValueDecoder().decode(JSONValue.self, from: value)
            let encoded = try JSONValueEncoder().encode(value)
            #expect(jsonIdentical(decoded, value))
            #expect(jsonIdentical(encoded, value))
        }
    }

    @Test func foundationAcceptsOurTextAndReadsTheSameValue() async {
        await propertyCheck(count: 200, input: RandomJSON.generator) { value in
            let data = Data(value.serializedBytes())
            // JSONSerialization accepts every text we write (fragments allowed for scalars).
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            // Foundation's decoder, through JSONValue's generic Decodable path, reads the same value.
            let viaFoundation = try JSONDecoder().decode(JSONValue.self, from: data)
            #expect(numericallyEqual(viaFoundation, value), "\(value.serializedString())")
        }
    }

    @Test func weReadFoundationsText() async {
        await propertyCheck(count: 200, input: RandomJSON.generator) { value in
            let data = try JSONEncoder().encode(value)
            let parsed = try JSONValue(parsing: [UInt8](data))
            #expect(numericallyEqual(parsed, value), "\(String(decoding: data, as: UTF8.self))")
        }
    }
}
