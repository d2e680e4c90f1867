import CoatyFilter
import CoatyModel
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
/// The write-ahead log is checkpointed at 10 000 pages by a `PASSIVE` checkpoint on a
/// short-lived connection of its own, not inside the writer's commit (see
/// `SQLiteCheckpointer`): a burst of writes is not stalled by copying the log and its fsyncs.
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
    /// One read-only connection for lookups of a promoted column on the calling thread
    /// (``SQLiteConnection/lookUpRows(matching:)``): it runs nothing but those (microseconds each),
    /// so a lookup never waits behind a brief read's body.
    let lookupReader: DatabaseQueue
    let indexes = JSONIndexDeclarations()
    /// What range lookups proved about indexed properties, shared by the connections.
    let numericKnowledge = NumericKnowledge()
    /// Checkpoints the WAL off the writer's thread.
    let checkpointer: SQLiteCheckpointer

    /// The most bytes of the file SQLite maps into memory (1 GiB of address space, not memory).
    static let mmapSize = 1 << 30

    /// The migrations, in order; their names are recorded in the file's `grdb_migrations` table.
    public static let migrationNames = ["v1-rows", "v2-local-context", "v3-json-indexes", "v4-named-local-stores"]

    /// The WAL size, in pages, at which it is checkpointed (by ``checkpointer``).
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
    /// - Throws: ``CoatyModel/AgentConfigurationError`` naming `adapter` (another backend) or
    ///   `connectionString` (no path); ``CoatySQLiteError`` when the file cannot be opened.
    public convenience init(options: DatabaseOptions, at path: String = "") throws {
        try self.init(path: options.sqlitePath(at: path))
    }

    /// Opens (creating if needed) a database file and brings its schema up to date.
    /// - Parameter path: the file path.
    /// - Throws: ``CoatySQLiteError`` when the file cannot be opened or migrated (check the path
    ///   and its directory's permissions, and that the file is a SQLite database).
    public convenience init(path: String) throws {
        try self.init(path: path, walCheckpointPages: Self.walAutocheckpointPages)
    }

    /// Opens a database whose WAL is checkpointed at `walCheckpointPages` pages (tests).
    init(path: String, walCheckpointPages: Int) throws {
        self.path = path
        let checkpointer = SQLiteCheckpointer(path: path, limit: walCheckpointPages)
        self.checkpointer = checkpointer
        do {
            pool = try DatabasePool(path: path, configuration: Self.configuration(checkpointer: checkpointer))
            try Self.migrator.migrate(pool)
            let declared = try pool.read { db in
                try Row.fetchAll(db, sql: "SELECT collection, property FROM coaty_json_indexes")
                    .map { JSONIndexDeclarations.Key(collection: $0[0], property: $0[1]) }
            }
            indexes.insert(declared)
            var readOnly = Configuration()
            readOnly.readonly = true
            readOnly.prepareDatabase { db in
                try db.execute(sql: "PRAGMA mmap_size = \(Self.mmapSize)")
                try SQLiteFunctions.register(db)
            }
            briefReader = try DatabaseQueue(path: path, configuration: readOnly)
            lookupReader = try DatabaseQueue(path: path, configuration: readOnly)
        } catch {
            throw CoatySQLiteError("Cannot open the SQLite database at \(path): \(error)")
        }
    }

    /// The pool's configuration: every connection runs ``pragmas`` first and has
    /// ``SQLiteFunctions``; the writer's WAL is checkpointed by `checkpointer` (which the
    /// configuration, kept by each connection, keeps alive as long as the connection).
    static func configuration(checkpointer: SQLiteCheckpointer) -> Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            for pragma in pragmas { try db.execute(sql: pragma) }
            try SQLiteFunctions.register(db)
            // After the pragmas: the hook replaces `wal_autocheckpoint`'s (the readers never commit).
            if !db.configuration.readonly { checkpointer.install(on: db) }
        }
        return configuration
    }

    /// The statements that set up each connection of the pool: a memory map, WAL with synchronous
    /// `NORMAL`, checkpoints every 10 000 pages. Public so that a raw GRDB connection to the same
    /// file — the benchmarks' baselines, a tool beside a recorder — can run with the same settings.
    public static let pragmas = [
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
        // however often it was rewritten (8 % more objects/s ingested, measured). The pool's
        // writer checkpoints at the same size, but off its thread (`SQLiteCheckpointer`).
        "PRAGMA wal_autocheckpoint = \(walAutocheckpointPages)",
    ]

    /// A connection (connections share the pool).
    /// - Returns: the connection.
    public func makeConnection() -> SQLiteConnection {
        SQLiteConnection(
            pool: pool,
            briefReader: briefReader,
            lookupReader: lookupReader,
            indexes: indexes,
            numericKnowledge: numericKnowledge
        )
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
