/// Where one member of a JSON object lies in the object's UTF-8 text.
package struct JSONMemberLocation {
    /// The first byte of the key (after its opening quote).
    var keyStart: Int
    /// The key's closing quote.
    var keyEnd: Int
    /// The first byte of the value.
    package var valueStart: Int
    /// The byte after the value.
    var valueEnd: Int
}

extension JSONParser {
    /// The most members `indexObject` locates; larger objects are parsed as a whole.
    static let maximumIndexedMembers = 64

    /// Validates a string exactly as `parseString` does, without making the `String` (only a string
    /// with escapes is built, to check it as the parser does).
    mutating func skipString() throws(JSONParseError) {
        let start = pos + 1
        guard let (text, ascii) = try scanPlainString() else {
            _ = try parseEscapedString(from: start)
            return
        }
        if !ascii && !Self.isValidUTF8(text) { throw JSONParseError(.invalidUTF8, at: start) }
    }

    /// Validates the value at `pos` exactly as `parseValue` does (same errors, same depth limit),
    /// without building it.
    mutating func skipValue() throws(JSONParseError) {
        let byte = try peek()
        switch byte {
        case UInt8(ascii: "\""):
            try skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            let isObject = byte == UInt8(ascii: "{")
            let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
            if try openContainer(closing: close) { return }
            repeat {
                if isObject {
                    try expectKey()
                    try skipString()
                    try expectColon()
                }
                try skipValue()
            } while try continueAfterMember(closing: close)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            _ = try parseNumber()
        case UInt8(ascii: "t"):
            try expectLiteral("true")
        case UInt8(ascii: "f"):
            try expectLiteral("false")
        case UInt8(ascii: "n"):
            try expectLiteral("null")
        default:
            throw JSONParseError(.unexpectedCharacter(byte), at: pos)
        }
    }

    /// Validates the object at `pos` (its `{`) as `parseValue` does and records where each member
    /// lies, building nothing.
    ///
    /// Returns `false` when the value at `pos` is not an object, and as soon as the object is
    /// outside what a location index answers exactly like the parsed object: a key with escapes,
    /// non-ASCII or control bytes (or cut off by the end of the text), a repeated key (the parser
    /// keeps its last value at the first position), or more than ``maximumIndexedMembers``
    /// members. Invalid text throws. Either way the caller then parses the text as a whole, which
    /// also reports any error at its exact offset.
    /// - Parameters:
    ///   - members: receives the members, in order.
    ///   - valueReader: called for each member with its key bytes, positioned at the value; returns
    ///     `true` when it read (and validated) the value itself, `false` to have it skipped.
    package mutating func indexObject(
        into members: inout [JSONMemberLocation],
        valueReader: (inout JSONParser, UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> Bool = { _, _ in false }
    ) throws(JSONParseError) -> Bool {
        guard try peek() == UInt8(ascii: "{") else { return false }
        if try openContainer(closing: UInt8(ascii: "}")) { return true }
        repeat {
            try expectKey()
            guard members.count < Self.maximumIndexedMembers else { return false }
            pos += 1
            let keyStart = pos
            while true {
                guard pos < end else { return false }
                let byte = base[pos]
                if byte == UInt8(ascii: "\"") { break }
                if byte == UInt8(ascii: "\\") || byte >= 0x80 || byte < 0x20 { return false }
                pos += 1
            }
            let keyEnd = pos
            pos += 1
            let length = keyEnd - keyStart
            for member in members where member.keyEnd - member.keyStart == length {
                if memcmpBytes(base + member.keyStart, base + keyStart, length) { return false }
            }
            try expectColon()
            let valueStart = pos
            if try !valueReader(&self, UnsafeBufferPointer(start: base + keyStart, count: length)) {
                try skipValue()
            }
            members.append(
                JSONMemberLocation(keyStart: keyStart, keyEnd: keyEnd, valueStart: valueStart, valueEnd: pos)
            )
        } while try continueAfterMember(closing: UInt8(ascii: "}"))
        return true
    }
}

/// Whether `count` bytes at `a` and `b` are equal: eight bytes at a time, then the rest (a topic of 70 bytes is nine
/// comparisons instead of seventy, without a call into the C library).
@inline(__always)
package func memcmpBytes(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
    var i = 0
    let (x, y) = (UnsafeRawPointer(a), UnsafeRawPointer(b))
    while i + 8 <= count {
        if x.loadUnaligned(fromByteOffset: i, as: UInt64.self) != y.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
            return false
        }
        i += 8
    }
    while i < count {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}
