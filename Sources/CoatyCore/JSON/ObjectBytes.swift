/// A JSON object's UTF-8 text with its members located (`JSONParser.indexObject`), read by a root
/// ``ValueDecoder`` member by member: each value is parsed when a container asks for it, and
/// nothing else is built. Valid only while the text's memory is.
///
/// Every answer equals the parsed object's: values come from the same parser, the text was
/// validated when it was indexed, and what a location index cannot answer the same way sets
/// ``unsupported`` so the caller decodes again from the parsed object.
final class ObjectBytes {
    /// The members, in order (no repeated keys, every key ASCII without escapes).
    let members: [JSONMemberLocation]
    // Used by one synchronous decode at a time; no exclusivity checks needed.
    @exclusivity(unchecked) private var parser: JSONParser
    /// The nesting depth of the object's members in the text, so values nest exactly as validated.
    private let depth: Int
    /// Set when a request was not answered as the parsed object would answer it.
    @exclusivity(unchecked) var unsupported = false

    /// - Parameters:
    ///   - parser: a parser over the whole text (its position does not matter).
    ///   - members: the located members.
    ///   - depth: the depth of the object itself in the text.
    init(parser: JSONParser, members: [JSONMemberLocation], depth: Int) {
        self.parser = parser
        self.members = members
        self.depth = depth
    }

    /// The member index of `name`, searching from `start` on and wrapping around.
    func index(of name: String, from start: Int = 0) -> Int? {
        var name = name
        let found = name.withUTF8 { utf8 -> Int? in
            let count = members.count
            guard count > 0, let key = utf8.baseAddress else { return nil }
            var i = start < count ? start : 0
            for _ in 0..<count {
                let member = members[i]
                if member.keyEnd - member.keyStart == utf8.count
                    && memcmpBytes(parser.base + member.keyStart, key, utf8.count)
                {
                    return i
                }
                i += 1
                if i == count { i = 0 }
            }
            return nil
        }
        // Keys here are ASCII; a non-ASCII name can still equal one under Unicode canonical
        // equivalence (U+212A KELVIN SIGN is "K"), as `String ==` decides for the parsed object.
        if found == nil && name.utf8.contains(where: { $0 >= 0x80 }) { unsupported = true }
        return found
    }

    /// The key of member `i`.
    func key(at i: Int) -> String {
        let member = members[i]
        return String(
            decoding: UnsafeBufferPointer(start: parser.base + member.keyStart, count: member.keyEnd - member.keyStart),
            as: UTF8.self
        )
    }

    /// The value of member `i`, parsed from the text.
    func value(at i: Int) -> JSONValue {
        parser.pos = members[i].valueStart
        parser.depth = depth
        do {
            return try parser.parseValue()
        } catch {
            // Unreachable: the text was validated when it was indexed.
            unsupported = true
            return .null
        }
    }

    /// The text of member `i`'s value when it is a string without escapes (the bytes between the
    /// quotes), else `nil`.
    func plainString(at i: Int) -> UnsafeRawBufferPointer? {
        let member = members[i]
        let start = member.valueStart
        let end = member.valueEnd
        guard end - start >= 2, parser.base[start] == UInt8(ascii: "\"") else { return nil }
        for j in (start + 1)..<(end - 1) where parser.base[j] == UInt8(ascii: "\\") { return nil }
        return UnsafeRawBufferPointer(start: parser.base + start + 1, count: end - start - 2)
    }

    /// The first byte of member `i`'s value.
    func firstByte(at i: Int) -> UInt8 { parser.base[members[i].valueStart] }
}

extension JSONValueDecoder {
    /// Decodes a Coaty object whose header the caller has validated, reading its members from the
    /// indexed text; `nil` when the text cannot answer as the parsed object would (decode that
    /// instead). Errors are thrown as the tree decoder's are, but callers should decode again from
    /// the parsed object to report them: their coding paths and messages are the tree's.
    func decodeValidatedObject<T: CoatyObject>(_ type: T.Type, from bytes: ObjectBytes) throws -> T? {
        let context = DecodingContext(self)
        let decoder = ValueDecoder(bytes: bytes, context: context)
        let result = try context.decodeObject(T.self, JSONObject(), decoder)
        return bytes.unsupported ? nil : result
    }
}
