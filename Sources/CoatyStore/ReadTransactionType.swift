public import CoatyModel
import CoatyFilter

/// The untyped primitives a read transaction offers; the typed API is built on them.
///
/// Implementations are the backends' transaction objects, and test doubles (a recording mock
/// is enough to test the typed API without a database). A transaction is only valid inside the
/// closure of ``ConnectionType/read(_:)`` or ``ConnectionType/write(_:)``.
///
/// The requirements are `async`: a backend that waits for its database (PostgreSQL) suspends the
/// calling task; one whose work is synchronous (SQLite, in-memory, a test double) implements them
/// with ordinary methods, which satisfy `async` requirements.
public protocol ReadTransactionType: SendableMetatype {
    /// The row at an index.
    /// - Parameter index: the index.
    /// - Returns: the row, or `nil`.
    /// - Throws: a backend error.
    func row(at index: StoreIndex) async throws -> StoreRow?

    /// The keys in a collection, in insertion order.
    /// - Parameter collection: the collection.
    /// - Returns: the keys.
    /// - Throws: a backend error.
    func keys(in collection: String) async throws -> [String]

    /// The rows a query selects, in the order the query defines (insertion order when it
    /// orders nothing).
    /// - Parameter query: the query.
    /// - Returns: the rows.
    /// - Throws: a backend error.
    func rows(matching query: StoreQuery) async throws -> [StoreRow]

    /// How many rows a query selects (skip and take apply).
    /// - Parameter query: the query.
    /// - Returns: the count.
    /// - Throws: a backend error.
    func count(matching query: StoreQuery) async throws -> Int

    /// A value of a local key/value store.
    /// - Parameters:
    ///   - key: the key.
    ///   - store: the store's name (`""` is the default store).
    /// - Returns: the value, or `nil`.
    /// - Throws: a backend error.
    func localValue(forKey key: String, in store: String) async throws -> JSONValue?

    /// The keys of a local key/value store, sorted.
    /// - Parameter store: the store's name.
    /// - Returns: the keys.
    /// - Throws: a backend error.
    func localKeys(in store: String) async throws -> [String]

    /// The names of the local stores that hold a value, sorted.
    /// - Returns: the names.
    /// - Throws: a backend error.
    func localStores() async throws -> [String]

    /// The indexes of the stored Coaty objects (scope ``StoreScope/coatyObjects``) whose key and
    /// `objectId` member are both among `objectIds`, by objectId, each list in insertion order:
    /// where a recorder looks up, once per batch, the rows a stored object replaces.
    ///
    /// The default reads those rows with ``rows(matching:)``; a backend overrides it with a
    /// lookup that reads the indexes only.
    /// - Parameter objectIds: the objectIds (lowercase).
    /// - Returns: the indexes by objectId; objectIds without a row are absent.
    /// - Throws: a backend error.
    func coatyObjectIndexes(withObjectIds objectIds: [String]) async throws -> [String: [StoreIndex]]
}

extension StoreQuery {
    /// The Coaty objects with these objectIds. A Coaty object's key is its objectId, so the keys
    /// narrow the rows first (the in-memory backend looks them up in a set) and the condition on
    /// the promoted `objectId` column lets SQL use its index.
    package static func coatyObjects(withObjectIds objectIds: [String]) -> StoreQuery {
        StoreQuery(
            scope: .coatyObjects,
            keys: objectIds,
            filter: .where("objectId", .in(objectIds.map(JSONValue.string)))
        )
    }
}

extension ReadTransactionType {
    /// See ``ReadTransactionType/coatyObjectIndexes(withObjectIds:)``.
    /// - Parameter objectIds: the objectIds (lowercase).
    /// - Returns: the indexes by objectId.
    /// - Throws: a backend error.
    public func coatyObjectIndexes(withObjectIds objectIds: [String]) async throws -> [String: [StoreIndex]] {
        guard !objectIds.isEmpty else { return [:] }
        var indexes: [String: [StoreIndex]] = [:]
        for row in try await rows(matching: .coatyObjects(withObjectIds: objectIds)) {
            if let id = row.object["objectId"]?.stringValue { indexes[id, default: []].append(row.index) }
        }
        return indexes
    }
}

extension ReadTransactionType {
    /// A value of the default local store.
    /// - Parameter key: the key.
    /// - Returns: the value, or `nil`.
    /// - Throws: a backend error.
    public func localValue(forKey key: String) async throws -> JSONValue? { try await localValue(forKey: key, in: "") }

    /// The keys of the default local store, sorted.
    /// - Returns: the keys.
    /// - Throws: a backend error.
    public func localKeys() async throws -> [String] { try await localKeys(in: "") }
}

extension ReadTransactionType {
    /// Counts by reading the rows; backends override this with a cheaper count.
    /// - Parameter query: the query.
    /// - Returns: the count.
    /// - Throws: a backend error.
    public func count(matching query: StoreQuery) async throws -> Int {
        try await rows(matching: query).count
    }
}
