public import CoatyModel
import CoatyFilter

/// A database that hands out connections.
public protocol DatabaseType: Sendable {
    /// The backend's connection.
    associatedtype Connection: ConnectionType

    /// A new connection.
    /// - Returns: the connection.
    /// - Throws: a backend error (e.g. the database cannot be opened).
    func makeConnection() async throws -> Connection
}

/// The columns a backend keeps beside a row's JSON, derived from the JSON only.
///
/// Each is the member's value when it is a JSON string, `nil` otherwise (missing or not a
/// string), so a column compares exactly as Coaty compares the string member.
public struct PromotedColumns: Sendable, Hashable {
    /// The `objectId` member.
    public var objectId: String?
    /// The `objectType` member.
    public var objectType: String?
    /// The `coreType` member.
    public var coreType: String?
    /// The `name` member.
    public var name: String?
    /// The `externalId` member.
    public var externalId: String?
    /// The `parentObjectId` member.
    public var parentObjectId: String?
    /// The `locationId` member.
    public var locationId: String?

    /// The names of the promoted members, as in the JSON (and as SQL column names).
    public static let names = [
        "objectId", "objectType", "coreType", "name", "externalId", "parentObjectId", "locationId",
    ]

    /// The promoted columns of an item's JSON.
    /// - Parameter object: the item's JSON.
    public init(_ object: JSONValue) {
        objectId = object["objectId"]?.stringValue
        objectType = object["objectType"]?.stringValue
        coreType = object["coreType"]?.stringValue
        name = object["name"]?.stringValue
        externalId = object["externalId"]?.stringValue
        parentObjectId = object["parentObjectId"]?.stringValue
        locationId = object["locationId"]?.stringValue
    }

    /// The value of a promoted column by its name.
    /// - Parameter name: one of ``names``.
    /// - Returns: the value, or `nil`.
    public subscript(name: String) -> String? {
        switch name {
        case "objectId": objectId
        case "objectType": objectType
        case "coreType": coreType
        case "name": self.name
        case "externalId": externalId
        case "parentObjectId": parentObjectId
        case "locationId": locationId
        default: nil
        }
    }
}
