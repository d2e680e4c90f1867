import CoatyCore
import CoatySQLite
import CoatyRecording
import CoatyStore
import Foundation
import Testing

@Suite("Stores opened from an agent configuration's databases")
struct DatabaseOptionsStoreTests {
    @Test("The database db (or the only one) is the default; COATY_DATABASE_DB replaces db; names match ignoring case")
    func selection() throws {
        var configuration = try AgentConfiguration(
            json: [
                "databases": [
                    "db": ["adapter": "SqLiteNodeAdapter", "connectionString": "/tmp/a.sqlite"],
                    "history": ["adapter": "PostgresAdapter", "connectionString": "postgres://u@h/x"],
                ]
            ]
        )
        #expect(try configuration.defaultDatabase()?.name == "db")
        #expect(try configuration.database(named: "HISTORY").backend == .postgres)
        try configuration.applyEnvironment(["COATY_DATABASE_DB": "sqlite:/tmp/b.sqlite"])
        #expect(configuration.databases.keys.sorted() == ["db", "history"])
        #expect(try configuration.database(named: "db").sqlitePath(at: "databases.db") == "/tmp/b.sqlite")

        let missing = #expect(throws: AgentConfigurationError.self) { try configuration.database(named: "cache") }
        #expect(missing?.description == "databases.cache: is not configured; the configuration has db, history")

        configuration.databases["db"] = nil
        #expect(try configuration.defaultDatabase()?.name == "history", "the only one")
        configuration.databases["other"] = DatabaseOptions(backend: .inMemory)
        let ambiguous = #expect(throws: AgentConfigurationError.self) { try configuration.defaultDatabase() }
        #expect(ambiguous?.field == "databases")
        configuration.databases = [:]
        #expect(try configuration.defaultDatabase() == nil)
    }

    @Test("SQLiteDatabase and InMemoryDatabase open from database options, and name the field that is wrong")
    func openFromOptions() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("options-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/store.sqlite"
        let database = try SQLiteDatabase(options: DatabaseOptions(url: "sqlite:" + file, field: "COATY_DATABASE_DB"))
        #expect(database.path == file)
        #expect(FileManager.default.fileExists(atPath: file))
        _ = try InMemoryDatabase(options: DatabaseOptions(backend: .inMemory))

        let postgres = DatabaseOptions(adapter: "PostgresAdapter", connectionString: "postgres://u@h/x")
        let wrongBackend = #expect(throws: AgentConfigurationError.self) {
            try SQLiteDatabase(options: postgres, at: "databases.db")
        }
        #expect(wrongBackend?.description == "databases.db.adapter: is PostgresAdapter, not SqLiteNodeAdapter")
        let noPath = #expect(throws: AgentConfigurationError.self) {
            try SQLiteDatabase(options: DatabaseOptions(adapter: "SqLiteNodeAdapter"), at: "databases.db")
        }
        #expect(noPath?.field == "databases.db.connectionString")
        let notMemory = #expect(throws: AgentConfigurationError.self) {
            try InMemoryDatabase(options: postgres, at: "databases.cache")
        }
        #expect(notMemory?.field == "databases.cache.adapter")
        let notAURL = #expect(throws: AgentConfigurationError.self) {
            try DatabaseOptions(adapter: "postgres", connectionString: "/tmp/x").postgresURL(at: "databases.pg")
        }
        #expect(notAURL?.field == "databases.pg.connectionString")
    }
}
