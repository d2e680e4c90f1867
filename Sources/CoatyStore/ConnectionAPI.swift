public import CoatyModel
public import CoatyFilter

/// Reads items of one type on a connection, each call in its own read transaction (the seeds'
/// `Item.read(connection)`); get one with `Item.read(connection)`.
///
/// ```swift
/// let note = try await Note.read(connection).byKey("1")
/// let (found, missing) = try await Note.read(connection).filterExisting(["1", "2"])
/// let audited = try await Setting.read(connection).withMetadata(Audit.self).all()
/// ```
///
/// Several reads that must see one snapshot go into one transaction instead:
/// `try await connection.read { tx in (try await Note.read(tx).all(), try await Setting.read(tx).all()) }`.
public struct ConnectionReader<Item: Sendable, Metadata: Codable & Sendable, Connection: ConnectionType>: Sendable {
    /// The connection read from.
    public let connection: Connection
    /// How items map to rows.
    public let coding: StoreCoding<Item, Metadata>

    /// A reader on a connection.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - coding: how items map to rows.
    public init(_ connection: Connection, coding: StoreCoding<Item, Metadata>) {
        self.connection = connection
        self.coding = coding
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Reader<Item, Metadata>) async throws -> T) async throws
        -> T
    {
        let coding = coding
        return try await connection.read { tx in try await body(Reader(tx, coding: coding)) }
    }

    /// See ``Reader/atIndex(_:)``.
    /// - Parameter index: the index.
    /// - Returns: the item, or `nil`.
    /// - Throws: a backend or decoding error.
    public func atIndex(_ index: StoreIndex) async throws -> Item? { try await read { try await $0.atIndex(index) } }

    /// See ``Reader/atIndexes(_:)``.
    /// - Parameter indexes: the indexes.
    /// - Returns: the items found, in the order given.
    /// - Throws: a backend or decoding error.
    public func atIndexes(_ indexes: [StoreIndex]) async throws -> [Item] {
        try await read { try await $0.atIndexes(indexes) }
    }

    /// See ``Reader/byKey(_:)``.
    /// - Parameter key: the key.
    /// - Returns: the item, or `nil`.
    /// - Throws: a backend or decoding error.
    public func byKey(_ key: String) async throws -> Item? { try await read { try await $0.byKey(key) } }

    /// See ``Reader/byKeys(_:)``.
    /// - Parameter keys: the keys.
    /// - Returns: the items found, in the order given.
    /// - Throws: a backend or decoding error.
    public func byKeys(_ keys: [String]) async throws -> [Item] { try await read { try await $0.byKeys(keys) } }

    /// See ``Reader/all()``.
    /// - Returns: every item, in insertion order.
    /// - Throws: a backend or decoding error.
    public func all() async throws -> [Item] { try await read { try await $0.all() } }

    /// See ``Reader/filterExisting(_:)``.
    /// - Parameter keys: the keys.
    /// - Returns: the items found and the missing keys, in the order given.
    /// - Throws: a backend or decoding error.
    public func filterExisting(_ keys: [String]) async throws -> (items: [Item], missingKeys: [String]) {
        let found = try await read { reader in
            let (items, missing) = try await reader.filterExisting(keys)
            return Found(items: items, missingKeys: missing)
        }
        return (found.items, found.missingKeys)
    }

    /// See ``Reader/matching(_:)``.
    /// - Parameter filter: the filter.
    /// - Returns: the items.
    /// - Throws: a backend or decoding error.
    public func matching(_ filter: ObjectFilter) async throws -> [Item] {
        try await read { try await $0.matching(filter) }
    }

    /// See ``Reader/count(_:)``.
    /// - Parameter filter: a filter; `nil` counts every item.
    /// - Returns: the count.
    /// - Throws: a backend error.
    public func count(_ filter: ObjectFilter? = nil) async throws -> Int {
        try await read { try await $0.count(filter) }
    }

    /// The same reads with each item's metadata.
    public var withMetadata: ConnectionMetadataReader<Item, Metadata, Connection> {
        ConnectionMetadataReader(connection: connection, coding: coding)
    }

    /// The same reads with each item's metadata, decoded as `type` (any `Codable` type).
    /// - Parameter type: the metadata type.
    /// - Returns: the reader.
    public func withMetadata<Other: Codable & Sendable>(
        _ type: Other.Type
    ) -> ConnectionMetadataReader<Item, Other, Connection> {
        ConnectionMetadataReader(connection: connection, coding: coding.withMetadata(Other.self))
    }

    private struct Found: Sendable {
        var items: [Item]
        var missingKeys: [String]
    }
}

/// The reads of a ``ConnectionReader`` returning ``Stored`` items with their metadata.
public struct ConnectionMetadataReader<Item: Sendable, Metadata: Codable & Sendable, Connection: ConnectionType>:
    Sendable
{
    let connection: Connection
    let coding: StoreCoding<Item, Metadata>

    private func read<T: Sendable>(
        _ body: @escaping @Sendable (MetadataReader<Item, Metadata>) async throws -> T
    ) async throws -> T {
        let coding = coding
        return try await connection.read { tx in try await body(Reader(tx, coding: coding).withMetadata) }
    }

    /// The item with a key, with its metadata.
    /// - Parameter key: the key.
    /// - Returns: the stored item, or `nil`.
    /// - Throws: a backend or decoding error.
    public func byKey(_ key: String) async throws -> Stored<Item, Metadata>? {
        try await read { try await $0.byKey(key) }
    }

    /// The item at an index, with its metadata.
    /// - Parameter index: the index.
    /// - Returns: the stored item, or `nil`.
    /// - Throws: a backend or decoding error.
    public func atIndex(_ index: StoreIndex) async throws -> Stored<Item, Metadata>? {
        try await read { try await $0.atIndex(index) }
    }

    /// Every item with its metadata, in insertion order.
    /// - Returns: the stored items.
    /// - Throws: a backend or decoding error.
    public func all() async throws -> [Stored<Item, Metadata>] { try await read { try await $0.all() } }

    /// The items a filter selects, with their metadata.
    /// - Parameter filter: the filter.
    /// - Returns: the stored items.
    /// - Throws: a backend or decoding error.
    public func matching(_ filter: ObjectFilter) async throws -> [Stored<Item, Metadata>] {
        try await read { try await $0.matching(filter) }
    }
}

// MARK: - Entry points on a connection and curried steps

extension Persistable {
    /// A reader of this type on a connection (each read its own transaction).
    /// - Parameter connection: the connection.
    /// - Returns: the reader.
    public static func read<C: ConnectionType>(_ connection: C) -> ConnectionReader<Self, Metadata, C> {
        ConnectionReader(connection, coding: storeCoding)
    }

    /// A read step: the item with a key, for `connection.read` (the seeds' curried
    /// `connection.read(Item.readByKey(key))`).
    /// - Parameter key: the key.
    /// - Returns: the step.
    public static func readByKey<T: ReadTransactionType>(_ key: String) -> @Sendable (T) async throws -> Self? {
        { try await read($0).byKey(key) }
    }

    /// A read step: every item, for `connection.read`.
    /// - Returns: the step.
    public static func readAll<T: ReadTransactionType>() -> @Sendable (T) async throws -> [Self] {
        { try await read($0).all() }
    }

    /// A write step: writes this item, for `connection.write` (the seeds'
    /// `connection.write(item.write())`); steps compose in one transaction:
    /// `try await connection.write { tx in try await a.write()(tx); try await b.write()(tx) }`.
    /// - Parameter metadata: the metadata stored beside it; `nil` stores none.
    /// - Returns: the step.
    public func write<T: WriteTransactionType>(metadata: Metadata? = nil) -> @Sendable (T) async throws -> Void {
        { [self] in try await self.write(to: $0, metadata: metadata) }
    }

    /// A remove step: removes this item, for `connection.write`.
    /// - Returns: the step; it returns whether the item was stored.
    public func remove<T: WriteTransactionType>() -> @Sendable (T) async throws -> Bool {
        { [self] in try await Self.writer($0).remove(self) }
    }
}

extension CoatyObject {
    /// A reader of this Coaty object type on a connection (each read its own transaction).
    /// - Parameters:
    ///   - connection: the connection.
    ///   - registry: the registry to decode with (for ``CoatyModel/AnyCoatyObject``); core types when `nil`.
    /// - Returns: the reader.
    public static func read<C: ConnectionType>(
        _ connection: C,
        registry: CoatyObjectRegistry? = nil
    ) -> ConnectionReader<Self, ReceiptMetadata, C> {
        ConnectionReader(connection, coding: coatyStoreCoding(registry: registry))
    }

    /// A read step: the object with an objectId, for `connection.read`.
    /// - Parameter key: the objectId (its text).
    /// - Returns: the step.
    public static func readByKey<T: ReadTransactionType>(_ key: String) -> @Sendable (T) async throws -> Self? {
        { try await read($0).byKey(key) }
    }

    /// A write step: writes this object, for `connection.write`.
    /// - Parameter metadata: how it was received; `nil` stores none.
    /// - Returns: the step.
    public func write<T: WriteTransactionType>(metadata: ReceiptMetadata? = nil) -> @Sendable (T) async throws -> Void {
        { [self] in try await self.write(to: $0, metadata: metadata) }
    }
}
