public import CoatyCore
public import CoatyStore
import GRDB

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
/// Coaty's; the rest is evaluated with ``CoatyCore/ObjectMatcher`` on the candidates SQL returns.
///
/// ```swift
/// let database = try SQLiteDatabase(path: "coaty.sqlite")
/// let connection = try await database.makeConnection()
/// try await light.write(to: connection, metadata: receipt)
/// ```
public final class SQLiteDatabase: DatabaseType {
    /// The file path.
    public let path: String
    let pool: DatabasePool

    /// The most bytes of the file SQLite maps into memory (1 GiB of address space, not memory).
    static let mmapSize = 1 << 30

    /// The migrations, in order; their names are recorded in the file's `grdb_migrations` table.
    public static let migrationNames = ["v1-rows", "v2-local-context"]

    /// Opens (creating if needed) a database file and brings its schema up to date.
    /// - Parameter path: the file path.
    /// - Throws: ``CoatySQLiteError`` when the file cannot be opened or migrated (check the path
    ///   and its directory's permissions, and that the file is a SQLite database).
    public init(path: String) throws {
        self.path = path
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            configuration.prepareDatabase { db in
                // Read pages from a memory map instead of one read(2) per page: a query that
                // re-checks JSON members reads many rows.
                try db.execute(sql: "PRAGMA mmap_size = \(Self.mmapSize)")
                // WAL with synchronous NORMAL: a commit is not fsynced, the WAL is at checkpoints. A
                // crash of the process loses nothing committed; a power loss may lose the last
                // transactions, never the database's consistency (SQLite's recommendation for WAL).
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
        } catch {
            throw CoatySQLiteError("Cannot open the SQLite database at \(path): \(error)")
        }
    }

    /// A connection (connections share the pool).
    /// - Returns: the connection.
    public func makeConnection() -> SQLiteConnection { SQLiteConnection(pool: pool) }

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
        return migrator
    }
}

/// A connection to a ``SQLiteDatabase``.
public struct SQLiteConnection: ConnectionType {
    let pool: DatabasePool

    /// Runs `body` in a read transaction on a snapshot (WAL readers run beside the writer).
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or SQLite throws.
    public func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) throws -> T) async throws -> T {
        try await pool.read { db in try body(SQLiteTransaction(db)) }
    }

    /// Runs `body` in an immediate write transaction: commits when it returns, rolls back when it
    /// throws.
    /// - Parameter body: the writes.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or SQLite throws.
    public func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) throws -> T) async throws -> T {
        try await pool.write { db in try body(SQLiteTransaction(db)) }
    }
}

/// A transaction of a ``SQLiteDatabase``; valid only inside its connection's closure.
public final class SQLiteTransaction: WriteTransactionType {
    let db: Database

    init(_ db: Database) {
        self.db = db
    }

    private static let columns = "collection, key, object, metadata"

    private func decode(_ row: Row) throws -> StoreRow {
        let index = StoreIndex(row["collection"], row["key"])
        let objectText: String = row["object"]
        let metadataText: String? = row["metadata"]
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
    /// translates), and ``CoatyCore/ObjectMatcher`` evaluates the rest.
    /// - Parameter query: the query.
    /// - Returns: the rows.
    /// - Throws: a database error.
    public func rows(matching query: StoreQuery) throws -> [StoreRow] {
        let plan = SQLPlan(query)
        let rows = try Row.fetchAll(
            db,
            sql: "SELECT \(Self.columns) FROM coaty_rows WHERE \(plan.whereClause) ORDER BY id\(plan.limitClause)",
            arguments: StatementArguments(plan.arguments)
        ).map(decode)
        guard !plan.isExact else { return rows }
        return ObjectMatcher.apply(query.filter, to: rows) { $0.object }
    }

    /// How many rows a query selects; one `COUNT(*)` when the whole filter translates.
    /// - Parameter query: the query.
    /// - Returns: the count.
    /// - Throws: a database error.
    public func count(matching query: StoreQuery) throws -> Int {
        let plan = SQLPlan(query)
        guard plan.isExact, plan.limitClause.isEmpty else { return try rows(matching: query).count }
        return try Int.fetchOne(
            db,
            sql: "SELECT COUNT(*) FROM coaty_rows WHERE \(plan.whereClause)",
            arguments: StatementArguments(plan.arguments)
        ) ?? 0
    }

    /// A local value.
    /// - Parameter key: the key.
    /// - Returns: the value, or `nil`.
    /// - Throws: a database error, or ``CoatySQLiteError`` for invalid stored JSON.
    public func localValue(forKey key: String) throws -> JSONValue? {
        guard let text = try String.fetchOne(db, sql: "SELECT value FROM coaty_local WHERE key = ?", arguments: [key])
        else { return nil }
        do {
            return try JSONValue(parsing: text)
        } catch {
            throw CoatySQLiteError("The local value of \(key) is not valid JSON (\(error)); set it again")
        }
    }

    /// The local keys, sorted.
    /// - Returns: the keys.
    /// - Throws: a database error.
    public func localKeys() throws -> [String] {
        try String.fetchAll(db, sql: "SELECT key FROM coaty_local ORDER BY key")
    }

    /// Writes a row (an upsert keeps the row's place in insertion order).
    /// - Parameters:
    ///   - row: the row.
    ///   - mode: how an existing row is treated.
    /// - Returns: whether it was written.
    /// - Throws: a database error.
    @discardableResult
    public func write(_ row: StoreRow, mode: StoreWriteMode) throws -> Bool {
        let columns = PromotedColumns(row.object)
        let index = [row.index.collection.databaseValue, row.index.key.databaseValue]
        // Plain `DatabaseValue`s (no boxed existentials), in the order of `writtenColumns`.
        var values: [DatabaseValue] = []
        values.reserveCapacity(Self.writtenColumns.count)
        if mode != .update { values += index }
        values.append(row.object.serializedString().databaseValue)
        values.append(row.metadata?.serializedString().databaseValue ?? .null)
        for name in PromotedColumns.names { values.append(columns[name]?.databaseValue ?? .null) }
        if mode == .update { values += index }
        let sql =
            switch mode {
            case .upsert: Self.upsertSQL
            case .insert: Self.insertSQL
            case .update: Self.updateSQL
            }
        try db.cachedStatement(sql: sql).execute(arguments: StatementArguments(values))
        return db.changesCount > 0
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
        let plan = SQLPlan(query)
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
    /// - Throws: a database error.
    public func setLocalValue(_ value: JSONValue?, forKey key: String) throws {
        if let value {
            try db.execute(
                sql:
                    "INSERT INTO coaty_local (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                arguments: [key, value.serializedString()]
            )
        } else {
            try db.execute(sql: "DELETE FROM coaty_local WHERE key = ?", arguments: [key])
        }
    }
}
