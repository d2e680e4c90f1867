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
        guard case .object(let members) = object else { return }
        // One pass over the members (a store's writer does this for every row), each key compared
        // only with the names of its length; the first member of a name decides, as a lookup does.
        var seen: UInt8 = 0
        for (key, value) in zip(members.keys, members.values) { take(key, value, &seen) }
    }

    /// The promoted columns of an item's JSON text: those of the parsed text, read from its member
    /// index without building its tree (a received object's text, stored as it is).
    /// - Parameter text: the item's UTF-8 JSON text.
    public init(text: [UInt8]) {
        guard let object = ObjectBytes(indexing: text) else {
            self.init((try? JSONValue(parsing: text)) ?? .null)
            return
        }
        self.init(indexed: object)
    }

    /// The promoted columns of an object's indexed members.
    private init(indexed object: ObjectBytes) {
        var seen: UInt8 = 0
        for i in object.members.indices { take(object.key(at: i), object.value(at: i), &seen) }
    }

    /// Sets the column named `key` to `value`'s string when no earlier member had that name.
    private mutating func take(_ key: String, _ value: @autoclosure () -> JSONValue, _ seen: inout UInt8) {
        func first(_ bit: UInt8) -> Bool {
            defer { seen |= bit }
            return seen & bit == 0
        }
        switch key.utf8.count {
        case 8 where key == "objectId": if first(1) { objectId = value().stringValue }
        case 10 where key == "objectType": if first(2) { objectType = value().stringValue }
        case 8 where key == "coreType": if first(4) { coreType = value().stringValue }
        case 4 where key == "name": if first(8) { name = value().stringValue }
        case 10 where key == "externalId": if first(16) { externalId = value().stringValue }
        case 14 where key == "parentObjectId": if first(32) { parentObjectId = value().stringValue }
        case 10 where key == "locationId": if first(64) { locationId = value().stringValue }
        default: return
        }
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
