import CoatyFilter
public import CoatyModel

/// The payload of a Coaty communication event, in its exact wire form.
///
/// Every event data type reads itself from the JSON object of a received payload, applying the
/// protocol's validation rules, and writes itself back with absent optional fields left out. The
/// `Codable` conformance goes through ``JSONValue``, so ``JSONValueEncoder``/``JSONValueDecoder``
/// (and Foundation's coders) produce the same wire form; objects are decoded with the
/// ``CoatyObjectRegistry`` found in the decoder's ``JSONValueDecoder/registry`` or
/// `userInfo[CoatyObjectRegistry.userInfoKey]`.
public protocol CommunicationEventData: Sendable, Codable {
    /// The event type whose payload this is.
    static var eventType: CommunicationEventType { get }

    /// Reads and validates a received payload.
    ///
    /// - Parameters:
    ///   - json: the payload's JSON object.
    ///   - registry: the registry that decodes the objects the payload carries.
    /// - Throws: ``CommunicationEventDataError`` when the payload breaks a protocol rule.
    init(json: JSONObject, registry: CoatyObjectRegistry) throws(CommunicationEventDataError)

    /// The payload's JSON object, absent optional fields left out.
    var json: JSONObject { get }
}

/// A received payload that breaks a rule of the Coaty protocol; such events are dropped (logged
/// at debug level and counted), never delivered.
public struct CommunicationEventDataError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The event type of the payload.
    public var eventType: CommunicationEventType
    /// What is wrong, naming the field.
    public var reason: String

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - eventType: the event type of the payload.
    ///   - reason: what is wrong, naming the field.
    public init(_ eventType: CommunicationEventType, _ reason: String) {
        self.eventType = eventType
        self.reason = reason
    }

    /// A message that names the event, the field and the rule.
    public var description: String {
        "Invalid \(eventType.name) payload: \(reason). The sender must follow the Coaty protocol v3 payload rules."
    }
}

extension CommunicationEventData {
    /// Decodes the payload through its JSON form.
    ///
    /// - Parameter decoder: the decoder; its registry decodes the carried objects.
    /// - Throws: ``CommunicationEventDataError`` or a `DecodingError`.
    public init(from decoder: any Decoder) throws {
        let value = try JSONValue(from: decoder)
        guard case .object(let object) = value else {
            throw CommunicationEventDataError(Self.eventType, "the payload is not a JSON object")
        }
        let registry =
            (decoder.userInfo[CoatyObjectRegistry.userInfoKey] as? CoatyObjectRegistry)
            ?? CoatyObjectRegistry.coreTypesOnly
        try self.init(json: object, registry: registry)
    }

    /// Encodes the payload's JSON form.
    ///
    /// - Parameter encoder: the encoder.
    /// - Throws: whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        try JSONValue.object(json).encode(to: encoder)
    }

    /// Parses and validates a received payload from its UTF-8 bytes.
    ///
    /// - Parameters:
    ///   - bytes: the payload.
    ///   - registry: the registry that decodes carried objects.
    /// - Throws: ``CommunicationEventDataError`` for invalid JSON or a broken rule.
    public init(bytes: [UInt8], registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        try self.init(json: Self.parsePayload(bytes), registry: registry)
    }

    /// The payload's JSON object.
    static func parsePayload(_ bytes: [UInt8]) throws(CommunicationEventDataError) -> JSONObject {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: bytes)
        } catch {
            throw CommunicationEventDataError(Self.eventType, "not JSON (\(error))")
        }
        guard case .object(let object) = value else {
            throw CommunicationEventDataError(Self.eventType, "the payload is not a JSON object")
        }
        return object
    }

    /// The payload's compact UTF-8 JSON text.
    public var payloadBytes: [UInt8] { json.serializedBytes() }
}

/// A payload that carries one Coaty object in its `object` member (Advertise, Channel, Resolve,
/// Update, Complete): received, that object is decoded straight from the payload's text.
protocol ObjectCarryingPayload: CommunicationEventData {
    /// Reads the payload's fields from `reader`.
    init(reader: PayloadReader) throws(CommunicationEventDataError)
}

extension ObjectCarryingPayload {
    /// Reads a received payload from its UTF-8 bytes, as ``CommunicationEventData/init(bytes:registry:)``
    /// does (the same result and the same errors), decoding the `object` member straight from the
    /// text without parsing the payload into a tree first; its ``AnyCoatyObject/json`` is parsed
    /// from the text when first asked for. A payload outside that path (see
    /// `PayloadReader.init(indexing:eventType:registry:)`) is parsed as a whole; when its object
    /// was invalid, the object's `init(from:)` has then run twice.
    init(receivedBytes bytes: [UInt8], registry: CoatyObjectRegistry) throws(CommunicationEventDataError) {
        if let reader = PayloadReader(indexing: bytes, eventType: Self.eventType, registry: registry) {
            try self.init(reader: reader)
        } else {
            try self.init(json: Self.parsePayload(bytes), registry: registry)
        }
    }
}

// MARK: Field helpers

/// Reads the fields of a received payload, throwing a ``CommunicationEventDataError`` that names
/// the offending field.
struct PayloadReader {
    let json: JSONObject
    let eventType: CommunicationEventType
    let registry: CoatyObjectRegistry
    /// The `object` member, decoded straight from the payload's text (then `json` lacks it).
    private var decodedObject: AnyCoatyObject?

    init(json: JSONObject, eventType: CommunicationEventType, registry: CoatyObjectRegistry) {
        self.json = json
        self.eventType = eventType
        self.registry = registry
    }

    /// A reader over a received payload's text whose `object` member, an object, is decoded
    /// straight from the text (`CoatyObjectRegistry.decodeReceived`) and keeps that text as its
    /// JSON; the other members are parsed as usual. `nil` when the payload is outside that path
    /// (no object-valued `object`, a key with escapes or repeated, invalid text or an invalid
    /// object): parse it as a whole then, with the same result or error.
    init?(indexing bytes: [UInt8], eventType: CommunicationEventType, registry: CoatyObjectRegistry) {
        let read = bytes.withUnsafeBufferPointer { buffer -> (JSONObject, AnyCoatyObject)? in
            guard let base = buffer.baseAddress, !buffer.isEmpty else { return nil }
            var parser = JSONParser(reading: base, count: buffer.count, maximumDepth: JSONValue.defaultMaximumDepth)
            var payload: [JSONMemberLocation] = []
            payload.reserveCapacity(4)
            var members: [JSONMemberLocation] = []
            var objectRange: Range<Int>?
            var objectDepth = 0
            do {
                parser.skipWhitespace()
                let indexed = try parser.indexObject(into: &payload) { parser, key throws(JSONParseError) in
                    // Compared as bytes: the generic `elementsEqual` cost ten times as much per message.
                    guard bytesEqual(key, 0, key.count, "object"), try parser.peek() == UInt8(ascii: "{") else {
                        return false
                    }
                    let start = parser.pos
                    objectDepth = parser.depth + 1
                    members.reserveCapacity(16)
                    guard try parser.indexObject(into: &members) else { throw JSONParseError(.unexpectedEnd, at: -1) }
                    objectRange = start..<parser.pos
                    return true
                }
                parser.skipWhitespace()
                guard indexed, parser.pos == buffer.count, let objectRange else { return nil }
                let top = ObjectBytes(text: bytes, members: payload, depth: 1)
                let object = ObjectBytes(text: bytes, members: members, depth: objectDepth)
                guard
                    let decoded = registry.decodeReceived(
                        object,
                        received: ReceivedJSON(payload: bytes, range: objectRange)
                    )
                else { return nil }
                var rest = JSONObject()
                for i in payload.indices where payload[i].valueStart != objectRange.lowerBound {
                    rest.appendUnchecked(top.key(at: i), top.value(at: i))
                }
                return top.unsupported ? nil : (rest, decoded)
            } catch {
                return nil
            }
        }
        guard let (rest, object) = read else { return nil }
        self.init(json: rest, eventType: eventType, registry: registry)
        decodedObject = object
    }

    func fail(_ reason: String) -> CommunicationEventDataError {
        CommunicationEventDataError(eventType, reason)
    }

    /// The value of `key`, treating `null` as absent for optional fields.
    func optional(_ key: String) -> JSONValue? {
        guard let value = json[key], !value.isNull else { return nil }
        return value
    }

    func object(_ key: String) throws(CommunicationEventDataError) -> AnyCoatyObject? {
        if key == "object", let decodedObject { return decodedObject }
        guard let value = optional(key) else { return nil }
        return try decodeObject(value, field: key)
    }

    func requiredObject(_ key: String) throws(CommunicationEventDataError) -> AnyCoatyObject {
        guard let object = try object(key) else { throw fail("'\(key)' is missing") }
        return object
    }

    /// The object of an Advertise or Update: one whose object type can be a topic level
    /// (`ADV::<objectType>`), so that it can be advertised or updated again (PROTOCOL.md:
    /// "objectType valid").
    func requiredTopicObject(_ key: String) throws(CommunicationEventDataError) -> AnyCoatyObject {
        let object = try requiredObject(key)
        guard isValidTopicComponent(object.objectType) else {
            throw fail("'\(key).objectType' must not contain '/', '+', '#' or NUL")
        }
        return object
    }

    func objects(_ key: String) throws(CommunicationEventDataError) -> [AnyCoatyObject]? {
        guard let value = optional(key) else { return nil }
        guard case .array(let array) = value else { throw fail("'\(key)' must be an array of objects") }
        var result: [AnyCoatyObject] = []
        result.reserveCapacity(array.count)
        for (index, element) in array.enumerated() {
            result.append(try decodeObject(element, field: "\(key)[\(index)]"))
        }
        return result
    }

    func decodeObject(_ value: JSONValue, field: String) throws(CommunicationEventDataError) -> AnyCoatyObject {
        do {
            return try registry.decode(value)
        } catch {
            throw fail("'\(field)' is not a valid Coaty object (\(error))")
        }
    }

    func privateData() throws(CommunicationEventDataError) -> JSONObject? {
        guard let value = optional("privateData") else { return nil }
        guard case .object(let object) = value else { throw fail("'privateData' must be an object") }
        return object
    }

    func string(_ key: String) throws(CommunicationEventDataError) -> String? {
        guard let value = optional(key) else { return nil }
        guard case .string(let string) = value else { throw fail("'\(key)' must be a string") }
        return string
    }

    func uuid(_ key: String) throws(CommunicationEventDataError) -> CoatyUUID? {
        guard let string = try string(key) else { return nil }
        guard let uuid = CoatyUUID(string) else { throw fail("'\(key)' must be a UUID") }
        return uuid
    }

    func strings(_ key: String) throws(CommunicationEventDataError) -> [String]? {
        guard let value = optional(key) else { return nil }
        guard case .array(let array) = value else { throw fail("'\(key)' must be an array of strings") }
        var result: [String] = []
        result.reserveCapacity(array.count)
        for element in array {
            guard case .string(let string) = element else { throw fail("'\(key)' must be an array of strings") }
            result.append(string)
        }
        return result
    }

    func objectTypes() throws(CommunicationEventDataError) -> [String]? {
        guard let types = try strings("objectTypes") else { return nil }
        for type in types where type.isEmpty {
            throw fail("'objectTypes' must not contain an empty object type")
        }
        return types
    }

    func coreTypes() throws(CommunicationEventDataError) -> [CoreType]? {
        guard let names = try strings("coreTypes") else { return nil }
        var result: [CoreType] = []
        for name in names {
            guard let type = CoreType(rawValue: name) else {
                throw fail("'coreTypes' names unknown core type '\(name)'")
            }
            result.append(type)
        }
        return result
    }

    func decode<T: Decodable>(_ type: T.Type, _ key: String) throws(CommunicationEventDataError) -> T? {
        guard let value = optional(key) else { return nil }
        do {
            return try JSONValueDecoder(registry: registry).decode(T.self, from: value)
        } catch {
            throw fail("'\(key)' is invalid (\(error))")
        }
    }
}

/// Builds the JSON object of an outgoing payload, leaving out absent fields.
struct PayloadWriter {
    var json = JSONObject()

    mutating func set(_ key: String, _ value: JSONValue?) {
        if let value { json[key] = value }
    }

    mutating func set(_ key: String, _ object: AnyCoatyObject?) {
        if let object { json[key] = .object(object.json) }
    }

    mutating func set(_ key: String, _ objects: [AnyCoatyObject]?) {
        if let objects { json[key] = .array(objects.map { .object($0.json) }) }
    }

    mutating func set(_ key: String, _ object: JSONObject?) {
        if let object { json[key] = .object(object) }
    }

    mutating func set(_ key: String, _ strings: [String]?) {
        if let strings { json[key] = .array(strings.map { .string($0) }) }
    }

    mutating func set<T: Encodable>(encoding key: String, _ value: T?) {
        guard let value else { return }
        // Filter and join types encode to JSON values without failure.
        if let encoded = try? JSONValueEncoder().encode(value) { json[key] = encoded }
    }
}

extension AnyCoatyObject {
    /// The bytes of a `{"object":…,"privateData":…}` payload (Advertise, single-object Channel, Resolve),
    /// encoded straight from the Swift value: the same bytes as the payload of the wrapped object,
    /// without building its JSON tree; an ``AnyCoatyObject`` that has its text (received, or read
    /// from a store) is written as that text.
    static func payloadBytes<T: CoatyObject>(
        object: T,
        privateData: JSONObject?
    ) throws(CommunicationError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(384)
        out.append(contentsOf: #"{"object":"#.utf8)
        let start = out.count
        if T.self == AnyCoatyObject.self {
            // Received (or read from a store) with its text: those bytes as they are; else its JSON.
            let any = _identityCast(object, to: AnyCoatyObject.self)
            if !any.appendReceivedText(to: &out) { JSONSerializer.writeObject(any.json, to: &out) }
        } else {
            do {
                try JSONValueEncoder().encode(object, appendingTo: &out)
                // As `AnyCoatyObject.init`: a type encoding itself as an array or a single value is
                // not a Coaty object.
                guard out[start] == UInt8(ascii: "{") else {
                    throw EncodingError.invalidValue(
                        object,
                        .init(codingPath: [], debugDescription: "A Coaty object must encode to a JSON object")
                    )
                }
            } catch {
                throw .encodingFailed(objectType: object.objectType, reason: "\(error)")
            }
        }
        if let privateData {
            out.append(contentsOf: #","privateData":"#.utf8)
            JSONSerializer.writeObject(privateData, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Wraps an object for a payload, using the value as is when it already is an ``AnyCoatyObject``.
    package static func wrapping<T: CoatyObject>(_ object: T) throws(CommunicationError) -> AnyCoatyObject {
        if let any = object as? AnyCoatyObject { return any }
        do {
            return try AnyCoatyObject(object)
        } catch {
            throw .encodingFailed(objectType: object.objectType, reason: "\(error)")
        }
    }
}
