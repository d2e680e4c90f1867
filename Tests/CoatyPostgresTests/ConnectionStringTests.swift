import CoatyPostgres
import PostgresNIO
import Testing

/// Connection strings (no server needed).
@Suite("PostgreSQL connection strings")
struct ConnectionStringTests {
    @Test func connectionStringsAreParsed() throws {
        let plain = try CoatyPostgres.PostgresDatabase.configuration(
            url: "postgres://coaty:secret@db.example:6543/agents"
        )
        #expect(plain.host == "db.example")
        #expect(plain.port == 6543)
        #expect(plain.username == "coaty")
        #expect(plain.password == "secret")
        #expect(plain.database == "agents")
        let defaults = try CoatyPostgres.PostgresDatabase.configuration(
            url: "postgresql://coaty@localhost/agents?sslmode=disable"
        )
        #expect(defaults.port == 5432)
        #expect(defaults.password == nil)
        let socket = try CoatyPostgres.PostgresDatabase.configuration(
            url: "postgres://coaty@/agents?host=/run/postgresql"
        )
        #expect(socket.unixSocketPath == "/run/postgresql/.s.PGSQL.5432")
    }

    @Test(arguments: [
        "mysql://coaty@localhost/agents", "postgres://localhost/agents", "postgres://coaty@localhost",
        "postgres://coaty@localhost/agents?sslmode=maybe", "postgres://coaty@/agents",
    ])
    func wrongConnectionStringsFailWithAClearError(_ url: String) {
        #expect(throws: CoatyPostgresError.self) { try CoatyPostgres.PostgresDatabase.configuration(url: url) }
    }
}
