import CoatyTesting
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL server on a free loopback port, for the tests of one process.
///
/// `initdb` (with `-A trust`) makes a data directory in a new temporary directory, `pg_ctl`
/// starts the server on `127.0.0.1` with its socket in the same directory, and ``stop()``
/// stops it and removes the directory. As root, the binaries run as the `postgres` user through
/// `runuser -u postgres --` (PostgreSQL refuses to run as root). The binaries are looked up in
/// `$COATY_POSTGRES_BIN`, then in Debian's `/usr/lib/postgresql/<version>/bin`, newest first.
public final class PostgresTestServer: Sendable {
    /// The server's directory (data directory `data`, socket and log).
    public let directory: String
    /// The port on 127.0.0.1.
    public let port: Int
    let binaries: String
    let asPostgresUser: Bool
    let databaseCounter = Atomic(0)

    /// An error while starting or using the server, with the command's output.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed, with the output of the command.
        public let description: String
    }

    /// The directory with `initdb` and `pg_ctl`, or `nil` when PostgreSQL's server is not installed.
    public static let binaryDirectory: String? = {
        if let directory = ProcessInfo.processInfo.environment["COATY_POSTGRES_BIN"] {
            return FileManager.default.isExecutableFile(atPath: directory + "/initdb") ? directory : nil
        }
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "\(root)/\($0)/bin" }.first {
            FileManager.default.isExecutableFile(atPath: $0 + "/initdb")
                && FileManager.default.isExecutableFile(atPath: $0 + "/pg_ctl")
        }
    }()

    /// Whether the tests run: the binaries are there, or CI is set (and the tests then fail).
    public static let shouldRun = binaryDirectory != nil || ProcessInfo.processInfo.environment["CI"] == "true"

    /// Why the tests are skipped.
    public static let skipReason =
        "PostgreSQL's server binaries (initdb, pg_ctl) are not installed; install Debian's postgresql package or set COATY_POSTGRES_BIN"

    /// The server of the running test scope (see ``PostgresServerTrait``).
    @TaskLocal public static var current: PostgresTestServer?

    private init(directory: String, port: Int, binaries: String, asPostgresUser: Bool) {
        self.directory = directory
        self.port = port
        self.binaries = binaries
        self.asPostgresUser = asPostgresUser
    }

    /// Makes the data directory and starts the server, on a thread of its own (`initdb` and
    /// `pg_ctl start` take seconds on a loaded machine: no thread of the cooperative pool waits
    /// for them).
    /// - Throws: ``Failure`` when the binaries are missing or a command fails.
    public static func start() async throws -> PostgresTestServer {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try startBlocking() }) }
        }
    }

    private static func startBlocking() throws -> PostgresTestServer {
        guard let binaries = binaryDirectory else { throw Failure(description: "\(skipReason)") }
        let asPostgresUser = getuid() == 0
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "coaty-postgres-\(UUID().uuidString.prefix(8))"
        ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if asPostgresUser { try run("/bin/chown", ["postgres:postgres", directory]) }
        var lastError: (any Error)?
        // A free port can be taken between the probe and the server's bind: try a few.
        for _ in 0..<3 {
            let server = PostgresTestServer(
                directory: directory,
                port: try MosquittoBroker.freeLoopbackPort(),
                binaries: binaries,
                asPostgresUser: asPostgresUser
            )
            do {
                try server.initializeAndStart()
                return server
            } catch {
                lastError = error
                try? server.pgctl(["-D", server.dataDirectory, "-m", "immediate", "-w", "stop"])
                try? FileManager.default.removeItem(atPath: server.dataDirectory)
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
        throw lastError ?? Failure(description: "PostgreSQL did not start")
    }

    var dataDirectory: String { directory + "/data" }

    /// A connection string for a new, empty database on this server.
    /// - Returns: `postgres://postgres@127.0.0.1:PORT/coaty_test_N`.
    /// - Throws: ``Failure`` when `createdb` fails.
    public func makeDatabase() throws -> String {
        let name = "coaty_test_\(databaseCounter.add(1, ordering: .relaxed).newValue)"
        try tool("createdb", ["-h", directory, "-p", "\(port)", "-U", "postgres", name])
        return "postgres://postgres@127.0.0.1:\(port)/\(name)?sslmode=disable"
    }

    /// Runs SQL with `psql` in a database made by ``makeDatabase()`` (stops at the first error).
    /// - Parameters:
    ///   - sql: the statements.
    ///   - url: the database's connection string.
    /// - Throws: ``Failure`` when a statement fails.
    public func execute(_ sql: String, in url: String) throws {
        let name = url.split(separator: "/").last.map { String($0.split(separator: "?")[0]) } ?? ""
        try tool(
            "psql",
            ["-h", directory, "-p", "\(port)", "-U", "postgres", "-d", name, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]
        )
    }

    /// Runs one SQL query with `psql` in a database made by ``makeDatabase()`` and returns its
    /// rows unaligned, one per line, columns separated by `|`.
    /// - Parameters:
    ///   - sql: the query.
    ///   - url: the database's connection string.
    /// - Returns: the rows.
    /// - Throws: ``Failure`` when the query fails.
    public func query(_ sql: String, in url: String) throws -> [String] {
        let name = url.split(separator: "/").last.map { String($0.split(separator: "?")[0]) } ?? ""
        let output = try tool(
            "psql",
            ["-h", directory, "-p", "\(port)", "-U", "postgres", "-d", name, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql]
        )
        return output.split(separator: "\n").map(String.init)
    }

    /// Stops the server (immediately) and removes its directory.
    public func stop() {
        try? pgctl(["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func initializeAndStart() throws {
        if !FileManager.default.fileExists(atPath: dataDirectory + "/PG_VERSION") {
            try tool(
                "initdb",
                ["-D", dataDirectory, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]
            )
        }
        let options = "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off"
        try pgctl(["-D", dataDirectory, "-o", options, "-l", directory + "/server.log", "-w", "-t", "60", "start"])
    }

    private func pgctl(_ arguments: [String]) throws {
        try tool("pg_ctl", arguments)
    }

    @discardableResult
    private func tool(_ name: String, _ arguments: [String]) throws -> String {
        let path = "\(binaries)/\(name)"
        if asPostgresUser {
            // In `/` (`env -C`): the `postgres` user cannot enter a private (0700) working
            // directory, and psql's warning about that would be read as its output.
            return try Self.run(
                "/usr/sbin/runuser",
                ["-u", "postgres", "--", "/usr/bin/env", "-C", "/", path] + arguments
            )
        } else {
            return try Self.run(path, arguments)
        }
    }

    /// Runs a command to its end and returns its output (stdout and stderr); throws with it when
    /// the command fails.
    ///
    /// posix_spawn and waitpid rather than Foundation's `Process`: a `Process` running `runuser`
    /// was never seen to exit (its child stayed a zombie and `waitUntilExit` hung), and the child
    /// must not inherit the blocked signals of a concurrency thread (`pg_ctl` waits for signals).
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let outputPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-pg-tool-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var attributes = posix_spawnattr_t()
        var actions = posix_spawn_file_actions_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        sigfillset(&signals)
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let words = [executable] + arguments
        let argv = words.map { strdup($0) } + [nil]
        defer { for word in argv { free(word) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard spawned == 0 else {
            throw Failure(description: "cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // Exited normally with 0 (WIFEXITED and WEXITSTATUS, which Swift does not import).
        guard status & 0xffff == 0 else {
            throw Failure(
                description: "\(words.joined(separator: " ")) failed with status \(status): \(output)"
            )
        }
        return output
    }
}
