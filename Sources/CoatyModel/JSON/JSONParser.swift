/// Why a byte sequence is not the JSON text it should be, and where.
///
/// `offset` is the zero-based byte offset in the input where the problem was found. Fix the
/// sender or the payload at that position; the parser never guesses.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Reason: Sendable, Equatable {
        /// The input ended inside a value (or was empty).
        case unexpectedEnd
        /// A byte that cannot start or continue a value here.
        case unexpectedCharacter(UInt8)
        /// A complete value is followed by more than whitespace.
        case trailingGarbage
        /// A number that does not follow the JSON number grammar, or is beyond the range of `Double`.
        case invalidNumber
        /// A backslash escape other than `\" \\ \/ \b \f \n \r \t \uXXXX`.
        case invalidEscape
        /// A raw control character (below U+0020) inside a string.
        case controlCharacterInString
        /// A string that is not valid UTF-8.
        case invalidUTF8
        /// Arrays and objects nested deeper than the limit.
        case tooDeep(limit: Int)
    }

    /// What went wrong.
    public let reason: Reason
    /// The byte offset in the input at which the problem was found.
    public let offset: Int

    /// Creates an error.
    /// - Parameters:
    ///   - reason: what went wrong.
    ///   - offset: the byte offset where it was found.
    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    /// A one-line message naming the problem and the byte offset.
    public var description: String {
        let what: String
        switch reason {
        case .unexpectedEnd: what = "unexpected end of input"
        case .unexpectedCharacter(let byte):
            if byte >= 0x20 && byte < 0x7F {
                what = "unexpected character '\(Character(Unicode.Scalar(byte)))'"
            } else {
                what = "unexpected byte 0x\(String(byte, radix: 16))"
            }
        case .trailingGarbage: what = "extra data after the JSON value"
        case .invalidNumber: what = "malformed number"
        case .invalidEscape: what = "invalid escape sequence in string"
        case .controlCharacterInString: what = "unescaped control character in string"
        case .invalidUTF8: what = "string is not valid UTF-8"
        case .tooDeep(let limit): what = "arrays/objects nested deeper than \(limit) levels"
        }
        return "Invalid JSON at byte \(offset): \(what)"
    }
}

extension JSONValue {
    /// The nesting depth the parser accepts by default.
    public static let defaultMaximumDepth = 512

    /// Parses UTF-8 JSON text held in raw memory.
    ///
    /// Numbers without fraction or exponent that fit in 64 bits become ``int(_:)``, all others
    /// ``double(_:)`` (`-0` becomes `.double(-0.0)` to keep its sign). Object keys keep their order;
    /// a repeated key keeps its first position and its last value.
    /// - Parameters:
    ///   - bytes: the UTF-8 text; one JSON value, optionally surrounded by whitespace.
    ///   - maximumDepth: the deepest nesting of arrays and objects accepted.
    /// - Throws: ``JSONParseError`` with the byte offset of the first problem.
    public init(parsing bytes: UnsafeRawBufferPointer, maximumDepth: Int = JSONValue.defaultMaximumDepth)
        throws(JSONParseError)
    {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw JSONParseError(.unexpectedEnd, at: 0)
        }
        var parser = JSONParser(
            base.assumingMemoryBound(to: UInt8.self),
            count: bytes.count,
            maximumDepth: maximumDepth
        )
        self = try parser.parseDocument()
    }

    /// Parses UTF-8 JSON bytes.
    /// - Parameters:
    ///   - bytes: the UTF-8 text.
    ///   - maximumDepth: the deepest nesting of arrays and objects accepted.
    /// - Throws: ``JSONParseError`` with the byte offset of the first problem.
    public init(parsing bytes: [UInt8], maximumDepth: Int = JSONValue.defaultMaximumDepth) throws(JSONParseError) {
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBytes { raw in
            do throws(JSONParseError) {
                return .success(try JSONValue(parsing: raw, maximumDepth: maximumDepth))
            } catch {
                return .failure(error)
            }
        }
        self = try result.get()
    }

    /// Parses JSON text.
    /// - Parameters:
    ///   - text: the JSON text.
    ///   - maximumDepth: the deepest nesting of arrays and objects accepted.
    /// - Throws: ``JSONParseError`` with the byte offset (in UTF-8) of the first problem.
    public init(parsing text: String, maximumDepth: Int = JSONValue.defaultMaximumDepth) throws(JSONParseError) {
        var text = text
        let result: Result<JSONValue, JSONParseError> = text.withUTF8 { buffer in
            do throws(JSONParseError) {
                return .success(try JSONValue(parsing: UnsafeRawBufferPointer(buffer), maximumDepth: maximumDepth))
            } catch {
                return .failure(error)
            }
        }
        self = try result.get()
    }
}

/// A recursive-descent UTF-8 JSON parser over raw memory.
package struct JSONParser {
    /// The text.
    let base: UnsafePointer<UInt8>
    /// The text's length in bytes.
    let end: Int
    /// The offset of the next byte to read.
    package var pos = 0
    /// The nesting depth of arrays and objects at `pos`.
    package var depth = 0
    private let maximumDepth: Int
    /// Reused buffer for strings with escapes.
    private var scratch: [UInt8] = []
    /// Members of the arrays and objects being parsed, innermost last.
    private var valueStack: [JSONValue] = []
    private var keyStack: [String] = []

    init(_ base: UnsafePointer<UInt8>, count: Int, maximumDepth: Int) {
        self.base = base
        self.end = count
        self.maximumDepth = maximumDepth
        valueStack.reserveCapacity(16)
        keyStack.reserveCapacity(16)
    }

    /// A parser for reading single values at chosen offsets (see `JSONObjectIndex`): no stacks
    /// reserved up front.
    package init(reading base: UnsafePointer<UInt8>, count: Int, maximumDepth: Int) {
        self.base = base
        self.end = count
        self.maximumDepth = maximumDepth
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if pos != end { throw JSONParseError(.trailingGarbage, at: pos) }
        return value
    }

    @inline(__always)
    package mutating func skipWhitespace() {
        while pos < end {
            switch base[pos] {
            case 0x20, 0x0A, 0x0D, 0x09: pos += 1
            default: return
            }
        }
    }

    /// The byte at `pos`; the end of the text is an error.
    @inline(__always)
    package func peek() throws(JSONParseError) -> UInt8 {
        guard pos < end else { throw JSONParseError(.unexpectedEnd, at: pos) }
        return base[pos]
    }

    /// Parses the value at `pos` and moves past it.
    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        let byte = try peek()
        switch byte {
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "{"):
            return try parseObject()
        case UInt8(ascii: "["):
            return try parseArray()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        default:
            throw JSONParseError(.unexpectedCharacter(byte), at: pos)
        }
    }

    /// Reads `literal` (`true`, `false`, `null`) at `pos`.
    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let bytes = literal.utf8Start
        for i in 0..<literal.utf8CodeUnitCount {
            guard pos < end else { throw JSONParseError(.unexpectedEnd, at: pos) }
            guard base[pos] == bytes[i] else { throw JSONParseError(.unexpectedCharacter(base[pos]), at: pos) }
            pos += 1
        }
    }

    /// Goes one array or object deeper, within `maximumDepth`.
    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > maximumDepth { throw JSONParseError(.tooDeep(limit: maximumDepth), at: pos) }
    }

    /// Enters the array or object whose opening bracket is at `pos`; `true` when it is empty
    /// (then it is closed and left again).
    @inline(__always)
    mutating func openContainer(closing close: UInt8) throws(JSONParseError) -> Bool {
        try enter()
        pos += 1
        skipWhitespace()
        guard try peek() == close else { return false }
        pos += 1
        depth -= 1
        return true
    }

    /// After an element or member: reads the separator; `true` after a comma (and the whitespace
    /// after it), `false` after `close` (the container is left); any other byte is an error.
    @inline(__always)
    mutating func continueAfterMember(closing close: UInt8) throws(JSONParseError) -> Bool {
        skipWhitespace()
        let byte = try peek()
        pos += 1
        if byte == UInt8(ascii: ",") {
            skipWhitespace()
            return true
        }
        guard byte == close else { throw JSONParseError(.unexpectedCharacter(byte), at: pos - 1) }
        depth -= 1
        return false
    }

    /// Checks that a member's key (its opening quote) is at `pos`.
    @inline(__always)
    func expectKey() throws(JSONParseError) {
        let quote = try peek()
        guard quote == UInt8(ascii: "\"") else { throw JSONParseError(.unexpectedCharacter(quote), at: pos) }
    }

    /// Reads the colon after a member's key, with the whitespace around it.
    @inline(__always)
    mutating func expectColon() throws(JSONParseError) {
        skipWhitespace()
        let colon = try peek()
        guard colon == UInt8(ascii: ":") else { throw JSONParseError(.unexpectedCharacter(colon), at: pos) }
        pos += 1
        skipWhitespace()
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        if try openContainer(closing: UInt8(ascii: "]")) { return .array([]) }
        // Elements collect on a shared stack and are copied out once, at their exact count.
        let first = valueStack.count
        repeat {
            valueStack.append(try parseValue())
        } while try continueAfterMember(closing: UInt8(ascii: "]"))
        let elements = takeValues(from: first)
        return .array(elements)
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        if try openContainer(closing: UInt8(ascii: "}")) { return .object(JSONObject()) }
        // Members collect on shared stacks and are copied out once, at their exact count.
        let keyBase = keyStack.count
        let valueBase = valueStack.count
        /// Index for duplicate detection once the object grows large.
        var index: [String: Int]? = nil
        repeat {
            try expectKey()
            let key = try parseString()
            try expectColon()
            let value = try parseValue()

            // Duplicate keys: first position, last value (as JavaScript's JSON.parse).
            let count = keyStack.count - keyBase
            var existing: Int?
            if let idx = index {
                existing = idx[key]
            } else if count < 16 {
                // Comparing lengths first skips most string comparisons.
                let length = key.utf8.count
                var i = keyBase
                while i < keyStack.count {
                    if keyStack[i].utf8.count == length && keyStack[i] == key {
                        existing = i - keyBase
                        break
                    }
                    i += 1
                }
            } else {
                var idx = [String: Int](minimumCapacity: count * 2)
                for i in 0..<count where idx[keyStack[keyBase + i]] == nil { idx[keyStack[keyBase + i]] = i }
                existing = idx[key]
                index = idx
            }
            if let existing {
                valueStack[valueBase + existing] = value
            } else {
                index?[key] = count
                keyStack.append(key)
                valueStack.append(value)
            }
        } while try continueAfterMember(closing: UInt8(ascii: "}"))
        let keys = takeKeys(from: keyBase)
        let values = takeValues(from: valueBase)
        return .object(JSONObject(uncheckedKeys: keys, values: values))
    }

    /// Moves the values from `first` to the top of the stack into a new array (no retain/release
    /// per element) and pops them.
    ///
    /// The array is made with `reserveCapacity`, whose storage type is looked up once and cached:
    /// `Array(unsafeUninitializedCapacity:)` calls the stdlib's unspecialized allocation, which
    /// looks the generic metadata up in the runtime's hash table on every call.
    private mutating func takeValues(from first: Int) -> [JSONValue] {
        let count = valueStack.count - first
        var taken: [JSONValue] = []
        taken.reserveCapacity(count)
        valueStack.withUnsafeMutableBufferPointer { stack in
            let source = stack.baseAddress! + first
            for i in 0..<count { taken.append((source + i).move()) }
            source.initialize(repeating: .null, count: count)  // trivial values, nothing to release
        }
        valueStack.removeLast(count)
        return taken
    }

    /// Moves the keys from `first` to the top of the key stack into a new array and pops them
    /// (made as in `takeValues`).
    private mutating func takeKeys(from first: Int) -> [String] {
        let count = keyStack.count - first
        var taken: [String] = []
        taken.reserveCapacity(count)
        keyStack.withUnsafeMutableBufferPointer { stack in
            let source = stack.baseAddress! + first
            for i in 0..<count { taken.append((source + i).move()) }
            source.initialize(repeating: "", count: count)  // empty strings own no storage
        }
        keyStack.removeLast(count)
        return taken
    }

    // MARK: Strings

    /// Parses a string starting at the opening quote.
    mutating func parseString() throws(JSONParseError) -> String {
        let start = pos + 1
        guard let (text, ascii) = try scanPlainString() else { return try parseEscapedString(from: start) }
        guard ascii || Self.isValidUTF8(text) else { throw JSONParseError(.invalidUTF8, at: start) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Whether `bytes` are well-formed UTF-8, as `String(validating:as:)` decides (no overlong
    /// forms, surrogates, or values beyond U+10FFFF), without its generic code's runtime
    /// metadata lookups.
    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        let n = bytes.count
        while i < n {
            let lead = bytes[i]
            if lead < 0x80 {
                i += 1
                continue
            }
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0...0xEF:
                length = 3
                if lead == 0xE0 { low = 0xA0 }  // overlong
                if lead == 0xED { high = 0x9F }  // surrogates
            case 0xF0...0xF4:
                length = 4
                if lead == 0xF0 { low = 0x90 }  // overlong
                if lead == 0xF4 { high = 0x8F }  // beyond U+10FFFF
            default: return false
            }
            guard i + length <= n, bytes[i + 1] >= low, bytes[i + 1] <= high else { return false }
            for j in (i + 2)..<(i + length) where bytes[j] & 0xC0 != 0x80 { return false }
            i += length
        }
        return true
    }

    /// Reads a string without escapes from its opening quote to after its closing one, returning
    /// its text and whether that is ASCII; `nil` at the first backslash (`pos` is left there).
    @inline(__always)
    mutating func scanPlainString() throws(JSONParseError) -> (text: UnsafeBufferPointer<UInt8>, ascii: Bool)? {
        pos += 1  // opening quote
        let start = pos
        var ascii = true
        // Eight bytes at a time while none of them ends the string or breaks its rules; the eight
        // that do are read one by one (up to `bytewiseUntil`).
        var bytewiseUntil = pos
        while pos < end {
            if pos >= bytewiseUntil && end - pos >= 8 {
                let word = UnsafeRawPointer(base + pos).loadUnaligned(as: UInt64.self)
                if !Self.mayEndPlainString(word) {
                    if word & 0x8080_8080_8080_8080 != 0 { ascii = false }
                    pos += 8
                    continue
                }
                bytewiseUntil = pos + 8
            }
            let byte = base[pos]
            if byte == UInt8(ascii: "\"") {
                pos += 1
                return (UnsafeBufferPointer(start: base + start, count: pos - 1 - start), ascii)
            }
            if byte == UInt8(ascii: "\\") { return nil }
            if byte < 0x20 { throw JSONParseError(.controlCharacterInString, at: pos) }
            if byte >= 0x80 { ascii = false }
            pos += 1
        }
        throw JSONParseError(.unexpectedEnd, at: pos)
    }

    /// Whether any of the eight bytes in `word` is a quote, a backslash or a control character
    /// (below 0x20): exact for "any" (a borrow reaches a higher byte only from a byte that
    /// matches), so a word without them is plain string text.
    @inline(__always)
    static func mayEndPlainString(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quotes = word ^ (ones &* 0x22)
        let backslashes = word ^ (ones &* 0x5C)
        let control = (word &- ones &* 0x20) & ~word
        let quote = (quotes &- ones) & ~quotes
        let backslash = (backslashes &- ones) & ~backslashes
        return (control | quote | backslash) & highs != 0
    }

    /// Continues a string that contains escapes; `pos` is at the first backslash.
    mutating func parseEscapedString(from start: Int) throws(JSONParseError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(start: base + start, count: pos - start))
        while pos < end {
            let byte = base[pos]
            if byte == UInt8(ascii: "\"") {
                pos += 1
                let valid = scratch.withUnsafeBufferPointer { Self.isValidUTF8($0) }
                guard valid else { throw JSONParseError(.invalidUTF8, at: start) }
                return String(decoding: scratch, as: UTF8.self)
            }
            if byte < 0x20 { throw JSONParseError(.controlCharacterInString, at: pos) }
            if byte != UInt8(ascii: "\\") {
                scratch.append(byte)
                pos += 1
                continue
            }
            let escapeStart = pos
            pos += 1
            guard pos < end else { throw JSONParseError(.unexpectedEnd, at: pos) }
            let escaped = base[pos]
            pos += 1
            switch escaped {
            case UInt8(ascii: "\""): scratch.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): scratch.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): scratch.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4(escapeStart: escapeStart)
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    // High surrogate: a low surrogate escape must follow, else U+FFFD.
                    if pos + 1 < end && base[pos] == UInt8(ascii: "\\") && base[pos + 1] == UInt8(ascii: "u") {
                        let save = pos
                        pos += 2
                        let low = try parseHex4(escapeStart: save)
                        if low >= 0xDC00 && low < 0xE000 {
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            scalar = 0xFFFD
                            pos = save  // re-read the second escape on its own
                        }
                    } else {
                        scalar = 0xFFFD
                    }
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    scalar = 0xFFFD  // lone low surrogate
                }
                appendUTF8(scalar)
            default:
                throw JSONParseError(.invalidEscape, at: escapeStart)
            }
        }
        throw JSONParseError(.unexpectedEnd, at: pos)
    }

    private mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt32 {
        guard pos + 4 <= end else { throw JSONParseError(.unexpectedEnd, at: end) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = base[pos]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte &- UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte &- UInt8(ascii: "a") &+ 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte &- UInt8(ascii: "A") &+ 10
            default: throw JSONParseError(.invalidEscape, at: escapeStart)
            }
            value = value << 4 | UInt32(digit)
            pos += 1
        }
        return value
    }

    private mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (scalar >> 6)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (scalar >> 12)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (scalar >> 18)))
            scratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }

    // MARK: Numbers

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = pos
        var negative = false
        if base[pos] == UInt8(ascii: "-") {
            negative = true
            pos += 1
        }
        guard pos < end else { throw JSONParseError(.unexpectedEnd, at: pos) }

        // Integer part: "0" or [1-9][0-9]*
        var mantissa: UInt64 = 0
        var significantDigits = 0
        var mantissaOverflow = false
        let first = base[pos]
        if first == UInt8(ascii: "0") {
            pos += 1
            if pos < end, base[pos] >= UInt8(ascii: "0"), base[pos] <= UInt8(ascii: "9") {
                throw JSONParseError(.invalidNumber, at: start)  // leading zero
            }
        } else if first >= UInt8(ascii: "1") && first <= UInt8(ascii: "9") {
            while pos < end {
                let byte = base[pos]
                guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { break }
                if significantDigits < 19 {
                    mantissa = mantissa &* 10 &+ UInt64(byte &- UInt8(ascii: "0"))
                    significantDigits += 1
                } else {
                    mantissaOverflow = true
                }
                pos += 1
            }
        } else {
            throw JSONParseError(.invalidNumber, at: start)
        }

        var isInteger = true
        var fractionDigits = 0
        if pos < end && base[pos] == UInt8(ascii: ".") {
            isInteger = false
            pos += 1
            let fractionStart = pos
            while pos < end {
                let byte = base[pos]
                guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { break }
                if significantDigits < 19 {
                    if mantissa != 0 || byte != UInt8(ascii: "0") { significantDigits += 1 }
                    mantissa = mantissa &* 10 &+ UInt64(byte &- UInt8(ascii: "0"))
                    fractionDigits += 1
                } else {
                    mantissaOverflow = true
                }
                pos += 1
            }
            if pos == fractionStart { throw JSONParseError(.invalidNumber, at: start) }
        }
        var exponent = 0
        if pos < end && (base[pos] == UInt8(ascii: "e") || base[pos] == UInt8(ascii: "E")) {
            isInteger = false
            pos += 1
            var negativeExponent = false
            if pos < end && (base[pos] == UInt8(ascii: "+") || base[pos] == UInt8(ascii: "-")) {
                negativeExponent = base[pos] == UInt8(ascii: "-")
                pos += 1
            }
            let exponentStart = pos
            while pos < end {
                let byte = base[pos]
                guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { break }
                if exponent < 100_000 { exponent = exponent * 10 + Int(byte &- UInt8(ascii: "0")) }
                pos += 1
            }
            if pos == exponentStart { throw JSONParseError(.invalidNumber, at: start) }
            if negativeExponent { exponent = -exponent }
        }

        if isInteger && !mantissaOverflow {
            if negative {
                if mantissa == 0 { return .double(-0.0) }
                if mantissa <= UInt64(Int64.max) + 1 { return .int(Int64(truncatingIfNeeded: 0 &- mantissa)) }
            } else if mantissa <= UInt64(Int64.max) {
                return .int(Int64(mantissa))
            }
        }

        // Clinger's fast path: exact when the mantissa and the power of ten are exact doubles.
        let decimalExponent = exponent - fractionDigits
        if !mantissaOverflow && mantissa <= (1 << 53) && decimalExponent >= -22 && decimalExponent <= 22 {
            var value = Double(mantissa)
            if decimalExponent < 0 {
                value /= JSONParser.powersOfTen[-decimalExponent]
            } else {
                value *= JSONParser.powersOfTen[decimalExponent]
            }
            return .double(negative ? -value : value)
        }
        let text = String(decoding: UnsafeBufferPointer(start: base + start, count: pos - start), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw JSONParseError(.invalidNumber, at: start) }
        return .double(value)
    }

    private static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]
}
