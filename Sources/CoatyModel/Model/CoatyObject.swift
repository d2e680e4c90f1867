/// A Coaty object type: a `Codable` value that travels as a Coaty object.
///
/// Declare a custom type in a few lines; `coreType` defaults to ``CoreType/coatyObject`` and
/// the encoder writes `objectType` and `coreType` although the struct does not store them:
///
/// ```swift
/// struct Light: CoatyObject, Hashable {
///     static let objectType = "com.example.Light"
///     var objectId = CoatyUUID()
///     var name: String
///     var isOn: Bool
///     var luminance: Double
/// }
/// ```
///
/// The optional base fields (`externalId`, `parentObjectId`, `locationId`, `isDeactivated`)
/// default to `nil`; declare a stored property of the same name to carry one. A custom type based
/// on another core type sets `static let coreType` and declares that core type's required
/// fields (see ``CoatyTask``). Register custom types with ``CoatyObjectRegistry/register(_:)``.
public protocol CoatyObject: Codable, Sendable {
    /// The object type this Swift type stands for, e.g. `com.example.Light`.
    static var objectType: String { get }
    /// The core type this Swift type is based on; ``CoreType/coatyObject`` by default.
    static var coreType: CoreType { get }

    /// The unique id of the object.
    var objectId: CoatyUUID { get }
    /// The name of the object (may be empty).
    var name: String { get }
    /// The object type of this value; ``objectType-swift.type.property`` unless the type stores it.
    var objectType: String { get }
    /// The core type of this value; ``coreType-swift.type.property`` by default.
    var coreType: CoreType { get }
    /// An external id (optional base field).
    var externalId: String? { get }
    /// The id of a parent object (optional base field).
    var parentObjectId: CoatyUUID? { get }
    /// The id of a Location object (optional base field).
    var locationId: CoatyUUID? { get }
    /// Whether the object is no longer in use (optional base field).
    var isDeactivated: Bool? { get }
}

extension CoatyObject {
    /// ``CoreType/coatyObject``.
    public static var coreType: CoreType { .coatyObject }
    /// The static ``objectType-swift.type.property``.
    public var objectType: String { Self.objectType }
    /// The static ``coreType-swift.type.property``.
    public var coreType: CoreType { Self.coreType }
    /// `nil`: the type does not declare this base field.
    public var externalId: String? { nil }
    /// `nil`: the type does not declare this base field.
    public var parentObjectId: CoatyUUID? { nil }
    /// `nil`: the type does not declare this base field.
    public var locationId: CoatyUUID? { nil }
    /// `nil`: the type does not declare this base field.
    public var isDeactivated: Bool? { nil }

    /// Whether a received object of `objectType`/`coreType` can be decoded as this type: its
    /// object type is this type's, or this type is a core type's own Swift type and the core
    /// types match (a core type accepts every object type based on it).
    /// - Parameters:
    ///   - objectType: the received object type.
    ///   - coreType: the received core type.
    /// - Returns: whether ``AnyCoatyObject/as(_:)`` may decode it as `Self`.
    public static func accepts(objectType: String, coreType: CoreType) -> Bool {
        objectType == Self.objectType || (Self.objectType == Self.coreType.objectType && coreType == Self.coreType)
    }

    /// Reads the header of a value known to be of type `Self` without copying it into an existential.
    static func _header<T>(of value: T) -> (objectType: String, coreType: CoreType) {
        precondition(T.self == Self.self)
        return withUnsafePointer(to: value) { pointer in
            let me = UnsafeRawPointer(pointer).assumingMemoryBound(to: Self.self)
            return (me.pointee.objectType, me.pointee.coreType)
        }
    }
}

/// A type that keeps the JSON members it does not declare, so they survive a re-publish.
///
/// ``JSONValueDecoder`` fills ``custom`` with every member the type's `init(from:)` did not read
/// (except `objectType` and `coreType` of a ``CoatyObject``), and ``JSONValueEncoder`` writes
/// them back after the declared fields. All core types and their nested structures conform. A
/// conforming type leaves `custom` out of its `CodingKeys`.
public protocol CustomFieldsCarrying {
    /// The members this type does not declare, in the order received.
    var custom: JSONObject { get set }
}

extension CustomFieldsCarrying {
    /// Sets `custom` on a value known to be of type `Self`, in place.
    static func _setCustom<T>(_ custom: JSONObject, in value: inout T) {
        precondition(T.self == Self.self)
        withUnsafeMutablePointer(to: &value) { pointer in
            UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: Self.self).pointee.custom = custom
        }
    }

    /// Reads `custom` of a value known to be of type `Self`.
    static func _custom<T>(of value: T) -> JSONObject {
        precondition(T.self == Self.self)
        return withUnsafePointer(to: value) { pointer in
            UnsafeRawPointer(pointer).assumingMemoryBound(to: Self.self).pointee.custom
        }
    }
}
