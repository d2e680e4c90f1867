// The process, broker and agent helpers live in AgentProcessTestSupport (shared with the
// examples' tests). Re-exported so that every file of this target sees them as before, and
// these names keep the CLI tests reading as before.
@_exported import AgentProcessTestSupport
import CoatyKit
import CoatyTesting
import Foundation
import Testing

/// The result of running the `coaty` executable.
typealias CLIResult = ProcessResult
/// A failure of the test support.
typealias CLITestError = TestSupportError
/// A running `coaty` process.
typealias CoatyProcess = TestProcess

/// The `coaty` executable built next to the test bundle.
func coatyExecutable() throws -> String {
    try builtExecutable(named: "coaty")
}

extension TestProcess {
    /// Starts `coaty` with `arguments`; `stdin` is written to its standard input (closed after).
    convenience init(_ arguments: [String], environment: [String: String] = [:], stdin: String? = nil) throws {
        try self.init(executable: try coatyExecutable(), arguments, environment: environment, stdin: stdin)
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

/// Starts `coaty` in the background and waits until it is ready: its identity (named `name`)
/// is advertised, which a Coaty agent does only after its subscriptions are acknowledged.
func startReadyCoaty(
    _ arguments: [String],
    name: String,
    observer: CommunicationManager,
    environment: [String: String] = [:]
) async throws -> CoatyProcess {
    try await startReadyProcess(
        executable: try coatyExecutable(),
        arguments + ["--name", name],
        name: name,
        observer: observer,
        environment: environment
    ).process
}

/// Starts `coaty observe advertise --object-type com.example.Light --count 1` with `connection`
/// (`--broker …` and the like), waits until it is ready (its identity reached `agent`, on `broker`),
/// advertises a lamp to `broker`, and checks that the observer printed exactly that lamp.
/// - Returns: the observer's result, for further checks of its stderr.
func expectObserverReceivesALamp(
    connection: [String],
    broker: MosquittoBroker,
    agent: CommunicationManager,
    name: String,
    environment: [String: String] = [:]
) async throws -> CLIResult {
    let observer = try await startReadyCoaty(
        ["observe", "advertise", "--object-type", "com.example.Light", "--count", "1", "--timeout", "30"]
            + connection,
        name: name,
        observer: agent,
        environment: environment
    )
    let lamp = Samples.light("Lamp")
    let sent = try await runCoaty(["advertise", "--broker", broker.url, "\(lamp)"])
    #expect(sent.status == 0, "stderr: \(sent.stderr)")
    let observed = await observer.finish()
    #expect(observed.status == 0, "stderr: \(observed.stderr)")
    let lines = try observed.jsonLines()
    try #require(lines.count == 1, "stdout: \(observed.stdout)")
    #expect(checkEventLine(lines[0], event: "Advertise")?["object"] == lamp)
    return observed
}
