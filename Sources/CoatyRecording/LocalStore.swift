public import CoatyCore
public import CoatyStore

// MARK: - Local key/value store

/// A local key/value store of a database (as Coaty JS's `DbLocalContext`): agent settings as
/// JSON, in named stores.
///
/// ```swift
/// let local = LocalStore(connection)                        // the default store
/// try await local.set("lastSeen", ["count": 3])
/// let settings = LocalStore(connection, name: "settings")  // another store, the same keys apart
/// try await settings.set("room", value: Room(floor: 4, name: "B7-4.12"))  // any Encodable
/// let room = try await settings.get("room", as: Room.self)
/// ```
///
/// A store exists while it holds a value (``LocalStore/names(in:)``); ``clear()`` removes one.
/// Values written before named stores existed are in the default store, `""`.
public struct LocalStore<Connection: ConnectionType>: Sendable {
    /// The connection used.
    public let connection: Connection
    /// The store's name; `""` is the default store.
    public let name: String

    /// A local store over a connection.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - name: the store's name; the default store when omitted.
    public init(_ connection: Connection, name: String = "") {
        self.connection = connection
        self.name = name
    }

    /// Sets a value.
    /// - Parameters:
    ///   - key: the key.
    ///   - value: the value.
    /// - Throws: a backend error.
    public func set(_ key: String, _ value: JSONValue) async throws {
        let name = name
        try await connection.write { tx in try await tx.setLocalValue(value, forKey: key, in: name) }
    }

    /// Sets any `Encodable` value (encoded as Coaty encodes: dates in milliseconds).
    /// - Parameters:
    ///   - key: the key.
    ///   - value: the value.
    /// - Throws: an encoding or backend error.
    public func set(_ key: String, value: some Encodable) async throws {
        try await set(key, try JSONValueEncoder().encode(value))
    }

    /// The value of a key.
    /// - Parameter key: the key.
    /// - Returns: the value, or `nil`.
    /// - Throws: a backend error.
    public func get(_ key: String) async throws -> JSONValue? {
        let name = name
        return try await connection.read { tx in try await tx.localValue(forKey: key, in: name) }
    }

    /// The value of a key, decoded.
    /// - Parameters:
    ///   - key: the key.
    ///   - type: the type to decode.
    /// - Returns: the value, or `nil` when the key has none.
    /// - Throws: a `DecodingError` when the stored value is not a `T`, or a backend error.
    public func get<T: Decodable>(_ key: String, as type: T.Type) async throws -> T? {
        guard let value = try await get(key) else { return nil }
        return try JSONValueDecoder().decode(T.self, from: value)
    }

    /// Removes a key.
    /// - Parameter key: the key.
    /// - Throws: a backend error.
    public func remove(_ key: String) async throws {
        let name = name
        try await connection.write { tx in try await tx.setLocalValue(nil, forKey: key, in: name) }
    }

    /// Every key, sorted.
    /// - Returns: the keys.
    /// - Throws: a backend error.
    public func keys() async throws -> [String] {
        let name = name
        return try await connection.read { tx in try await tx.localKeys(in: name) }
    }

    /// Every key with its value, read in one transaction.
    /// - Returns: the values by key.
    /// - Throws: a backend error.
    public func values() async throws -> [String: JSONValue] {
        let name = name
        return try await connection.read { tx in
            var values: [String: JSONValue] = [:]
            for key in try await tx.localKeys(in: name) { values[key] = try await tx.localValue(forKey: key, in: name) }
            return values
        }
    }

    /// Removes every key of this store, in one transaction.
    /// - Returns: how many keys were removed.
    /// - Throws: a backend error.
    @discardableResult
    public func clear() async throws -> Int {
        let name = name
        return try await connection.write { tx in
            let keys = try await tx.localKeys(in: name)
            for key in keys { try await tx.setLocalValue(nil, forKey: key, in: name) }
            return keys.count
        }
    }

    /// The names of the stores that hold a value, sorted (the default store is `""`).
    /// - Parameter connection: the connection.
    /// - Returns: the names.
    /// - Throws: a backend error.
    public static func names(in connection: Connection) async throws -> [String] {
        try await connection.read { tx in try await tx.localStores() }
    }
}
