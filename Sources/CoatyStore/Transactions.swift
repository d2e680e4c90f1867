public import CoatyCore
import CoatySync
import Synchronization

/// Where a stored item lives: a key inside a collection.
///
/// A Coaty object is stored in the collection named by its object type, under its objectId.
public struct StoreIndex: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The collection, e.g. `com.example.Light`.
    public var collection: String
    /// The key inside the collection, e.g. a lowercase objectId.
    public var key: String

    /// An index.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - key: the key inside the collection.
    public init(_ collection: String, _ key: String) {
        self.collection = collection
        self.key = key
    }

    /// `collection/key`.
    public var description: String { "\(collection)/\(key)" }
}

/// One untyped stored row: an item's JSON and its metadata's JSON at an index.
public struct StoreRow: Sendable, Hashable {
    /// Where the row is stored.
    public var index: StoreIndex
    /// The item's JSON (a JSON object for every Coaty object).
    public var object: JSONValue
    /// The metadata's JSON, stored beside the item; `nil` when the item has none.
    public var metadata: JSONValue?
    /// The item's JSON text (UTF-8) when the writer has it already, e.g. a received object's
    /// text (``CoatyModel/AnyCoatyObject/receivedText``): a backend that stores text stores these
    /// bytes instead of serializing ``object`` again. When set, it must be a JSON text of
    /// ``object``. Not part of equality or hashing.
    public var objectText: [UInt8]?

    /// A row.
    /// - Parameters:
    ///   - index: where the row is stored.
    ///   - object: the item's JSON.
    ///   - metadata: the metadata's JSON, if any.
    public init(index: StoreIndex, object: JSONValue, metadata: JSONValue? = nil) {
        self.index = index
        self.object = object
        self.metadata = metadata
    }

    /// Equal when index, object and metadata are equal.
    public static func == (lhs: StoreRow, rhs: StoreRow) -> Bool {
        lhs.index == rhs.index && lhs.object == rhs.object && lhs.metadata == rhs.metadata
    }

    /// Hashes index, object and metadata.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(index)
        hasher.combine(object)
        hasher.combine(metadata)
    }
}

/// Which rows a query or a typed reader looks at.
public enum StoreScope: Sendable, Hashable {
    /// The rows of one collection.
    case collection(String)
    /// The rows of several collections.
    case collections([String])
    /// The Coaty objects whose `coreType` member is one of these wire strings (e.g. `"Task"`).
    case coreTypes([String])
    /// Every row that is a Coaty object (it has string `objectType` and `coreType` members).
    case coatyObjects
    /// Every row.
    case all

    /// Whether a row at `index` with the given promoted columns is in this scope.
    /// - Parameters:
    ///   - index: the row's index.
    ///   - columns: the row's promoted columns.
    /// - Returns: `true` when the row belongs to the scope.
    public func contains(_ index: StoreIndex, columns: PromotedColumns) -> Bool {
        switch self {
        case .collection(let name): index.collection == name
        case .collections(let names): names.contains(index.collection)
        case .coreTypes(let types): columns.coreType.map(types.contains) ?? false
        case .coatyObjects: columns.coreType != nil && columns.objectType != nil
        case .all: true
        }
    }
}

/// A description of the rows to read: a scope, optionally some keys, and a Coaty filter.
///
/// Backends evaluate the filter with Coaty's exact semantics (``ObjectMatcher``), conditions,
/// ordering, skip and take included; SQL backends push down only what gives the same result.
public struct StoreQuery: Sendable, Hashable {
    /// The rows looked at.
    public var scope: StoreScope
    /// When set, only rows with one of these keys.
    public var keys: [String]?
    /// The filter: conditions, ordering, skip and take; `nil` selects every row in scope.
    public var filter: ObjectFilter?
    /// Whether the rows must carry their metadata; `false` lets a backend skip reading and parsing
    /// it (``StoreRow/metadata`` may then be `nil`), for a reader that needs the objects only.
    public var includesMetadata: Bool

    /// A query.
    /// - Parameters:
    ///   - scope: the rows looked at.
    ///   - keys: only rows with one of these keys, when set.
    ///   - filter: the Coaty filter, when set.
    ///   - includesMetadata: whether the rows carry their metadata (default `true`).
    public init(scope: StoreScope, keys: [String]? = nil, filter: ObjectFilter? = nil, includesMetadata: Bool = true) {
        self.scope = scope
        self.keys = keys
        self.filter = filter
        self.includesMetadata = includesMetadata
    }
}

extension ObjectFilter {
    /// The rows to skip and take when a backend's SQL selects exactly the filter's matches and
    /// may page them itself; `take` is `nil` for no limit.
    ///
    /// `nil` when paging must be left to ``CoatyFilter/ObjectMatcher``: the filter orders its
    /// results (SQL's collation is not Coaty's), or its `take` is negative.
    public var exactSQLPaging: (skip: Int, take: Int?)? {
        if let ordering = orderByProperties, !ordering.isEmpty { return nil }
        let take = self.take ?? 0
        if take < 0 { return nil }
        return (max(skip ?? 0, 0), take > 0 ? take : nil)
    }
}

extension StoreScope {
    /// The one collection this scope names, if it names exactly one.
    public var singleCollection: String? {
        switch self {
        case .collection(let name): name
        case .collections(let names) where names.count == 1: names[0]
        default: nil
        }
    }
}

/// The JSON-property indexes declared on a database (``JSONPropertyIndexing``), shared by its
/// connections; the SQL backends keep the declarations in their own table and load them here.
public final class JSONIndexDeclarations: Sendable {
    /// A declared index: a top-level property of the items of one collection.
    public struct Key: Hashable, Sendable {
        /// The collection.
        public var collection: String
        /// The property.
        public var property: String

        /// A declaration.
        /// - Parameters:
        ///   - collection: the collection.
        ///   - property: the property.
        public init(collection: String, property: String) {
            self.collection = collection
            self.property = property
        }

        /// The index's name in the database: `coaty_json_` and a hash of collection and property.
        public var indexName: String {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in (collection + "\u{0}" + property).utf8 {
                hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
            }
            return "coaty_json_" + String(hash, radix: 16)
        }
    }

    private let keys = CoatyMutex<Set<Key>>([])

    /// No declarations yet.
    public init() {}

    /// Records declarations.
    /// - Parameter new: the declarations.
    public func insert(_ new: [Key]) { keys.withLock { $0.formUnion(new) } }

    /// Whether an index is declared on `property` of `collection`.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - property: the property.
    /// - Returns: `true` when declared.
    public func contains(collection: String, property: String) -> Bool {
        keys.withLock { $0.contains(Key(collection: collection, property: property)) }
    }

    /// Every declaration.
    public var all: [Key] { keys.withLock { Array($0) } }

    /// Whether `property` can be indexed: a top-level member named with ASCII letters, digits and
    /// `_`, not starting with a digit (it is written into SQL as a JSON path).
    /// - Parameter property: the property.
    /// - Returns: `true` when it can.
    public static func isIndexable(_ property: String) -> Bool {
        guard let first = property.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            return false
        }
        return property.utf8.allSatisfy { c in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) || c == UInt8(ascii: "_")
        }
    }
}

/// A transaction that also reads rows with SQL written by the caller (the SQLite and PostgreSQL
/// backends): the escape hatch for what an `ObjectFilter` cannot say — a computed expression, a
/// function of the database, a comparison between two members.
///
/// The condition is SQL over the row table: `object` is the item's JSON (`TEXT` read with
/// `json_extract(object, '$.a')` in SQLite, `jsonb` read with `object->>'a'` in PostgreSQL),
/// `metadata` the metadata's, and `objectId`, `objectType`, `coreType`, `name`, `externalId`,
/// `parentObjectId`, `locationId` are the promoted columns (quote them in PostgreSQL). Arguments
/// are bound to the placeholders in order — `?` in SQLite, `$1`, `$2`, … in PostgreSQL — and are
/// never spliced into the text. Rows outside the scope are never returned.
///
/// ```swift
/// let dim = try await connection.read { tx in
///     try Light.read(tx).matchingSQL(
///         "json_extract(object, '$.luminance') < json_extract(object, '$.minimum') * ?",
///         arguments: [1.5],
///         orderBySQL: "name"
///     )
/// }
/// ```
public protocol SQLReadTransaction: ReadTransactionType {
    /// The rows in `scope` satisfying `condition`.
    /// - Parameters:
    ///   - scope: the rows looked at.
    ///   - condition: an SQL boolean expression; placeholders for `arguments`.
    ///   - arguments: the values bound to the placeholders (strings, numbers, booleans, `null`;
    ///     arrays and objects as their JSON text).
    ///   - orderBy: an SQL ORDER BY list; insertion order when `nil`.
    ///   - limit: the most rows, when set.
    /// - Returns: the rows.
    /// - Throws: a backend error, naming what the database refused.
    func rows(
        in scope: StoreScope,
        whereSQL condition: String,
        arguments: [JSONValue],
        orderBySQL orderBy: String?,
        limit: Int?
    ) async throws -> [StoreRow]
}

/// SQL text that stays within a database's limits, for backends that push filters into SQL.
public enum SQLText {
    /// The most bound arguments a pushed-down filter may use: below SQLite's 32 766 and
    /// PostgreSQL's 65 535 with room for the scope's own. A filter that needs more is evaluated by
    /// ``CoatyFilter/ObjectMatcher`` instead (every row in scope is a candidate).
    public static let maximumArguments = 30_000

    /// The most conditions of one filter a backend pushes into SQL. SQLite's planner and code
    /// generator compare each term of a WHERE clause with the others (their cost grows with the
    /// square of the terms: seconds for a few thousand), so of a longer and-ed list only the first
    /// that translate go into SQL, as a necessary condition, and ``CoatyFilter/ObjectMatcher``
    /// checks the rest on the rows they select; a longer or-ed list restricts nothing in SQL.
    /// ("Indexes and fast queries" in the CoatyStore docs has the measurements.)
    public static let maximumPushedConditions = 64

    /// The indexable top-level properties (``JSONIndexDeclarations/isIndexable(_:)``) whose
    /// conditions satisfy `test` (a backend: "I can compare this exactly when the property holds
    /// only numbers").
    /// - Parameters:
    ///   - conditions: a filter's conditions.
    ///   - test: whether a condition's expression qualifies.
    /// - Returns: the properties.
    public static func properties(
        of conditions: ObjectFilterConditions?,
        where test: (ObjectFilterExpression) -> Bool
    ) -> Set<String> {
        let list: [ObjectFilterCondition]
        switch conditions {
        case .condition(let condition)?: list = [condition]
        case .and(let conditions)?, .or(let conditions)?: list = conditions
        case nil: list = []
        }
        var keys: Set<String> = []
        for condition in list {
            let path = condition.property.path
            if path.count == 1, JSONIndexDeclarations.isIndexable(path[0]), test(condition.expression) {
                keys.insert(path[0])
            }
        }
        return keys
    }

    /// A string as an SQL string literal: in single quotes, each `'` doubled (standard SQL, as
    /// SQLite and PostgreSQL with `standard_conforming_strings` read it). For names the SQL must
    /// hold literally, such as the collection a partial index is defined on.
    /// - Parameter text: the string.
    /// - Returns: the literal.
    public static func literal(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''") + "'"
    }

    /// `parts` joined by `separator` (` AND `, ` OR `) as a balanced tree of parentheses: a Query
    /// with thousands of conditions then has an expression depth of about log₂ of their number
    /// (SQLite refuses depths beyond 1000; a flat chain of n terms has depth n).
    /// - Parameters:
    ///   - parts: the operands, each already parenthesized or atomic.
    ///   - separator: the operator with its spaces.
    /// - Returns: the joined text.
    public static func balanced(_ parts: [String], _ separator: String) -> String {
        if parts.count <= 8 { return parts.joined(separator: separator) }
        let middle = parts.count / 2
        return "(" + balanced(Array(parts[..<middle]), separator) + ")" + separator + "("
            + balanced(Array(parts[middle...]), separator) + ")"
    }
}

extension ObjectFilterOperator {
    /// The SQL operator of a numeric comparison (`<`, `<=`, `>`, `>=`), or `nil` for any other
    /// operator; for backends that push conditions into SQL.
    public var sqlComparison: String? {
        switch self {
        case .lessThan: "<"
        case .lessThanOrEqual: "<="
        case .greaterThan: ">"
        case .greaterThanOrEqual: ">="
        default: nil
        }
    }
}

extension JSONValue {
    /// 2^53: SQL compares numbers below this magnitude as JavaScript does; conditions on larger
    /// ones are left to ``CoatyFilter/ObjectMatcher`` (JavaScript compares them as doubles).
    public static let exactSQLNumberLimit = JSONMemberProbe.exactLimit

    /// Whether this is a finite number below ``exactSQLNumberLimit`` in magnitude, so a backend
    /// may compare it in SQL.
    public var isExactSQLNumber: Bool {
        switch self {
        case .int(let i): Swift.abs(Double(i)) < Self.exactSQLNumberLimit
        case .double(let d): d.isFinite && Swift.abs(d) < Self.exactSQLNumberLimit
        default: false
        }
    }
}

/// How a write treats an existing row at the same index.
public enum StoreWriteMode: Sendable, Hashable {
    /// Insert, or replace the existing row (the row keeps its position in insertion order).
    case upsert
    /// Insert only; an existing row is kept and the write is skipped.
    case insert
    /// Replace only; when there is no row the write is skipped.
    case update
}

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
    static func coatyObjects(withObjectIds objectIds: [String]) -> StoreQuery {
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

/// The untyped primitives a write transaction adds to reading.
public protocol WriteTransactionType: ReadTransactionType {
    /// Writes a row.
    /// - Parameters:
    ///   - row: the row, with its metadata (`nil` stores none).
    ///   - mode: how an existing row at the same index is treated.
    /// - Returns: whether the row was written.
    /// - Throws: a backend error.
    @discardableResult
    func write(_ row: StoreRow, mode: StoreWriteMode) async throws -> Bool

    /// Writes rows in order, with the effect of writing each in turn with ``write(_:mode:)``
    /// (the default does that). A backend for which a statement is a round trip writes many rows
    /// with one statement (PostgreSQL).
    /// - Parameters:
    ///   - rows: the rows, with their metadata.
    ///   - mode: how an existing row at the same index is treated.
    /// - Returns: how many rows were written.
    /// - Throws: a backend error.
    @discardableResult
    func writeRows(_ rows: [StoreRow], mode: StoreWriteMode) async throws -> Int

    /// Removes the row at an index.
    /// - Parameter index: the index.
    /// - Returns: whether a row was removed.
    /// - Throws: a backend error.
    @discardableResult
    func removeRow(at index: StoreIndex) async throws -> Bool

    /// Removes the rows a query selects.
    /// - Parameter query: the query.
    /// - Returns: the indexes of the removed rows.
    /// - Throws: a backend error.
    @discardableResult
    func removeRows(matching query: StoreQuery) async throws -> [StoreIndex]

    /// Sets or removes (`nil`) a value of a local key/value store.
    /// - Parameters:
    ///   - value: the value; `nil` removes the key.
    ///   - key: the key.
    ///   - store: the store's name (`""` is the default store).
    /// - Throws: a backend error.
    func setLocalValue(_ value: JSONValue?, forKey key: String, in store: String) async throws
}

extension WriteTransactionType {
    /// Writes each row in turn with ``write(_:mode:)``.
    /// - Parameters:
    ///   - rows: the rows.
    ///   - mode: how an existing row at the same index is treated.
    /// - Returns: how many rows were written.
    /// - Throws: a backend error.
    @discardableResult
    public func writeRows(_ rows: [StoreRow], mode: StoreWriteMode) async throws -> Int {
        var written = 0
        for row in rows where try await write(row, mode: mode) { written += 1 }
        return written
    }

    /// Sets or removes (`nil`) a value of the default local store.
    /// - Parameters:
    ///   - value: the value; `nil` removes the key.
    ///   - key: the key.
    /// - Throws: a backend error.
    public func setLocalValue(_ value: JSONValue?, forKey key: String) async throws {
        try await setLocalValue(value, forKey: key, in: "")
    }

    /// Removes by reading the rows first; backends may override this.
    /// - Parameter query: the query.
    /// - Returns: the indexes of the removed rows.
    /// - Throws: a backend error.
    @discardableResult
    public func removeRows(matching query: StoreQuery) async throws -> [StoreIndex] {
        var removed: [StoreIndex] = []
        for row in try await rows(matching: query) where try await removeRow(at: row.index) {
            removed.append(row.index)
        }
        return removed
    }
}

/// A connection to a database: runs read and write transactions.
///
/// Async all the way: the transaction bodies are `async` closures and the primitives of a
/// transaction are `async` requirements, so no backend blocks a Swift concurrency thread while
/// it waits for its database. PostgreSQL awaits each statement on its pooled connection; SQLite
/// (whose work is synchronous, and on one connection's thread) runs the body on that thread of
/// GRDB's, which runs nothing else until the body ends; the in-memory backend runs it where the
/// caller is. A write commits when its body returns and rolls back when its body throws.
///
/// A body may await other work (an actor, a clock) while it holds its transaction; it must not
/// start another transaction of the same database and wait for it (SQLite has one writer, and a
/// body holds it), and it must not let the transaction escape.
///
/// ```swift
/// let moved = try await connection.write { tx in
///     let light = try await Light.read(tx).byKey(id)
///     try await light?.remove(from: tx)
///     return light
/// }
/// ```
public protocol ConnectionType: Sendable {
    /// The backend's read transaction.
    associatedtype ReadTransaction: ReadTransactionType
    /// The backend's write transaction.
    associatedtype WriteTransaction: WriteTransactionType

    /// Runs `body` in a read transaction that sees one consistent snapshot.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or the backend throws.
    func read<T: Sendable>(_ body: @escaping @Sendable (ReadTransaction) async throws -> T) async throws -> T

    /// Runs `body` in a write transaction: commits when it returns, rolls back when it throws.
    /// - Parameter body: the writes.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or the backend throws (after the rollback).
    func write<T: Sendable>(_ body: @escaping @Sendable (WriteTransaction) async throws -> T) async throws -> T

    /// Runs a brief read (a lookup by key or indexed column); see the default implementation.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or the backend throws.
    func readBriefly<T: Sendable>(_ body: @escaping @Sendable (ReadTransaction) async throws -> T) async throws -> T

    /// Runs a read that is probably brief where a backend can run it without a thread switch,
    /// stopping it once it has run for about a millisecond; see the default implementation.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns, or `nil` when the backend stopped it or has no such path.
    /// - Throws: what `body` or the backend throws.
    func readIfBrief<T: Sendable>(_ body: @escaping @Sendable (ReadTransaction) async throws -> T) async throws -> T?

    /// Whether write transactions run one at a time, in the order ``write(_:)`` was called (one
    /// writer connection, as SQLite's): a writer may then call ``write(_:)`` again before its
    /// previous transaction has ended and rely on that order. `false` by default.
    static var writesInCallOrder: Bool { get }
}

extension ConnectionType {
    /// `false`: see ``ConnectionType/writesInCallOrder``.
    public static var writesInCallOrder: Bool { false }

    /// Runs a brief read — a lookup by key or by an indexed column, microseconds of work — where a
    /// backend has a cheaper path for it (SQLite: its one brief-read connection, with cached
    /// `BEGIN` and `COMMIT` and no reader checkout); by default a ``read(_:)``. Never for scans or
    /// filters that may read many rows: brief reads are serialized on that connection.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or the backend throws.
    public func readBriefly<T: Sendable>(_ body: @escaping @Sendable (ReadTransaction) async throws -> T) async throws
        -> T
    {
        try await read(body)
    }

    /// Runs a read that is probably brief — a page walked on an index, a filter an index serves —
    /// on the calling thread where a backend can (SQLite: on its brief-read connection), and
    /// stops it once it has run for ``briefReadBudget``; `nil` then, and by default (backends
    /// without such a path): run the same body with ``read(_:)``. A read that turns out long
    /// thus costs at most the budget twice; a brief one saves the two thread switches of a hop
    /// to a reader and back.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns, or `nil`.
    /// - Throws: what `body` or the backend throws.
    public func readIfBrief<T: Sendable>(_ body: @escaping @Sendable (ReadTransaction) async throws -> T) async throws
        -> T?
    {
        nil
    }

    /// Runs `body` with ``readIfBrief(_:)``, and with ``read(_:)`` when that did not finish it.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or the backend throws.
    public func readBrieflyIfPossible<T: Sendable>(_ body: @escaping @Sendable (ReadTransaction) async throws -> T)
        async throws -> T
    {
        if let result = try await readIfBrief(body) { return result }
        return try await read(body)
    }
}

/// How long ``ConnectionType/readIfBrief(_:)`` lets a read run on the calling thread.
public let briefReadBudget: Duration = .milliseconds(1)

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
