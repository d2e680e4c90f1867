/// Why a JSON value is not a valid Coaty object (or not one this agent can decode).
///
/// The ``description`` names the field, the object type and what to do, e.g.
/// `Invalid Coaty object of type "coaty.Task" (core type Task): required field "status" is missing.`
public struct CoatyObjectError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong.
    public enum Kind: Sendable, Equatable {
        /// The value is not a JSON object.
        case notAnObject
        /// A required field is absent (or `null`).
        case missingField
        /// A field has the wrong JSON type or an invalid value (e.g. an objectId that is not a UUID,
        /// an enum number out of range).
        case invalidField(reason: String)
        /// `coreType` is not one of the twelve core types.
        case unknownCoreType(String)
        /// The object's core type differs from the core type of the Swift type asked for.
        case coreTypeMismatch(expected: CoreType)
    }

    /// What is wrong.
    public let kind: Kind
    /// The field concerned, as a dotted path (`geoLocation.coords.latitude`); empty for the object.
    public let field: String
    /// The object type of the offending object, when it has a usable one.
    public let objectType: String?
    /// The core type of the offending object, when it has a usable one.
    public let coreType: String?

    /// Creates an error.
    /// - Parameters:
    ///   - kind: what is wrong.
    ///   - field: the field concerned (dotted path), empty for the whole object.
    ///   - objectType: the object type of the object, if known.
    ///   - coreType: the core type of the object, if known.
    public init(_ kind: Kind, field: String = "", objectType: String? = nil, coreType: String? = nil) {
        self.kind = kind
        self.field = field
        self.objectType = objectType
        self.coreType = coreType
    }

    /// A one-line message naming the object type, the field and the problem.
    public var description: String {
        var subject = "Invalid Coaty object"
        if let objectType { subject += " of type \"\(objectType)\"" }
        if let coreType { subject += " (core type \(coreType))" }
        switch kind {
        case .notAnObject:
            return "\(subject): expected a JSON object."
        case .missingField:
            return "\(subject): required field \"\(field)\" is missing; the sender must include it."
        case .invalidField(let reason):
            return "\(subject): field \"\(field)\" is invalid: \(reason)."
        case .unknownCoreType(let name):
            return "\(subject): unknown core type \"\(name)\"; expected one of "
                + CoreType.allCases.map(\.rawValue).joined(separator: ", ") + "."
        case .coreTypeMismatch(let expected):
            return "\(subject): the Swift type expects core type \(expected.rawValue); decode it as its own core type "
                + "or register a type for this object type."
        }
    }

    /// Maps a `DecodingError` raised inside an object to an error naming the field.
    init(decodingError: DecodingError, object: JSONObject, droppingPathPrefix prefix: Int) {
        let objectType = object["objectType"]?.stringValue
        let coreType = object["coreType"]?.stringValue
        func dotted(_ path: [any CodingKey]) -> String {
            path.dropFirst(prefix).map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch decodingError {
        case .keyNotFound(let key, let context):
            self.init(
                .missingField,
                field: dotted(context.codingPath + [key]),
                objectType: objectType,
                coreType: coreType
            )
        case .valueNotFound(_, let context):
            self.init(.missingField, field: dotted(context.codingPath), objectType: objectType, coreType: coreType)
        case .typeMismatch(_, let context):
            self.init(
                .invalidField(reason: context.debugDescription),
                field: dotted(context.codingPath),
                objectType: objectType,
                coreType: coreType
            )
        case .dataCorrupted(let context):
            self.init(
                .invalidField(reason: context.debugDescription),
                field: dotted(context.codingPath),
                objectType: objectType,
                coreType: coreType
            )
        @unknown default:
            self.init(.invalidField(reason: "\(decodingError)"), objectType: objectType, coreType: coreType)
        }
    }
}

/// The checks every Coaty object passes before its fields are decoded.
enum CoatyObjectValidation {
    /// Validates `objectType`, `coreType`, `objectId` and `name`, returning the core type.
    @discardableResult
    static func validateHeader(_ object: JSONObject, expectedCoreType: CoreType? = nil) throws -> (
        objectType: String, coreType: CoreType
    ) {
        let objectType = object["objectType"]?.stringValue
        let coreTypeName = object["coreType"]?.stringValue
        func fail(_ kind: CoatyObjectError.Kind, _ field: String) -> CoatyObjectError {
            CoatyObjectError(kind, field: field, objectType: objectType, coreType: coreTypeName)
        }
        guard let objectType else {
            throw fail(
                object["objectType"] == nil ? .missingField : .invalidField(reason: "expected a string"),
                "objectType"
            )
        }
        guard !objectType.isEmpty else { throw fail(.invalidField(reason: "must not be empty"), "objectType") }
        guard let coreTypeName else {
            throw fail(
                object["coreType"] == nil ? .missingField : .invalidField(reason: "expected a string"),
                "coreType"
            )
        }
        guard let coreType = CoreType(rawValue: coreTypeName) else {
            throw fail(.unknownCoreType(coreTypeName), "coreType")
        }
        if let expectedCoreType, expectedCoreType != coreType {
            throw fail(.coreTypeMismatch(expected: expectedCoreType), "coreType")
        }
        switch object["objectId"] {
        case nil, .null?:
            throw fail(.missingField, "objectId")
        case .string(let id)?:
            guard CoatyUUID(id) != nil else { throw fail(.invalidField(reason: "\"\(id)\" is not a UUID"), "objectId") }
        default:
            throw fail(.invalidField(reason: "expected a UUID string"), "objectId")
        }
        switch object["name"] {
        case nil, .null?:
            throw fail(.missingField, "name")
        case .string?:
            break
        default:
            throw fail(.invalidField(reason: "expected a string"), "name")
        }
        return (objectType, coreType)
    }
}
