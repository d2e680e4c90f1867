import CoatyStoreTestSupport
import Testing

/// Starts one ``PostgresTestServer`` for a suite, offers it as ``PostgresTestServer/current``
/// to the suite's tests, and stops it when the suite ends.
struct PostgresServerTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        let server = try await PostgresTestServer.start()
        defer { server.stop() }
        try await PostgresTestServer.$current.withValue(server) { try await function() }
    }
}

extension Trait where Self == PostgresServerTrait {
    /// A PostgreSQL server for the suite.
    static var postgresServer: Self { PostgresServerTrait() }
}
