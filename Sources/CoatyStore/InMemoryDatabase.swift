public import CoatyCore
import Synchronization

/// The rows and local values of an in-memory database: a value, copied by a write transaction
/// and swapped in when it commits.
struct InMemoryState: Sendable {
    struct Entry: Sendable {
        var sequence: Int
        var row: StoreRow
        var columns: PromotedColumns
    }

    var entries: [StoreIndex: Entry] = [:]
    var nextSequence = 0
    var local: [String: JSONValue] = [:]

    /// The entries in scope and among `keys`, in insertion order.
    func entries(in scope: StoreScope, keys: [String]?) -> [Entry] {
        let keySet = keys.map(Set.init)
        var selected: [Entry] = []
        if case .collection(let collection) = scope, let keySet {
            for key in keySet {
                if let entry = entries[StoreIndex(collection, key)] { selected.append(entry) }
            }
        } else {
            for entry in entries.values where scope.contains(entry.row.index, columns: entry.columns) {
                if let keySet, !keySet.contains(entry.row.index.key) { continue }
                selected.append(entry)
            }
        }
        selected.sort { $0.sequence < $1.sequence }
        return selected
    }

    func rows(matching query: StoreQuery) -> [StoreRow] {
        let rows = entries(in: query.scope, keys: query.keys).map(\.row)
        return ObjectMatcher.apply(query.filter, to: rows) { $0.object }
    }
}

/// An in-memory database: every connection shares one state behind a mutex.
///
/// Reads see a snapshot; a write transaction works on a copy and swaps it in when its body
/// returns, so a throwing body leaves the state unchanged. Writes are serialized; a write
/// transaction copies the state, so it costs O(rows) — this backend is for tests and small
/// agents.
public final class InMemoryDatabase: DatabaseType {
    let state = Mutex(InMemoryState())

    /// An empty database.
    public init() {}

    /// A connection to this database.
    /// - Returns: the connection.
    public func makeConnection() -> InMemoryConnection { InMemoryConnection(database: self) }
}

/// A connection to an ``InMemoryDatabase``.
public struct InMemoryConnection: ConnectionType {
    let database: InMemoryDatabase

    /// Runs `body` on a snapshot.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws.
    public func read<T: Sendable>(_ body: @escaping @Sendable (InMemoryTransaction) throws -> T) async throws -> T {
        let snapshot = database.state.withLock { $0 }
        return try body(InMemoryTransaction(snapshot))
    }

    /// Runs `body` on a copy of the state and commits the copy when `body` returns.
    /// - Parameter body: the writes.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws; nothing is changed then.
    public func write<T: Sendable>(_ body: @escaping @Sendable (InMemoryTransaction) throws -> T) async throws -> T {
        try database.state.withLock { state throws -> T in
            let transaction = InMemoryTransaction(state)
            let result = try body(transaction)
            state = transaction.state
            return result
        }
    }
}

/// A read or write transaction of an ``InMemoryDatabase``.
public final class InMemoryTransaction: WriteTransactionType {
    var state: InMemoryState

    init(_ state: InMemoryState) {
        self.state = state
    }

    /// The row at an index.
    /// - Parameter index: the index.
    /// - Returns: the row, or `nil`.
    public func row(at index: StoreIndex) -> StoreRow? { state.entries[index]?.row }

    /// The keys of a collection in insertion order.
    /// - Parameter collection: the collection.
    /// - Returns: the keys.
    public func keys(in collection: String) -> [String] {
        state.entries(in: .collection(collection), keys: nil).map(\.row.index.key)
    }

    /// The rows a query selects, evaluated with ``CoatyCore/ObjectMatcher``.
    /// - Parameter query: the query.
    /// - Returns: the rows.
    public func rows(matching query: StoreQuery) -> [StoreRow] { state.rows(matching: query) }

    /// A local value.
    /// - Parameter key: the key.
    /// - Returns: the value, or `nil`.
    public func localValue(forKey key: String) -> JSONValue? { state.local[key] }

    /// The local keys, sorted.
    /// - Returns: the keys.
    public func localKeys() -> [String] { state.local.keys.sorted() }

    /// Writes a row.
    /// - Parameters:
    ///   - row: the row.
    ///   - mode: how an existing row is treated.
    /// - Returns: whether it was written.
    @discardableResult
    public func write(_ row: StoreRow, mode: StoreWriteMode) -> Bool {
        let existing = state.entries[row.index]
        switch (mode, existing) {
        case (.insert, .some), (.update, .none): return false
        default: break
        }
        let sequence: Int
        if let existing {
            sequence = existing.sequence
        } else {
            sequence = state.nextSequence
            state.nextSequence += 1
        }
        state.entries[row.index] = InMemoryState.Entry(
            sequence: sequence,
            row: row,
            columns: PromotedColumns(row.object)
        )
        return true
    }

    /// Removes a row.
    /// - Parameter index: the index.
    /// - Returns: whether it existed.
    @discardableResult
    public func removeRow(at index: StoreIndex) -> Bool {
        state.entries.removeValue(forKey: index) != nil
    }

    /// Sets or removes a local value.
    /// - Parameters:
    ///   - value: the value; `nil` removes it.
    ///   - key: the key.
    public func setLocalValue(_ value: JSONValue?, forKey key: String) {
        state.local[key] = value
    }
}
