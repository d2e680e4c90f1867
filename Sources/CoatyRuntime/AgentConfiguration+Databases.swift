public import CoatyModel
public import CoatyStore

extension AgentConfiguration {
    /// The name of the database an agent uses when it is not told which: `db`, as Coaty JS's
    /// examples name it (`runtime.databaseOptions["db"]`).
    public static let defaultDatabaseName = "db"

    /// The database of a name: the key of ``databases`` equal to it, else the only key equal to
    /// it ignoring case (so `COATY_DATABASE_DB` gives the database `db`).
    /// - Parameter name: the name.
    /// - Returns: its options.
    /// - Throws: ``AgentConfigurationError`` naming `databases.<name>` when there is none (listing
    ///   the configured names).
    public func database(named name: String) throws(AgentConfigurationError) -> DatabaseOptions {
        guard let options = databaseEntry(named: name)?.options else {
            let configured = databases.keys.sorted()
            throw AgentConfigurationError(
                field: "databases.\(name)",
                reason: configured.isEmpty
                    ? "is not configured: the configuration has no databases (set it in the file or COATY_DATABASE_\(name))"
                    : "is not configured; the configuration has \(configured.joined(separator: ", "))"
            )
        }
        return options
    }

    /// The database to use when none is named: ``defaultDatabaseName`` (`db`) when configured,
    /// else the only one configured.
    /// - Returns: its name and options, or `nil` when no database is configured.
    /// - Throws: ``AgentConfigurationError`` naming `databases` when several are configured and
    ///   none is named `db`.
    public func defaultDatabase() throws(AgentConfigurationError) -> (name: String, options: DatabaseOptions)? {
        if let entry = databaseEntry(named: Self.defaultDatabaseName) { return entry }
        if databases.count == 1, let (name, options) = databases.first { return (name, options) }
        guard databases.isEmpty else {
            throw AgentConfigurationError(
                field: "databases",
                reason: "has \(databases.keys.sorted().joined(separator: ", ")) and none named "
                    + "\(Self.defaultDatabaseName); name the one to use"
            )
        }
        return nil
    }

    private func databaseEntry(named name: String) -> (name: String, options: DatabaseOptions)? {
        if let options = databases[name] { return (name, options) }
        let matches = databases.filter { $0.key.lowercased() == name.lowercased() }
        guard matches.count == 1, let (key, options) = matches.first else { return nil }
        return (key, options)
    }
}
