import Foundation

/// Decodes `Decodable` values from ``JSONValue`` (or straight from JSON bytes), without Foundation's JSON coders.
///
/// ```swift
/// let light = try JSONValueDecoder().decode(Light.self, from: bytes)
/// ```
///
/// Numbers convert between integer and floating form when the value fits exactly; `null` and
/// absent keys are both "absent" for optionals. Types conforming to ``CoatyObject`` are validated
/// (objectId, objectType, coreType, name) and a missing field is reported as a
/// ``CoatyObjectError`` naming the field and the object type; types conforming to
/// ``CustomFieldsCarrying`` receive every member they did not read in `custom`.
public struct JSONValueDecoder: Sendable {
    /// How `Date` values are read.
    public enum DateDecodingStrategy: Sendable {
        /// A number of milliseconds since 1970-01-01T00:00:00Z (Coaty's timestamps).
        case millisecondsSince1970
        /// An ISO 8601 string, with or without fractional seconds.
        case iso8601
    }

    /// How `Date` values are read; Coaty's millisecond timestamps by default.
    public var dateDecodingStrategy: DateDecodingStrategy = .millisecondsSince1970
    /// The registry used for ``AnyCoatyObject`` values nested in the decoded value; `nil` means
    /// core types only.
    public var registry: CoatyObjectRegistry?
    /// Values handed to `Decodable` implementations through `Decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates a decoder.
    /// - Parameter registry: the registry for nested ``AnyCoatyObject`` values (core types only when `nil`).
    public init(registry: CoatyObjectRegistry? = nil) {
        self.registry = registry
    }

    /// Decodes a value from a ``JSONValue``.
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - value: the JSON value.
    /// - Returns: the decoded value.
    /// - Throws: `DecodingError` for shape mismatches, ``CoatyObjectError`` for invalid Coaty objects.
    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        let context = DecodingContext(self)
        return try context.unbox(value, as: T.self, parent: nil, key: nil)
    }

    /// Decodes a Coaty object whose header the caller has validated already.
    func decodeValidatedObject<T: CoatyObject>(_ type: T.Type, from object: JSONObject) throws -> T {
        let context = DecodingContext(self)
        return try context.unbox(.object(object), as: T.self, parent: nil, key: nil, headerValidated: true)
    }

    /// Parses JSON bytes and decodes a value from them.
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - bytes: UTF-8 JSON text.
    /// - Returns: the decoded value.
    /// - Throws: ``JSONParseError`` for malformed JSON, else as when decoding from a `JSONValue`.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try decode(T.self, from: try JSONValue(parsing: bytes))
    }

    /// Parses JSON bytes in raw memory and decodes a value from them.
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - bytes: UTF-8 JSON text.
    /// - Returns: the decoded value.
    /// - Throws: ``JSONParseError`` for malformed JSON, else as when decoding from a `JSONValue`.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
        try decode(T.self, from: try JSONValue(parsing: bytes))
    }

    /// Parses JSON text and decodes a value from it.
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - text: JSON text.
    /// - Returns: the decoded value.
    /// - Throws: ``JSONParseError`` for malformed JSON, else as when decoding from a `JSONValue`.
    public func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try decode(T.self, from: try JSONValue(parsing: text))
    }
}

// MARK: - Internals

/// Options shared by every decoder of one decoding run.
final class DecodingContext {
    let options: JSONValueDecoder

    init(_ options: JSONValueDecoder) {
        self.options = options
    }

    /// Built on first use: most decodes never ask.
    lazy var userInfo: [CodingUserInfoKey: Any] = {
        var info: [CodingUserInfoKey: Any] = [:]
        for (key, value) in options.userInfo { info[key] = value }
        if let registry = options.registry { info[CoatyObjectRegistry.userInfoKey] = registry }
        return info
    }()

    /// Decodes `T` from `value`; the one place where special types and Coaty objects are handled.
    func unbox<T: Decodable>(
        _ value: JSONValue,
        as type: T.Type,
        parent: ValueDecoder?,
        key: (any CodingKey)?,
        headerValidated: Bool = false
    ) throws -> T {
        // Scalars reached through generic paths (arrays, dictionaries, optionals).
        if T.self == String.self {
            guard case .string(let s) = value else { throw mismatch(String.self, value, parent, key) }
            return _identityCast(s, to: T.self)
        }
        if T.self == JSONValue.self { return _identityCast(value, to: T.self) }
        if T.self == CoatyUUID.self {
            return _identityCast(try unboxUUID(value, parent, key), to: T.self)
        }
        if T.self == Double.self {
            guard let d = value.doubleValue else { throw mismatch(Double.self, value, parent, key) }
            return _identityCast(d, to: T.self)
        }
        if T.self == Int.self {
            return _identityCast(try unboxInteger(value, Int.self, parent, key), to: T.self)
        }
        if T.self == Bool.self {
            guard case .bool(let b) = value else { throw mismatch(Bool.self, value, parent, key) }
            return _identityCast(b, to: T.self)
        }
        if T.self == JSONObject.self {
            guard case .object(let o) = value else { throw mismatch(JSONObject.self, value, parent, key) }
            return _identityCast(o, to: T.self)
        }
        if T.self == Int64.self {
            return _identityCast(try unboxInteger(value, Int64.self, parent, key), to: T.self)
        }
        if T.self == CoreType.self {
            guard case .string(let s) = value, let coreType = CoreType(rawValue: s) else {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: path(parent, key),
                        debugDescription: "Expected a Coaty core type name, found \(value)"
                    )
                )
            }
            return _identityCast(coreType, to: T.self)
        }
        if T.self == AnyCoatyObject.self {
            guard case .object(let o) = value else { throw mismatch(JSONObject.self, value, parent, key) }
            let registry = options.registry ?? CoatyObjectRegistry.coreTypesOnly
            return _identityCast(try registry.decode(o, decoder: options), to: T.self)
        }
        if T.self == Date.self {
            return _identityCast(try unboxDate(value, parent, key), to: T.self)
        }
        if T.self == URL.self {
            guard case .string(let s) = value, let url = URL(string: s) else {
                throw mismatch(URL.self, value, parent, key)
            }
            return _identityCast(url, to: T.self)
        }

        let decoder = ValueDecoder(value, context: self, parent: parent, key: key)
        guard let coatyType = T.self as? any CoatyObject.Type else {
            var result = try T(from: decoder)
            if let carrier = T.self as? any CustomFieldsCarrying.Type, case .object(let object) = value {
                let rest = decoder.unreadMembers(of: object, excludingHeader: false)
                if !rest.isEmpty { carrier._setCustom(rest, in: &result) }
            }
            return result
        }

        guard case .object(let object) = value else { throw mismatch(JSONObject.self, value, parent, key) }
        if !headerValidated {
            try CoatyObjectValidation.validateHeader(object, expectedCoreType: coatyType.coreType)
        }
        return try decodeObject(T.self, object, decoder)
    }

    /// Decodes a Coaty object whose header is valid, naming missing fields and capturing unknown ones.
    func decodeObject<T: Decodable>(_ type: T.Type, _ object: JSONObject, _ decoder: ValueDecoder) throws -> T {
        var result: T
        do {
            result = try T(from: decoder)
        } catch let error as DecodingError {
            throw CoatyObjectError(decodingError: error, object: object, droppingPathPrefix: decoder.depth)
        }
        // A `let objectId = CoatyUUID()` (or `let name = …`) is never decoded by synthesized Codable:
        // the object would silently get a new identity. Refuse instead.
        for field in ["objectId", "name"] where !decoder.hasRead(field) {
            throw CoatyObjectError(
                .invalidField(
                    reason: "the Swift type \(T.self) does not decode it; declare it with `var` "
                        + "(a `let` with a default value is never decoded)"
                ),
                field: field,
                objectType: object["objectType"]?.stringValue,
                coreType: object["coreType"]?.stringValue
            )
        }
        if let carrier = T.self as? any CustomFieldsCarrying.Type {
            let rest = decoder.unreadMembers(of: object, excludingHeader: true)
            if !rest.isEmpty { carrier._setCustom(rest, in: &result) }
        }
        return result
    }

    func path(_ parent: ValueDecoder?, _ key: (any CodingKey)?) -> [any CodingKey] {
        var result = parent?.codingPath ?? []
        if let key { result.append(key) }
        return result
    }

    /// The error for `value` not being a `type`: `valueNotFound` for `null` (as Foundation reports
    /// it), else `typeMismatch`.
    func mismatch(_ type: Any.Type, _ value: JSONValue, _ parent: ValueDecoder?, _ key: (any CodingKey)?)
        -> DecodingError
    {
        if case .null = value {
            return DecodingError.valueNotFound(
                type,
                .init(codingPath: path(parent, key), debugDescription: "Expected \(type), found null")
            )
        }
        return DecodingError.typeMismatch(
            type,
            .init(
                codingPath: path(parent, key),
                debugDescription: "Expected \(type), found \(JSONValue.kindName(value))"
            )
        )
    }

    func unboxUUID(_ value: JSONValue, _ parent: ValueDecoder?, _ key: (any CodingKey)?) throws -> CoatyUUID {
        guard case .string(let s) = value else { throw mismatch(CoatyUUID.self, value, parent, key) }
        guard let uuid = CoatyUUID(s) else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: path(parent, key),
                    debugDescription: "Not a UUID: \"\(s)\""
                )
            )
        }
        return uuid
    }

    func unboxInteger<I: FixedWidthInteger>(
        _ value: JSONValue,
        _ type: I.Type,
        _ parent: ValueDecoder?,
        _ key: (any CodingKey)?
    ) throws -> I {
        switch value {
        case .int(let i):
            if let v = I(exactly: i) { return v }
        case .double(let d):
            if let v = I(exactly: d) { return v }
        default:
            throw mismatch(I.self, value, parent, key)
        }
        throw DecodingError.dataCorrupted(
            .init(
                codingPath: path(parent, key),
                debugDescription: "Number \(value) does not fit in \(I.self)"
            )
        )
    }

    func unboxFloat(_ value: JSONValue, _ parent: ValueDecoder?, _ key: (any CodingKey)?) throws -> Float {
        guard let d = value.doubleValue else { throw mismatch(Float.self, value, parent, key) }
        return Float(d)
    }

    func unboxDate(_ value: JSONValue, _ parent: ValueDecoder?, _ key: (any CodingKey)?) throws -> Date {
        switch options.dateDecodingStrategy {
        case .millisecondsSince1970:
            guard let ms = value.doubleValue else { throw mismatch(Date.self, value, parent, key) }
            return Date(timeIntervalSince1970: ms / 1000)
        case .iso8601:
            guard case .string(let s) = value else { throw mismatch(Date.self, value, parent, key) }
            if let date = ISO8601Dates.parse(s) { return date }
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: path(parent, key),
                    debugDescription: "Not an ISO 8601 date: \"\(s)\""
                )
            )
        }
    }
}

/// ISO 8601 formatting shared by the encoder and decoder.
enum ISO8601Dates {
    static func parse(_ string: String) -> Date? {
        let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        if let date = try? withFraction.parse(string) { return date }
        return try? Date.ISO8601FormatStyle().parse(string)
    }

    static func format(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }
}

/// The `Decoder` for one JSON value; its coding path is computed only when an error needs it.
final class ValueDecoder: Decoder, CodingPathNode {
    let value: JSONValue
    /// `value` when it is an object (else empty), unpacked once for the keyed container.
    let object: JSONObject
    let context: DecodingContext
    let parent: ValueDecoder?
    let key: (any CodingKey)?
    // A decoder is used by one synchronous `init(from:)` at a time; no exclusivity checks needed.
    /// Members of `object` read so far: bit i for member i < 64.
    @exclusivity(unchecked) private var readMask: UInt64 = 0
    /// Members read beyond the first 64.
    @exclusivity(unchecked) private var readOverflow: Set<Int> = []
    /// Where the next key lookup starts.
    @exclusivity(unchecked) var cursor = 0

    /// The object's text when it is read from bytes (see ``ObjectBytes``); `object` is then empty.
    let bytes: ObjectBytes?

    init(_ value: JSONValue, context: DecodingContext, parent: ValueDecoder?, key: (any CodingKey)?) {
        self.value = value
        if case .object(let object) = value {
            self.object = object
        } else {
            self.object = JSONObject()
        }
        self.context = context
        self.parent = parent
        self.key = key
        self.bytes = nil
    }

    /// The decoder of a root object read from its bytes.
    init(bytes: ObjectBytes, context: DecodingContext) {
        self.value = .object(JSONObject())
        self.object = JSONObject()
        self.context = context
        self.parent = nil
        self.key = nil
        self.bytes = bytes
    }

    package var depth: Int {
        var n = 0
        var node: ValueDecoder? = self
        while let current = node, current.key != nil {
            n += 1
            node = current.parent
        }
        return n
    }

    var codingPath: [any CodingKey] { pathFromRoot }

    var userInfo: [CodingUserInfoKey: Any] { context.userInfo }

    @inline(__always)
    func markRead(_ index: Int) {
        if index < 64 { readMask |= 1 << UInt64(index) } else { readOverflow.insert(index) }
    }

    /// Whether a container has read the member `key` (of `object`, or of the text in bytes mode).
    func hasRead(_ key: String) -> Bool {
        guard let i = bytes?.index(of: key) ?? object.index(forKey: key) else { return false }
        return i < 64 ? (readMask & (1 << UInt64(i))) != 0 : readOverflow.contains(i)
    }

    /// The members of `object` (of the text in bytes mode, where `object` is not used) no container
    /// has read, minus `objectType`/`coreType` for objects.
    func unreadMembers(of object: JSONObject, excludingHeader: Bool) -> JSONObject {
        var keys: [String] = []
        var values: [JSONValue] = []
        let count = bytes?.members.count ?? object.keys.count
        for i in 0..<count {
            let read = i < 64 ? (readMask & (1 << UInt64(i))) != 0 : readOverflow.contains(i)
            if read { continue }
            let key = bytes?.key(at: i) ?? object.keys[i]
            if excludingHeader && (key == "objectType" || key == "coreType") { continue }
            keys.append(key)
            values.append(bytes?.value(at: i) ?? object.values[i])
        }
        return JSONObject(uncheckedKeys: keys, values: values)
    }

    /// The value of member `name`, found from the member read last on (synthesized decoders
    /// usually read the members in the order they were written) and marked as read.
    @inline(__always)
    func lookup(_ name: String) -> JSONValue? {
        if let bytes {
            guard let i = bytes.index(of: name, from: cursor) else { return nil }
            markRead(i)
            cursor = i + 1
            return bytes.value(at: i)
        }
        let keys = object.keys
        let count = keys.count
        guard count > 0 else { return nil }
        var i = cursor < count ? cursor : 0
        for _ in 0..<count {
            if keys[i] == name {
                markRead(i)
                cursor = i + 1
                return object.values[i]
            }
            i += 1
            if i == count { i = 0 }
        }
        return nil
    }

    /// The member `name` as a UUID read straight from the text, when the object is read from
    /// its bytes and the member is a UUID string without escapes (marked as read); otherwise `nil`
    /// and nothing is marked (the caller goes the general way).
    func plainUUID(_ name: String) -> CoatyUUID? {
        guard let bytes, let i = bytes.index(of: name, from: cursor), let uuid = bytes.plainUUID(at: i) else {
            return nil
        }
        markRead(i)
        cursor = i + 1
        return uuid
    }

    /// The value of member `name` without marking it read.
    func member(_ name: String) -> JSONValue? {
        if let bytes { return bytes.index(of: name).map { bytes.value(at: $0) } }
        return object[name]
    }

    /// The keys in order.
    var memberKeys: [String] {
        guard let bytes else { return object.keys }
        return bytes.members.indices.map { bytes.key(at: $0) }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object = value else {
            throw DecodingError.typeMismatch(
                JSONObject.self,
                .init(
                    codingPath: codingPath,
                    debugDescription: "Expected an object, found \(JSONValue.kindName(value))"
                )
            )
        }
        return KeyedDecodingContainer(KeyedValueDecoder<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else {
            throw DecodingError.typeMismatch(
                [JSONValue].self,
                .init(codingPath: codingPath, debugDescription: "Expected an array, found \(JSONValue.kindName(value))")
            )
        }
        return UnkeyedValueDecoder(elements: elements, decoder: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        if let bytes {
            // The whole object as one value: not what the byte view serves; the caller decodes
            // again from the parsed object.
            bytes.unsupported = true
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "decoded again from the tree"))
        }
        return SingleValueDecoder(decoder: self)
    }
}

extension JSONValue {
    static func kindName(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A coding key made from a string or an index.
struct JSONCodingKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }

    static let superKey = JSONCodingKey(stringValue: "super")
}

/// Holds only its decoder (one reference to retain when the container box copies it).
struct KeyedValueDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ValueDecoder

    var codingPath: [any CodingKey] { decoder.codingPath }

    var allKeys: [Key] { decoder.memberKeys.compactMap { Key(stringValue: $0) } }

    @inline(__always)
    private func lookup(_ key: Key) -> JSONValue? { decoder.lookup(key.stringValue) }

    private func required(_ key: Key) throws -> JSONValue {
        guard let value = lookup(key) else {
            throw DecodingError.keyNotFound(
                key,
                .init(codingPath: codingPath, debugDescription: "No value for key \"\(key.stringValue)\"")
            )
        }
        return value
    }

    /// The value for `key` unless absent or null.
    @inline(__always)
    private func present(_ key: Key) -> JSONValue? {
        guard let value = lookup(key) else { return nil }
        if case .null = value { return nil }
        return value
    }

    func contains(_ key: Key) -> Bool { lookup(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool {
        if case .null = try required(key) { return true }
        return false
    }

    private func nullError(_ type: Any.Type, _ key: Key) -> DecodingError {
        DecodingError.valueNotFound(
            type,
            .init(
                codingPath: codingPath + [key],
                debugDescription: "Expected \(type) for key \"\(key.stringValue)\", found null"
            )
        )
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let value = try required(key)
        guard case .bool(let b) = value else { throw decoder.context.mismatch(Bool.self, value, decoder, key) }
        return b
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let value = try required(key)
        guard case .string(let s) = value else { throw decoder.context.mismatch(String.self, value, decoder, key) }
        return s
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        let value = try required(key)
        guard let d = value.doubleValue else { throw decoder.context.mismatch(Double.self, value, decoder, key) }
        return d
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        try decoder.context.unboxFloat(try required(key), decoder, key)
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        // The common case without the generic integer path (and its runtime metadata lookups).
        let value = try required(key)
        if case .int(let i) = value, let v = Int(exactly: i) { return v }
        return try decoder.context.unboxInteger(value, Int.self, decoder, key)
    }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(key) }

    private func integer<I: FixedWidthInteger>(_ key: Key) throws -> I {
        try decoder.context.unboxInteger(try required(key), I.self, decoder, key)
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if T.self == CoatyUUID.self, let uuid = decoder.plainUUID(key.stringValue) {
            return _identityCast(uuid, to: T.self)
        }
        return try decoder.context.unbox(try required(key), as: T.self, parent: decoder, key: key)
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let value = present(key) else { return nil }
        guard case .bool(let b) = value else { throw decoder.context.mismatch(Bool.self, value, decoder, key) }
        return b
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let value = present(key) else { return nil }
        guard case .string(let s) = value else { throw decoder.context.mismatch(String.self, value, decoder, key) }
        return s
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard let value = present(key) else { return nil }
        guard let d = value.doubleValue else { throw decoder.context.mismatch(Double.self, value, decoder, key) }
        return d
    }

    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        guard let value = present(key) else { return nil }
        return try decoder.context.unboxFloat(value, decoder, key)
    }

    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try integerIfPresent(key) }

    private func integerIfPresent<I: FixedWidthInteger>(_ key: Key) throws -> I? {
        guard let value = present(key) else { return nil }
        return try decoder.context.unboxInteger(value, I.self, decoder, key)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        if T.self == CoatyUUID.self, let uuid = decoder.plainUUID(key.stringValue) {
            return _identityCast(uuid, to: T.self)
        }
        guard let value = lookup(key) else { return nil }
        if case .null = value, T.self != JSONValue.self { return nil }
        return try decoder.context.unbox(value, as: T.self, parent: decoder, key: key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        let child = ValueDecoder(try required(key), context: decoder.context, parent: decoder, key: key)
        return try child.container(keyedBy: NestedKey.self)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let child = ValueDecoder(try required(key), context: decoder.context, parent: decoder, key: key)
        return try child.unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        let value = decoder.member("super") ?? .null
        return ValueDecoder(value, context: decoder.context, parent: decoder, key: JSONCodingKey.superKey)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(lookup(key) ?? .null, context: decoder.context, parent: decoder, key: key)
    }
}

struct UnkeyedValueDecoder: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let decoder: ValueDecoder
    private(set) var currentIndex = 0

    init(elements: [JSONValue], decoder: ValueDecoder) {
        self.elements = elements
        self.decoder = decoder
    }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private var indexKey: JSONCodingKey { JSONCodingKey(intValue: currentIndex) }

    private mutating func next(_ type: Any.Type) throws -> JSONValue {
        guard currentIndex < elements.count else {
            throw DecodingError.valueNotFound(
                type,
                .init(
                    codingPath: codingPath + [indexKey],
                    debugDescription: "Array has only \(elements.count) elements"
                )
            )
        }
        defer { currentIndex += 1 }
        return elements[currentIndex]
    }

    mutating func decodeNil() throws -> Bool {
        guard currentIndex < elements.count else {
            throw DecodingError.valueNotFound(
                Never.self,
                .init(
                    codingPath: codingPath + [indexKey],
                    debugDescription: "Array has only \(elements.count) elements"
                )
            )
        }
        if case .null = elements[currentIndex] {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool {
        let key = indexKey
        let value = try next(Bool.self)
        guard case .bool(let b) = value else { throw decoder.context.mismatch(Bool.self, value, decoder, key) }
        return b
    }

    mutating func decode(_ type: String.Type) throws -> String {
        let key = indexKey
        let value = try next(String.self)
        guard case .string(let s) = value else { throw decoder.context.mismatch(String.self, value, decoder, key) }
        return s
    }

    mutating func decode(_ type: Double.Type) throws -> Double {
        let key = indexKey
        let value = try next(Double.self)
        guard let d = value.doubleValue else { throw decoder.context.mismatch(Double.self, value, decoder, key) }
        return d
    }

    mutating func decode(_ type: Float.Type) throws -> Float {
        let key = indexKey
        return try decoder.context.unboxFloat(try next(Float.self), decoder, key)
    }

    mutating func decode(_ type: Int.Type) throws -> Int { try integer() }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try integer() }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try integer() }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try integer() }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try integer() }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try integer() }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try integer() }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try integer() }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try integer() }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try integer() }

    private mutating func integer<I: FixedWidthInteger>() throws -> I {
        let key = indexKey
        return try decoder.context.unboxInteger(try next(I.self), I.self, decoder, key)
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let key = indexKey
        return try decoder.context.unbox(try next(T.self), as: T.self, parent: decoder, key: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<
        NestedKey
    > {
        let key = indexKey
        let child = ValueDecoder(try next(JSONObject.self), context: decoder.context, parent: decoder, key: key)
        return try child.container(keyedBy: NestedKey.self)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let key = indexKey
        let child = ValueDecoder(try next([JSONValue].self), context: decoder.context, parent: decoder, key: key)
        return try child.unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let key = indexKey
        return ValueDecoder(try next(JSONValue.self), context: decoder.context, parent: decoder, key: key)
    }
}

struct SingleValueDecoder: SingleValueDecodingContainer {
    let decoder: ValueDecoder

    var codingPath: [any CodingKey] { decoder.codingPath }
    private var value: JSONValue { decoder.value }

    func decodeNil() -> Bool { value.isNull }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let b) = value else {
            throw decoder.context.mismatch(Bool.self, value, decoder.parent, decoder.key)
        }
        return b
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let s) = value else {
            throw decoder.context.mismatch(String.self, value, decoder.parent, decoder.key)
        }
        return s
    }

    func decode(_ type: Double.Type) throws -> Double {
        guard let d = value.doubleValue else {
            throw decoder.context.mismatch(Double.self, value, decoder.parent, decoder.key)
        }
        return d
    }

    func decode(_ type: Float.Type) throws -> Float {
        try decoder.context.unboxFloat(value, decoder.parent, decoder.key)
    }

    func decode(_ type: Int.Type) throws -> Int { try integer() }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer() }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer() }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer() }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer() }
    func decode(_ type: UInt.Type) throws -> UInt { try integer() }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer() }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer() }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer() }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer() }

    private func integer<I: FixedWidthInteger>() throws -> I {
        try decoder.context.unboxInteger(value, I.self, decoder.parent, decoder.key)
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try decoder.context.unbox(value, as: T.self, parent: decoder.parent, key: decoder.key)
    }
}
