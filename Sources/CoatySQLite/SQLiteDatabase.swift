public import CoatyCore
public import CoatyStore
import CoatySync
import GRDB
import GRDBSQLite
import Synchronization

/// An error of the SQLite backend, saying what to check.
public struct CoatySQLiteError: Error, Sendable, CustomStringConvertible {
    /// The message.
    public let message: String

    init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

/// A SQLite database file through GRDB: a `DatabasePool` in WAL mode (concurrent readers, one
/// writer), with the schema created and upgraded by versioned migrations.
///
/// Each row keeps the item's JSON text, the metadata's JSON text, and promoted indexed columns
/// (`collection`, `key`, `objectId`, `objectType`, `coreType`, `name`, `externalId`,
/// `parentObjectId`, `locationId`). Filters are pushed into SQL only where the result is exactly
/// Coaty's; the rest is evaluated with ``CoatyFilter/ObjectMatcher`` on the candidates SQL returns.
///
/// ```swift
/// let database = try SQLiteDatabase(path: "coaty.sqlite")
/// let connection = try await database.makeConnection()
/// try await light.write(to: connection, metadata: receipt)
/// ```
public final class SQLiteDatabase: DatabaseType, JSONPropertyIndexing {
    /// The file path.
    public let path: String
    let pool: DatabasePool
    /// One read-only connection for brief reads (``SQLiteConnection/readBriefly(_:)``): a lookup
    /// through it costs a third of one through the pool, whose reader checkout and isolation
    /// machinery dominate a read of one row.
    let briefReader: DatabaseQueue
    let indexes = JSONIndexDeclarations()
    /// What range lookups proved about indexed properties, shared by the connections.
    let numericKnowledge = NumericKnowledge()

    /// The most bytes of the file SQLite maps into memory (1 GiB of address space, not memory).
    static let mmapSize = 1 << 30

    /// The migrations, in order; their names are recorded in the file's `grdb_migrations` table.
    public static let migrationNames = ["v1-rows", "v2-local-context", "v3-json-indexes", "v4-named-local-stores"]

    /// The WAL size, in pages, at which a commit checkpoints it.
    static let walAutocheckpointPages = 10_000

    /// Opens (creating if needed) the SQLite file that database options of an agent
    /// configuration name (adapter `SqLiteNodeAdapter`, the connection string the file path).
    ///
    /// ```swift
    /// let configuration = try AgentConfiguration.load()
    /// let database = try SQLiteDatabase(options: configuration.database(named: "db"), at: "databases.db")
    /// ```
    /// - Parameters:
    ///   - options: the options, e.g. ``CoatyRuntime/AgentConfiguration/database(named:)``.
    ///   - path: their field path for errors.
    /// - Throws: ``CoatyRuntime/AgentConfigurationError`` naming `adapter` (another backend) or
    ///   `connectionString` (no path); ``CoatySQLiteError`` when the file cannot be opened.
    public convenience init(options: DatabaseOptions, at path: String = "") throws {
        try self.init(path: options.sqlitePath(at: path))
    }

    /// Opens (creating if needed) a database file and brings its schema up to date.
    /// - Parameter path: the file path.
    /// - Throws: ``CoatySQLiteError`` when the file cannot be opened or migrated (check the path
    ///   and its directory's permissions, and that the file is a SQLite database).
    public init(path: String) throws {
        self.path = path
        do {
            pool = try DatabasePool(path: path, configuration: Self.configuration)
            try Self.migrator.migrate(pool)
            let declared = try pool.read { db in
                try Row.fetchAll(db, sql: "SELECT collection, property FROM coaty_json_indexes")
                    .map { JSONIndexDeclarations.Key(collection: $0[0], property: $0[1]) }
            }
            indexes.insert(declared)
            var readOnly = Configuration()
            readOnly.readonly = true
            readOnly.prepareDatabase { db in try db.execute(sql: "PRAGMA mmap_size = \(Self.mmapSize)") }
            briefReader = try DatabaseQueue(path: path, configuration: readOnly)
        } catch {
            throw CoatySQLiteError("Cannot open the SQLite database at \(path): \(error)")
        }
    }

    /// The pool's configuration: every connection runs ``pragmas`` first.
    static var configuration: Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            for pragma in pragmas { try db.execute(sql: pragma) }
        }
        return configuration
    }

    /// The statements that set up each connection of the pool (the benchmark's raw GRDB baseline
    /// runs them too, so that it compares with the same settings).
    package static let pragmas = [
        // Read pages from a memory map instead of one read(2) per page: a query that
        // re-checks JSON members reads many rows.
        "PRAGMA mmap_size = \(mmapSize)",
        // WAL with synchronous NORMAL: a commit is not fsynced, the WAL is at checkpoints. A
        // crash of the process loses nothing committed; a power loss may lose the last
        // transactions, never the database's consistency (SQLite's recommendation for WAL).
        "PRAGMA synchronous = NORMAL",
        // Checkpoint the WAL every 10 000 pages (40 MB), not SQLite's 1000: a recorder's
        // inserts land on random pages of the objectId and key indexes, so consecutive
        // commits rewrite mostly the same pages, and each checkpoint copies a page once
        // however often it was rewritten (8 % more objects/s ingested, measured).
        "PRAGMA wal_autocheckpoint = \(walAutocheckpointPages)",
    ]

    /// A connection (connections share the pool).
    /// - Returns: the connection.
    public func makeConnection() -> SQLiteConnection {
        SQLiteConnection(pool: pool, briefReader: briefReader, indexes: indexes, numericKnowledge: numericKnowledge)
    }

    /// Creates (once; later calls do nothing) an index on a top-level JSON property of the items
    /// of one collection (for Coaty objects: one object type), so that Queries with a condition
    /// on that property or ordered by it read only the rows they return.
    ///
    /// It is an expression index, `json_extract(object, '$.property')`, partial on the
    /// collection: it costs writes to that collection only. A query ordered by the property walks
    /// the index and stops after `skip + take` matches; a numeric range condition reads only its
    /// range. The declaration is kept in the file.
    ///
    /// ```swift
    /// try await database.createIndex(collection: "com.example.Light", property: "luminance")
    /// ```
    /// - Parameters:
    ///   - collection: the collection (a Coaty object's collection is its object type).
    ///   - property: the property: a top-level member whose name is letters, digits and `_`.
    /// - Throws: ``CoatySQLiteError`` for another property name, or when SQLite fails.
    public func createIndex(collection: String, property: String) async throws {
        try await Self.createIndex(collection: collection, property: property, pool: pool, indexes: indexes)
    }

    static func createIndex(
        collection: String,
        property: String,
        pool: DatabasePool,
        indexes: JSONIndexDeclarations
    ) async throws {
        guard JSONIndexDeclarations.isIndexable(property) else {
            throw CoatySQLiteError(
                "Cannot index the property \"\(property)\": only top-level properties named with letters, digits and _"
            )
        }
        let key = JSONIndexDeclarations.Key(collection: collection, property: property)
        try await pool.write { db in
            try db.execute(
                sql: """
                    CREATE INDEX IF NOT EXISTS \(key.indexName) ON coaty_rows (\(SQLPlan.valueExpression(property)))
                    WHERE collection = \(SQLText.literal(collection))
                    """
            )
            try db.execute(
                sql: "INSERT OR IGNORE INTO coaty_json_indexes (collection, property, name) VALUES (?, ?, ?)",
                arguments: [collection, property, key.indexName]
            )
        }
        indexes.insert([key])
    }

    /// Whether ``createIndex(collection:property:)`` created that index (in this or an earlier run).
    /// - Parameters:
    ///   - collection: the collection.
    ///   - property: the property.
    /// - Returns: `true` when declared.
    public func hasIndex(collection: String, property: String) -> Bool {
        indexes.contains(collection: collection, property: property)
    }

    /// The indexes declared with ``createIndex(collection:property:)``, sorted.
    /// - Returns: (collection, property) pairs.
    public func declaredIndexes() -> [(collection: String, property: String)] {
        indexes.all.map { ($0.collection, $0.property) }.sorted {
            ($0.collection, $0.property) < ($1.collection, $1.property)
        }
    }

    /// The names of the migrations applied to the file, in order.
    /// - Returns: the names.
    /// - Throws: a database error.
    public func appliedMigrations() async throws -> [String] {
        try await pool.read { db in try Self.migrator.appliedMigrations(db) }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-rows") { db in
            try db.execute(
                sql: """
                    CREATE TABLE coaty_rows (
                        id INTEGER PRIMARY KEY,
                        collection TEXT NOT NULL,
                        key TEXT NOT NULL,
                        object TEXT NOT NULL,
                        metadata TEXT,
                        objectId TEXT,
                        objectType TEXT,
                        coreType TEXT,
                        name TEXT,
                        externalId TEXT,
                        parentObjectId TEXT,
                        locationId TEXT,
                        UNIQUE (collection, key)
                    );
                    CREATE INDEX coaty_rows_objectId ON coaty_rows (objectId);
                    CREATE INDEX coaty_rows_objectType ON coaty_rows (objectType);
                    CREATE INDEX coaty_rows_coreType ON coaty_rows (coreType);
                    CREATE INDEX coaty_rows_name ON coaty_rows (name);
                    CREATE INDEX coaty_rows_externalId ON coaty_rows (externalId);
                    CREATE INDEX coaty_rows_parentObjectId ON coaty_rows (parentObjectId);
                    CREATE INDEX coaty_rows_locationId ON coaty_rows (locationId);
                    """
            )
        }
        migrator.registerMigration("v2-local-context") { db in
            try db.execute(sql: "CREATE TABLE coaty_local (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)")
        }
        migrator.registerMigration("v3-json-indexes") { db in
            try db.execute(
                sql: """
                    CREATE TABLE coaty_json_indexes (
                        collection TEXT NOT NULL, property TEXT NOT NULL, name TEXT NOT NULL,
                        PRIMARY KEY (collection, property)
                    )
                    """
            )
        }
        migrator.registerMigration("v4-named-local-stores") { db in
            // The local values of v2 move to the default store "".
            try db.execute(
                sql: """
                    CREATE TABLE coaty_local_stores (
                        store TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (store, key)
                    );
                    INSERT INTO coaty_local_stores (store, key, value) SELECT '', key, value FROM coaty_local;
                    DROP TABLE coaty_local;
                    ALTER TABLE coaty_local_stores RENAME TO coaty_local;
                    """
            )
        }
        return migrator
    }
}

/// A connection to a ``SQLiteDatabase``.
public struct SQLiteConnection: ConnectionType, JSONPropertyIndexing {
    let pool: DatabasePool
    let briefReader: DatabaseQueue
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
        let (pool, indexes, numericKnowledge) = (pool, indexes, numericKnowledge)
        return try await ConnectionThreadExecutor.run(in: { work in try await pool.read(work) }) { db in
            try await body(SQLiteTransaction(db, indexes: indexes, numericKnowledge: numericKnowledge))
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
        return try await readOnBriefReader(body) { work in
            try await briefReader.unsafeRead { db in try Self.inBriefTransaction(db) { try work(db) } }
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
            let result = try await readOnBriefReader(body) { work in
                try await briefReader.unsafeRead { db in
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
                    try Self.inBriefTransaction(db, beforeEnd: removeHandler) { try work(db) }
                }
            }
            // A body that caught SQLite's interruption must not return what it read so far.
            return budget.exceeded ? nil : result
        } catch  where budget.exceeded {
            return nil
        }
    }

    /// See ``SQLiteDatabase/createIndex(collection:property:)``.
    public func createIndex(collection: String, property: String) async throws {
        try await SQLiteDatabase.createIndex(collection: collection, property: property, pool: pool, indexes: indexes)
    }

    /// See ``SQLiteDatabase/hasIndex(collection:property:)``.
    public func hasIndex(collection: String, property: String) -> Bool {
        indexes.contains(collection: collection, property: property)
    }

    /// Runs `body` on the brief reader's thread (``ConnectionThreadExecutor``), inside `access`.
    private func readOnBriefReader<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteTransaction) async throws -> T,
        access: @escaping @Sendable (@escaping @Sendable (Database) throws -> Void) async throws -> Void
    ) async throws -> T {
        let (indexes, numericKnowledge) = (indexes, numericKnowledge)
        return try await ConnectionThreadExecutor.run(in: access) { db in
            try await body(SQLiteTransaction(db, indexes: indexes, numericKnowledge: numericKnowledge))
        }
    }

    /// Runs `work` in a read transaction on `db` begun and committed with cached statements.
    /// - Parameters:
    ///   - beforeEnd: runs after `work`, before the transaction ends.
    private static func inBriefTransaction(_ db: Database, beforeEnd: () -> Void = {}, _ work: () throws -> Void)
        throws
    {
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
        try work()
    }

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
        let (pool, indexes, numericKnowledge) = (pool, indexes, numericKnowledge)
        return try await ConnectionThreadExecutor.run(in: { work in try await pool.write(work) }) { db in
            try await body(SQLiteTransaction(db, indexes: indexes, numericKnowledge: numericKnowledge))
        }
    }
}

/// A transaction of a ``SQLiteDatabase``; valid only inside its connection's closure.
public final class SQLiteTransaction: WriteTransactionType, SQLReadTransaction {
    let db: Database
    let indexes: JSONIndexDeclarations
    /// The statements of ``write(_:mode:)`` used in this transaction, by mode (a batch of writes
    /// looks its statement up once, not once per row by hashing its text). Kept as GRDB's
    /// `Statement`s: a statement cache emptied meanwhile does not finalize them.
    private var writeStatements: [StoreWriteMode: Statement] = [:]

    let numericKnowledge: NumericKnowledge

    init(_ db: Database, indexes: JSONIndexDeclarations, numericKnowledge: NumericKnowledge) {
        self.db = db
        self.indexes = indexes
        self.numericKnowledge = numericKnowledge
    }

    static let columns = "collection, key, object, metadata"
    static let columnsWithoutMetadata = "collection, key, object, NULL"

    /// The prepared statement for some SQL, from the connection's statement cache: preparing
    /// costs more than running a small query (SQLite parses and plans, GRDB's authorizer is
    /// called for every column the statement reads). The cache is bounded: see
    /// ``StatementCacheBudget``.
    func statement(_ sql: String) throws -> Statement {
        guard sql.utf8.count <= StatementCacheBudget.longestText else { return try db.makeStatement(sql: sql) }
        if StatementCacheBudget.admit(sql, in: db) { db.releaseMemory() }
        return try db.cachedStatement(sql: sql)
    }

    /// A row selected with ``columns`` (read by position: a lookup by name costs a case-insensitive
    /// comparison per column).
    func decode(_ row: Row) throws -> StoreRow {
        let index = StoreIndex(row[0], row[1])
        let objectText: String = row[2]
        let metadataText: String? = row[3]
        do {
            return StoreRow(
                index: index,
                object: try JSONValue(parsing: objectText),
                metadata: try metadataText.map { try JSONValue(parsing: $0) }
            )
        } catch {
            throw CoatySQLiteError("The stored JSON at \(index) is not valid (\(error)); remove or rewrite that row")
        }
    }

    /// The row at an index.
    /// - Parameter index: the index.
    /// - Returns: the row, or `nil`.
    /// - Throws: a database error.
    public func row(at index: StoreIndex) throws -> StoreRow? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(Self.columns) FROM coaty_rows WHERE collection = ? AND key = ?"),
            arguments: [index.collection, index.key]
        ).map(decode)
    }

    /// The keys of a collection, in insertion order.
    /// - Parameter collection: the collection.
    /// - Returns: the keys.
    /// - Throws: a database error.
    public func keys(in collection: String) throws -> [String] {
        try String.fetchAll(
            db,
            sql: "SELECT key FROM coaty_rows WHERE collection = ? ORDER BY id",
            arguments: [collection]
        )
    }

    /// The rows a query selects: SQL selects the candidates (exactly, when every condition
    /// translates), and ``CoatyFilter/ObjectMatcher`` evaluates the rest.
    /// - Parameter query: the query.
    /// - Returns: the rows.
    /// - Throws: a database error.
    public func rows(matching query: StoreQuery) throws -> [StoreRow] {
        if let lookup = PromotedLookup(query) { return try rows(lookup) }
        let (plan, hint) = try plan(for: query)
        if let rows = try orderedRows(query, plan) { return rows }
        let columns = query.includesMetadata ? Self.columns : Self.columnsWithoutMetadata
        let rows = try Row.fetchAll(
            statement(
                "SELECT \(columns) FROM coaty_rows\(hint) WHERE \(plan.whereClause) ORDER BY id\(plan.limitClause)"
            ),
            arguments: StatementArguments(plan.arguments)
        ).map(decode)
        guard !plan.isExact else { return rows }
        return ObjectMatcher.apply(query.filter, to: rows) { $0.object }
    }

    /// The rows of a ``PromotedLookup``: one cached statement, the value bound and the columns
    /// read with SQLite's C API (a Discover's lookup by objectId: planning the filter, building
    /// its SQL text and GRDB's arguments and rows cost more than SQLite's indexed search).
    private func rows(_ lookup: PromotedLookup) throws -> [StoreRow] {
        let sql = lookup.sql
        let prepared = try db.cachedStatement(sql: sql)
        let statement = prepared.sqliteStatement
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var value = lookup.value
        value.withUTF8 { utf8 in
            _ = sqlite3_bind_text(statement, 1, utf8.baseAddress, Int32(utf8.count), sqliteTransient)
        }
        func text(_ column: Int32) -> UnsafeRawBufferPointer? {
            guard let bytes = sqlite3_column_text(statement, column) else { return nil }
            return UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, column)))
        }
        var rows: [StoreRow] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code),
                    message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                    sql: sql
                )
            }
            let index = StoreIndex(
                text(0).map { String(decoding: $0, as: UTF8.self) } ?? "",
                text(1).map { String(decoding: $0, as: UTF8.self) } ?? ""
            )
            do {
                let object = try JSONValue(parsing: text(2) ?? UnsafeRawBufferPointer(start: nil, count: 0))
                let metadata = try text(3).map { try JSONValue(parsing: $0) }
                rows.append(StoreRow(index: index, object: object, metadata: metadata))
            } catch {
                throw CoatySQLiteError(
                    "The stored JSON at \(index) is not valid (\(error)); remove or rewrite that row"
                )
            }
        }
        return rows
    }

    /// See ``CoatyStore/SQLReadTransaction/rows(in:whereSQL:arguments:orderBySQL:limit:)``.
    public func rows(
        in scope: StoreScope,
        whereSQL condition: String,
        arguments: [JSONValue],
        orderBySQL orderBy: String?,
        limit: Int?
    ) throws -> [StoreRow] {
        let scopePlan = SQLPlan(StoreQuery(scope: scope))
        let values: [DatabaseValue] =
            arguments.map { value in
                switch value {
                case .null: .null
                case .bool(let flag): (flag ? 1 : 0).databaseValue
                case .int(let number): number.databaseValue
                case .double(let number): number.databaseValue
                case .string(let text): text.databaseValue
                default: value.serializedString().databaseValue
                }
            }
        let scopeValues = scopePlan.arguments.map { $0?.databaseValue ?? .null }
        let sql =
            "SELECT \(Self.columns) FROM coaty_rows WHERE (\(scopePlan.whereClause)) AND (\(condition))"
            + " ORDER BY \(orderBy.map { "\($0), id" } ?? "id")" + (limit.map { " LIMIT \($0)" } ?? "")
        do {
            // Prepared afresh: the text is the caller's, not one of a bounded set.
            return try Row.fetchAll(db.makeStatement(sql: sql), arguments: StatementArguments(scopeValues + values))
                .map(decode)
        } catch let error as DatabaseError {
            throw CoatySQLiteError("SQLite refused the SQL read (\(error.message ?? "\(error.resultCode)")): \(sql)")
        }
    }

    /// How many rows a query selects; one `COUNT(*)` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the count.
    /// - Throws: a database error.
    public func count(matching query: StoreQuery) throws -> Int {
        let plan = try plan(for: query).plan
        guard plan.isExact, plan.limitClause.isEmpty else { return try rows(matching: query).count }
        return try Int.fetchOne(
            db,
            sql: "SELECT COUNT(*) FROM coaty_rows WHERE \(plan.whereClause)",
            arguments: StatementArguments(plan.arguments)
        ) ?? 0
    }

    /// A local value.
    /// - Parameters:
    ///   - key: the key.
    ///   - store: the store's name.
    /// - Returns: the value, or `nil`.
    /// - Throws: a database error, or ``CoatySQLiteError`` for invalid stored JSON.
    public func localValue(forKey key: String, in store: String) throws -> JSONValue? {
        guard
            let text = try String.fetchOne(
                db,
                sql: "SELECT value FROM coaty_local WHERE store = ? AND key = ?",
                arguments: [store, key]
            )
        else { return nil }
        do {
            return try JSONValue(parsing: text)
        } catch {
            throw CoatySQLiteError("The local value of \(key) is not valid JSON (\(error)); set it again")
        }
    }

    /// The keys of a local store, sorted.
    /// - Parameter store: the store's name.
    /// - Returns: the keys.
    /// - Throws: a database error.
    public func localKeys(in store: String) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT key FROM coaty_local WHERE store = ? ORDER BY key", arguments: [store])
    }

    /// The names of the local stores that hold a value, sorted.
    /// - Returns: the names.
    /// - Throws: a database error.
    public func localStores() throws -> [String] {
        try String.fetchAll(db, sql: "SELECT DISTINCT store FROM coaty_local ORDER BY store")
    }

    /// The indexes of the stored Coaty objects whose key and `objectId` are among `objectIds`, by
    /// objectId, in insertion order: one cached statement that binds the objectIds as one JSON
    /// array and reads only the index columns (the recorder's lookup of each batch, which as a
    /// ``rows(matching:)`` query built, prepared and bound two `IN` lists of the batch's size).
    /// - Parameter objectIds: the objectIds.
    /// - Returns: the indexes by objectId.
    /// - Throws: a database error.
    public func coatyObjectIndexes(withObjectIds objectIds: [String]) throws -> [String: [StoreIndex]] {
        guard !objectIds.isEmpty else { return [:] }
        let ids = JSONValue.array(objectIds.map(JSONValue.string)).serializedString()
        var indexes: [String: [StoreIndex]] = [:]
        let rows = try Row.fetchCursor(db.cachedStatement(sql: Self.objectIndexesSQL), arguments: [ids])
        while let row = try rows.next() {
            let id: String = row[0]
            indexes[id, default: []].append(StoreIndex(row[1], row[2]))
        }
        return indexes
    }

    /// The rows of ``coatyObjectIndexes(withObjectIds:)``: scope ``StoreScope/coatyObjects``, the
    /// key and the promoted `objectId` (the JSON's string member) among the bound array's strings.
    private static let objectIndexesSQL = """
        SELECT objectId, collection, key FROM coaty_rows
        WHERE objectId IN (SELECT value FROM json_each(?1)) AND key IN (SELECT value FROM json_each(?1))
        AND coreType IS NOT NULL AND objectType IS NOT NULL ORDER BY id
        """

    /// Writes a row (an upsert keeps the row's place in insertion order).
    /// - Parameters:
    ///   - row: the row.
    ///   - mode: how an existing row is treated.
    /// - Returns: whether it was written.
    /// - Throws: a database error.
    @discardableResult
    public func write(_ row: StoreRow, mode: StoreWriteMode) throws -> Bool {
        let sql =
            switch mode {
            case .upsert: Self.upsertSQL
            case .insert: Self.insertSQL
            case .update: Self.updateSQL
            }
        // The recorder's hot path (every received object): the values are bound straight into
        // the cached statement with SQLite's C API, without building `StatementArguments`
        // (an array of existentials, then a copy per value: as much as SQLite's own insert took).
        // The statement is reset and its bindings cleared before it returns to GRDB's cache.
        let prepared: Statement
        if let cached = writeStatements[mode] {
            prepared = cached
        } else {
            prepared = try db.cachedStatement(sql: sql)
            writeStatements[mode] = prepared
        }
        let statement = prepared.sqliteStatement
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var position: Int32 = 1
        func bind(_ text: String?) {
            if let text {
                var text = text
                text.withUTF8 { utf8 in
                    _ = sqlite3_bind_text(statement, position, utf8.baseAddress, Int32(utf8.count), sqliteTransient)
                }
            } else {
                sqlite3_bind_null(statement, position)
            }
            position += 1
        }
        func bind(_ json: JSONValue?, text: [UInt8]? = nil) {
            if let json {
                var bytes: [UInt8] = []
                if let text {
                    bytes = text
                } else {
                    bytes.reserveCapacity(512)
                    json.serialize(into: &bytes)
                }
                bytes.withUnsafeBufferPointer { utf8 in
                    _ = sqlite3_bind_text(
                        statement,
                        position,
                        UnsafeRawPointer(utf8.baseAddress)?.assumingMemoryBound(to: CChar.self),
                        Int32(utf8.count),
                        sqliteTransient
                    )
                }
            } else {
                sqlite3_bind_null(statement, position)
            }
            position += 1
        }
        if mode != .update {
            bind(row.index.collection)
            bind(row.index.key)
        }
        bind(row.object, text: row.objectText)
        bind(row.metadata)
        let columns = PromotedColumns(row.object)
        for name in PromotedColumns.names { bind(columns[name]) }
        if mode == .update {
            bind(row.index.collection)
            bind(row.index.key)
        }
        let code = sqlite3_step(statement)
        guard code == SQLITE_DONE else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code),
                message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                sql: sql
            )
        }
        return sqlite3_changes(db.sqliteConnection) > 0
    }

    /// The columns a row writes, in the order ``write(_:mode:)`` passes their values.
    private static let writtenColumns = ["collection", "key", "object", "metadata"] + PromotedColumns.names

    private static let insertPrefix =
        "INSERT INTO coaty_rows (\(writtenColumns.joined(separator: ", ")))"
        + " VALUES (\(Array(repeating: "?", count: writtenColumns.count).joined(separator: ", ")))"
        + " ON CONFLICT (collection, key)"

    /// An insert that replaces an existing row in place (keeping its place in insertion order).
    private static let upsertSQL =
        insertPrefix + " DO UPDATE SET "
        + writtenColumns.dropFirst(2).map { "\($0) = excluded.\($0)" }.joined(separator: ", ")

    /// An insert that leaves an existing row alone.
    private static let insertSQL = insertPrefix + " DO NOTHING"

    /// An update of an existing row (its columns after `collection` and `key`, then the index).
    private static let updateSQL =
        "UPDATE coaty_rows SET \(writtenColumns.dropFirst(2).map { "\($0) = ?" }.joined(separator: ", "))"
        + " WHERE collection = ? AND key = ?"

    /// Removes a row.
    /// - Parameter index: the index.
    /// - Returns: whether it existed.
    /// - Throws: a database error.
    @discardableResult
    public func removeRow(at index: StoreIndex) throws -> Bool {
        try db.cachedStatement(sql: "DELETE FROM coaty_rows WHERE collection = ? AND key = ?").execute(arguments: [
            index.collection, index.key,
        ])
        return db.changesCount > 0
    }

    /// Removes the rows a query selects: one `DELETE … RETURNING` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the indexes removed.
    /// - Throws: a database error.
    @discardableResult
    public func removeRows(matching query: StoreQuery) throws -> [StoreIndex] {
        let plan = try plan(for: query).plan
        guard plan.isExact, plan.limitClause.isEmpty else {
            var removed: [StoreIndex] = []
            for row in try rows(matching: query) where try removeRow(at: row.index) { removed.append(row.index) }
            return removed
        }
        return try Row.fetchAll(
            db,
            sql: "DELETE FROM coaty_rows WHERE \(plan.whereClause) RETURNING collection, key",
            arguments: StatementArguments(plan.arguments)
        ).map { StoreIndex($0["collection"], $0["key"]) }
    }

    /// Sets or removes a local value.
    /// - Parameters:
    ///   - value: the value; `nil` removes it.
    ///   - key: the key.
    ///   - store: the store's name.
    /// - Throws: a database error.
    public func setLocalValue(_ value: JSONValue?, forKey key: String, in store: String) throws {
        if let value {
            try db.execute(
                sql: """
                    INSERT INTO coaty_local (store, key, value) VALUES (?, ?, ?)
                    ON CONFLICT (store, key) DO UPDATE SET value = excluded.value
                    """,
                arguments: [store, key, value.serializedString()]
            )
        } else {
            try db.execute(sql: "DELETE FROM coaty_local WHERE store = ? AND key = ?", arguments: [store, key])
        }
    }
}

// MARK: - Ordered queries

extension SQLiteTransaction {
    /// The rows of a query that orders by top-level properties, the first of them indexed
    /// (``SQLiteDatabase/createIndex(collection:property:)``), ordered and paged by SQL
    /// (`ORDER BY json_extract(…)`, then insertion order); `nil` without such an index or when
    /// SQL's order might not be Coaty's.
    ///
    /// SQL orders numbers numerically, puts a missing value first (ascending) or last
    /// (descending), and keeps insertion order among equals — exactly Coaty's order as long as
    /// every candidate's value at each ordering property is a number below 2^53 or missing. One
    /// probe proves that first (with a declared index on the property, a few index range lookups;
    /// without, one scan in SQLite); any other value (a string, whose collation is Coaty's own, a
    /// boolean, `null`, an array or object, a huge number) leaves the query to
    /// ``CoatyFilter/ObjectMatcher``. Rows come from a cursor: when the WHERE clause is not exact,
    /// each is checked by the matcher, and reading stops at `skip + take` matches.
    func orderedRows(_ query: StoreQuery, _ plan: SQLPlan) throws -> [StoreRow]? {
        guard let filter = query.filter, let ordering = filter.orderByProperties, !ordering.isEmpty else { return nil }
        var keys: [(key: String, descending: Bool)] = []
        for level in ordering {
            guard level.property.path.count == 1, JSONIndexDeclarations.isIndexable(level.property.path[0]) else {
                return nil
            }
            keys.append((level.property.path[0], level.order == .descending))
        }
        // Without an index on the first property SQLite evaluates `json_extract` for every
        // candidate (a parse of its JSON each time); that still beats decoding every candidate
        // into Swift for the matcher to sort, when the conditions are exact and only the page is
        // decoded.
        let walk = indexClause(query.scope, keys[0].key)
        guard !walk.isEmpty || plan.conditionsAreExact else { return nil }
        let take = filter.take ?? 0
        if take < 0 { return [] }
        let skip = max(filter.skip ?? 0, 0)
        guard try orderIsNumeric(keys.map(\.key), query: query, plan: plan) else { return nil }
        let order =
            keys.map { "\(SQLPlan.valueExpression($0.key)) \($0.descending ? "DESC" : "ASC")" }.joined(separator: ", ")
            + ", id"
        let exact = plan.conditionsAreExact
        let limit = exact && (take > 0 || skip > 0) ? " LIMIT \(take > 0 ? take : -1) OFFSET \(skip)" : ""
        let columns = query.includesMetadata ? Self.columns : Self.columnsWithoutMetadata
        // Walk the index of the first property (SQLite's planner, without statistics, would rather
        // read the whole collection and sort it).
        if exact {
            // The page's ids first, then their rows: SQLite sorts ties by id in a temporary tree
            // that would otherwise carry every skipped row's JSON (5 × faster for skip 1000).
            let ids = try Int64.fetchAll(
                statement("SELECT id FROM coaty_rows\(walk) WHERE \(plan.whereClause) ORDER BY \(order)\(limit)"),
                arguments: StatementArguments(plan.arguments)
            )
            return try rows(withIds: ids, columns: columns)
        }
        let cursor = try Row.fetchCursor(
            statement("SELECT \(columns) FROM coaty_rows\(walk) WHERE \(plan.whereClause) ORDER BY \(order)\(limit)"),
            arguments: StatementArguments(plan.arguments)
        )
        let matcher = CompiledObjectFilter(ObjectFilter(conditions: filter.conditions))
        var rows: [StoreRow] = []
        var skipped = 0
        while let raw = try cursor.next() {
            let row = try decode(raw)
            if !matcher.matches(row.object) { continue }
            if skipped < skip {
                skipped += 1
                continue
            }
            rows.append(row)
            if take > 0, rows.count == take { break }
        }
        return rows
    }

    /// The rows with these ids (in chunks of at most 500 per statement), in the order of `ids`.
    private func rows(withIds ids: [Int64], columns: String) throws -> [StoreRow] {
        var byId: [Int64: StoreRow] = [:]
        byId.reserveCapacity(ids.count)
        for start in stride(from: 0, to: ids.count, by: 500) {
            let chunk = Array(ids[start..<min(start + 500, ids.count)])
            let sql = "SELECT \(columns), id FROM coaty_rows WHERE id IN (\(SQLPlan.placeholders(chunk.count)))"
            // A page of up to 64 rows (the usual `take`) from the statement cache.
            let raws = try Row.fetchAll(
                chunk.count <= 64 ? statement(sql) : db.makeStatement(sql: sql),
                arguments: StatementArguments(chunk)
            )
            for raw in raws { byId[raw[4]] = try decode(raw) }
        }
        return ids.compactMap { byId[$0] }
    }

    /// Whether every candidate's value at each of `keys` is a number below 2^53 in magnitude, or
    /// missing: for an indexed key, a few range lookups in its index (over the whole collection);
    /// for another, one scan of the candidates in SQLite.
    private func orderIsNumeric(_ keys: [String], query: StoreQuery, plan: SQLPlan) throws -> Bool {
        var scans: [String] = []
        for key in keys {
            if let numeric = try holdsOnlyNumbers(key, in: query.scope) {
                if !numeric { return false }
                continue
            }
            let (value, type) = (SQLPlan.valueExpression(key), SQLPlan.typeExpression(key))
            scans.append("\(type) NOT IN ('integer', 'real') OR abs(\(value)) >= \(SQLPlan.exactLimit)")
        }
        if scans.isEmpty { return true }
        let sql =
            "SELECT EXISTS (SELECT 1 FROM coaty_rows WHERE (\(plan.whereClause)) AND ("
            + scans.map { "(\($0))" }.joined(separator: " OR ") + "))"
        return try Bool.fetchOne(statement(sql), arguments: StatementArguments(plan.arguments)) == false
    }

    /// Whether every row of the scope's one collection holds a number below 2^53 in magnitude,
    /// or nothing, at `property`, proven by range lookups in the property's declared index: text
    /// (strings, arrays, objects) sorts after every number there, JSON `null` reads as `NULL`,
    /// `true` and `false` as 1 and 0. `nil` without such an index. Proven once for each state of
    /// the database this connection sees (``NumericKnowledge``).
    func holdsOnlyNumbers(_ property: String, in scope: StoreScope) throws -> Bool? {
        guard let collection = scope.singleCollection, indexes.contains(collection: collection, property: property)
        else { return nil }
        let key = JSONIndexDeclarations.Key(collection: collection, property: property)
        let stamp = try NumericKnowledge.Stamp(db)
        if let known = numericKnowledge.known(key, connection: db, stamp: stamp) { return known }
        let numeric = try Bool.fetchOne(statement(NumericKnowledge.probe(key))) == false
        numericKnowledge.record(numeric, for: key, connection: db, stamp: stamp)
        return numeric
    }

    /// The plan of a query, with numeric comparisons of indexed properties that hold only numbers
    /// made exact and sargable, and ` INDEXED BY` the index of the first such comparison of a
    /// single condition or a conjunction (SQLite's planner, without statistics, would rather read
    /// the whole collection by its `collection` index).
    func plan(for query: StoreQuery) throws -> (plan: SQLPlan, hint: String) {
        guard query.scope.singleCollection != nil, let conditions = query.filter?.conditions else {
            return (SQLPlan(query), "")
        }
        var numeric: Set<String> = []
        for property in SQLPlan.numericallyCompared(conditions)
        where try holdsOnlyNumbers(property, in: query.scope) == true {
            numeric.insert(property)
        }
        guard !numeric.isEmpty else { return (SQLPlan(query), "") }
        let conjuncts: [ObjectFilterCondition]
        switch conditions {
        case .condition(let condition): conjuncts = [condition]
        case .and(let list): conjuncts = list
        case .or: conjuncts = []
        }
        let indexed = conjuncts.first { $0.property.path.count == 1 && numeric.contains($0.property.path[0]) }
        let hint = indexed.map { indexClause(query.scope, $0.property.path[0]) } ?? ""
        return (SQLPlan(query, numericProperties: numeric), hint)
    }

    /// ` INDEXED BY <name>` when an index is declared on `property` of the scope's one
    /// collection, else empty.
    private func indexClause(_ scope: StoreScope, _ property: String) -> String {
        guard let collection = scope.singleCollection, indexes.contains(collection: collection, property: property)
        else { return "" }
        return " INDEXED BY " + JSONIndexDeclarations.Key(collection: collection, property: property).indexName
    }
}

/// What ``SQLiteTransaction/holdsOnlyNumbers(_:in:)`` proved, per connection, valid while the
/// database is as that connection saw it then: no commit by another connection (of this process
/// or another: SQLite's `data_version`) and no change by the connection itself
/// (`sqlite3_total_changes64`). A responder answering ordered Queries on a quiet store then
/// proves it once, not with five range lookups per Query.
final class NumericKnowledge: Sendable {
    /// The state of the database as one connection sees it.
    struct Stamp: Equatable {
        let dataVersion: Int64
        let ownChanges: Int64

        init(_ db: Database) throws {
            dataVersion = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) ?? -1
            ownChanges = sqlite3_total_changes64(db.sqliteConnection)
        }
    }

    private struct Entry {
        var stamp: Stamp
        var known: [JSONIndexDeclarations.Key: Bool]
    }

    /// By connection: a connection of the pool lives as long as the database (a closed one's
    /// identifier could be reused, but its entry is only trusted for a matching stamp).
    private let entries = CoatyMutex<[ObjectIdentifier: Entry]>([:])
    func known(_ key: JSONIndexDeclarations.Key, connection db: Database, stamp: Stamp) -> Bool? {
        entries.withLock { entries in
            guard let entry = entries[ObjectIdentifier(db)], entry.stamp == stamp else { return nil }
            return entry.known[key]
        }
    }

    func record(_ numeric: Bool, for key: JSONIndexDeclarations.Key, connection db: Database, stamp: Stamp) {
        entries.withLock { entries in
            let id = ObjectIdentifier(db)
            if entries[id]?.stamp != stamp { entries[id] = Entry(stamp: stamp, known: [:]) }
            entries[id]?.known[key] = numeric
        }
    }

    /// The statement of the range lookups (built once per property).
    static func probe(_ key: JSONIndexDeclarations.Key) -> String {
        if let sql = probeTexts.withLock({ $0[key] }) { return sql }
        let (value, type, limit) = (
            SQLPlan.valueExpression(key.property), SQLPlan.typeExpression(key.property), SQLPlan.exactLimit
        )
        let probes = [
            "\(value) >= ''", "\(value) IS NULL AND \(type) = 'null'",
            "\(value) IN (0, 1) AND \(type) IN ('true', 'false')", "\(value) >= \(limit)", "\(value) <= -\(limit)",
        ]
        let sql =
            "SELECT "
            + probes.map {
                "EXISTS (SELECT 1 FROM coaty_rows INDEXED BY \(key.indexName) WHERE collection = "
                    + "\(SQLText.literal(key.collection)) AND \($0))"
            }
            .joined(separator: " OR ")
        probeTexts.withLock { texts in
            if texts.count >= 1024 { texts = [:] }
            texts[key] = sql
        }
        return sql
    }

    private static let probeTexts = CoatyMutex<[JSONIndexDeclarations.Key: String]>([:])
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

/// A query for the Coaty objects whose promoted, indexed `objectId` or `externalId` is one
/// string, nothing else: a Discover's lookup, answered by a fixed statement (the same rows, in the
/// same order, as ``SQLPlan`` selects for it).
struct PromotedLookup {
    /// The statement.
    let sql: String
    /// The string.
    let value: String

    /// The lookup `query` is, or `nil`.
    init?(_ query: StoreQuery) {
        guard query.keys == nil, case .coatyObjects = query.scope, let filter = query.filter,
            filter.orderByProperties?.isEmpty ?? true, (filter.skip ?? 0) <= 0, (filter.take ?? 0) == 0,
            case .condition(let condition)? = filter.conditions, condition.property.path.count == 1,
            condition.expression.operator == .equals, case .string(let value)? = condition.expression.operand1,
            let statements = Self.statements[condition.property.path[0]]
        else { return nil }
        self.sql = query.includesMetadata ? statements.withMetadata : statements.withoutMetadata
        self.value = value
    }

    private static let statements: [String: (withMetadata: String, withoutMetadata: String)] = Dictionary(
        uniqueKeysWithValues: ["objectId", "externalId"].map { column in
            func sql(_ columns: String) -> String {
                "SELECT \(columns) FROM coaty_rows WHERE coreType IS NOT NULL AND objectType IS NOT NULL"
                    + " AND \(column) = ? ORDER BY id"
            }
            return (column, (sql(SQLiteTransaction.columns), sql(SQLiteTransaction.columnsWithoutMetadata)))
        }
    )
}

/// Bounds GRDB's statement cache of each SQLite connection: GRDB keeps every statement it caches
/// until the connection closes, and the SQL of a Query holds the names from the Query (object
/// type, property paths), so anyone on the bus could grow it without end. After
/// ``limit`` distinct texts on a connection, its cache is emptied and starts again.
enum StatementCacheBudget {
    /// Distinct texts cached per connection before the cache is emptied.
    static let limit = 256
    /// Longer texts (large In lists, long and/or trees) are prepared afresh each time.
    static let longestText = 4096

    private static let texts = CoatyMutex<[ObjectIdentifier: Set<String>]>([:])

    /// Records that `sql` is about to be cached on `db`; `true` when the connection's cache must
    /// be emptied first.
    static func admit(_ sql: String, in db: Database) -> Bool {
        texts.withLock { texts in
            let id = ObjectIdentifier(db)
            if texts[id, default: []].contains(sql) { return false }
            let overflow = texts[id, default: []].count >= limit
            if overflow { texts[id] = [] }
            texts[id, default: []].insert(sql)
            return overflow
        }
    }
}

/// SQLite's `SQLITE_TRANSIENT`: SQLite copies a bound value before the bind call returns (the C
/// macro, `(sqlite3_destructor_type)-1`, is not imported into Swift).
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
