// The process, broker and agent helpers live in AgentProcessTestSupport (shared with the
// examples' tests). Re-exported so that every file of this target sees them as before, and
// these names keep the CLI tests reading as before.
@_exported import AgentProcessTestSupport
import CoatyKit
import Foundation

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
