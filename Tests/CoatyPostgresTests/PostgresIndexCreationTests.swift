import CoatyRecording
import CoatyStore
import CoatyStoreTestSupport
import CoatySync
import Logging
import PostgresNIO
import Testing

@testable import CoatyPostgres

extension PostgresBackendTests {
    /// Recorder group members each run their own client on one database and may auto-create the
    /// same index at the same moment: eight databases (eight clients, as eight members) create the
    /// same five indexes at once, three rounds. Every creation succeeds, nothing is logged at
    /// warning or above, and each index exists once, declared once.
    @Test func concurrentCreatorsOfTheSameIndexAllSucceedQuietly() async throws {
        let server = try #require(PostgresTestServer.current, "the suite has no PostgreSQL server")
        let url = try server.makeDatabase()
        let recorded = Recorded()
        var databases: [CoatyPostgres.PostgresDatabase] = []
        for member in 0..<8 {
            var logger = Logger(label: "member-\(member)") { _ in RecordingHandler(recorded: recorded) }
            logger.logLevel = .warning
            databases.append(try CoatyPostgres.PostgresDatabase(url: url, logger: logger))
        }
        let members = databases
        let properties = ["p0", "p1", "p2", "p3", "p4"]
        try await withThrowingTaskGroup(of: Void.self) { services in
            for member in members { services.addTask { try await member.run() } }
            defer { services.cancelAll() }
            for member in members { _ = try await member.makeConnection() }
            for round in 0..<3 {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for member in members {
                        for property in properties {
                            group.addTask {
                                let collection = "com.example.Round\(round)"
                                try await member.createIndex(collection: collection, property: property)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            for member in members {
                for round in 0..<3 {
                    for property in properties {
                        #expect(member.hasIndex(collection: "com.example.Round\(round)", property: property))
                    }
                }
            }
        }
        #expect(recorded.messages.withLock { $0 }.isEmpty)
        let declared = try server.query("SELECT count(*) FROM coaty_json_indexes", in: url)
        #expect(declared == ["15"])
        let indexes = try server.query(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'coaty_rows' AND indexname LIKE 'coaty_json_%'",
            in: url
        )
        #expect(indexes == ["15"])
    }

    /// A statement PostgreSQL refuses is reported with the server's own text (message, SQLSTATE),
    /// not postgres-nio's generic "PSQLError – Generic description" and not the statement's data.
    @Test func aRefusedStatementIsReportedWithTheServersText() async throws {
        try await withPostgres { _, connection in
            var binding = PostgresSQL()
            let statement = "SELECT * FROM coaty_rows WHERE nonexistent_column = \(binding.bind("a secret value"))"
            let sql = binding
            let error = await #expect(throws: CoatyPostgresError.self) {
                try await connection.read { tx in _ = try await tx.fetch(statement, sql) }
            }
            let message = try #require(error).message
            #expect(message.contains("column \"nonexistent_column\" does not exist"), "\(message)")
            #expect(message.contains("SQLSTATE 42703"), "\(message)")
            #expect(!message.contains("Generic description"), "\(message)")
            #expect(!message.contains("a secret value"), "\(message)")
        }
    }
}
