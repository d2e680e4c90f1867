import CoatyFilter
import CoatyModel
public import CoatyStore
import CoatySync
import Foundation
public import Logging
public import PostgresNIO
public import ServiceLifecycle
import Synchronization

/// An error of the PostgreSQL backend, saying what to check.
public struct CoatyPostgresError: Error, Sendable, CustomStringConvertible {
    /// The message.
    public let message: String

    init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

/// A PostgreSQL database through postgres-nio's `PostgresClient`, with the schema created and
/// upgraded by versioned migrations (recorded in the `coaty_schema_version` table).
///
/// Each row keeps the item as `object jsonb` (with a GIN index), the metadata as `metadata jsonb`,
/// and promoted indexed text columns (`collection`, `key`, `objectId`, `objectType`, `coreType`,
/// `name`, `externalId`, `parentObjectId`, `locationId`). Filters are pushed into SQL only where
/// the result is exactly Coaty's; the rest is evaluated with ``CoatyFilter/ObjectMatcher`` on the
/// candidates SQL returns. `jsonb` keeps no key order: a read object has the same members and
/// values as the written one (it compares equal), with its keys in PostgreSQL's order. Strings
/// cannot contain `\u0000` (PostgreSQL rejects them; the write throws).
///
/// The database is a `Service`: its ``run()`` runs the client's connection pool and must be
/// running (in a `ServiceGroup` or a task of yours) while connections are used; a transaction
/// waits for a pooled connection until then. ``withDatabase(url:logger:_:)`` does both for a scope:
///
/// ```swift
/// try await PostgresDatabase.withDatabase(url: "postgres://coaty@localhost:5432/coaty") { database in
///     let connection = try await database.makeConnection()
///     try await light.write(to: connection, metadata: receipt)
/// }
/// ```
///
/// Transaction bodies are `async` (see ``CoatyStore/ConnectionType``): each leases a connection
/// from the client's pool and awaits its statements there, so a transaction waiting for
/// PostgreSQL holds a pooled connection, never a thread. Name the type `CoatyPostgres.PostgresDatabase` where `PostgresNIO`
/// is imported too (it has a protocol of the same name).
public final class PostgresDatabase: DatabaseType, Service, JSONPropertyIndexing {
    /// The client's configuration.
    public let configuration: PostgresClient.Configuration
    let client: PostgresClient
    let logger: Logger
    let isMigrated = CoatyMutex(false)
    let indexes = JSONIndexDeclarations()

    /// The migrations, in order; version `n` is `migrationNames[n - 1]`.
    public static let migrationNames = ["v1-rows", "v2-local-context", "v3-named-local-stores", "v4-json-indexes"]

    /// A database for a client configuration (nothing connects before ``run()``).
    /// - Parameters:
    ///   - configuration: the client's configuration.
    ///   - logger: where the client and the transactions log; nothing is logged when `nil`.
    public init(configuration: PostgresClient.Configuration, logger: Logger? = nil) {
        let logger = logger ?? Logger(label: "coaty.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        self.configuration = configuration
        self.logger = logger
        var background = logger
        background.handler = RunOrderWarningFilter(base: logger.handler)
        self.client = PostgresClient(configuration: configuration, backgroundLogger: background)
    }

    /// A database for a connection string `postgres://user[:password]@host[:port]/database`
    /// (`postgresql://` too; port 5432 by default). Query items: `sslmode=disable|prefer|require`
    /// (default `prefer`), `host=/path` for a Unix socket directory (the server's `-k`), in which
    /// case the host part may be empty (`postgres://user@/database?host=/tmp`).
    /// - Parameters:
    ///   - url: the connection string.
    ///   - logger: where the client and the transactions log; nothing is logged when `nil`.
    /// - Throws: ``CoatyPostgresError`` when the string is not such a URL.
    public convenience init(url: String, logger: Logger? = nil) throws {
        try self.init(configuration: Self.configuration(url: url), logger: logger)
    }

    /// A database for the PostgreSQL database that database options of an agent configuration
    /// name (adapter `PostgresAdapter`, the connection string a `postgres://` URL; see
    /// ``init(url:logger:)``). Nothing connects before ``run()``.
    ///
    /// ```swift
    /// let configuration = try AgentConfiguration.load()
    /// let database = try PostgresDatabase(options: configuration.database(named: "db"), at: "databases.db")
    /// ```
    /// - Parameters:
    ///   - options: the options, e.g. ``CoatyRuntime/AgentConfiguration/database(named:)``.
    ///   - path: their field path for errors.
    ///   - logger: where the client and the transactions log; nothing is logged when `nil`.
    /// - Throws: ``CoatyModel/AgentConfigurationError`` naming `adapter` (another backend) or
    ///   `connectionString` (not a `postgres://` URL); ``CoatyPostgresError`` when the URL is
    ///   incomplete.
    public convenience init(options: DatabaseOptions, at path: String = "", logger: Logger? = nil) throws {
        try self.init(url: options.postgresURL(at: path), logger: logger)
    }

    /// Parses a connection string (see ``init(url:logger:)``).
    /// - Parameter url: the connection string.
    /// - Returns: the client configuration.
    /// - Throws: ``CoatyPostgresError`` naming what is missing or wrong.
    public static func configuration(url: String) throws -> PostgresClient.Configuration {
        func fail(_ why: String) -> CoatyPostgresError {
            CoatyPostgresError(
                "Invalid PostgreSQL connection string \"\(url)\": \(why); use postgres://user[:password]@host[:port]/database"
            )
        }
        guard let components = URLComponents(string: url) else { throw fail("it is not a URL") }
        guard let scheme = components.scheme, ["postgres", "postgresql"].contains(scheme) else {
            throw fail("the scheme must be postgres or postgresql")
        }
        guard let user = components.user, !user.isEmpty else { throw fail("the user is missing") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else { throw fail("the database name is missing") }
        var tls = PostgresClient.Configuration.TLS.prefer(.makeClientConfiguration())
        var socketDirectory: String?
        for item in components.queryItems ?? [] {
            switch (item.name, item.value) {
            case ("sslmode", "disable"): tls = .disable
            case ("sslmode", "prefer"): tls = .prefer(.makeClientConfiguration())
            case ("sslmode", "require"): tls = .require(.makeClientConfiguration())
            case ("host", let value?) where value.hasPrefix("/"): socketDirectory = value
            default: throw fail("unsupported query item \(item.name)=\(item.value ?? "")")
            }
        }
        if let socketDirectory {
            let port = components.port ?? 5432
            return PostgresClient.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)",
                username: user,
                password: components.password,
                database: database
            )
        }
        guard let host = components.host, !host.isEmpty else { throw fail("the host is missing") }
        return PostgresClient.Configuration(
            host: host,
            port: components.port ?? 5432,
            username: user,
            password: components.password,
            database: database,
            tls: tls
        )
    }

    /// Runs the client's connection pool until the task is cancelled or a graceful shutdown.
    public func run() async throws {
        await client.run()
    }

    /// Runs `body` with a database whose ``run()`` runs in a child task for the scope's duration.
    /// - Parameters:
    ///   - url: the connection string (see ``init(url:logger:)``).
    ///   - logger: where the client and the transactions log; nothing is logged when `nil`.
    ///   - body: what to do with the database.
    /// - Returns: what `body` returns.
    /// - Throws: ``CoatyPostgresError`` for a wrong string, or what `body` throws.
    public static func withDatabase<T: Sendable>(
        url: String,
        logger: Logger? = nil,
        _ body: (PostgresDatabase) async throws -> T
    ) async throws -> T {
        let database = try PostgresDatabase(url: url, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { try await database.run() }
            defer { group.cancelAll() }
            return try await body(database)
        }
    }

    /// A connection; the first one brings the schema up to date.
    /// - Returns: the connection.
    /// - Throws: ``CoatyPostgresError`` when the schema cannot be migrated (check the URL, that the
    ///   server runs, and that the user may create tables in the database).
    public func makeConnection() async throws -> PostgresStoreConnection {
        if !isMigrated.withLock({ $0 }) {
            try await migrate()
            let logger = logger
            let declared = try await Self.describingClientErrors { [client] in
                try await client.withConnection { connection in
                    try await connection.query("SELECT collection, property FROM coaty_json_indexes", logger: logger)
                        .collect().map { row in
                            let (collection, property) = try row.decode((String, String).self)
                            return JSONIndexDeclarations.Key(collection: collection, property: property)
                        }
                }
            }
            indexes.insert(declared)
            isMigrated.withLock { $0 = true }
        }
        return PostgresStoreConnection(database: self)
    }

    /// Creates (once; later calls do nothing) an index on a top-level JSON property of the items
    /// of one collection (for Coaty objects: one object type): a partial expression index on
    /// `(object -> 'property')` (`jsonb`, missing values first), kept in the database. Queries of
    /// that collection ordered by the property, or comparing it with numbers, then read only the
    /// rows they answer with (see "Indexes and fast queries" in the CoatyStore docs).
    /// - Parameters:
    ///   - collection: the collection.
    ///   - property: a top-level member named with letters, digits and `_`.
    /// - Throws: ``CoatyPostgresError`` for another property name, or when PostgreSQL fails.
    public func createIndex(collection: String, property: String) async throws {
        guard JSONIndexDeclarations.isIndexable(property) else {
            throw CoatyPostgresError(
                "Cannot index the property \"\(property)\": only top-level properties named with letters, digits and _"
            )
        }
        _ = try await makeConnection()  // the schema is up to date
        let key = JSONIndexDeclarations.Key(collection: collection, property: property)
        let logger = logger
        do {
            try await client.withConnection { connection in
                // Creators of the same index (recorder group members answering the same kind of
                // Query) take turns: `CREATE INDEX IF NOT EXISTS` checks the catalog before it
                // inserts, so two at once both go ahead and one fails on the catalog's unique index.
                try await connection.withTransaction(logger: logger) { connection in
                    try await connection.query(
                        "SELECT pg_advisory_xact_lock(\(Self.indexLockClass), hashtext(\(key.indexName)))",
                        logger: logger
                    )
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: "CREATE INDEX IF NOT EXISTS \(key.indexName) ON coaty_rows"
                                + " ((object -> \(SQLText.literal(property))) NULLS FIRST)"
                                + " WHERE collection = \(SQLText.literal(collection))"
                        ),
                        logger: logger
                    )
                    _ = try await connection.query(
                        "INSERT INTO coaty_json_indexes (collection, property, name) VALUES (\(collection), \(property), \(key.indexName)) ON CONFLICT DO NOTHING",
                        logger: logger
                    )
                }
            }
        } catch let error where PostgresErrorText.isConcurrentCreation(error) {
            // A creator that does not take the lock (an older CoatyKit) created it at the same
            // moment: the index exists, as asked. Its declaration row is written once more.
            try await declareIndex(key, collection: collection, property: property)
        } catch {
            throw CoatyPostgresError(
                "Could not create the index \(key.indexName) on \(collection).\(property): \(PostgresErrorText.describe(error))"
            )
        }
        indexes.insert([key])
    }

    /// The first key of the advisory locks ``createIndex(collection:property:)`` takes (the second
    /// is the index name's hash); ``migrate()`` locks 7243020001 in the one-key form.
    static let indexLockClass: Int32 = 72_430_201

    /// Records an index another session created in `coaty_json_indexes` (once).
    private func declareIndex(_ key: JSONIndexDeclarations.Key, collection: String, property: String) async throws {
        let logger = logger
        do {
            try await client.withConnection { connection in
                _ = try await connection.query(
                    "INSERT INTO coaty_json_indexes (collection, property, name) VALUES (\(collection), \(property), \(key.indexName)) ON CONFLICT DO NOTHING",
                    logger: logger
                )
            }
        } catch {
            throw CoatyPostgresError(
                "Could not record the index \(key.indexName) on \(collection).\(property): \(PostgresErrorText.describe(error))"
            )
        }
    }

    /// Whether ``createIndex(collection:property:)`` created that index.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - property: the property.
    /// - Returns: `true` when declared.
    public func hasIndex(collection: String, property: String) -> Bool {
        indexes.contains(collection: collection, property: property)
    }

    /// The names of the migrations applied to the database, in order.
    /// - Returns: the names.
    /// - Throws: a database error.
    public func appliedMigrations() async throws -> [String] {
        let logger = logger
        return try await client.withConnection { connection in
            let exists = try await connection.query(
                "SELECT to_regclass('coaty_schema_version') IS NOT NULL",
                logger: logger
            ).collect()
            guard try exists.first?.decode(Bool.self) == true else { return [String]() }
            return try await connection.query(
                "SELECT name FROM coaty_schema_version ORDER BY version",
                logger: logger
            ).collect().map { try $0.decode(String.self) }
        }
    }

    /// The statements of each migration, in order.
    /// The statements of each migration as text (tests replay old schemas).
    static var migrationTexts: [[String]] { migrations.map { $0.map(\.sql) } }

    static let migrations: [[PostgresQuery]] = [
        [
            """
            CREATE TABLE coaty_rows (
                id bigserial PRIMARY KEY,
                collection text NOT NULL,
                key text NOT NULL,
                object jsonb NOT NULL,
                metadata jsonb,
                "objectId" text,
                "objectType" text,
                "coreType" text,
                name text,
                "externalId" text,
                "parentObjectId" text,
                "locationId" text,
                UNIQUE (collection, key)
            )
            """,
            "CREATE INDEX coaty_rows_object ON coaty_rows USING gin (object)",
            "CREATE INDEX coaty_rows_objectId ON coaty_rows (\"objectId\")",
            "CREATE INDEX coaty_rows_objectType ON coaty_rows (\"objectType\")",
            "CREATE INDEX coaty_rows_coreType ON coaty_rows (\"coreType\")",
            "CREATE INDEX coaty_rows_name ON coaty_rows (name)",
            "CREATE INDEX coaty_rows_externalId ON coaty_rows (\"externalId\")",
            "CREATE INDEX coaty_rows_parentObjectId ON coaty_rows (\"parentObjectId\")",
            "CREATE INDEX coaty_rows_locationId ON coaty_rows (\"locationId\")",
        ],
        [
            "CREATE TABLE coaty_local (key text PRIMARY KEY, value jsonb NOT NULL)"
        ],
        [
            // The local values of version 2 move to the default store "".
            "ALTER TABLE coaty_local ADD COLUMN store text NOT NULL DEFAULT ''",
            "ALTER TABLE coaty_local DROP CONSTRAINT coaty_local_pkey",
            "ALTER TABLE coaty_local ADD PRIMARY KEY (store, key)",
        ],
        [
            """
            CREATE TABLE coaty_json_indexes (
                collection text NOT NULL, property text NOT NULL, name text NOT NULL,
                PRIMARY KEY (collection, property)
            )
            """
        ],
    ]

    /// Applies the missing migrations in one transaction, under an advisory lock so that
    /// concurrent first connections (also of other processes) migrate once.
    func migrate() async throws {
        let logger = logger
        do {
            try await client.withConnection { connection in
                try await connection.withTransaction(logger: logger) { connection in
                    try await connection.query("SELECT pg_advisory_xact_lock(7243020001)", logger: logger)
                    try await connection.query(
                        """
                        CREATE TABLE IF NOT EXISTS coaty_schema_version (
                            version integer PRIMARY KEY,
                            name text NOT NULL,
                            applied_at timestamptz NOT NULL DEFAULT now()
                        )
                        """,
                        logger: logger
                    )
                    let current =
                        try await connection.query(
                            "SELECT coalesce(max(version), 0) FROM coaty_schema_version",
                            logger: logger
                        ).collect().first?.decode(Int.self) ?? 0
                    for (offset, statements) in Self.migrations.enumerated() where offset + 1 > current {
                        for statement in statements { try await connection.query(statement, logger: logger) }
                        let version = offset + 1
                        let name = Self.migrationNames[offset]
                        try await connection.query(
                            "INSERT INTO coaty_schema_version (version, name) VALUES (\(version), \(name))",
                            logger: logger
                        )
                    }
                }
            }
        } catch {
            throw CoatyPostgresError(
                "Cannot bring the CoatyKit schema up to date on \(Self.describe(configuration)): \(PostgresErrorText.describe(error)); check that the server runs and the user may create tables"
            )
        }
    }

    static func describe(_ configuration: PostgresClient.Configuration) -> String {
        let place = configuration.unixSocketPath ?? "\(configuration.host ?? "?"):\(configuration.port ?? 5432)"
        return "\(configuration.username)@\(place)/\(configuration.database ?? "")"
    }

    /// Runs `body` in a transaction on a connection leased from the pool, awaiting each statement.
    func transaction<T: Sendable>(
        readOnly: Bool,
        _ body: @escaping @Sendable (PostgresTransaction) async throws -> T
    ) async throws -> T {
        let logger = logger
        let declared = indexes
        return try await Self.describingClientErrors { [client] in
            try await client.withConnection { connection in
                let begin: PostgresQuery = readOnly ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN"
                try await connection.query(begin, logger: logger)
                let result: T
                do {
                    let transaction = PostgresTransaction(connection: connection, logger: logger, indexes: declared)
                    result = try await body(transaction)
                    if let failure = transaction.failure {
                        throw CoatyPostgresError(
                            "A statement failed inside the transaction, which was rolled back: \(failure)"
                        )
                    }
                } catch {
                    do {
                        try await connection.query("ROLLBACK", logger: logger)
                    } catch let rollbackError {
                        logger.error("ROLLBACK failed: \(PostgresErrorText.describe(rollbackError))")
                    }
                    throw error
                }
                try await connection.query("COMMIT", logger: logger)
                return result
            }
        }
    }

    /// Runs `body`, turning the client's own errors (`PSQLError`: a lost connection, a refused
    /// BEGIN or COMMIT) into a ``CoatyPostgresError`` that names what the server said; any other
    /// error passes unchanged.
    static func describingClientErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PSQLError {
            throw CoatyPostgresError(PostgresErrorText.describe(error))
        }
    }
}

/// A connection to a ``PostgresDatabase``: each transaction leases a pooled connection.
public struct PostgresStoreConnection: ConnectionType, JSONPropertyIndexing {
    let database: PostgresDatabase

    /// See ``PostgresDatabase/createIndex(collection:property:)``.
    public func createIndex(collection: String, property: String) async throws {
        try await database.createIndex(collection: collection, property: property)
    }

    /// See ``PostgresDatabase/hasIndex(collection:property:)``.
    public func hasIndex(collection: String, property: String) -> Bool {
        database.hasIndex(collection: collection, property: property)
    }

    /// Runs `body` in a read-only repeatable-read transaction (one snapshot).
    /// - Parameter body: the reads.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or PostgreSQL throws.
    public func read<T: Sendable>(_ body: @escaping @Sendable (PostgresTransaction) async throws -> T) async throws
        -> T
    {
        try await database.transaction(readOnly: true, body)
    }

    /// Runs `body` in a read-committed write transaction: commits when it returns, rolls back when
    /// it throws (or when one of its statements failed).
    /// - Parameter body: the writes.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or PostgreSQL throws.
    public func write<T: Sendable>(_ body: @escaping @Sendable (PostgresTransaction) async throws -> T) async throws
        -> T
    {
        try await database.transaction(readOnly: false, body)
    }
}

/// Passes everything to `base` except postgres-nio's warning that a connection was leased before
/// `PostgresClient.run()` was entered. ``PostgresDatabase/run()`` and the first lease start
/// concurrently (``PostgresDatabase/withDatabase(url:logger:_:)``, `coaty record`); the lease then
/// simply waits for the pool, so the warning is noise (a stray line on the CLI's stderr).
struct RunOrderWarningFilter: LogHandler {
    var base: any LogHandler

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        if event.level == .warning, event.message.description.contains("`PostgresClient.run()` hasn't been called") {
            return
        }
        base.log(event: event)
    }
}
