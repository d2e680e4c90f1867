import CoatyModel
import CoatyFilter

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

    /// The rows `query` selects, for a lookup by key or by an indexed column (a Discover's
    /// objectId): where a backend can, on the calling thread without a thread switch; see the
    /// default implementation.
    /// - Parameter query: the lookup.
    /// - Returns: the rows, as ``ReadTransactionType/rows(matching:)`` returns them.
    /// - Throws: what the backend throws.
    func lookUpRows(matching query: StoreQuery) async throws -> [StoreRow]

    /// The rows of ``lookUpRows(matching:)``, each made from the texts the backend stored where it
    /// stores text (``StoreRow/init(index:objectText:metadataText:)``: nothing parsed, the
    /// object `.null` when its text does not parse): for a caller that sends the stored bytes
    /// on and validates them itself, as a recorder answering a Discover does. By default the rows
    /// of ``lookUpRows(matching:)``.
    /// - Parameter query: the lookup.
    /// - Returns: the rows.
    /// - Throws: what the backend throws.
    func lookUpRowTexts(matching query: StoreQuery) async throws -> [StoreRow]

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

    /// The rows `query` selects, read in a ``readBriefly(_:)``: the default for backends without
    /// a cheaper path. SQLite runs a lookup of one of its promoted, indexed columns (objectId,
    /// externalId) synchronously on the calling thread, on a connection of its own for such
    /// lookups: microseconds of SQLite work, without the two thread switches of a hop to a
    /// connection's thread and back (the larger part of a Discover's cost when it is answered
    /// from the store).
    /// - Parameter query: the lookup: a key or an indexed column, never a scan.
    /// - Returns: the rows.
    /// - Throws: what the backend throws.
    public func lookUpRows(matching query: StoreQuery) async throws -> [StoreRow] {
        try await readBriefly { tx in try await tx.rows(matching: query) }
    }

    /// The rows of ``lookUpRows(matching:)``, parsed: the default for backends that keep no text.
    /// - Parameter query: the lookup.
    /// - Returns: the rows.
    /// - Throws: what the backend throws.
    public func lookUpRowTexts(matching query: StoreQuery) async throws -> [StoreRow] {
        try await lookUpRows(matching: query)
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
