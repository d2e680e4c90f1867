public import CoatyModel
public import CoatyFilter

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
        guard reader.coding.scope.contains(row.index, columns: row.promotedColumns) else { return nil }
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
        try await transaction.write(try row(for: item, metadata: metadata), mode: mode)
    }

    /// The row an item is stored as (with a received object's text and a receipt's, which a
    /// backend stores as they are).
    /// - Parameters:
    ///   - item: the item.
    ///   - metadata: the metadata stored beside it; `nil` stores none.
    /// - Returns: the row.
    /// - Throws: an encoding error.
    public func row(for item: Item, metadata: Metadata? = nil) throws -> StoreRow {
        // A received object whose JSON nobody parsed (a recorder's): the row is its text, and a
        // backend reads the promoted columns from it; no tree is built for it at all.
        if let received = item as? AnyCoatyObject, received.isJSONDeferred, let text = received.receivedText {
            var row = StoreRow(index: coding.index(item), objectText: text, metadataText: coding.encodeMetadataText(metadata))
            if row.metadataText == nil, metadata != nil { row.metadata = try coding.encodeMetadata(metadata) }
            return row
        }
        let (index, object) = (coding.index(item), try coding.encode(item))
        var row =
            if let text = coding.encodeMetadataText(metadata) {
                StoreRow(index: index, object: object, metadataText: text)
            } else {
                StoreRow(index: index, object: object, metadata: try coding.encodeMetadata(metadata))
            }
        if let received = item as? AnyCoatyObject { row.objectText = received.receivedText }
        return row
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
