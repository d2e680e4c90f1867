public import CoatyModel
import CoatyFilter
import CoatySync
import Synchronization

/// The rows and local values of an in-memory database.
struct InMemoryState: Sendable {
    struct Entry: Sendable {
        var sequence: Int
        var row: StoreRow
        var columns: PromotedColumns
    }

    var entries: [StoreIndex: Entry] = [:]
    var nextSequence = 0
    /// Local values by store name, then key.
    var local: [String: [String: JSONValue]] = [:]
    /// The property indexes (``InMemoryDatabase/createIndex(collection:property:)``).
    var indexes: [JSONIndexDeclarations.Key: InMemoryPropertyIndex] = [:]
    /// The indexed properties by collection.
    var indexedProperties: [String: [String]] = [:]

    /// The entries in scope and among `keys`, in insertion order.
    func entries(in scope: StoreScope, keys: [String]?) -> [Entry] {
        entries(in: scope, keySet: keys.map(Set.init))
    }

    /// The entries in scope and among `keySet`, in insertion order.
    func entries(in scope: StoreScope, keySet: Set<String>?) -> [Entry] {
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

    /// The rows a query selects: those of its keys and of the candidates its indexes give
    /// (``indexedCandidates(_:)``), filtered and ordered by ``CoatyFilter/ObjectMatcher``.
    func rows(matching query: StoreQuery) -> [StoreRow] {
        var keys = query.keys.map(Set.init)
        if let candidates = indexedCandidates(query) {
            keys = keys.map { $0.intersection(candidates) } ?? candidates
        }
        let scope: StoreScope
        if keys != nil, case .collections(let names) = query.scope, names.count == 1 {
            scope = .collection(names[0])
        } else {
            scope = query.scope
        }
        let rows = entries(in: scope, keySet: keys).map(\.row)
        return ObjectMatcher.apply(query.filter, to: rows) { $0.object }
    }
}

/// An in-memory database: every connection shares one state.
///
/// A write transaction borrows the state for its body (writes are serialized, first come first
/// served) and keeps an undo log, so a throwing body leaves the state unchanged at the cost of
/// its own changes only; a read waits while a write holds the state, then reads a snapshot.
/// Waiting suspends the task, no thread is blocked. Queries scan the rows in scope and evaluate
/// the filter with ``CoatyFilter/ObjectMatcher`` — this backend is for tests and small agents. A
/// property index (``createIndex(collection:property:)``) narrows the rows a query of that
/// collection examines to those whose value can satisfy its conditions (string equality, `In` of
/// strings, numeric comparisons and ranges); the matcher still decides, so answers stay the same.
public final class InMemoryDatabase: DatabaseType, JSONPropertyIndexing {
    let state = InMemoryStateSlot()
    /// The indexed properties, readable while a write holds the state.
    private let declaredIndexes = JSONIndexDeclarations()

    /// An empty database.
    public init() {}

    /// A connection to this database.
    /// - Returns: the connection.
    public func makeConnection() -> InMemoryConnection { InMemoryConnection(database: self) }

    /// Indexes a top-level property of the rows of a collection, from the rows stored now on
    /// (once; later calls do nothing). Writes keep it current.
    /// - Parameters:
    ///   - collection: the collection (a Coaty object's collection is its object type).
    ///   - property: a top-level property named with letters, digits and `_`.
    /// - Throws: ``InMemoryIndexError`` for another property name.
    public func createIndex(collection: String, property: String) async throws {
        guard JSONIndexDeclarations.isIndexable(property) else { throw InMemoryIndexError(property: property) }
        var borrowed = await state.borrow()
        borrowed.createIndex(collection: collection, property: property)
        declaredIndexes.insert([JSONIndexDeclarations.Key(collection: collection, property: property)])
        state.giveBack(borrowed)
    }

    /// Whether a property of a collection is indexed.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - property: the property.
    /// - Returns: `true` when indexed.
    public func hasIndex(collection: String, property: String) -> Bool {
        declaredIndexes.contains(collection: collection, property: property)
    }
}

/// The state of an ``InMemoryDatabase``, lent to one writer at a time: readers take a snapshot
/// (a copy of the value) when no writer holds it, and wait in line otherwise. A writer takes the
/// storage over (uniquely referenced, so its mutations do not copy it) and gives it back.
final class InMemoryStateSlot: Sendable {
    private enum Waiter {
        case reader(CheckedContinuation<InMemoryState, Never>)
        case writer(CheckedContinuation<InMemoryState, Never>)
    }

    private struct Slot {
        /// `nil` while a writer holds the state.
        var state: InMemoryState? = InMemoryState()
        var waiters: [Waiter] = []
    }

    private let slot = CoatyMutex(Slot())

    /// A snapshot of the state; waits while a writer holds it.
    func snapshot() async -> InMemoryState {
        if let state = slot.withLock({ $0.state }) { return state }
        return await withCheckedContinuation { continuation in
            let ready = slot.withLock { slot -> InMemoryState? in
                if let state = slot.state { return state }
                slot.waiters.append(.reader(continuation))
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The state, for one writer; waits while another writer holds it. Give it back with
    /// ``giveBack(_:)``.
    func borrow() async -> InMemoryState {
        await withCheckedContinuation { continuation in
            let ready = slot.withLock { slot -> InMemoryState? in
                if let state = slot.state, slot.waiters.isEmpty {
                    slot.state = nil
                    return state
                }
                slot.waiters.append(.writer(continuation))
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Returns the state a writer borrowed: the readers waiting before the next writer get a
    /// snapshot, that writer the state.
    func giveBack(_ state: InMemoryState) {
        var readers: [CheckedContinuation<InMemoryState, Never>] = []
        let writer = slot.withLock { slot -> CheckedContinuation<InMemoryState, Never>? in
            while !slot.waiters.isEmpty {
                switch slot.waiters.removeFirst() {
                case .reader(let continuation): readers.append(continuation)
                case .writer(let continuation): return continuation
                }
            }
            slot.state = state
            return nil
        }
        for reader in readers { reader.resume(returning: state) }
        writer?.resume(returning: state)
    }

    /// Reads the state where no writer holds it (tests inspect the indexes so).
    func peek<T: Sendable>(_ body: (InMemoryState) -> T) -> T? {
        let state = slot.withLock { $0.state }
        return state.map(body)
    }
}

/// A property the in-memory backend cannot index.
public struct InMemoryIndexError: Error, Sendable, CustomStringConvertible {
    /// The property.
    public let property: String

    /// What to change.
    public var description: String {
        "Cannot index \"\(property)\": an index is on a top-level property named with letters, digits and _"
    }
}

/// A connection to an ``InMemoryDatabase``.
public struct InMemoryConnection: ConnectionType, JSONPropertyIndexing {
    let database: InMemoryDatabase

    /// See ``InMemoryDatabase/createIndex(collection:property:)``.
    public func createIndex(collection: String, property: String) async throws {
        try await database.createIndex(collection: collection, property: property)
    }

    /// See ``InMemoryDatabase/hasIndex(collection:property:)``.
    public func hasIndex(collection: String, property: String) -> Bool {
        database.hasIndex(collection: collection, property: property)
    }

    /// Runs `body` on a snapshot (taken when no write holds the state).
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws.
    public func read<T: Sendable>(_ body: @escaping @Sendable (InMemoryTransaction) async throws -> T) async throws
        -> T
    {
        try await body(InMemoryTransaction(await database.state.snapshot()))
    }

    /// Runs `body` holding the database's state (writes are serialized): its changes stay when it
    /// returns and are undone when it throws.
    /// - Parameter body: the writes.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws; nothing is changed then.
    public func write<T: Sendable>(_ body: @escaping @Sendable (InMemoryTransaction) async throws -> T) async throws
        -> T
    {
        // The transaction takes the storage over and keeps an undo log for a rollback.
        let transaction = InMemoryTransaction(await database.state.borrow())
        do {
            let result = try await body(transaction)
            database.state.giveBack(transaction.state)
            return result
        } catch {
            transaction.rollBack()
            database.state.giveBack(transaction.state)
            throw error
        }
    }
}

/// A read or write transaction of an ``InMemoryDatabase``.
public final class InMemoryTransaction: WriteTransactionType {
    enum Undo {
        case entry(StoreIndex, InMemoryState.Entry?)
        case local(store: String, key: String, JSONValue?)
    }

    var state: InMemoryState
    var undoLog: [Undo] = []

    init(_ state: InMemoryState) {
        self.state = state
    }

    /// Restores every row and local value this transaction changed, newest change first.
    func rollBack() {
        for undo in undoLog.reversed() {
            switch undo {
            case .entry(let index, let entry):
                state.reindex(index, old: state.entries[index]?.row, new: entry?.row)
                state.entries[index] = entry
            case .local(let store, let key, let value): state.local[store, default: [:]][key] = value
            }
        }
        undoLog.removeAll()
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

    /// The rows a query selects, evaluated with ``CoatyFilter/ObjectMatcher``.
    /// - Parameter query: the query.
    /// - Returns: the rows.
    public func rows(matching query: StoreQuery) -> [StoreRow] { state.rows(matching: query) }

    /// A local value.
    /// - Parameters:
    ///   - key: the key.
    ///   - store: the store's name.
    /// - Returns: the value, or `nil`.
    public func localValue(forKey key: String, in store: String) -> JSONValue? { state.local[store]?[key] }

    /// The keys of a local store, sorted.
    /// - Parameter store: the store's name.
    /// - Returns: the keys.
    public func localKeys(in store: String) -> [String] { (state.local[store] ?? [:]).keys.sorted() }

    /// The names of the local stores that hold a value, sorted.
    /// - Returns: the names.
    public func localStores() -> [String] { state.local.filter { !$0.value.isEmpty }.keys.sorted() }

    /// Writes a row.
    /// - Parameters:
    ///   - row: the row.
    ///   - mode: how an existing row is treated.
    /// - Returns: whether it was written.
    @discardableResult
    public func write(_ row: StoreRow, mode: StoreWriteMode) -> Bool {
        let row = row.withParsedJSON
        let existing = state.entries[row.index]
        switch (mode, existing) {
        case (.insert, .some), (.update, .none): return false
        default: break
        }
        undoLog.append(.entry(row.index, existing))
        let sequence: Int
        if let existing {
            sequence = existing.sequence
        } else {
            sequence = state.nextSequence
            state.nextSequence += 1
        }
        state.reindex(row.index, old: existing?.row, new: row)
        state.entries[row.index] = InMemoryState.Entry(
            sequence: sequence,
            row: row,
            columns: row.promotedColumns
        )
        return true
    }

    /// Removes a row.
    /// - Parameter index: the index.
    /// - Returns: whether it existed.
    @discardableResult
    public func removeRow(at index: StoreIndex) -> Bool {
        guard let removed = state.entries.removeValue(forKey: index) else { return false }
        state.reindex(index, old: removed.row, new: nil)
        undoLog.append(.entry(index, removed))
        return true
    }

    /// Sets or removes a local value.
    /// - Parameters:
    ///   - value: the value; `nil` removes it.
    ///   - key: the key.
    ///   - store: the store's name.
    public func setLocalValue(_ value: JSONValue?, forKey key: String, in store: String) {
        undoLog.append(.local(store: store, key: key, state.local[store]?[key]))
        state.local[store, default: [:]][key] = value
    }
}
