public import CoatyModel

/// How to reach one named database of an agent (Coaty's `DbConnectionInfo`): the adapter (the
/// backend) and its connection string, from `databases.<name>` of the configuration.
///
/// ```json
/// "databases": {
///   "store": { "adapter": "PostgresAdapter", "connectionString": "postgres://coaty@db:5432/coaty" },
///   "local": { "adapter": "SqLiteNodeAdapter", "connectionString": "/var/lib/agent/local.db" }
/// }
/// ```
///
/// The adapter names are Coaty JS's (`InMemoryAdapter`, `SqLiteNodeAdapter`, `PostgresAdapter`);
/// ``backend`` maps them, and the short names `memory`, `sqlite` and `postgres`, onto CoatyKit's
/// backends. An environment variable `COATY_DATABASE_<NAME>` sets one database from a URL (see
/// ``init(url:field:)``).
public struct DatabaseOptions: Sendable, Hashable {
    /// A database backend of CoatyKit.
    public enum Backend: Sendable, Hashable {
        /// The in-memory store (`InMemoryAdapter`).
        case inMemory
        /// SQLite through GRDB (`SqLiteNodeAdapter`); the connection string is the file path.
        case sqlite
        /// PostgreSQL through postgres-nio (`PostgresAdapter`); the connection string is a
        /// `postgres://` URL.
        case postgres
        /// An adapter CoatyKit does not provide, by its name.
        case other(String)

        /// Coaty JS's adapter name of the backend.
        public var adapterName: String {
            switch self {
            case .inMemory: "InMemoryAdapter"
            case .sqlite: "SqLiteNodeAdapter"
            case .postgres: "PostgresAdapter"
            case .other(let name): name
            }
        }
    }

    /// The adapter's name, e.g. `PostgresAdapter` (JSON: `adapter`, required).
    public var adapter: String
    /// The adapter-specific connection string or URL (JSON: `connectionString`).
    public var connectionString: String?
    /// Adapter-specific options, kept as given (JSON: `adapterOptions`).
    public var adapterOptions: JSONValue?
    /// Adapter-specific connection options, kept as given (JSON: `connectionOptions`).
    public var connectionOptions: JSONValue?

    /// Creates database options.
    /// - Parameters:
    ///   - adapter: the adapter's name.
    ///   - connectionString: the connection string or URL.
    ///   - adapterOptions: adapter-specific options.
    ///   - connectionOptions: adapter-specific connection options.
    public init(
        adapter: String,
        connectionString: String? = nil,
        adapterOptions: JSONValue? = nil,
        connectionOptions: JSONValue? = nil
    ) {
        self.adapter = adapter
        self.connectionString = connectionString
        self.adapterOptions = adapterOptions
        self.connectionOptions = connectionOptions
    }

    /// Creates database options for a backend.
    /// - Parameters:
    ///   - backend: the backend.
    ///   - connectionString: the SQLite file path or the PostgreSQL URL.
    public init(backend: Backend, connectionString: String? = nil) {
        self.init(adapter: backend.adapterName, connectionString: connectionString)
    }

    /// Reads database options from a URL, as `COATY_DATABASE_<NAME>` gives them:
    /// `postgres://…` or `postgresql://…` (PostgreSQL, the whole URL is the connection string),
    /// `sqlite:PATH` (SQLite file `PATH`) or `memory:` (in memory).
    /// - Parameters:
    ///   - url: the URL.
    ///   - field: the variable or field named in an error.
    /// - Throws: ``AgentConfigurationError`` for another scheme or an empty SQLite path.
    public init(url: String, field: String) throws(AgentConfigurationError) {
        let lowercased = url.lowercased()
        if lowercased.hasPrefix("postgres://") || lowercased.hasPrefix("postgresql://") {
            self.init(backend: .postgres, connectionString: url)
        } else if lowercased.hasPrefix("sqlite:") {
            let path = String(url.dropFirst("sqlite:".count))
            guard !path.isEmpty else {
                throw AgentConfigurationError(field: field, reason: "'\(url)' has no file path; use sqlite:PATH")
            }
            self.init(backend: .sqlite, connectionString: path)
        } else if lowercased == "memory:" {
            self.init(backend: .inMemory)
        } else {
            throw AgentConfigurationError(
                field: field,
                reason: "'\(url)' is not a database URL; use postgres://…, sqlite:PATH or memory:"
            )
        }
    }

    /// Reads Coaty JS's `DbConnectionInfo`: `adapter` (a non-empty string, required),
    /// `connectionString` (a string), `adapterOptions` and `connectionOptions` (any JSON).
    /// - Parameters:
    ///   - json: the connection information.
    ///   - path: its field path for errors, e.g. `databases.store`.
    /// - Throws: ``AgentConfigurationError`` naming the bad member.
    public init(json: JSONValue, at path: String) throws(AgentConfigurationError) {
        let object = try ConfigurationReader.object(json, at: path)
        guard let adapter = try ConfigurationReader.string(object, "adapter", at: path), !adapter.isEmpty else {
            throw AgentConfigurationError(
                field: ConfigurationReader.path(path, "adapter"),
                reason: "is missing or empty; name the adapter, e.g. SqLiteNodeAdapter or PostgresAdapter"
            )
        }
        self.init(
            adapter: adapter,
            connectionString: try ConfigurationReader.string(object, "connectionString", at: path),
            adapterOptions: object["adapterOptions"].flatMap { $0.isNull ? nil : $0 },
            connectionOptions: object["connectionOptions"].flatMap { $0.isNull ? nil : $0 }
        )
    }

    /// The backend of ``adapter``: Coaty JS's adapter names and the short names `memory`,
    /// `sqlite`, `postgres` (any case); ``Backend/other(_:)`` for the rest.
    public var backend: Backend {
        switch adapter.lowercased() {
        case "inmemoryadapter", "memory", "inmemory": .inMemory
        case "sqlitenodeadapter", "sqlite": .sqlite
        case "postgresadapter", "postgres", "postgresql": .postgres
        default: .other(adapter)
        }
    }

    /// The options as JSON in Coaty JS's layout; absent members are left out.
    public var json: JSONValue {
        var object: JSONObject = ["adapter": .string(adapter)]
        if let connectionString { object["connectionString"] = .string(connectionString) }
        if let adapterOptions { object["adapterOptions"] = adapterOptions }
        if let connectionOptions { object["connectionOptions"] = connectionOptions }
        return .object(object)
    }
}

extension DatabaseOptions {
    /// The SQLite file the options name, checked: the adapter must be SQLite
    /// (`SqLiteNodeAdapter`, `sqlite`) and the connection string a non-empty path.
    /// - Parameter path: the options' field path for errors, e.g. `databases.db`.
    /// - Returns: the file path.
    /// - Throws: ``AgentConfigurationError`` naming `adapter` or `connectionString`.
    public func sqlitePath(at path: String = "") throws(AgentConfigurationError) -> String {
        try requireBackend(.sqlite, at: path)
        guard let file = connectionString, !file.isEmpty else {
            throw AgentConfigurationError(
                field: ConfigurationReader.path(path, "connectionString"),
                reason: "is missing or empty; give the SQLite file path"
            )
        }
        return file
    }

    /// The PostgreSQL URL the options name, checked: the adapter must be PostgreSQL
    /// (`PostgresAdapter`, `postgres`) and the connection string a `postgres://` or
    /// `postgresql://` URL.
    /// - Parameter path: the options' field path for errors, e.g. `databases.db`.
    /// - Returns: the URL.
    /// - Throws: ``AgentConfigurationError`` naming `adapter` or `connectionString`.
    public func postgresURL(at path: String = "") throws(AgentConfigurationError) -> String {
        try requireBackend(.postgres, at: path)
        guard let url = connectionString,
            url.lowercased().hasPrefix("postgres://") || url.lowercased().hasPrefix("postgresql://")
        else {
            throw AgentConfigurationError(
                field: ConfigurationReader.path(path, "connectionString"),
                reason: "must be a URL postgres://user[:password]@host[:port]/database"
            )
        }
        return url
    }

    /// Checks that the options are for a backend.
    /// - Parameters:
    ///   - expected: the backend.
    ///   - path: the options' field path for errors.
    /// - Throws: ``AgentConfigurationError`` naming `adapter` when ``backend`` is another.
    public func requireBackend(_ expected: Backend, at path: String = "") throws(AgentConfigurationError) {
        guard backend != expected else { return }
        throw AgentConfigurationError(
            field: ConfigurationReader.path(path, "adapter"),
            reason: "is \(adapter), not \(expected.adapterName)"
        )
    }
}
