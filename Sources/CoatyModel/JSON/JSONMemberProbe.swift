/// What a JSON text holds at one top-level member, read without building the document: a
/// store's scan of stored objects (e.g. SQLite evaluating a condition on a property that has no
/// index) asks this for every row.
///
/// Conservative by design: ``missing`` and ``nonNumber`` are certain; anything the probe cannot
/// decide cheaply is ``undecided``, and the caller must treat the row as a candidate for the full
/// evaluation.
package enum JSONMemberProbe: Equatable, Sendable {
    /// The text is a JSON object without that member.
    case missing
    /// The member is an integer below 2^53 in magnitude (exact as a `Double` too).
    case integer(Int64)
    /// The member is a finite non-integral number (or one written with a fraction or exponent)
    /// below 2^53 in magnitude, parsed exactly as `JSONValue(parsing:)` parses it.
    case real(Double)
    /// The member is a string, `true`, `false`, `null`, an array or an object.
    case nonNumber
    /// Not decided: a number at or beyond 2^53, the member twice, a key written with escapes
    /// (which might spell the name), or a text that is not a JSON object.
    case undecided

    /// 2^53: numbers at or beyond it are ``undecided`` (not exact as doubles).
    package static let exactLimit = 9_007_199_254_740_992.0

    /// Probes `text` for the top-level member `key`.
    /// - Parameters:
    ///   - key: the member's name, as its UTF-8 bytes (compared with the keys as written; a key
    ///     written with escapes makes a missing member ``undecided``).
    ///   - text: the JSON text's UTF-8 bytes.
    /// - Returns: what the member holds.
    package static func probe(_ key: UnsafeRawBufferPointer, in text: UnsafeRawBufferPointer) -> JSONMemberProbe {
        guard let base = text.baseAddress?.assumingMemoryBound(to: UInt8.self), text.count > 0 else {
            return .undecided
        }
        var parser = JSONParser(reading: base, count: text.count, maximumDepth: JSONValue.defaultMaximumDepth)
        do throws(JSONParseError) {
            return try parser.probeMember(key)
        } catch {
            return .undecided
        }
    }
}

extension JSONParser {
    /// ``JSONMemberProbe/probe(_:in:)`` from the start of the text.
    fileprivate mutating func probeMember(_ key: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONMemberProbe {
        skipWhitespace()
        guard try peek() == UInt8(ascii: "{") else { return .undecided }
        if try openContainer(closing: UInt8(ascii: "}")) { return .missing }
        var found: JSONMemberProbe?
        var escapedKey = false
        repeat {
            try expectKey()
            let matches: Bool
            let start = pos + 1
            if let plain = try scanPlainString() {
                matches =
                    plain.text.count == key.count
                    && (key.isEmpty
                        || memcmpBytes(
                            plain.text.baseAddress!,
                            key.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            key.count
                        ))
            } else {
                _ = try parseEscapedString(from: start)
                escapedKey = true
                matches = false
            }
            try expectColon()
            if matches {
                // A second member of that name: which one counts is the reader's business.
                if found != nil { return .undecided }
                found = try probeValue()
            } else {
                try skipValue()
            }
        } while try continueAfterMember(closing: UInt8(ascii: "}"))
        skipWhitespace()
        guard pos == end else { return .undecided }
        if let found { return found }
        return escapedKey ? .undecided : .missing
    }

    /// The member value at `pos`, moving past it.
    private mutating func probeValue() throws(JSONParseError) -> JSONMemberProbe {
        switch try peek() {
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            switch try parseNumber() {
            case .int(let value) where Swift.abs(Double(value)) < JSONMemberProbe.exactLimit:
                return .integer(value)
            case .double(let value) where Swift.abs(value) < JSONMemberProbe.exactLimit:
                return .real(value)
            default:
                return .undecided
            }
        default:
            try skipValue()
            return .nonNumber
        }
    }
}
