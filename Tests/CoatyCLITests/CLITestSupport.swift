import Foundation
import Testing

/// The result of running the `coaty` executable.
struct CLIResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// The `coaty` executable built next to the test bundle (Linux: the directory of
/// `CommandLine.arguments[0]`; macOS: next to the .xctest bundle).
func coatyExecutable() throws -> String {
    var directories = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()]
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

/// Runs `coaty` with `arguments`, killing it after `timeout` seconds so a hang fails the test.
func runCoaty(_ arguments: [String], environment: [String: String] = [:], timeout: Double = 60) async throws -> CLIResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try coatyExecutable())
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env.removeValue(forKey: "COATY_BROKER")
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let watchdog = Task {
        try await Task.sleep(for: .seconds(timeout))
        if process.isRunning { process.terminate() }
    }
    // Read both pipes fully before waiting, so a chatty child never blocks on a full pipe.
    async let stdoutData = Task.detached { out.fileHandleForReading.readDataToEndOfFile() }.value
    async let stderrData = Task.detached { err.fileHandleForReading.readDataToEndOfFile() }.value
    let (o, e) = await (stdoutData, stderrData)
    process.waitUntilExit()
    watchdog.cancel()
    return CLIResult(
        status: process.terminationStatus,
        stdout: String(decoding: o, as: UTF8.self),
        stderr: String(decoding: e, as: UTF8.self)
    )
}

/// Whether the integration tests can run: mosquitto installed, or CI (where its absence must fail).
enum BrokerAvailability {
    static let isInCI = ProcessInfo.processInfo.environment["CI"] == "true"
    static let hasMosquitto = ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/opt/homebrew/sbin/mosquitto"]
        .contains { FileManager.default.isExecutableFile(atPath: $0) }
    static let shouldRun = hasMosquitto || isInCI
}
