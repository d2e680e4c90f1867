import CoatySync
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a command-line tool run by ``runProcess(_:_:in:environment:)`` did.
public struct ToolOutcome: Sendable {
    /// Its exit status.
    public var status: Int32
    /// What it wrote to standard output and standard error, interleaved.
    public var output: String
}

/// Runs a command-line tool to its end and returns its exit status and output, awaiting the exit
/// (`Process.terminationHandler`): no thread of the cooperative pool waits for it, so a slow tool
/// (openssl's key generation, `rabbitmqctl`'s Erlang VM) never stalls the other tests of the
/// process. The output goes to a temporary file, not a pipe, so nothing blocks on a full pipe.
/// - Parameters:
///   - executable: an absolute path, or a name looked up in `/usr/bin`, `/usr/sbin`,
///     `/usr/local/bin` and `/opt/homebrew/bin`.
///   - arguments: its arguments.
///   - directory: its working directory, or `nil` for this process's.
///   - environment: its whole environment, or `nil` for this process's.
///   - keepStandardError: whether standard error goes into the output (else it is discarded).
///   - timeout: the longest run; the tool is killed (`SIGKILL`) after it.
/// - Returns: the status and output.
/// - Throws: ``TestSupportError`` when the tool cannot be found or started, or was killed after
///   `timeout`.
public func runProcess(
    _ executable: String,
    _ arguments: [String],
    in directory: String? = nil,
    environment: [String: String]? = nil,
    keepStandardError: Bool = true,
    timeout: Duration? = nil
) async throws -> ToolOutcome {
    let candidates =
        executable.hasPrefix("/")
        ? [executable]
        : ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/opt/homebrew/bin"].map { "\($0)/\(executable)" }
    guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw TestSupportError("\(executable) is needed and was not found (looked in \(candidates))")
    }
    let outputPath = FileManager.default.temporaryDirectory
        .appendingPathComponent("coaty-tool-\(UUID().uuidString.prefix(8)).out").path
    _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
    defer { try? FileManager.default.removeItem(atPath: outputPath) }
    let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
    defer { try? output.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    if let environment { process.environment = environment }
    process.standardOutput = output
    process.standardError = keepStandardError ? output : FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    // (pid, killed): the watchdog kills the tool once `timeout` has passed.
    let run = ToolRun()
    var watchdog: Task<Void, any Error>?
    if let timeout {
        watchdog = Task {
            try await Task.sleep(for: timeout)
            run.state.withLock { run in
                guard run.pid > 0 else { return }
                run.killed = true
                kill(run.pid, SIGKILL)
            }
        }
    }
    defer { watchdog?.cancel() }
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { process in
            run.state.withLock { $0.pid = 0 }
            continuation.resume(returning: process.terminationStatus)
        }
        do {
            try run.state.withLock { run in
                try process.run()
                run.pid = process.processIdentifier
            }
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: TestSupportError("cannot start \(path): \(error)"))
        }
    }
    if run.state.withLock({ $0.killed }) {
        throw TestSupportError("\(executable) \(arguments.joined(separator: " ")) was killed after \(timeout!)")
    }
    return ToolOutcome(status: status, output: (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "")
}

/// A running tool's process id (0 once it has ended) and whether the watchdog killed it.
private final class ToolRun: Sendable {
    let state = CoatyMutex((pid: Int32(0), killed: false))
}

/// Runs a command-line tool to its end (see ``runProcess(_:_:in:environment:)``), failing when it
/// exits non-zero.
/// - Parameters:
///   - executable: an absolute path, or a name looked up in the usual directories.
///   - arguments: its arguments.
///   - directory: its working directory, or `nil` for this process's.
/// - Returns: its output (standard output and standard error).
/// - Throws: ``TestSupportError`` with the output when it fails or cannot be started.
@discardableResult
public func runTool(_ executable: String, _ arguments: [String], in directory: String? = nil) async throws -> String {
    let outcome = try await runProcess(executable, arguments, in: directory)
    guard outcome.status == 0 else {
        throw TestSupportError(
            "\(executable) \(arguments.joined(separator: " ")) exited with \(outcome.status): \(outcome.output)"
        )
    }
    return outcome.output
}

/// Writes a mosquitto password file with one user (`mosquitto_passwd -b -c`).
/// - Parameters:
///   - path: the file to write.
///   - user: the user name.
///   - password: its password.
/// - Throws: ``TestSupportError`` when `mosquitto_passwd` (Debian package mosquitto) is missing or fails.
public func writeMosquittoPasswordFile(_ path: String, user: String, password: String) async throws {
    try await runTool("mosquitto_passwd", ["-b", "-c", path, user, password])
}

/// A CA, a server certificate for IP 127.0.0.1 signed by it, and an unrelated second CA, made
/// with openssl in a directory: for TLS tests against a real broker.
public struct TestCertificates: Sendable {
    /// The directory holding the files.
    public let directory: String
    /// The CA's certificate (PEM).
    public let caFile: String
    /// The CA's private key.
    public let caKey: String
    /// The server's certificate, for IP 127.0.0.1, signed by the CA.
    public let serverCertificate: String
    /// The server's private key.
    public let serverKey: String
    /// An unrelated CA's certificate: a client trusting only it rejects the server.
    public let otherCAFile: String

    private init(directory: String) {
        self.directory = directory
        caFile = directory + "/ca.crt"
        caKey = directory + "/ca.key"
        serverCertificate = directory + "/server.crt"
        serverKey = directory + "/server.key"
        otherCAFile = directory + "/other-ca.crt"
    }

    /// Makes the CAs and the server certificate in `directory`.
    /// - Parameter directory: an existing directory.
    /// - Returns: the paths.
    /// - Throws: ``TestSupportError`` when openssl is missing or fails.
    public static func make(in directory: String) async throws -> TestCertificates {
        func path(_ name: String) -> String { directory + "/" + name }
        for name in ["ca", "other-ca"] {
            try await runTool(
                "openssl",
                [
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", path("\(name).key"), "-out", path("\(name).crt"), "-subj", "/CN=Coaty test \(name)",
                ]
            )
        }
        let certificates = TestCertificates(directory: directory)
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: path("san.ext"), atomically: true, encoding: .utf8)
        try await certificates.sign(name: "server", subject: "/CN=127.0.0.1", extensions: path("san.ext"))
        return certificates
    }

    /// Makes a client certificate signed by the CA (for brokers that require one).
    /// - Parameter name: the files' base name; the subject's common name is derived from it.
    /// - Returns: the certificate's and the key's paths.
    /// - Throws: ``TestSupportError`` when openssl fails.
    public func makeClientCertificate(name: String = "client") async throws -> (certificate: String, key: String) {
        try await sign(name: name, subject: "/CN=Coaty test \(name)", extensions: nil)
        return (directory + "/\(name).crt", directory + "/\(name).key")
    }

    /// A key and a certificate `<name>.key` / `<name>.crt` signed by the CA.
    private func sign(name: String, subject: String, extensions: String?) async throws {
        func path(_ file: String) -> String { directory + "/" + file }
        try await runTool(
            "openssl",
            [
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", path("\(name).key"), "-out", path("\(name).csr"),
                "-subj", subject,
            ]
        )
        try await runTool(
            "openssl",
            [
                "x509", "-req", "-in", path("\(name).csr"), "-CA", caFile, "-CAkey", caKey, "-CAcreateserial",
                "-out", path("\(name).crt"), "-days", "2",
            ] + (extensions.map { ["-extfile", $0] } ?? [])
        )
    }
}
