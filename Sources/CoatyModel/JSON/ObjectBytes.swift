/// A JSON object's UTF-8 text with its members located (`JSONParser.indexObject`), read by a root
/// ``ValueDecoder`` member by member: each value is parsed when a container asks for it, and
/// nothing else is built.
///
/// Answers equal the parsed object's: values come from the same parser, the text was validated
/// when it was indexed, and what a location index cannot answer the same way sets
/// ``unsupported`` so the caller decodes again from the parsed object. It keeps the text (the
/// whole payload array) and reaches its bytes only inside each call, so a container a type keeps
/// beyond its `init(from:)` stays safe to use.
package final class ObjectBytes {
    /// The text (a whole received payload; the object is a part of it).
    private let text: [UInt8]
    /// The members, in order (no repeated keys, every key ASCII without escapes).
    package let members: [JSONMemberLocation]
    /// The nesting depth of the members' values in the text (1 for a payload's own members), so
    /// values nest exactly as validated.
    private let depth: Int
    /// Set when a request was not answered as the parsed object would answer it. Used by one
    /// synchronous decode at a time; no exclusivity checks needed.
    @exclusivity(unchecked) package var unsupported = false

    /// - Parameters:
    ///   - text: the validated text the members lie in.
    ///   - members: the located members.
    ///   - depth: the depth of the members' values.
    package init(text: [UInt8], members: [JSONMemberLocation], depth: Int) {
        self.text = text
        self.members = members
        self.depth = depth
    }

    /// The members of the object that `text` is, as a whole (whitespace around it aside); `nil`
    /// when the text is no object, is invalid, or is outside what a member index answers exactly
    /// (see `JSONParser.indexObject`): parse it then.
    /// - Parameter text: a UTF-8 JSON text.
    package convenience init?(indexing text: [UInt8]) {
        let members = text.withUnsafeBufferPointer { buffer -> [JSONMemberLocation]? in
            guard let base = buffer.baseAddress else { return nil }
            var parser = JSONParser(reading: base, count: buffer.count, maximumDepth: JSONValue.defaultMaximumDepth)
            var members: [JSONMemberLocation] = []
            members.reserveCapacity(16)
            do {
                parser.skipWhitespace()
                guard try parser.indexObject(into: &members) else { return nil }
                parser.skipWhitespace()
                return parser.pos == buffer.count ? members : nil
            } catch {
                return nil
            }
        }
        guard let members else { return nil }
        self.init(text: text, members: members, depth: 1)
    }

    /// The member index of `name`, searching from `start` on and wrapping around.
    func index(of name: String, from start: Int = 0) -> Int? {
        var name = name
        let found = name.withUTF8 { utf8 -> Int? in
            text.withUnsafeBufferPointer { text -> Int? in
                let count = members.count
                guard count > 0, let key = utf8.baseAddress, let base = text.baseAddress else { return nil }
                var i = start < count ? start : 0
                for _ in 0..<count {
                    let member = members[i]
                    if member.keyEnd - member.keyStart == utf8.count
                        && memcmpBytes(base + member.keyStart, key, utf8.count)
                    {
                        return i
                    }
                    i += 1
                    if i == count { i = 0 }
                }
                return nil
            }
        }
        // Keys here are ASCII; a non-ASCII name can still equal one under Unicode canonical
        // equivalence (U+212A KELVIN SIGN is "K"), as `String ==` decides for the parsed object.
        if found == nil && name.utf8.contains(where: { $0 >= 0x80 }) { unsupported = true }
        return found
    }

    /// The key of member `i`.
    package func key(at i: Int) -> String {
        let member = members[i]
        return String(decoding: text[member.keyStart..<member.keyEnd], as: UTF8.self)
    }

    /// The value of member `i`, parsed from the text.
    package func value(at i: Int) -> JSONValue {
        let start = members[i].valueStart
        let parsed = text.withUnsafeBufferPointer { text -> JSONValue? in
            var parser = JSONParser(
                reading: text.baseAddress!,
                count: text.count,
                maximumDepth: JSONValue.defaultMaximumDepth
            )
            parser.pos = start
            parser.depth = depth
            return try? parser.parseValue()
        }
        guard let parsed else {
            // Unreachable: the text was validated when it was indexed.
            unsupported = true
            return .null
        }
        return parsed
    }

    /// The value of member `i` as a UUID when it is a UUID string without escapes, else `nil`.
    func plainUUID(at i: Int) -> CoatyUUID? {
        let member = members[i]
        guard member.valueEnd - member.valueStart == 38, text[member.valueStart] == UInt8(ascii: "\"") else {
            return nil
        }
        return text.withUnsafeBytes {
            CoatyUUID.parse(UnsafeRawBufferPointer(rebasing: $0[(member.valueStart + 1)..<(member.valueEnd - 1)]))
        }
    }

    /// The first byte of member `i`'s value.
    func firstByte(at i: Int) -> UInt8 { text[members[i].valueStart] }

    /// The object id when the members are what ``BaseObject`` reads from a valid object (as
    /// `BaseObject(validMembersOf:objectType:)` checks them on the parsed object: `objectId` a
    /// UUID string, `name` a string, `externalId` null or a string, `parentObjectId` and
    /// `locationId` null or a UUID string, `isDeactivated` null or a Boolean), else `nil`. The text
    /// was validated when it was indexed, so a value's first byte tells its kind.
    func validBaseObjectId() -> CoatyUUID? {
        let (quote, null, yes, no) = (UInt8(ascii: "\""), UInt8(ascii: "n"), UInt8(ascii: "t"), UInt8(ascii: "f"))
        var objectId: CoatyUUID?
        var hasName = false
        // One pass over the members, each key compared only with the names of its length.
        let valid = text.withUnsafeBufferPointer { text -> Bool in
            guard let base = text.baseAddress else { return false }
            for (i, member) in members.enumerated() {
                func keyIs(_ name: StaticString) -> Bool {
                    member.keyEnd - member.keyStart == name.utf8CodeUnitCount
                        && memcmpBytes(base + member.keyStart, name.utf8Start, name.utf8CodeUnitCount)
                }
                let first = text[member.valueStart]
                switch member.keyEnd - member.keyStart {
                case 8 where keyIs("objectId"):
                    objectId = uuid(at: i)
                    if objectId == nil { return false }
                case 4 where keyIs("name"):
                    guard first == quote else { return false }
                    hasName = true
                case 10 where keyIs("externalId"):
                    guard first == null || first == quote else { return false }
                case 10 where keyIs("locationId"), 14 where keyIs("parentObjectId"):
                    guard first == null || uuid(at: i) != nil else { return false }
                case 13 where keyIs("isDeactivated"):
                    guard first == null || first == yes || first == no else { return false }
                default:
                    continue
                }
            }
            return true
        }
        return valid && hasName ? objectId : nil
    }

    /// The value of member `i` as a UUID when it is a string of one (escaped or not), else `nil`.
    func uuid(at i: Int) -> CoatyUUID? {
        if let plain = plainUUID(at: i) { return plain }
        guard firstByte(at: i) == UInt8(ascii: "\""), case .string(let text) = value(at: i) else { return nil }
        return CoatyUUID(text)
    }

    /// All members as a parsed object (for a type that reads the whole value through the root decoder).
    var object: JSONObject {
        var object = JSONObject()
        object.reserveCapacity(members.count)
        for i in members.indices { object.appendUnchecked(key(at: i), value(at: i)) }
        return object
    }
}

extension JSONValueDecoder {
    /// Decodes a Coaty object whose header the caller has validated, reading its members from the
    /// indexed text; `nil` when the text cannot answer as the parsed object would (decode that
    /// instead). Errors are not the tree decoder's (their object details are missing): on an
    /// error, decode the parsed object to report it.
    func decodeValidatedObject<T: CoatyObject>(_ type: T.Type, from bytes: ObjectBytes) throws -> T? {
        let context = DecodingContext(self)
        let decoder = ValueDecoder(bytes: bytes, context: context)
        let result = try context.decodeObject(T.self, JSONObject(), decoder)
        return bytes.unsupported ? nil : result
    }
}
