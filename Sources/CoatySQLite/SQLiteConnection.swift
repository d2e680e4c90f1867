import CoatyFilter
import CoatyModel
public import CoatyStore
import CoatySync
import GRDB
import GRDBSQLite
import Synchronization

/// A connection to a ``SQLiteDatabase``.
public struct SQLiteConnection: ConnectionType, JSONPropertyIndexing {
    let pool: DatabasePool
    let briefReader: DatabaseQueue
    let lookupReader: DatabaseQueue
    let indexes: JSONIndexDeclarations
    let numericKnowledge: NumericKnowledge

    /// Runs `body` in a read transaction on a snapshot (WAL readers run beside the writer), on
    /// one of GRDB's reader queues: the reader's thread runs the body's work and waits while the
    /// body awaits anything else, so a long read never holds a Swift concurrency thread. The body
    /// runs in the calling task (its task-local values, priority and cancellation apply).
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or SQLite throws.
    public func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) async throws -> T) async throws
        -> T
    {
        let pool = pool
        return try await run(body) { work, ended in
            pool.asyncRead { database in ended(Result { try work(database.get()) }) }
        }
    }

    /// Runs a brief read (a lookup by key or indexed column) on the database's one read-only
    /// connection for brief reads: a WAL reader never waits for the writer, and that connection's
    /// transaction is begun and committed with cached statements (GRDB's `read` prepares `BEGIN`
    /// and `COMMIT` afresh each time, a third of a lookup's cost) without the pool's reader
    /// checkout. Brief reads are serialized on that connection, whose thread runs the body's work;
    /// the calling task is suspended meanwhile, never its thread blocked. Never for scans: use
    /// ``read(_:)``.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or SQLite throws.
    public func readBriefly<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) async throws -> T)
        async throws -> T
    {
        let briefReader = briefReader
        return try await run(body) { work, ended in
            briefReader.asyncUnsafeRead { database in
                ended(Result { try Self.inBriefTransaction(database.get(), work) })
            }
        }
    }

    /// The rows `query` selects. A lookup of a promoted, indexed column — `objectId` or
    /// `externalId` equal to a string, over Coaty objects, as a Discover's — runs synchronously on
    /// the calling thread, on the database's connection for such lookups, in a read transaction
    /// begun and committed with cached statements: a few microseconds of SQLite work that blocks
    /// the caller no longer than that (and than another such lookup), without the two thread
    /// switches of a hop to a connection's thread and back. Any other query runs in
    /// ``readBriefly(_:)``.
    /// - Parameter query: the lookup.
    /// - Returns: the rows.
    /// - Throws: `CancellationError` when the task is cancelled, or what SQLite throws.
    public func lookUpRows(matching query: StoreQuery) async throws -> [StoreRow] {
        guard let lookup = PromotedLookup(query) else {
            return try await readBriefly { tx in try tx.rows(matching: query) }
        }
        try Task.checkCancellation()
        return try lookUpNow(lookup, parsing: true)
    }

    /// ``lookUpRows(matching:)`` with each row made from its stored texts, parsed when read (see
    /// ``CoatyStore/ConnectionType/lookUpRowTexts(matching:)``): a Discover's lookup by objectId
    /// then builds no JSON tree for the object it sends on as stored.
    /// - Parameter query: the lookup.
    /// - Returns: the rows.
    /// - Throws: `CancellationError` when the task is cancelled, or what SQLite throws.
    public func lookUpRowTexts(matching query: StoreQuery) async throws -> [StoreRow] {
        guard let lookup = PromotedLookup(query) else { return try await lookUpRows(matching: query) }
        try Task.checkCancellation()
        return try lookUpNow(lookup, parsing: false)
    }

    /// ``lookUpRows(matching:)``'s lookup, on the calling thread (GRDB's synchronous access: an
    /// `async` caller would pick its asynchronous overload, which hops to the connection's queue).
    private func lookUpNow(_ lookup: PromotedLookup, parsing: Bool) throws -> [StoreRow] {
        let (indexes, numericKnowledge) = (indexes, numericKnowledge)
        return try lookupReader.unsafeRead { db in
            var rows: [StoreRow] = []
            try Self.inBriefTransaction(db) { db in
                rows = try SQLiteTransaction(db, indexes: indexes, numericKnowledge: numericKnowledge)
                    .rows(lookup, parsing: parsing)
            }
            return rows
        }
    }

    /// Runs a probably brief read on the brief-read connection (see ``readBriefly(_:)``), and stops
    /// it (SQLite's progress handler, checked every 1000 virtual-machine steps) once it has run
    /// for ``CoatyStore/briefReadBudget``: `nil` then, so the caller runs it with ``read(_:)``.
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns, or `nil` when it was stopped.
    /// - Throws: what `body` or SQLite throws (but not the stop).
    public func readIfBrief<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) async throws -> T)
        async throws -> T?
    {
        let briefReader = briefReader
        let budget = BriefReadBudget(briefReadBudget)
        do {
            let result = try await run(body) { work, ended in
                briefReader.asyncUnsafeRead { database in
                    ended(Result { try Self.readWithBudget(database.get(), budget: budget, work) })
                }
            }
            // A body that caught SQLite's interruption must not return what it read so far.
            return budget.exceeded ? nil : result
        } catch  where budget.exceeded {
            return nil
        }
    }

    /// Runs `work` in a brief read transaction on `db`, stopped by SQLite's progress handler once
    /// `budget` is spent.
    private static func readWithBudget(_ db: Database, budget: BriefReadBudget, _ work: (Database) throws -> Void)
        throws
    {
        let connection = db.sqliteConnection
        budget.start()
        sqlite3_progress_handler(
            connection,
            1000,
            { context in
                guard let context else { return 0 }
                return Unmanaged<BriefReadBudget>.fromOpaque(context).takeUnretainedValue().check()
                    ? 1 : 0
            },
            Unmanaged.passUnretained(budget).toOpaque()
        )
        // The handler goes before the transaction ends: SQLite counts a cached statement's
        // steps across its runs, so the handler can fire inside COMMIT, and an interrupted
        // COMMIT would leave the transaction open (the soak benchmark crashed a loaded
        // recorder so).
        let removeHandler = {
            withExtendedLifetime(budget) { sqlite3_progress_handler(connection, 0, nil, nil) }
        }
        defer { removeHandler() }
        try Self.inBriefTransaction(db, beforeEnd: removeHandler, work)
    }

    /// See ``SQLiteDatabase/createIndex(collection:property:)``.
    public func createIndex(collection: String, property: String) async throws {
        try await SQLiteDatabase.createIndex(collection: collection, property: property, pool: pool, indexes: indexes)
    }

    /// See ``SQLiteDatabase/hasIndex(collection:property:)``.
    public func hasIndex(collection: String, property: String) -> Bool {
        indexes.contains(collection: collection, property: property)
    }

    /// Runs `body` in `access` (GRDB's access to one connection: the pool's reader or writer, or
    /// the brief reader), on that connection's thread (``ConnectionThreadExecutor``); a read's
    /// statements are interrupted when its task is cancelled.
    private func run<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteTransaction) async throws -> T,
        interruptible: Bool = true,
        access: (
            _ work: @escaping @Sendable (Database) throws -> Void,
            _ ended: @escaping @Sendable (Result<Void, any Error>) -> Void
        ) -> Void
    ) async throws -> T {
        let (indexes, numericKnowledge) = (indexes, numericKnowledge)
        return try await ConnectionThreadExecutor.run(interruptible: interruptible, in: access) { db in
            try await body(SQLiteTransaction(db, indexes: indexes, numericKnowledge: numericKnowledge))
        }
    }

    /// Runs `work` in a read transaction on `db` begun and committed with cached statements.
    /// - Parameters:
    ///   - beforeEnd: runs after `work`, before the transaction ends.
    private static func inBriefTransaction(
        _ db: Database,
        beforeEnd: () -> Void = {},
        _ work: (Database) throws -> Void
    ) throws {
        try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
        defer {
            beforeEnd()
            // A read transaction's commit only releases the snapshot; it cannot fail for a reason
            // the read's result would depend on. Should it fail anyway, the transaction is rolled
            // back: GRDB stops the process when a transaction outlives its database access.
            if (try? db.cachedStatement(sql: "COMMIT TRANSACTION").execute()) == nil, db.isInsideTransaction {
                try? db.execute(sql: "ROLLBACK TRANSACTION")
            }
        }
        try work(db)
    }

    /// `true`: the pool has one writer connection, and ``write(_:)`` queues its transaction on
    /// that connection's serial queue when it is called (after checking for cancellation).
    public static var writesInCallOrder: Bool { true }

    /// Runs `body` in an immediate write transaction: commits when it returns, rolls back when it
    /// throws. The pool's writer thread runs the body's work and waits while the body awaits
    /// anything else (holding the write lock: other writers wait); the body runs in the calling
    /// task (its task-local values, priority and cancellation apply).
    /// - Parameter body: the writes.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or SQLite throws.
    public func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) async throws -> T) async throws
        -> T
    {
        let pool = pool
        return try await run(body, interruptible: false) { work, ended in
            pool.asyncWrite { db in
                try work(db)
            } completion: { _, result in
                ended(result)
            }
        }
    }
}

/// The deadline of one ``SQLiteConnection/readIfBrief(_:)``, checked by SQLite's progress
/// handler on the reading thread (and only there).
private final class BriefReadBudget: Sendable {
    private struct State {
        var deadline: ContinuousClock.Instant?
        var exceeded = false
    }

    private let budget: Duration
    private let state = CoatyMutex(State())

    /// Whether the read was stopped.
    var exceeded: Bool { state.withLock { $0.exceeded } }

    init(_ budget: Duration) { self.budget = budget }

    /// Starts the clock: called on the reader's thread when the read begins (time spent waiting
    /// for the connection does not count).
    func start() { state.withLock { $0.deadline = ContinuousClock.now + budget } }

    /// Whether the read must stop now.
    func check() -> Bool {
        state.withLock { state in
            if !state.exceeded, let deadline = state.deadline, ContinuousClock.now >= deadline { state.exceeded = true }
            return state.exceeded
        }
    }
}
