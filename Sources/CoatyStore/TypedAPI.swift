public import CoatyCore

/// Reads items of one type from a transaction; get one with `Item.read(transaction)`.
///
/// ```swift
/// let light = try await Light.read(transaction).byKey(id.uuidString)
/// let bright = try await Light.read(transaction).matching(.where("luminance", .greaterThan(0.5)))
/// let withReceipts = try await Light.read(transaction).withMetadata.all()
/// ```
public struct Reader<Item, Metadata: Codable & Sendable> {
    /// The transaction read from.
    public let transaction: any ReadTransactionType
    /// How items map to rows.
    public let coding: StoreCoding<Item, Metadata>

    /// A reader.
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - coding: how items map to rows.
    public init(_ transaction: any ReadTransactionType, coding: StoreCoding<Item, Metadata>) {
        self.transaction = transaction
        self.coding = coding
    }

    /// The same reads, returning each item with its metadata.
    public var withMetadata: MetadataReader<Item, Metadata> { MetadataReader(reader: self) }

    /// The item at an index.
    /// - Parameter index: the index.
    /// - Returns: the item, or `nil`.
    /// - Throws: a backend or decoding error.
    public func atIndex(_ index: StoreIndex) async throws -> Item? {
        try await withMetadata.atIndex(index)?.item
    }

    /// The items at these indexes that exist, in the order given.
    /// - Parameter indexes: the indexes.
    /// - Returns: the items found.
    /// - Throws: a backend or decoding error.
    public func atIndexes(_ indexes: some Sequence<StoreIndex>) async throws -> [Item] {
        try await withMetadata.atIndexes(indexes).map(\.item)
    }

    /// The item with a key.
    /// - Parameter key: the key.
    /// - Returns: the item, or `nil`.
    /// - Throws: a backend or decoding error.
    public func byKey(_ key: String) async throws -> Item? {
        try await withMetadata.byKey(key)?.item
    }

    /// The items with these keys that exist, in the order given.
    /// - Parameter keys: the keys.
    /// - Returns: the items found.
    /// - Throws: a backend or decoding error.
    public func byKeys(_ keys: some Sequence<String>) async throws -> [Item] {
        try await withMetadata.byKeys(keys).map(\.item)
    }

    /// Every item, in insertion order.
    /// - Returns: the items.
    /// - Throws: a backend or decoding error.
    public func all() async throws -> [Item] {
        try await withMetadata.all().map(\.item)
    }

    /// The items a Coaty filter selects (conditions, ordering, skip and take).
    /// - Parameter filter: the filter.
    /// - Returns: the items.
    /// - Throws: a backend or decoding error.
    public func matching(_ filter: ObjectFilter) async throws -> [Item] {
        try await withMetadata.matching(filter).map(\.item)
    }

    /// The items that exist for these keys, and the keys that have none (as the seeds'
    /// `let (items, missingKeys) = Item.read(transaction).filterExisting(keys)`), in the order given.
    /// - Parameter keys: the keys.
    /// - Returns: the items found and the missing keys.
    /// - Throws: a backend or decoding error.
    public func filterExisting(_ keys: some Sequence<String>) async throws -> (items: [Item], missingKeys: [String]) {
        var items: [Item] = []
        var missing: [String] = []
        for key in keys {
            if let item = try await byKey(key) { items.append(item) } else { missing.append(key) }
        }
        return (items, missing)
    }

    /// The keys that have an item, in the order given (one read of the collection's keys).
    /// - Parameter keys: the keys.
    /// - Returns: the keys that exist.
    /// - Throws: a backend error.
    public func existingKeys(_ keys: some Sequence<String>) async throws -> [String] {
        let keys = Array(keys)
        let existing: Set<String>
        if case .collection(let collection) = coding.scope {
            existing = Set(try await transaction.keys(in: collection))
        } else {
            existing = Set(
                try await transaction.rows(matching: StoreQuery(scope: coding.scope, keys: keys)).map(\.index.key)
            )
        }
        return keys.filter(existing.contains)
    }

    /// The same reads, returning each item with its metadata decoded as any `Codable` type (the
    /// seeds decouple metadata from the item: one item type, many metadata types).
    /// - Parameter type: the metadata type.
    /// - Returns: the reader.
    public func withMetadata<Other: Codable & Sendable>(_ type: Other.Type) -> MetadataReader<Item, Other> {
        MetadataReader(reader: Reader<Item, Other>(transaction, coding: coding.withMetadata(Other.self)))
    }

    /// How many items there are.
    /// - Parameter filter: a filter; `nil` counts every item.
    /// - Returns: the count.
    /// - Throws: a backend error.
    public func count(_ filter: ObjectFilter? = nil) async throws -> Int {
        try await transaction.count(matching: StoreQuery(scope: coding.scope, filter: filter))
    }
}

extension Reader {
    /// The items satisfying an SQL condition, on a backend that reads SQL
    /// (``SQLReadTransaction``: SQLite, PostgreSQL); see there for the table and placeholders.
    /// - Parameters:
    ///   - condition: an SQL boolean expression.
    ///   - arguments: the values for its placeholders.
    ///   - orderBy: an SQL ORDER BY list; insertion order when `nil`.
    ///   - limit: the most items, when set.
    /// - Returns: the items.
    /// - Throws: ``SQLReadingUnsupported`` on a backend without SQL, a backend or decoding error.
    public func matchingSQL(
        _ condition: String,
        arguments: [JSONValue] = [],
        orderBySQL orderBy: String? = nil,
        limit: Int? = nil
    ) async throws -> [Item] {
        guard let sqlTransaction = transaction as? any SQLReadTransaction else {
            throw SQLReadingUnsupported(backend: "\(type(of: transaction))")
        }
        let rows = try await sqlTransaction.rows(
            in: coding.scope,
            whereSQL: condition,
            arguments: arguments,
            orderBySQL: orderBy,
            limit: limit
        )
        return try rows.map { try coding.decode($0.object) }
    }
}

/// ``Reader/matchingSQL(_:arguments:orderBySQL:limit:)`` on a backend that does not read SQL (the
/// in-memory one).
public struct SQLReadingUnsupported: Error, CustomStringConvertible {
    /// The backend's transaction type.
    public let backend: String

    /// What went wrong.
    public var description: String {
        "\(backend) does not read SQL: matchingSQL needs the SQLite or PostgreSQL backend"
    }
}

/// The reads of a ``Reader`` returning ``Stored`` items with their metadata.
public struct MetadataReader<Item, Metadata: Codable & Sendable> {
    let reader: Reader<Item, Metadata>

    private func stored(_ row: StoreRow) throws -> Stored<Item, Metadata> {
        Stored(
            item: try reader.coding.decode(row.object),
            metadata: try reader.coding.decodeMetadata(row.metadata),
            index: row.index
        )
    }

    /// The item at an index, with its metadata.
    /// - Parameter index: the index.
    /// - Returns: the stored item, or `nil`.
    /// - Throws: a backend or decoding error.
    public func atIndex(_ index: StoreIndex) async throws -> Stored<Item, Metadata>? {
        guard let row = try await reader.transaction.row(at: index) else { return nil }
        guard reader.coding.scope.contains(row.index, columns: PromotedColumns(row.object)) else { return nil }
        return try stored(row)
    }

    /// The items at these indexes that exist, with their metadata, in the order given.
    /// - Parameter indexes: the indexes.
    /// - Returns: the stored items found.
    /// - Throws: a backend or decoding error.
    public func atIndexes(_ indexes: some Sequence<StoreIndex>) async throws -> [Stored<Item, Metadata>] {
        var found: [Stored<Item, Metadata>] = []
        for index in indexes {
            if let stored = try await atIndex(index) { found.append(stored) }
        }
        return found
    }

    /// The item with a key, with its metadata.
    /// - Parameter key: the key.
    /// - Returns: the stored item, or `nil`.
    /// - Throws: a backend or decoding error.
    public func byKey(_ key: String) async throws -> Stored<Item, Metadata>? {
        if let index = reader.coding.indexForKey(key) { return try await atIndex(index) }
        let rows = try await reader.transaction.rows(matching: StoreQuery(scope: reader.coding.scope, keys: [key]))
        return try rows.first.map(stored)
    }

    /// The items with these keys that exist, with their metadata, in the order given.
    /// - Parameter keys: the keys.
    /// - Returns: the stored items found.
    /// - Throws: a backend or decoding error.
    public func byKeys(_ keys: some Sequence<String>) async throws -> [Stored<Item, Metadata>] {
        let keys = Array(keys)
        if reader.coding.indexForKey("") != nil {
            var found: [Stored<Item, Metadata>] = []
            for key in keys {
                if let stored = try await byKey(key) { found.append(stored) }
            }
            return found
        }
        var rowsByKey: [String: StoreRow] = [:]
        for row in try await reader.transaction.rows(matching: StoreQuery(scope: reader.coding.scope, keys: keys))
        where rowsByKey[row.index.key] == nil {
            rowsByKey[row.index.key] = row
        }
        return try keys.compactMap { key in try rowsByKey[key].map(stored) }
    }

    /// Every item with its metadata, in insertion order.
    /// - Returns: the stored items.
    /// - Throws: a backend or decoding error.
    public func all() async throws -> [Stored<Item, Metadata>] {
        try await reader.transaction.rows(matching: StoreQuery(scope: reader.coding.scope)).map(stored)
    }

    /// The items a Coaty filter selects, with their metadata.
    /// - Parameter filter: the filter.
    /// - Returns: the stored items.
    /// - Throws: a backend or decoding error.
    public func matching(_ filter: ObjectFilter) async throws -> [Stored<Item, Metadata>] {
        try await reader.transaction.rows(matching: StoreQuery(scope: reader.coding.scope, filter: filter)).map(stored)
    }
}

extension Writer {
    /// The same writes, with metadata of any `Codable` type.
    /// - Parameter type: the metadata type.
    /// - Returns: the writer.
    public func withMetadata<Other: Codable & Sendable>(_ type: Other.Type) -> Writer<Item, Other> {
        Writer<Item, Other>(transaction, coding: coding.withMetadata(Other.self))
    }
}

/// Writes and removes items of one type in a write transaction.
public struct Writer<Item, Metadata: Codable & Sendable> {
    /// The transaction written to.
    public let transaction: any WriteTransactionType
    /// How items map to rows.
    public let coding: StoreCoding<Item, Metadata>

    /// A writer.
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - coding: how items map to rows.
    public init(_ transaction: any WriteTransactionType, coding: StoreCoding<Item, Metadata>) {
        self.transaction = transaction
        self.coding = coding
    }

    /// Writes an item with optional metadata.
    /// - Parameters:
    ///   - item: the item.
    ///   - metadata: the metadata stored beside it; `nil` stores none.
    ///   - mode: how an existing item is treated; replaced by default.
    /// - Returns: whether it was written.
    /// - Throws: a backend or encoding error.
    @discardableResult
    public func write(_ item: Item, metadata: Metadata? = nil, mode: StoreWriteMode = .upsert) async throws -> Bool {
        var row = StoreRow(
            index: coding.index(item),
            object: try coding.encode(item),
            metadata: try coding.encodeMetadata(metadata)
        )
        if let received = item as? AnyCoatyObject { row.objectText = received.receivedText }
        return try await transaction.write(row, mode: mode)
    }

    /// Writes items, each with the same metadata.
    /// - Parameters:
    ///   - items: the items.
    ///   - metadata: the metadata stored beside each; `nil` stores none.
    ///   - mode: how existing items are treated; replaced by default.
    /// - Returns: the indexes written.
    /// - Throws: a backend or encoding error.
    @discardableResult
    public func write(
        _ items: some Sequence<Item>,
        metadata: Metadata? = nil,
        mode: StoreWriteMode = .upsert
    ) async throws -> [StoreIndex] {
        var written: [StoreIndex] = []
        for item in items where try await write(item, metadata: metadata, mode: mode) {
            written.append(coding.index(item))
        }
        return written
    }

    /// Removes an item.
    /// - Parameter item: the item.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(_ item: Item) async throws -> Bool {
        try await transaction.removeRow(at: coding.index(item))
    }

    /// Removes items.
    /// - Parameter items: the items.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(_ items: some Sequence<Item>) async throws -> Int {
        var count = 0
        for item in items where try await remove(item) { count += 1 }
        return count
    }

    /// Removes the items with these keys.
    /// - Parameter keys: the keys.
    /// - Returns: the indexes removed.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(keys: some Sequence<String>) async throws -> [StoreIndex] {
        try await transaction.removeRows(matching: StoreQuery(scope: coding.scope, keys: Array(keys)))
    }

    /// Removes the items a filter selects (ordering, skip and take apply).
    /// - Parameter filter: the filter.
    /// - Returns: the indexes removed.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(matching filter: ObjectFilter) async throws -> [StoreIndex] {
        try await transaction.removeRows(matching: StoreQuery(scope: coding.scope, filter: filter))
    }

    /// Removes every item of the type.
    /// - Returns: how many were removed.
    /// - Throws: a backend error.
    @discardableResult
    public func removeAll() async throws -> Int {
        try await transaction.removeRows(matching: StoreQuery(scope: coding.scope)).count
    }
}

// MARK: - Entry points for Persistable types

extension Persistable {
    /// A reader of this type in a transaction.
    /// - Parameter transaction: the transaction.
    /// - Returns: the reader.
    public static func read(_ transaction: some ReadTransactionType) -> Reader<Self, Metadata> {
        Reader(transaction, coding: storeCoding)
    }

    /// A writer of this type in a transaction.
    /// - Parameter transaction: the transaction.
    /// - Returns: the writer.
    public static func writer(_ transaction: some WriteTransactionType) -> Writer<Self, Metadata> {
        Writer(transaction, coding: storeCoding)
    }

    /// Writes this item (replacing an existing one).
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - metadata: the metadata stored beside it; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to transaction: some WriteTransactionType, metadata: Metadata? = nil) async throws {
        try await Self.writer(transaction).write(self, metadata: metadata)
    }

    /// Writes this item in its own write transaction.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - metadata: the metadata stored beside it; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to connection: some ConnectionType, metadata: Metadata? = nil) async throws {
        try await connection.write { tx in try await self.write(to: tx, metadata: metadata) }
    }

    /// Removes this item.
    /// - Parameter transaction: the transaction.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from transaction: some WriteTransactionType) async throws -> Bool {
        try await Self.writer(transaction).remove(self)
    }

    /// Removes this item in its own write transaction.
    /// - Parameter connection: the connection.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from connection: some ConnectionType) async throws -> Bool {
        try await connection.write { tx in try await self.remove(from: tx) }
    }

    /// Removes every item of this type.
    /// - Parameter transaction: the transaction.
    /// - Returns: how many were removed.
    /// - Throws: a backend error.
    @discardableResult
    public static func removeAll(from transaction: some WriteTransactionType) async throws -> Int {
        try await writer(transaction).removeAll()
    }
}

extension Sequence where Element: Persistable {
    /// Writes these items (replacing existing ones).
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - metadata: the metadata stored beside each; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to transaction: some WriteTransactionType, metadata: Element.Metadata? = nil) async throws {
        try await Element.writer(transaction).write(self, metadata: metadata)
    }

    /// Writes these items in one write transaction.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - metadata: the metadata stored beside each; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to connection: some ConnectionType, metadata: Element.Metadata? = nil) async throws {
        let items = Array(self)
        try await connection.write { tx in try await items.write(to: tx, metadata: metadata) }
    }

    /// Removes these items.
    /// - Parameter transaction: the transaction.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from transaction: some WriteTransactionType) async throws -> Int {
        try await Element.writer(transaction).remove(self)
    }

    /// Removes these items in one write transaction.
    /// - Parameter connection: the connection.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from connection: some ConnectionType) async throws -> Int {
        let items = Array(self)
        return try await connection.write { tx in try await items.remove(from: tx) }
    }
}

// MARK: - Entry points for Coaty objects

extension CoatyObject {
    /// A reader of this Coaty object type in a transaction.
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - registry: the registry to decode with (for ``CoatyModel/AnyCoatyObject``); core types when `nil`.
    /// - Returns: the reader.
    public static func read(
        _ transaction: some ReadTransactionType,
        registry: CoatyObjectRegistry? = nil
    ) -> Reader<Self, ReceiptMetadata> {
        Reader(transaction, coding: coatyStoreCoding(registry: registry))
    }

    /// A writer of this Coaty object type in a transaction.
    /// - Parameter transaction: the transaction.
    /// - Returns: the writer.
    public static func writer(_ transaction: some WriteTransactionType) -> Writer<Self, ReceiptMetadata> {
        Writer(transaction, coding: storeCoding)
    }

    /// Writes this object (replacing an existing one with the same objectId and object type).
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - metadata: how it was received, stored beside it; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to transaction: some WriteTransactionType, metadata: ReceiptMetadata? = nil) async throws {
        try await Self.writer(transaction).write(self, metadata: metadata)
    }

    /// Writes this object in its own write transaction.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - metadata: how it was received; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to connection: some ConnectionType, metadata: ReceiptMetadata? = nil) async throws {
        try await connection.write { tx in try await self.write(to: tx, metadata: metadata) }
    }

    /// Removes this object.
    /// - Parameter transaction: the transaction.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from transaction: some WriteTransactionType) async throws -> Bool {
        try await Self.writer(transaction).remove(self)
    }

    /// Removes this object in its own write transaction.
    /// - Parameter connection: the connection.
    /// - Returns: whether it was stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from connection: some ConnectionType) async throws -> Bool {
        try await connection.write { tx in try await self.remove(from: tx) }
    }

    /// Removes every object this type reads.
    /// - Parameter transaction: the transaction.
    /// - Returns: how many were removed.
    /// - Throws: a backend error.
    @discardableResult
    public static func removeAll(from transaction: some WriteTransactionType) async throws -> Int {
        try await writer(transaction).removeAll()
    }
}

extension Sequence where Element: CoatyObject {
    /// Writes these objects (replacing existing ones).
    /// - Parameters:
    ///   - transaction: the transaction.
    ///   - metadata: how they were received; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to transaction: some WriteTransactionType, metadata: ReceiptMetadata? = nil) async throws {
        try await Element.writer(transaction).write(self, metadata: metadata)
    }

    /// Writes these objects in one write transaction.
    /// - Parameters:
    ///   - connection: the connection.
    ///   - metadata: how they were received; `nil` stores none.
    /// - Throws: a backend or encoding error.
    public func write(to connection: some ConnectionType, metadata: ReceiptMetadata? = nil) async throws {
        let items = Array(self)
        try await connection.write { tx in try await items.write(to: tx, metadata: metadata) }
    }

    /// Removes these objects.
    /// - Parameter transaction: the transaction.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from transaction: some WriteTransactionType) async throws -> Int {
        try await Element.writer(transaction).remove(self)
    }

    /// Removes these objects in one write transaction.
    /// - Parameter connection: the connection.
    /// - Returns: how many were stored.
    /// - Throws: a backend error.
    @discardableResult
    public func remove(from connection: some ConnectionType) async throws -> Int {
        let items = Array(self)
        return try await connection.write { tx in try await items.remove(from: tx) }
    }
}

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
