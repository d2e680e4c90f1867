import CoatyKit
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The result of running the `coaty` executable.
struct CLIResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String

    /// The stdout lines, each parsed as JSON (a line that is not JSON fails the caller's test).
    func jsonLines() throws -> [JSONValue] {
        try stdout.split(separator: "\n").map { line in
            do {
                return try JSONValue(parsing: String(line))
            } catch {
                throw CLITestError("stdout line is not JSON: \(line)")
            }
        }
    }

    /// The non-empty stderr lines.
    var stderrLines: [Substring] { stderr.split(separator: "\n") }
}

/// The `coaty` executable built next to the test bundle (Linux: the directory of
/// `CommandLine.arguments[0]`; macOS: next to the .xctest bundle).
func coatyExecutable() throws -> String {
    var directories = [
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    ]
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        directories.append(URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent())
    }
    for directory in directories {
        let candidate = directory.appendingPathComponent("coaty").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw CLITestError("coaty executable not found next to the test bundle; run `swift build --build-tests` first")
}

struct CLITestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Reads a file handle to its end on a thread of its own (never blocking the concurrency pool).
private func readToEnd(_ handle: FileHandle) async -> Data {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(returning: handle.readDataToEndOfFile())
        }
    }
}

/// A running `coaty` process; its output is collected until it exits.
final class CoatyProcess: Sendable {
    let arguments: [String]
    /// The process id.
    let pid: Int32
    private let output: Task<CLIResult, Never>

    /// Starts `coaty` with `arguments`; `stdin` is written to its standard input (closed after).
    init(_ arguments: [String], environment: [String: String] = [:], stdin: String? = nil) throws {
        self.arguments = arguments
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try coatyExecutable())
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for key in ["COATY_BROKER", "COATY_NAMESPACE", "COATY_PASSWORD"] { env.removeValue(forKey: key) }
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        let input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        let (exits, exit) = AsyncStream<Int32>.makeStream(bufferingPolicy: .bufferingNewest(1))
        process.terminationHandler = { process in
            exit.yield(process.terminationStatus)
            exit.finish()
        }
        try process.run()
        pid = process.processIdentifier
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try? input.fileHandleForWriting.close()
        let outHandle = out.fileHandleForReading
        let errHandle = err.fileHandleForReading
        output = Task {
            async let o = readToEnd(outHandle)
            async let e = readToEnd(errHandle)
            let (stdoutData, stderrData) = await (o, e)
            var status: Int32 = -1
            for await code in exits { status = code }
            return CLIResult(
                status: status,
                stdout: String(decoding: stdoutData, as: UTF8.self),
                stderr: String(decoding: stderrData, as: UTF8.self)
            )
        }
    }

    /// Sends a signal (e.g. `SIGTERM`).
    func signal(_ number: Int32) {
        _ = kill(pid, number)
    }

    /// Waits until the process exits; after `timeout` seconds it is killed, so a hang fails
    /// the test (the result then has the status of a killed process) instead of blocking it.
    func finish(timeout: Double = 60) async -> CLIResult {
        let pid = self.pid
        let watchdog = Task {
            try await Task.sleep(for: .seconds(timeout))
            _ = kill(pid, SIGKILL)
        }
        let result = await output.value
        watchdog.cancel()
        return result
    }
}

/// Runs `coaty` with `arguments` to its end, killing it after `timeout` seconds.
func runCoaty(
    _ arguments: [String],
    environment: [String: String] = [:],
    stdin: String? = nil,
    timeout: Double = 60
) async throws -> CLIResult {
    try await CoatyProcess(arguments, environment: environment, stdin: stdin).finish(timeout: timeout)
}

/// Whether the integration tests can run: mosquitto installed, or CI (where its absence must fail).
enum BrokerAvailability {
    static let isInCI = ProcessInfo.processInfo.environment["CI"] == "true"
    static let hasMosquitto = MosquittoBroker.findExecutable() != nil
    static let shouldRun = hasMosquitto || isInCI
}

/// Runs `body` with a fresh mosquitto on a free loopback port, stopping it afterwards.
func withBroker<T>(_ body: (MosquittoBroker) async throws -> T) async throws -> T {
    let broker = try await MosquittoBroker.start()
    do {
        let result = try await body(broker)
        await broker.stop()
        return result
    } catch {
        await broker.stop()
        throw error
    }
}

/// Runs `body` with a started in-process agent on `broker`, stopping it afterwards.
func withAgent<T>(
    on broker: MosquittoBroker,
    name: String = "test agent",
    namespace: String = CoatyTopic.defaultNamespace,
    _ body: (CommunicationManager) async throws -> T
) async throws -> T {
    let manager = try CommunicationManager.mqtt(
        url: broker.url,
        identity: Identity(name: name),
        options: .init(namespace: namespace)
    )
    try await manager.start()
    do {
        let result = try await body(manager)
        await manager.stop()
        return result
    } catch {
        await manager.stop()
        throw error
    }
}

/// The first element of `sequence` satisfying `predicate`, or `nil` after `timeout` seconds.
func first<S: AsyncSequence & Sendable>(
    _ sequence: S,
    timeout: Double = 30,
    where predicate: @escaping @Sendable (S.Element) -> Bool = { _ in true }
) async throws -> S.Element? where S.Element: Sendable {
    try await withThrowingTaskGroup(of: S.Element?.self) { group in
        group.addTask {
            for try await element in sequence where predicate(element) { return element }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: .seconds(timeout))
            return nil
        }
        let result = try await group.next() ?? nil
        group.cancelAll()
        return result
    }
}

/// Starts `coaty` in the background and waits until it is ready: its identity (named `name`)
/// is advertised, which a Coaty agent does only after its subscriptions are acknowledged.
func startReadyCoaty(
    _ arguments: [String],
    name: String,
    observer: CommunicationManager,
    environment: [String: String] = [:]
) async throws -> CoatyProcess {
    let identities = try observer.observeAdvertise(coreType: .identity)
    await identities.subscribed()
    let process = try CoatyProcess(arguments + ["--name", name], environment: environment)
    let ready = try await first(identities, timeout: 30) { $0.object.name == name }
    if ready == nil {
        process.signal(SIGKILL)
        let result = await process.finish(timeout: 10)
        throw CLITestError("coaty \(arguments) did not get ready; status \(result.status), stderr: \(result.stderr)")
    }
    return process
}

extension JSONValue {
    /// The value at a dotted path of object keys.
    func at(_ path: String) -> JSONValue? {
        var value: JSONValue? = self
        for key in path.split(separator: ".") {
            value = value?[String(key)]
        }
        return value
    }
}
