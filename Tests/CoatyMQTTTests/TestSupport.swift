import AgentProcessTestSupport
import CoatyMQTT
import CoatySync
import CoatyTesting
import CoreMetrics
import Foundation
import Logging
import Synchronization
import Testing

/// Whether the broker-backed suites run: mosquitto is installed, or CI=true (then a missing mosquitto fails them).
enum BrokerAvailability {
    static let isInCI = ProcessInfo.processInfo.environment["CI"] == "true"
    static let hasMosquitto = MosquittoBroker.findExecutable() != nil
    static let shouldRun = hasMosquitto || isInCI
    static let skipMessage: Comment = "mosquitto is not installed (apt-get install mosquitto); skipping broker tests"
}

/// A wait that took longer than its bound: the test fails instead of hanging.
struct TestTimeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Runs `body`, failing with ``TestTimeout`` when it does not finish within `seconds` (then cancels it).
func withTimeout<T: Sendable>(
    _ seconds: Double,
    _ what: String,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw TestTimeout(what: what) }
        return value
    }
}

/// Polls `condition` every 20 ms until it holds, failing after `seconds`.
func eventually(_ seconds: Double, _ what: String, _ condition: @escaping @Sendable () -> Bool) async throws {
    try await withTimeout(seconds, what) {
        while !condition() { try await Task.sleep(for: .milliseconds(20)) }
    }
}

/// Collects the next `count` messages from `client` within `seconds`.
func receive(_ client: MQTTClient, count: Int, within seconds: Double = 10) async throws -> [MQTTMessage] {
    try await withTimeout(seconds, "\(count) message(s)") {
        var received: [MQTTMessage] = []
        for await message in client.messages {
            received.append(message)
            if received.count == count { break }
        }
        return received
    }
}

/// Collects messages until `predicate` matches one (included), within `seconds`.
func receive(
    _ client: MQTTClient,
    until predicate: @escaping @Sendable (MQTTMessage) -> Bool,
    within seconds: Double = 10
) async throws -> [MQTTMessage] {
    try await withTimeout(seconds, "a matching message") {
        var received: [MQTTMessage] = []
        for await message in client.messages {
            received.append(message)
            if predicate(message) { break }
        }
        return received
    }
}

/// Waits until the client reports `state`.
func waitForState(_ client: MQTTClient, _ state: MQTTConnectionState, within seconds: Double = 15) async throws {
    try await withTimeout(seconds, "connection state \(state)") {
        for await current in client.connectionStates() where current == state { return }
    }
}

/// A unique client id for a test.
func uniqueClientId(_ prefix: String = "test") -> String {
    "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())"
}

/// Starts a broker with a TLS listener beside its plain one, its certificates made in `directory` (keep it while the
/// broker is used); returns the TLS listener's URL too.
func startTLSBroker(in directory: TemporaryDirectory) async throws -> (
    broker: MosquittoBroker, certificates: TestCertificates, tlsURL: String
) {
    let pki = try await TestCertificates.make(in: directory.path)
    let broker = try await MosquittoBroker.start(
        tls: .init(caFile: pki.caFile, certificateFile: pki.serverCertificate, privateKeyFile: pki.serverKey)
    )
    return (broker, pki, try #require(broker.tlsURL))
}

/// Creates and connects a client to `url`.
func connectedClient(
    _ url: String,
    _ prefix: String = "test",
    configure: (inout MQTTConfiguration) -> Void = { _ in }
) async throws -> MQTTClient {
    var configuration = try MQTTConfiguration(url: url, clientId: uniqueClientId(prefix))
    configure(&configuration)
    let client = MQTTClient(configuration: configuration)
    try await withTimeout(15, "connect to \(url)") { try await client.connect() }
    return client
}

/// Starts a broker and a client that retries every 100–200 ms, then stops the broker and waits until the client
/// is reconnecting: the start of an outage.
func clientInOutage() async throws -> (broker: MosquittoBroker, client: MQTTClient) {
    let broker = try await MosquittoBroker.start()
    let client = try await connectedClient(broker.url) {
        $0.reconnectDelay = .milliseconds(100)
        $0.maxReconnectDelay = .milliseconds(200)
    }
    await broker.stop()
    try await waitForState(client, .reconnecting)
    return (broker, client)
}

/// A temporary directory removed on deinit.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-mqtt-test-\(UUID().uuidString.lowercased())").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The coaty-mqtt-probe executable, built next to the test bundle.
///
/// On Linux `swift test` runs `<scratch>/debug/CoatyKitPackageTests.xctest` (an executable), so the probe is in the
/// directory of `CommandLine.arguments[0]`; on macOS the .xctest bundle sits in the same directory as the probe.
func probeExecutable() -> String? {
    var directories: [URL] = []
    let argument0 = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    directories.append(argument0.deletingLastPathComponent())
    if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
        directories.append(executable.deletingLastPathComponent())
    }
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        directories.append(URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent())
    }
    // Inside a macOS bundle: Contents/MacOS → up to the products directory.
    directories += directories.map {
        $0.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }
    return directories.map { $0.appendingPathComponent("coaty-mqtt-probe").path }
        .first { FileManager.default.isExecutableFile(atPath: $0) }
}

// MARK: - Metrics and logs captured in tests

final class RecordingCounter: CounterHandler, Sendable {
    let value = Atomic<Int64>(0)
    func increment(by amount: Int64) { value.add(amount, ordering: .relaxed) }
    func reset() { value.store(0, ordering: .relaxed) }
}

final class NoOpRecorder: RecorderHandler, TimerHandler, Sendable {
    func record(_ value: Int64) {}
    func record(_ value: Double) {}
    func recordNanoseconds(_ duration: Int64) {}
}

/// A metrics factory that records counters by label.
final class RecordingMetrics: MetricsFactory, Sendable {
    let counters = CoatyMutex<[String: RecordingCounter]>([:])

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        counters.withLock { counters in
            if let existing = counters[label] { return existing }
            let counter = RecordingCounter()
            counters[label] = counter
            return counter
        }
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NoOpRecorder()
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { NoOpRecorder() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    func counterValue(_ label: String) -> Int64 {
        counters.withLock { $0[label]?.value.load(ordering: .relaxed) ?? 0 }
    }
}

/// A log handler that keeps every record.
struct RecordingLogHandler: LogHandler {
    final class Storage: Sendable {
        let records = CoatyMutex<[(Logger.Level, String)]>([])
        func contains(_ level: Logger.Level, _ text: String) -> Bool {
            records.withLock { $0.contains { $0.0 == level && $0.1.contains(text) } }
        }
        var joined: String { records.withLock { $0.map { "\($0.0): \($0.1)" }.joined(separator: "\n") } }
    }

    let storage: Storage
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        storage.records.withLock { $0.append((event.level, "\(event.message) \(event.metadata ?? [:])")) }
    }
}
