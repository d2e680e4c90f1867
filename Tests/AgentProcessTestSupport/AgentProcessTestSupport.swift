// Test support shared by the test targets that run agent executables (`coaty`, the examples)
// as subprocesses against a real mosquitto started by the test, and by the MQTT client tests
// (`SilentListener`).
public import CoatyKit
import CoatySync
public import CoatyTesting
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The result of running an executable to its end.
public struct ProcessResult: Sendable {
    /// The exit status (or the status of a killed process).
    public var status: Int32
    /// Everything written to standard output.
    public var stdout: String
    /// Everything written to standard error.
    public var stderr: String

    /// Creates a result.
    /// - Parameters:
    ///   - status: the exit status.
    ///   - stdout: the standard output.
    ///   - stderr: the standard error.
    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }

    /// The stdout lines, each parsed as JSON (a line that is not JSON fails the caller's test).
    /// - Returns: the parsed lines.
    /// - Throws: ``TestSupportError`` naming the first line that is not JSON.
    public func jsonLines() throws -> [JSONValue] {
        try stdout.split(separator: "\n").map { line in
            do {
                return try JSONValue(parsing: String(line))
            } catch {
                throw TestSupportError("stdout line is not JSON: \(line)")
            }
        }
    }

    /// The non-empty stdout lines.
    public var stdoutLines: [Substring] { stdout.split(separator: "\n") }

    /// The non-empty stderr lines.
    public var stderrLines: [Substring] { stderr.split(separator: "\n") }
}

/// A failure of the test support itself (an executable not built, a process that did not get ready).
public struct TestSupportError: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String

    /// Creates an error.
    /// - Parameter description: what went wrong.
    public init(_ description: String) { self.description = description }
}

/// The executable product `name` built next to the test bundle (Linux: the directory of
/// `CommandLine.arguments[0]`; macOS: next to the .xctest bundle).
/// - Parameter name: the product name, e.g. `coaty` or `hello-service`.
/// - Returns: its path.
/// - Throws: ``TestSupportError`` when it is not built.
public func builtExecutable(named name: String) throws -> String {
    var directories = [
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    ]
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        directories.append(URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent())
    }
    for directory in directories {
        let candidate = directory.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw TestSupportError(
        "\(name) executable not found next to the test bundle; run `swift build --build-tests` first"
    )
}

/// Reads a file handle to its end on a thread of its own (never blocking the concurrency pool).
private func readToEnd(_ handle: FileHandle) async -> Data {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(returning: handle.readDataToEndOfFile())
        }
    }
}

/// What a process wrote to one of its outputs so far.
private final class OutputSoFar: Sendable {
    private let bytes = CoatyMutex(Data())

    /// Everything written so far.
    var data: Data { bytes.withLock { $0 } }

    /// Reads `handle` to its end on a thread of its own, keeping each chunk as it arrives.
    /// - Returns: everything read.
    func read(_ handle: FileHandle) async -> Data {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    self.bytes.withLock { $0.append(chunk) }
                }
                continuation.resume(returning: self.data)
            }
        }
    }
}

/// A running process; its output is collected until it exits.
public final class TestProcess: Sendable {
    /// The arguments it was started with.
    public let arguments: [String]
    /// The process id.
    public let pid: Int32
    private let output: Task<ProcessResult, Never>
    /// What it wrote to standard error so far.
    private let stderrSoFar = OutputSoFar()

    /// Starts `executable` with `arguments`; `stdin` is written to its standard input (closed after).
    /// `COATY_BROKER`, `COATY_NAMESPACE` and `COATY_PASSWORD` of the test's environment are not
    /// passed on; `environment` is added.
    /// - Parameters:
    ///   - executable: the executable's path.
    ///   - arguments: its arguments.
    ///   - environment: variables to set.
    ///   - stdin: its standard input, or `nil` for none.
    /// - Throws: when the process cannot be started.
    public init(
        executable: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        stdin: String? = nil
    ) throws {
        self.arguments = arguments
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
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
        let stderrSoFar = self.stderrSoFar
        output = Task {
            async let o = readToEnd(outHandle)
            async let e = stderrSoFar.read(errHandle)
            let (stdoutData, stderrData) = await (o, e)
            var status: Int32 = -1
            for await code in exits { status = code }
            return ProcessResult(
                status: status,
                stdout: String(decoding: stdoutData, as: UTF8.self),
                stderr: String(decoding: stderrData, as: UTF8.self)
            )
        }
    }

    /// Waits until what the process wrote to standard error has a line containing `text`.
    /// - Parameters:
    ///   - text: the text to look for.
    ///   - timeout: the longest wait, in seconds.
    /// - Returns: the first such line, or `nil` when none came within `timeout`.
    public func stderrLine(containing text: String, timeout: Double = 30) async -> String? {
        let deadline = ContinuousClock.now + .milliseconds(Int64(timeout * 1000))
        while ContinuousClock.now < deadline {
            let written = String(decoding: stderrSoFar.data, as: UTF8.self)
            if let line = written.split(separator: "\n").first(where: { $0.contains(text) }) { return String(line) }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Sends a signal (e.g. `SIGTERM`).
    /// - Parameter number: the signal.
    public func signal(_ number: Int32) {
        _ = kill(pid, number)
    }

    /// Waits until the process exits; after `timeout` seconds it is killed, so a hang fails
    /// the test (the result then has the status of a killed process) instead of blocking it.
    /// - Parameter timeout: the longest wait, in seconds.
    /// - Returns: its status and output.
    public func finish(timeout: Double = 60) async -> ProcessResult {
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

/// Whether the integration tests can run: mosquitto installed, or CI (where its absence must fail).
public enum BrokerAvailability {
    /// Whether `CI=true`.
    public static let isInCI = ProcessInfo.processInfo.environment["CI"] == "true"
    /// Whether a mosquitto executable is installed.
    public static let hasMosquitto = MosquittoBroker.findExecutable() != nil
    /// Whether broker-backed tests run.
    public static let shouldRun = hasMosquitto || isInCI
}

/// Runs `body` with a fresh mosquitto that requires the user name `user` and the password
/// `password`, and a temporary directory for the test's files; stops the broker and removes the
/// directory afterwards.
/// - Parameters:
///   - user: the only user the broker accepts.
///   - password: its password.
///   - body: the test, given the started broker and the directory.
/// - Returns: what `body` returns.
/// - Throws: ``TestSupportError`` when `mosquitto_passwd` is missing or fails; what starting the
///   broker or `body` throws.
public func withPasswordBroker<T>(
    user: String,
    password: String,
    _ body: (MosquittoBroker, String) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-auth-\(CoatyUUID())").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let passwordFile = directory + "/passwords"
    try await writeMosquittoPasswordFile(passwordFile, user: user, password: password)
    let broker = try await MosquittoBroker.start(passwordFile: passwordFile)
    do {
        let result = try await body(broker, directory)
        await broker.stop()
        return result
    } catch {
        await broker.stop()
        throw error
    }
}

/// Writes `configuration` as a JSON file in Coaty JS's layout (``AgentConfiguration/json``) into
/// `directory`, as a user would write it for `AgentConfiguration.load(file:)` or `$COATY_CONFIG`.
/// - Parameters:
///   - configuration: the configuration.
///   - directory: the directory.
///   - name: the file name.
/// - Returns: the file's path.
/// - Throws: when the file cannot be written.
public func writeConfigurationFile(
    _ configuration: AgentConfiguration,
    in directory: String,
    name: String = "agent.json"
) throws -> String {
    let path = directory + "/" + name
    try Data(configuration.json.serializedBytes()).write(to: URL(fileURLWithPath: path))
    return path
}

/// Runs `body` with a fresh mosquitto on a free loopback port, stopping it afterwards.
/// - Parameter body: the test, given the started broker.
/// - Returns: what `body` returns.
/// - Throws: what starting the broker or `body` throws.
public func withBroker<T>(_ body: (MosquittoBroker) async throws -> T) async throws -> T {
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
/// - Parameters:
///   - broker: the broker.
///   - name: the agent's identity name.
///   - namespace: its namespace.
///   - registry: the object types it decodes into.
///   - qos: the least QoS of its publications and subscriptions (Coaty's QoS 0 by default).
///   - body: the test, given the started agent.
/// - Returns: what `body` returns.
/// - Throws: what starting the agent or `body` throws.
public func withAgent<T>(
    on broker: MosquittoBroker,
    name: String = "test agent",
    namespace: String = CoatyTopic.defaultNamespace,
    registry: CoatyObjectRegistry = CoatyObjectRegistry(),
    qos: TransportQoS = .atMostOnce,
    _ body: (CommunicationManager) async throws -> T
) async throws -> T {
    let manager = try CommunicationManager.mqtt(
        url: broker.url,
        identity: Identity(name: name),
        registry: registry,
        options: .init(namespace: namespace, qos: qos)
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

/// Runs `body` with one started agent per name on `broker` (in that order), stopping them
/// afterwards.
/// - Parameters:
///   - broker: the broker.
///   - names: the identity names.
///   - body: the test, given the agents in the order of `names`.
/// - Returns: what `body` returns.
/// - Throws: what starting an agent or `body` throws.
public func withAgents<T>(
    on broker: MosquittoBroker,
    names: [String],
    _ body: ([CommunicationManager]) async throws -> T
) async throws -> T {
    guard let name = names.first else { return try await body([]) }
    return try await withAgent(on: broker, name: name) { agent in
        try await withAgents(on: broker, names: Array(names.dropFirst())) { others in
            try await body([agent] + others)
        }
    }
}

/// Runs `router` in a task and waits (up to 30 s) until `observer` sees it advertise its IO
/// context: the router then observes IoNodes.
/// - Parameters:
///   - router: the router.
///   - observer: an agent that watches for the Advertise.
/// - Returns: the running router's task and the advertised context (`nil` when none came).
/// - Throws: ``CommunicationError`` when the observation cannot be made.
public func runRouter(
    _ router: IoRouter,
    seenBy observer: CommunicationManager
) async throws -> (running: Task<Void, any Error>, advertised: AnyCoatyObject?) {
    let contexts = try observer.observeAdvertise(coreType: .ioContext)
    await contexts.subscribed()
    let running = Task { try await router.run() }
    let contextId = router.ioContext.objectId
    let advertised = try await first(contexts, timeout: 30) { $0.object.objectId == contextId }
    return (running, advertised?.object)
}

/// The first element of `sequence` satisfying `predicate`, or `nil` after `timeout` seconds.
/// - Parameters:
///   - sequence: the sequence.
///   - timeout: the longest wait, in seconds.
///   - predicate: the condition.
/// - Returns: the element, or `nil`.
/// - Throws: what the sequence throws.
public func first<S: AsyncSequence & Sendable>(
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

/// The first `count` elements of `sequence` satisfying `predicate`, or fewer when `timeout`
/// seconds pass first (the caller's expectation on the count then fails).
/// - Parameters:
///   - sequence: the sequence.
///   - count: how many elements to collect.
///   - timeout: the longest wait, in seconds.
///   - predicate: the condition.
/// - Returns: the elements collected, in order.
/// - Throws: what the sequence throws.
public func collect<S: AsyncSequence & Sendable>(
    _ sequence: S,
    count: Int,
    timeout: Double = 30,
    where predicate: @escaping @Sendable (S.Element) -> Bool = { _ in true }
) async throws -> [S.Element] where S.Element: Sendable {
    let collected = CoatyMutex<[S.Element]>([])
    _ = try await first(sequence, timeout: timeout) { element in
        guard predicate(element) else { return false }
        return collected.withLock { elements in
            elements.append(element)
            return elements.count >= count
        }
    }
    return collected.withLock { $0 }
}

/// A process started in the background once it is ready, with the identity it advertised.
public struct ReadyProcess: Sendable {
    /// The running process.
    public var process: TestProcess
    /// The identity the agent advertised.
    public var identity: AnyCoatyObject
}

/// Starts an agent executable in the background and waits until it is ready: its identity
/// (named `name`) is advertised, which a Coaty agent does only after its subscriptions are
/// acknowledged.
/// - Parameters:
///   - executable: the executable's path.
///   - arguments: its arguments.
///   - name: the identity name it advertises.
///   - observer: an agent that observes the identity Advertise.
///   - environment: variables to set.
/// - Returns: the running process and its identity.
/// - Throws: ``TestSupportError`` (after killing it) when it did not get ready within 30 s.
public func startReadyProcess(
    executable: String,
    _ arguments: [String],
    name: String,
    observer: CommunicationManager,
    environment: [String: String] = [:]
) async throws -> ReadyProcess {
    let identities = try observer.observeAdvertise(coreType: .identity)
    await identities.subscribed()
    let process = try TestProcess(executable: executable, arguments, environment: environment)
    guard let ready = try await first(identities, timeout: 30, where: { $0.object.name == name }) else {
        process.signal(SIGKILL)
        let result = await process.finish(timeout: 10)
        throw TestSupportError(
            "\(executable) \(arguments) did not get ready; status \(result.status), stderr: \(result.stderr)"
        )
    }
    return ReadyProcess(process: process, identity: ready.object)
}

/// Runs an agent executable, ready (see ``startReadyProcess(executable:_:name:observer:environment:)``),
/// while `body` runs; then ends it with SIGTERM and returns what it wrote. When `body` throws,
/// the process is killed and the error rethrown.
/// - Parameters:
///   - executable: the executable's path.
///   - arguments: its arguments.
///   - name: the identity name it advertises.
///   - observer: an agent that observes the identity Advertise.
///   - body: the test, run while the process is ready.
/// - Returns: the ended process's status and output.
/// - Throws: what starting the process or `body` throws.
public func withReadyProcess(
    executable: String,
    _ arguments: [String],
    name: String,
    observer: CommunicationManager,
    _ body: () async throws -> Void
) async throws -> ProcessResult {
    let process = try await startReadyProcess(
        executable: executable,
        arguments,
        name: name,
        observer: observer
    ).process
    do {
        try await body()
    } catch {
        process.signal(SIGKILL)
        _ = await process.finish(timeout: 10)
        throw error
    }
    process.signal(SIGTERM)
    return await process.finish(timeout: 30)
}

extension JSONValue {
    /// The value at a dotted path of object keys.
    /// - Parameter path: e.g. `object.name`.
    /// - Returns: the value, or `nil` when a key is missing.
    public func at(_ path: String) -> JSONValue? {
        var value: JSONValue? = self
        for key in path.split(separator: ".") {
            value = value?[String(key)]
        }
        return value
    }
}

/// A TCP port on 127.0.0.1 that accepts connections (the kernel completes the handshake into the
/// backlog) but never answers, like a broker that hangs before CONNACK. Closed when released.
public final class SilentListener: Sendable {
    let descriptor: Int32
    /// Connections taken with ``acceptConnection(within:)``, held open (and silent) until release.
    private let accepted = CoatyMutex<[Int32]>([])
    /// The port it listens on.
    public let port: Int

    /// Listens on `port`, or on a free port when it is 0 (the port of a stopped broker can be
    /// taken over: the address is reused).
    /// - Parameter port: the port, or 0.
    /// - Throws: `POSIXError` when the socket cannot be bound.
    public init(port: Int = 0) throws {
        let fd = loopbackTCPSocket()
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = loopbackAddress(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        descriptor = fd
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Waits for a client to connect and takes its connection, keeping it open without answering.
    /// - Parameter seconds: the longest wait.
    /// - Returns: whether a client connected in time.
    public func acceptConnection(within seconds: Double) -> Bool {
        var pending = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&pending, 1, Int32(seconds * 1000)) == 1 else { return false }
        let connection = accept(descriptor, nil, nil)
        guard connection >= 0 else { return false }
        accepted.withLock { $0.append(connection) }
        return true
    }

    deinit {
        for connection in accepted.withLock({ $0 }) { close(connection) }
        close(descriptor)
    }
}
