import CoatySync
import Synchronization

/// Any Coaty object: its wire JSON together with its decoded Swift value.
///
/// Received objects arrive as `AnyCoatyObject` (see `CoatyObjectRegistry.decode(_:)`);
/// re-encoding one writes back exactly the fields received, unknown ones included. Equality and
/// hashing follow the JSON.
///
/// ```swift
/// let any = try AnyCoatyObject(light)
/// any.objectType                 // "com.example.Light"
/// any.as(Light.self)?.isOn       // typed access in one call
/// ```
public struct AnyCoatyObject: Sendable, Hashable, CustomStringConvertible {
    /// The JSON: built, or the received text, parsed when first asked for.
    private let source: Source
    /// The decoded value, or `nil` for a received object that decodes into ``BaseObject`` (a type
    /// nobody registered): its members were validated on the received text, and the value is read
    /// from its JSON when first asked for (see ``value``).
    private let decoded: (any CoatyObject)?
    /// The object id.
    public let objectId: CoatyUUID
    /// The object type.
    public let objectType: String
    /// The core type.
    public let coreType: CoreType

    /// Where the JSON comes from.
    private enum Source: Sendable {
        case built(JSONObject)
        case received(ReceivedJSON)
    }

    /// The decoded value: a registered type, or the struct of the object's core type.
    ///
    /// A received object of a type nobody registered (a generic observer's, a recorder's) is
    /// validated on arrival and decoded into its ``BaseObject`` the first time this is asked for
    /// (once, then kept): a consumer that only forwards or stores the object's text never pays for it.
    public var value: any CoatyObject {
        if let decoded { return decoded }
        switch source {
        case .received(let received): return received.baseObject(objectType: objectType, objectId: objectId)
        // Not reached: a built object carries its value.
        case .built(let json): return ReceivedJSON.baseObject(of: json, objectType: objectType, objectId: objectId)
        }
    }

    /// The object's JSON as received (or as encoded from the value).
    ///
    /// A received object is decoded into ``value`` straight from the payload's text; its JSON
    /// tree is parsed from that text the first time it is asked for (once, then kept). Until the
    /// object is released it keeps the received payload (a few hundred bytes, typically).
    public var json: JSONObject {
        switch source {
        case .built(let json): json
        case .received(let received): received.object
        }
    }

    /// The object's JSON text as received (UTF-8; compact or not, members in the sender's order),
    /// or `nil` for an object built in this process. A store that keeps text writes these bytes
    /// instead of serializing ``json`` again.
    public var receivedText: [UInt8]? {
        guard case .received(let received) = source else { return nil }
        return received.withText { Array($0) }
    }

    /// Appends the object's JSON text as received (or as stored: see
    /// ``CoatyObjectRegistry/decode(_:text:)``) to `out`; `false`, appending nothing, for an object
    /// built in this process. An outgoing payload carries these bytes instead of serializing
    /// ``json`` again.
    package func appendReceivedText(to out: inout [UInt8]) -> Bool {
        guard case .received(let received) = source else { return false }
        received.withText { out.append(contentsOf: $0) }
        return true
    }

    /// Whether this is a received object whose JSON tree was not parsed yet: a store that keeps
    /// text can store ``receivedText`` and read what it needs from it without building the tree.
    package var isJSONDeferred: Bool {
        guard case .received(let received) = source else { return false }
        return !received.isParsed
    }

    /// Whether the JSON is still the received text (for tests).
    var isReceivedText: Bool {
        if case .received = source { return true }
        return false
    }

    package init(json: JSONObject, value: any CoatyObject, objectType: String, coreType: CoreType) {
        self.source = .built(json)
        self.decoded = value
        self.objectId = value.objectId
        self.objectType = objectType
        self.coreType = coreType
    }

    /// A received object whose JSON is the validated text `received`.
    package init(received: ReceivedJSON, value: any CoatyObject, objectType: String, coreType: CoreType) {
        self.source = .received(received)
        self.decoded = value
        self.objectId = value.objectId
        self.objectType = objectType
        self.coreType = coreType
    }

    /// A received object of core type CoatyObject whose members `received` holds, validated as
    /// ``BaseObject`` reads them; its value is decoded when first asked for.
    package init(received: ReceivedJSON, objectId: CoatyUUID, objectType: String) {
        self.source = .received(received)
        self.decoded = nil
        self.objectId = objectId
        self.objectType = objectType
        self.coreType = .coatyObject
    }

    /// Whether the value is decoded on first use rather than on arrival (for tests).
    var isValueDeferred: Bool { decoded == nil }

    /// Wraps a typed object, encoding it to its JSON once.
    /// - Parameter value: the object.
    /// - Throws: `EncodingError` when the value's encoding fails.
    public init<T: CoatyObject>(_ value: T) throws {
        if let already = value as? AnyCoatyObject {
            self = already
            return
        }
        let encoded = try JSONValueEncoder().encode(value)
        guard case .object(let object) = encoded else {
            throw EncodingError.invalidValue(
                value,
                .init(codingPath: [], debugDescription: "A Coaty object must encode to a JSON object")
            )
        }
        self.init(json: object, value: value, objectType: value.objectType, coreType: value.coreType)
    }

    /// The name.
    public var name: String { value.name }
    /// The external id, if any.
    public var externalId: String? { json["externalId"]?.stringValue }
    /// The parent object id, if any.
    public var parentObjectId: CoatyUUID? { json["parentObjectId"]?.stringValue.flatMap(CoatyUUID.init) }
    /// The location id, if any.
    public var locationId: CoatyUUID? { json["locationId"]?.stringValue.flatMap(CoatyUUID.init) }
    /// Whether the object is marked as no longer in use, if it says.
    public var isDeactivated: Bool? { json["isDeactivated"]?.boolValue }
    /// The JSON as a ``JSONValue``.
    public var jsonValue: JSONValue { .object(json) }

    /// The object as `T`, or `nil` when it is not one.
    ///
    /// Returns the decoded value when it is a `T`; otherwise decodes the JSON as `T` when `T`
    /// accepts the object (same object type, or `T` is the struct of the object's core type, so
    /// `as(CoatyTask.self)` works for every Task-based object).
    /// - Parameter type: the type wanted.
    /// - Returns: the typed value, or `nil`.
    public func `as`<T: CoatyObject>(_ type: T.Type) -> T? {
        if T.self == AnyCoatyObject.self { return self as? T }
        // The registered type itself (the common case) without a dynamic cast; a subclass of T, say, takes `as?`.
        if let typed = Self.exactly(value, as: T.self) { return typed }
        if let typed = value as? T { return typed }
        guard T.accepts(objectType: objectType, coreType: coreType) else { return nil }
        return try? JSONValueDecoder().decode(T.self, from: .object(json))
    }

    /// `value` as `T` when its type is exactly `T` (the existential opened, no dynamic cast), else `nil`.
    private static func exactly<U: CoatyObject, T: CoatyObject>(_ value: U, as _: T.Type) -> T? {
        U.self == T.self ? _identityCast(value, to: T.self) : nil
    }

    /// Equal when the JSON is equal.
    public static func == (lhs: AnyCoatyObject, rhs: AnyCoatyObject) -> Bool { lhs.json == rhs.json }

    /// Hashes the JSON.
    public func hash(into hasher: inout Hasher) { hasher.combine(json) }

    /// The compact JSON text.
    public var description: String { json.description }
}

extension AnyCoatyObject: CoatyObject {
    /// `coaty.CoatyObject`: an `AnyCoatyObject` has no static object type; use the instance's.
    public static var objectType: String { CoreType.coatyObject.objectType }

    /// Decodes any Coaty object, using the registry from ``JSONValueDecoder/registry`` or from
    /// `userInfo[CoatyObjectRegistry.userInfoKey]` (core types only when neither is set).
    /// - Parameter decoder: the decoder.
    /// - Throws: ``CoatyObjectError`` or `DecodingError`.
    public init(from decoder: any Decoder) throws {
        let value = try JSONValue(from: decoder)
        guard case .object(let object) = value else { throw CoatyObjectError(.notAnObject) }
        let registry = decoder.userInfo[CoatyObjectRegistry.userInfoKey] as? CoatyObjectRegistry
        self = try (registry ?? CoatyObjectRegistry.coreTypesOnly).decode(object)
    }

    /// Encodes the JSON exactly.
    /// - Parameter encoder: the encoder.
    /// - Throws: whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        try json.encode(to: encoder)
    }
}

/// The text of a received object, validated already, parsed into its ``JSONObject`` on first use.
package final class ReceivedJSON: Sendable {
    /// The payload that holds the text.
    private let payload: [UInt8]
    /// Where the object's text lies in `payload`.
    private let range: Range<Int>
    /// The object once parsed, and its BaseObject once read (for a value decoded on first use).
    private let parsed = CoatyMutex<Parsed>(Parsed())

    /// What was built from the text so far.
    private struct Parsed {
        var object: JSONObject?
        var base: BaseObject?
    }

    /// - Parameters:
    ///   - payload: the received payload, validated.
    ///   - range: where the object's text lies in it.
    package init(payload: [UInt8], range: Range<Int>) {
        self.payload = payload
        self.range = range
    }

    /// The text of an object parsed already: `text` must be a JSON text of `object` (a stored
    /// row's text and the tree parsed from it, say).
    package convenience init(text: [UInt8], parsed object: JSONObject) {
        self.init(payload: text, range: text.indices)
        setParsed(object)
    }

    /// Sets the parsed object when the receiver parsed it already (it must be the text's).
    func setParsed(_ object: JSONObject) {
        parsed.withLock { $0.object = object }
    }

    /// Calls `body` with the object's UTF-8 text as received.
    func withText<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try payload.withUnsafeBytes { raw in try body(UnsafeRawBufferPointer(rebasing: raw[range])) }
    }

    /// Whether the object was parsed already.
    var isParsed: Bool {
        parsed.withLock { $0.object != nil }
    }

    /// The parsed object.
    var object: JSONObject {
        parsed.withLock { parseOnce(&$0) }
    }

    /// The object's ``BaseObject``, read from the parsed object on first use (its members were
    /// validated as BaseObject reads them when it was received).
    func baseObject(objectType: String, objectId: CoatyUUID) -> BaseObject {
        parsed.withLock { state in
            if let base = state.base { return base }
            let base = Self.baseObject(of: parseOnce(&state), objectType: objectType, objectId: objectId)
            state.base = base
            return base
        }
    }

    /// The BaseObject of a validated object's JSON.
    static func baseObject(of json: JSONObject, objectType: String, objectId: CoatyUUID) -> BaseObject {
        if let base = BaseObject(validMembersOf: json, objectType: objectType) { return base }
        // Unreachable: the members were validated when the object was received.
        assertionFailure("a received object's members no longer validate")
        return BaseObject(objectType: objectType, objectId: objectId, name: json["name"]?.stringValue ?? "")
    }

    /// The parsed object, parsing the text the first time.
    private func parseOnce(_ state: inout Parsed) -> JSONObject {
        if let object = state.object { return object }
        let value = payload.withUnsafeBytes { raw in
            try? JSONValue(parsing: UnsafeRawBufferPointer(rebasing: raw[range]))
        }
        guard case .object(let object)? = value else {
            // Unreachable: the text was validated as an object when the payload was read.
            assertionFailure("received object text no longer parses")
            return JSONObject()
        }
        state.object = object
        return object
    }
}
