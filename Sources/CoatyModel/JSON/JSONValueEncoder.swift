import Foundation

/// Encodes `Encodable` values into ``JSONValue`` (or straight into JSON bytes), without Foundation's JSON coders.
///
/// ```swift
/// let bytes = try JSONValueEncoder().encodeToBytes(light)
/// ```
///
/// - Absent optionals are left out (the synthesized `encodeIfPresent` skips them), never `null`.
/// - A `Double` or `Float` with an integral value that is exact in 53 bits is written as an
///   integer (`21`, not `21.0`), as JavaScript writes numbers; other values keep their fraction.
///   A ``JSONValue`` is written exactly as it is.
/// - Values conforming to ``CoatyObject`` get `objectType` and `coreType` first, even when the
///   type does not store them; values conforming to ``CustomFieldsCarrying`` get their `custom`
///   members appended (a declared field wins over a `custom` member of the same name).
public struct JSONValueEncoder: Sendable {
    /// How `Date` values are written.
    public enum DateEncodingStrategy: Sendable {
        /// A number of milliseconds since 1970-01-01T00:00:00Z (Coaty's timestamps).
        case millisecondsSince1970
        /// An ISO 8601 string with fractional seconds, in UTC.
        case iso8601
    }

    /// How `Date` values are written; Coaty's millisecond timestamps by default.
    public var dateEncodingStrategy: DateEncodingStrategy = .millisecondsSince1970
    /// Values handed to `Encodable` implementations through `Encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates an encoder.
    public init() {}

    /// Encodes a value into a ``JSONValue``.
    /// - Parameter value: the value to encode.
    /// - Returns: its JSON form.
    /// - Throws: `EncodingError` when the value's `encode(to:)` fails or encodes nothing.
    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let context = EncodingContext(self)
        return try context.box(value, parent: nil, key: nil)
    }

    /// Encodes a value into compact UTF-8 JSON bytes.
    ///
    /// The bytes are written straight from the value, without a ``JSONValue`` tree, and are always
    /// those of ``encode(_:)`` serialized. A value using its containers out of nesting order (or
    /// a super encoder), and a value whose encoding throws, is encoded again through the tree:
    /// its `encode(to:)` then runs twice.
    /// - Parameter value: the value to encode.
    /// - Returns: the JSON text.
    /// - Throws: as ``encode(_:)``.
    public func encodeToBytes<T: Encodable>(_ value: T) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        try encode(value, appendingTo: &out)
        return out
    }

    /// Encodes a value into compact JSON text.
    /// - Parameter value: the value to encode.
    /// - Returns: the JSON text.
    /// - Throws: as ``encode(_:)``.
    public func encodeToString<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encodeToBytes(value), as: UTF8.self)
    }
}

// MARK: - Internals

extension JSONValueEncoder {
    /// ``userInfo`` as `Encoder.userInfo` gives it.
    var codingUserInfo: [CodingUserInfoKey: Any] {
        var info: [CodingUserInfoKey: Any] = [:]
        for (key, value) in userInfo { info[key] = value }
        return info
    }

    /// The JSON form of a value of a type written without its `encode(to:)` (strings, numbers,
    /// UUIDs, dates, JSON values, received objects…), or `nil` for any other type. The one list of
    /// such types, for the tree and the streaming encoder.
    @inline(__always)
    func specialValue<T: Encodable>(_ value: T) -> JSONValue? {
        if T.self == String.self { return .string(_identityCast(value, to: String.self)) }
        if T.self == JSONValue.self { return _identityCast(value, to: JSONValue.self) }
        if T.self == CoatyUUID.self { return .string(_identityCast(value, to: CoatyUUID.self).uuidString) }
        if T.self == Double.self { return jsonNumber(_identityCast(value, to: Double.self)) }
        if T.self == Int.self { return .int(Int64(_identityCast(value, to: Int.self))) }
        if T.self == Bool.self { return .bool(_identityCast(value, to: Bool.self)) }
        if T.self == JSONObject.self { return .object(_identityCast(value, to: JSONObject.self)) }
        if T.self == Int64.self { return .int(_identityCast(value, to: Int64.self)) }
        if T.self == CoreType.self { return .string(_identityCast(value, to: CoreType.self).rawValue) }
        if T.self == AnyCoatyObject.self { return .object(_identityCast(value, to: AnyCoatyObject.self).json) }
        if T.self == Date.self {
            let date = _identityCast(value, to: Date.self)
            switch dateEncodingStrategy {
            case .millisecondsSince1970: return jsonNumber(date.timeIntervalSince1970 * 1000)
            case .iso8601: return .string(ISO8601Dates.format(date))
            }
        }
        if T.self == URL.self { return .string(_identityCast(value, to: URL.self).absoluteString) }
        return nil
    }
}

/// Converts a Swift floating-point value to JSON the way JavaScript writes numbers.
@inline(__always)
func jsonNumber(_ d: Double) -> JSONValue {
    if d.rounded(.towardZero) == d && abs(d) <= 9_007_199_254_740_992 && !(d == 0 && d.sign == .minus) {
        return .int(Int64(d))
    }
    return .double(d)
}

/// A `Float` as JSON: its shortest decimal form (`0.1`, not `0.10000000149011612`), which reads
/// back as the same `Float`.
@inline(__always)
func floatNumber(_ f: Float) -> JSONValue {
    let d = Double(f)
    if case .int = jsonNumber(d) { return jsonNumber(d) }
    guard f.isFinite, let shortest = Double(f.description) else { return .double(d) }
    return .double(shortest)
}

final class EncodingContext {
    let options: JSONValueEncoder

    init(_ options: JSONValueEncoder) {
        self.options = options
    }

    /// Built on first use: most encodes never ask.
    lazy var userInfo = options.codingUserInfo

    /// Encodes `value`; the one place where special types and Coaty objects are handled.
    func box<T: Encodable>(_ value: T, parent: ValueEncoder?, key: (any CodingKey)?) throws -> JSONValue {
        if let special = options.specialValue(value) { return special }

        let encoder = ValueEncoder(context: self, parent: parent, key: key)
        if let coatyType = T.self as? any CoatyObject.Type {
            let header = coatyType._header(of: value)
            let ref = ObjectRef()
            ref.object.reserveCapacity(8)
            ref.object.appendUnchecked("objectType", .string(header.objectType))
            ref.object.appendUnchecked("coreType", .string(header.coreType.rawValue))
            ref.hasHeader = true
            encoder.storage = .object(ref)
        }
        try value.encode(to: encoder)
        var result = try encoder.finish(for: T.self)
        if let carrier = T.self as? any CustomFieldsCarrying.Type, case .object(var object) = result {
            let custom = carrier._custom(of: value)
            if !custom.isEmpty {
                for (key, member) in custom where object.index(forKey: key) == nil {
                    object[key] = member
                }
                result = .object(object)
            }
        }
        return result
    }
}

/// A growing JSON object shared by a keyed container and its encoder.
///
/// An encoder and its containers are used by one synchronous `encode(to:)` at a time, so the
/// mutable state of these classes needs no dynamic exclusivity checks.
final class ObjectRef {
    @exclusivity(unchecked) var object = JSONObject()
    /// Whether `objectType`/`coreType` were written up front (a type storing them replaces them).
    @exclusivity(unchecked) var hasHeader = false
    /// Nested containers and super encoders, resolved when the object is finished.
    @exclusivity(unchecked) var pending: [(key: String, storage: ValueEncoder)] = []

    func finish() throws -> JSONObject {
        for (key, encoder) in pending {
            object[key] = try encoder.finish(for: Any.self)
        }
        pending = []
        return object
    }
}

/// A growing JSON array shared by an unkeyed container and its encoder.
final class ArrayRef {
    @exclusivity(unchecked) var elements: [JSONValue] = []
    @exclusivity(unchecked) var pending: [(index: Int, storage: ValueEncoder)] = []

    func finish() throws -> [JSONValue] {
        for (index, encoder) in pending {
            elements[index] = try encoder.finish(for: Any.self)
        }
        pending = []
        return elements
    }
}

final class ValueEncoder: Encoder, CodingPathNode {
    enum Storage {
        case empty
        case value(JSONValue)
        case object(ObjectRef)
        case array(ArrayRef)
    }

    let context: EncodingContext
    let parent: ValueEncoder?
    let key: (any CodingKey)?
    @exclusivity(unchecked) var storage: Storage = .empty

    init(context: EncodingContext, parent: ValueEncoder?, key: (any CodingKey)?) {
        self.context = context
        self.parent = parent
        self.key = key
    }

    /// Computed only when someone asks (errors, custom encode code).
    var codingPath: [any CodingKey] { pathFromRoot }

    var userInfo: [CodingUserInfoKey: Any] { context.userInfo }

    func finish(for type: Any.Type) throws -> JSONValue {
        switch storage {
        case .empty:
            // As Foundation's JSONEncoder: a value that encodes nothing becomes an empty object.
            return .object(JSONObject())
        case .value(let v):
            return v
        case .object(let ref):
            return .object(try ref.finish())
        case .array(let ref):
            return .array(try ref.finish())
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let ref: ObjectRef
        if case .object(let existing) = storage {
            ref = existing
        } else {
            ref = ObjectRef()
            storage = .object(ref)
        }
        return KeyedEncodingContainer(KeyedValueEncoder<Key>(ref: ref, encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let ref: ArrayRef
        if case .array(let existing) = storage {
            ref = existing
        } else {
            ref = ArrayRef()
            storage = .array(ref)
        }
        return UnkeyedValueEncoder(ref: ref, encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueEncoder(encoder: self)
    }
}

struct KeyedValueEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let ref: ObjectRef
    let encoder: ValueEncoder

    var codingPath: [any CodingKey] { encoder.codingPath }

    /// Appends a member. Keys of one container are unique in synthesized code, so only the
    /// up-front header keys are looked for (a later value for them replaces the header's in place).
    @inline(__always)
    private func set(_ value: JSONValue, _ key: Key) {
        let name = key.stringValue
        if ref.hasHeader && (name == "objectType" || name == "coreType") {
            ref.object[name] = value
        } else {
            ref.object.appendUnchecked(name, value)
        }
    }

    /// Keeps the member's position for a nested container filled in later.
    private func reserve(_ name: String, for child: ValueEncoder) {
        ref.object[name] = .null
        ref.pending.append((name, child))
    }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(jsonNumber(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(floatNumber(value), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(unsigned(value), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(try encoder.context.box(value, parent: encoder, key: key), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        let child = ValueEncoder(context: encoder.context, parent: encoder, key: key)
        reserve(key.stringValue, for: child)
        return child.container(keyedBy: NestedKey.self)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = ValueEncoder(context: encoder.context, parent: encoder, key: key)
        reserve(key.stringValue, for: child)
        return child.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let child = ValueEncoder(context: encoder.context, parent: encoder, key: JSONCodingKey.superKey)
        reserve("super", for: child)
        return child
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        let child = ValueEncoder(context: encoder.context, parent: encoder, key: key)
        reserve(key.stringValue, for: child)
        return child
    }
}

/// A `UInt64` as JSON: an integer when it fits in `Int64`, else a double.
@inline(__always)
func unsigned(_ value: UInt64) -> JSONValue {
    if let i = Int64(exactly: value) { return .int(i) }
    return .double(Double(value))
}

struct UnkeyedValueEncoder: UnkeyedEncodingContainer {
    let ref: ArrayRef
    let encoder: ValueEncoder

    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { ref.elements.count }

    private var indexKey: JSONCodingKey { JSONCodingKey(intValue: ref.elements.count) }

    mutating func encodeNil() throws { ref.elements.append(.null) }
    mutating func encode(_ value: Bool) throws { ref.elements.append(.bool(value)) }
    mutating func encode(_ value: String) throws { ref.elements.append(.string(value)) }
    mutating func encode(_ value: Double) throws { ref.elements.append(jsonNumber(value)) }
    mutating func encode(_ value: Float) throws { ref.elements.append(floatNumber(value)) }
    mutating func encode(_ value: Int) throws { ref.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { ref.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { ref.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { ref.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { ref.elements.append(.int(value)) }
    mutating func encode(_ value: UInt) throws { ref.elements.append(unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { ref.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { ref.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { ref.elements.append(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { ref.elements.append(unsigned(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let key = indexKey
        ref.elements.append(try encoder.context.box(value, parent: encoder, key: key))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<
        NestedKey
    > {
        let child = ValueEncoder(context: encoder.context, parent: encoder, key: indexKey)
        ref.pending.append((ref.elements.count, child))
        ref.elements.append(.null)
        return child.container(keyedBy: NestedKey.self)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = ValueEncoder(context: encoder.context, parent: encoder, key: indexKey)
        ref.pending.append((ref.elements.count, child))
        ref.elements.append(.null)
        return child.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let child = ValueEncoder(context: encoder.context, parent: encoder, key: indexKey)
        ref.pending.append((ref.elements.count, child))
        ref.elements.append(.null)
        return child
    }
}

struct SingleValueEncoder: SingleValueEncodingContainer {
    let encoder: ValueEncoder

    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ value: JSONValue) { encoder.storage = .value(value) }

    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(.string(value)) }
    mutating func encode(_ value: Double) throws { set(jsonNumber(value)) }
    mutating func encode(_ value: Float) throws { set(floatNumber(value)) }
    mutating func encode(_ value: Int) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { set(.int(value)) }
    mutating func encode(_ value: UInt) throws { set(unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { set(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { set(unsigned(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        set(try encoder.context.box(value, parent: encoder.parent, key: encoder.key))
    }
}
