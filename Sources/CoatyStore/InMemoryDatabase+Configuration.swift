public import CoatyModel

extension InMemoryDatabase {
    /// An empty database for database options of an agent configuration that name the in-memory
    /// adapter (`InMemoryAdapter`, `memory:` in `COATY_DATABASE_<NAME>`).
    /// - Parameters:
    ///   - options: the options, e.g. `AgentConfiguration.database(named:)` of CoatyRuntime.
    ///   - path: their field path for errors.
    /// - Throws: ``CoatyModel/AgentConfigurationError`` naming `adapter` for another backend.
    public convenience init(options: DatabaseOptions, at path: String = "") throws(AgentConfigurationError) {
        try options.requireBackend(.inMemory, at: path)
        self.init()
    }
}
