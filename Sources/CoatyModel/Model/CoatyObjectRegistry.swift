import CoatySync
import Synchronization

/// The object types an agent decodes into its own Swift types. Thread-safe; share one per agent.
///
/// Decoding a received object follows the Coaty rule: a registered object type decodes into the
/// registered Swift type; otherwise a known core type decodes into that core type's struct with
/// every unknown field kept in `custom`; otherwise decoding fails with a ``CoatyObjectError``.
///
/// ```swift
/// let registry = CoatyObjectRegistry()
/// registry.register(Light.self)
/// let object = try registry.decode(json)      // AnyCoatyObject
/// if let light = object.as(Light.self) { … }
/// ```
public final class CoatyObjectRegistry: Sendable {
    private let types: CoatyMutex<[String: any CoatyObject.Type]>

    /// The `userInfo` key under which a registry can be handed to other decoders (such as
    /// Foundation's `JSONDecoder`) for nested ``AnyCoatyObject`` values.
    public static let userInfoKey = CodingUserInfoKey(rawValue: "coaty.CoatyObjectRegistry")!

    /// A registry that knows the core types only.
    package static let coreTypesOnly = CoatyObjectRegistry()

    /// A registry knowing the core types and `types`.
    /// - Parameter types: custom object types to register.
    public init(_ types: [any CoatyObject.Type] = []) {
        var map: [String: any CoatyObject.Type] = [:]
        for type in types { map[type.objectType] = type }
        self.types = CoatyMutex(map)
    }

    /// Registers a Swift type for its ``CoatyObject/objectType-swift.type.property``; a later
    /// registration for the same object type replaces the earlier one.
    /// - Parameter type: the type to register.
    public func register<T: CoatyObject>(_ type: T.Type) {
        types.withLock { $0[T.objectType] = type }
    }

    /// Removes the registration for `objectType`, if any.
    /// - Parameter objectType: the object type.
    public func unregister(objectType: String) {
        _ = types.withLock { $0.removeValue(forKey: objectType) }
    }

    /// The Swift type registered for `objectType`, if any (core types are not listed).
    /// - Parameter objectType: the object type.
    /// - Returns: the registered type.
    public func registeredType(for objectType: String) -> (any CoatyObject.Type)? {
        types.withLock { $0[objectType] }
    }

    /// The Swift type a received object of `objectType`/`coreType` decodes into.
    /// - Parameters:
    ///   - objectType: the object type.
    ///   - coreType: the core type.
    /// - Returns: the registered type, else the core type's struct.
    public func swiftType(objectType: String, coreType: CoreType) -> any CoatyObject.Type {
        registeredType(for: objectType) ?? coreType.coreObjectType
    }

    /// Decodes a received object.
    /// - Parameter json: the object's JSON.
    /// - Returns: the object, keeping `json` as received.
    /// - Throws: ``CoatyObjectError`` naming the field and object type when the object is invalid.
    public func decode(_ json: JSONObject) throws -> AnyCoatyObject {
        try decode(json, decoder: JSONValueDecoder(registry: self))
    }

    /// Decodes a received object from a JSON value.
    /// - Parameter json: the object's JSON.
    /// - Returns: the object.
    /// - Throws: ``CoatyObjectError`` (``CoatyObjectError/Kind/notAnObject`` for a non-object).
    public func decode(_ json: JSONValue) throws -> AnyCoatyObject {
        guard case .object(let object) = json else { throw CoatyObjectError(.notAnObject) }
        return try decode(object)
    }

    /// Decodes an object from its JSON and the text it was parsed from (a stored row's), keeping
    /// the text: a Resolve, Advertise or Retrieve of the object then carries these bytes as they
    /// are instead of serializing the JSON again.
    /// - Parameters:
    ///   - json: the object's JSON.
    ///   - text: a UTF-8 JSON text of `json` (the one it was parsed from).
    /// - Returns: the object.
    /// - Throws: ``CoatyObjectError`` naming the field and object type when the object is invalid.
    public func decode(_ json: JSONObject, text: [UInt8]) throws -> AnyCoatyObject {
        let decoded = try decode(json)
        return AnyCoatyObject(
            received: ReceivedJSON(text: text, parsed: json),
            value: decoded.value,
            objectType: decoded.objectType,
            coreType: decoded.coreType
        )
    }

    /// Decodes an object from its UTF-8 JSON text (a stored row's), keeping the text, with the
    /// result and errors of parsing it and calling ``decode(_:text:)``; but as a received object
    /// is decoded: on the text's member index, so an object of a type nobody registered is
    /// validated on the text and parsed only when its ``AnyCoatyObject/json`` or value is read.
    /// - Parameter text: the JSON text of one object.
    /// - Returns: the object.
    /// - Throws: ``JSONParseError`` or ``CoatyObjectError``.
    public func decode(storedText text: [UInt8]) throws -> AnyCoatyObject {
        if let bytes = ObjectBytes(indexing: text),
            let object = decodeReceived(bytes, received: ReceivedJSON(payload: text, range: text.indices))
        {
            return object
        }
        guard case .object(let json) = try JSONValue(parsing: text) else { throw CoatyObjectError(.notAnObject) }
        return try decode(json, text: text)
    }

    /// Parses and decodes a received object from UTF-8 JSON bytes.
    /// - Parameter bytes: the JSON text of one object.
    /// - Returns: the object.
    /// - Throws: ``JSONParseError`` or ``CoatyObjectError``.
    public func decode(bytes: [UInt8]) throws -> AnyCoatyObject {
        try decode(try JSONValue(parsing: bytes))
    }

    /// Parses and decodes a received object from UTF-8 JSON bytes in raw memory (e.g. an MQTT
    /// payload buffer), without copying them first.
    /// - Parameter bytes: the JSON text of one object.
    /// - Returns: the object.
    /// - Throws: ``JSONParseError`` or ``CoatyObjectError``.
    public func decode(bytes: UnsafeRawBufferPointer) throws -> AnyCoatyObject {
        try decode(try JSONValue(parsing: bytes))
    }

    func decode(_ json: JSONObject, decoder: JSONValueDecoder) throws -> AnyCoatyObject {
        let header = try CoatyObjectValidation.validateHeader(json)
        let type = swiftType(objectType: header.objectType, coreType: header.coreType)
        if type.coreType != header.coreType {
            throw CoatyObjectError(
                .coreTypeMismatch(expected: type.coreType),
                field: "coreType",
                objectType: header.objectType,
                coreType: header.coreType.rawValue
            )
        }
        // Objects of types nobody registered (a generic observer's, a recorder's) decode into
        // BaseObject: read its seven members directly, without the Decodable machinery (a third of
        // the cost of receiving such an object). Anything off the happy path takes the full path,
        // which names the error.
        if type == BaseObject.self, let value = BaseObject(validMembersOf: json, objectType: header.objectType) {
            return AnyCoatyObject(json: json, value: value, objectType: header.objectType, coreType: header.coreType)
        }
        var decoder = decoder
        if decoder.registry == nil { decoder.registry = self }
        let value = try Self.decodeValue(type, from: json, decoder: decoder)
        return AnyCoatyObject(json: json, value: value, objectType: header.objectType, coreType: header.coreType)
    }

    /// Decodes a received object straight from its indexed text, keeping the text as its JSON;
    /// `nil` when this path does not decode it exactly as ``decode(_:)-(JSONObject)`` decodes the
    /// parsed object, or when the object is invalid (decode the parsed object then: it also
    /// reports the error). The Swift type's `init(from:)` then runs a second time.
    /// - Parameters:
    ///   - bytes: the object's members in the text.
    ///   - received: the object's text, kept as its JSON.
    package func decodeReceived(_ bytes: ObjectBytes, received: ReceivedJSON) -> AnyCoatyObject? {
        // The header checks of `CoatyObjectValidation.validateHeader`, on the happy path only.
        guard let typeIndex = bytes.index(of: "objectType"),
            case .string(let objectType) = bytes.value(at: typeIndex), !objectType.isEmpty,
            let coreIndex = bytes.index(of: "coreType"),
            case .string(let coreName) = bytes.value(at: coreIndex),
            let coreType = CoreType(rawValue: coreName)
        else { return nil }
        let type = swiftType(objectType: objectType, coreType: coreType)
        // A type nobody registered decodes into BaseObject: validate its members on the text and
        // decode the value when someone asks for it (`coaty observe` prints the text, a recorder
        // stores it; neither needs the value).
        if type == BaseObject.self, coreType == .coatyObject {
            guard let objectId = bytes.validBaseObjectId(), !bytes.unsupported else { return nil }
            return AnyCoatyObject(received: received, objectId: objectId, objectType: objectType)
        }
        // A type that keeps unknown fields (the core types' structs) reads every member anyway,
        // and whoever receives such objects generically (a recorder, say) reads their JSON too:
        // parse the object once, as a tree, member by member, decode that tree, and keep both
        // the tree and the text (a store writes the text as received instead of serializing
        // the tree again). Decided before the rest of the header is read.
        if type is any CustomFieldsCarrying.Type {
            let json = bytes.object
            guard !bytes.unsupported, let decoded = try? decode(json) else { return nil }
            received.setParsed(json)
            return AnyCoatyObject(
                received: received,
                value: decoded.value,
                objectType: decoded.objectType,
                coreType: decoded.coreType
            )
        }
        guard type.coreType == coreType,
            let idIndex = bytes.index(of: "objectId"),
            let nameIndex = bytes.index(of: "name"), bytes.firstByte(at: nameIndex) == UInt8(ascii: "\"")
        else { return nil }
        guard bytes.uuid(at: idIndex) != nil else { return nil }
        guard let value = try? Self.decodeValue(type, from: bytes, decoder: JSONValueDecoder(registry: self)),
            !bytes.unsupported
        else { return nil }
        return AnyCoatyObject(received: received, value: value, objectType: objectType, coreType: coreType)
    }

    /// Opens the registered type for `JSONValueDecoder.decodeValidatedObject(_:from:)` on the text.
    private static func decodeValue<T: CoatyObject>(_ type: T.Type, from bytes: ObjectBytes, decoder: JSONValueDecoder)
        throws -> (any CoatyObject)?
    {
        try decoder.decodeValidatedObject(T.self, from: bytes)
    }

    private static func decodeValue<T: CoatyObject>(_ type: T.Type, from json: JSONObject, decoder: JSONValueDecoder)
        throws -> any CoatyObject
    {
        try decoder.decodeValidatedObject(T.self, from: json)
    }
}

extension BaseObject {
    /// The value `JSONValueDecoder` decodes from a valid object whose header is validated (every
    /// member it does not declare in `custom`, in the order received), read member by member;
    /// `nil` when a member is not what a valid object has (decode it with the decoder then).
    init?(validMembersOf json: JSONObject, objectType: String) {
        var objectId: CoatyUUID?
        var name: String?
        var externalId: String?
        var parentObjectId: CoatyUUID?
        var locationId: CoatyUUID?
        var isDeactivated: Bool?
        var keys: [String] = []
        var values: [JSONValue] = []
        func uuid(_ value: JSONValue) -> CoatyUUID?? {
            switch value {
            case .null: .some(nil)
            case .string(let text): CoatyUUID(text).map { .some($0) }
            default: nil
            }
        }
        for (key, value) in zip(json.keys, json.values) {
            switch key {
            case "objectType", "coreType":
                continue
            case "objectId":
                guard case .string(let text) = value, let id = CoatyUUID(text) else { return nil }
                objectId = id
            case "name":
                guard case .string(let text) = value else { return nil }
                name = text
            case "externalId":
                switch value {
                case .null: externalId = nil
                case .string(let text): externalId = text
                default: return nil
                }
            case "parentObjectId":
                guard let id = uuid(value) else { return nil }
                parentObjectId = id
            case "locationId":
                guard let id = uuid(value) else { return nil }
                locationId = id
            case "isDeactivated":
                switch value {
                case .null: isDeactivated = nil
                case .bool(let flag): isDeactivated = flag
                default: return nil
                }
            default:
                keys.append(key)
                values.append(value)
            }
        }
        guard let objectId, let name else { return nil }
        self.init(
            objectType: objectType,
            objectId: objectId,
            name: name,
            externalId: externalId,
            parentObjectId: parentObjectId,
            locationId: locationId,
            isDeactivated: isDeactivated,
            custom: keys.isEmpty ? [:] : JSONObject(uncheckedKeys: keys, values: values)
        )
    }
}
