// The Coaty JS 2.4.1 peer (`agent.js` in ../shared/coaty-js, see its README) as a test
// subprocess: started against a test's mosquitto, its stdout JSON lines read as they arrive.
@_exported import AgentProcessTestSupport
import CoatyKit
import CoatySync
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the Coaty JS peer and Node.js are, and whether the interop tests run (``CoatyJSInstallation``).
typealias CoatyJSPeer = CoatyJSInstallation

extension Trait where Self == ConditionTrait {
    /// Runs a suite when the Coaty JS peer, `node` and mosquitto are installed, or with `CI=true`
    /// (where a missing one fails the tests); otherwise skips it, naming `COATY_JS_AGENT`.
    static var coatyJSPeerAvailable: Self {
        .enabled(if: CoatyJSPeer.shouldRun, Comment(rawValue: CoatyJSPeer.skipReason))
    }
}

/// What a running `agent.js` has written so far.
private final class PeerOutput: Sendable {
    struct State {
        var pending: [UInt8] = []
        var lines: [String] = []
        var stderr: [UInt8] = []
        var stdoutClosed = false
        var stderrClosed = false
        var status: Int32?
    }

    let state = CoatyMutex(State())

    func appendStdout(_ data: Data) {
        state.withLock { state in
            state.pending.append(contentsOf: data)
            while let newline = state.pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: state.pending[..<newline], as: UTF8.self)
                state.pending.removeSubrange(...newline)
                if !line.isEmpty { state.lines.append(line) }
            }
        }
    }
}

/// Reads `handle` until end of file on a thread of its own, handing each chunk to `chunk`.
private func drain(_ handle: FileHandle, chunk: @escaping @Sendable (Data) -> Void, end: @escaping @Sendable () -> Void)
{
    Thread.detachNewThread {
        while true {
            let data = handle.availableData
            if data.isEmpty { break }
            chunk(data)
        }
        end()
    }
}

/// A running Coaty JS `agent.js` scenario.
final class CoatyJSAgent: Sendable {
    /// The scenario and its arguments.
    let arguments: [String]
    /// The process id of `node`.
    let pid: Int32
    private let output: PeerOutput

    /// Starts `node agent.js <scenario> <arguments> --broker <broker> --timeout <timeout>`.
    /// - Parameters:
    ///   - scenario: the agent.js scenario, e.g. `observe` or `respond`.
    ///   - arguments: its options.
    ///   - broker: the broker.
    ///   - timeout: seconds after ready until it stops by itself.
    /// - Throws: ``TestSupportError`` naming `COATY_JS_AGENT` when the peer is missing.
    init(_ scenario: String, _ arguments: [String] = [], broker: MosquittoBroker, timeout: Double = 8) throws {
        let (node, script) = try CoatyJSPeer.requireInstalled()
        let all =
            [scenario] + arguments + ["--broker", broker.url, "--timeout", "\(timeout)", "--connect-timeout", "8"]
        let output = PeerOutput()
        self.arguments = all
        self.output = output
        let process = Process()
        process.executableURL = URL(fileURLWithPath: node)
        process.arguments = [script] + all
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { process in
            let status = process.terminationStatus
            output.state.withLock { $0.status = status }
        }
        try process.run()
        pid = process.processIdentifier
        drain(out.fileHandleForReading, chunk: { output.appendStdout($0) }) {
            output.state.withLock { $0.stdoutClosed = true }
        }
        drain(err.fileHandleForReading, chunk: { data in output.state.withLock { $0.stderr.append(contentsOf: data) } })
        {
            output.state.withLock { $0.stderrClosed = true }
        }
    }

    /// The stdout lines so far, parsed.
    /// - Throws: ``TestSupportError`` for a line that is not JSON.
    func lines() throws -> [JSONValue] {
        try output.state.withLock { $0.lines }.map { line in
            do {
                return try JSONValue(parsing: line)
            } catch {
                throw TestSupportError("agent.js wrote a stdout line that is not JSON: \(line)")
            }
        }
    }

    /// The stdout lines so far of one event (`"ready"`, `"Advertise"`, `"Resolve"`, …).
    /// - Parameter event: the `event` member.
    /// - Returns: the lines, in order.
    /// - Throws: ``TestSupportError`` for a line that is not JSON.
    func events(_ event: String) throws -> [JSONValue] {
        try lines().filter { $0["event"] == .string(event) }
    }

    /// Whether the process has exited and its output is read.
    private var hasEnded: Bool {
        output.state.withLock { $0.status != nil && $0.stdoutClosed && $0.stderrClosed }
    }

    /// What it wrote, for failure messages.
    var diagnostics: String {
        output.state.withLock { state in
            "agent.js \(arguments.joined(separator: " ")); status \(state.status.map(String.init) ?? "running")\n"
                + "stdout:\n\(state.lines.joined(separator: "\n"))\nstderr:\n"
                + String(decoding: state.stderr.suffix(4000), as: UTF8.self)
        }
    }

    /// Waits for the first `count` lines of `event` that satisfy `predicate`.
    /// - Parameters:
    ///   - event: the `event` member.
    ///   - count: how many lines.
    ///   - timeout: the longest wait, in seconds (it returns as soon as the lines are there; the default
    ///     only bounds a failing test, and is long because a loaded machine delays everything).
    ///   - predicate: which lines count.
    /// - Returns: the lines.
    /// - Throws: ``TestSupportError`` with the peer's output when they do not arrive in time.
    func wait(
        for event: String,
        count: Int = 1,
        timeout: Double = 30,
        where predicate: (JSONValue) -> Bool = { _ in true }
    ) async throws -> [JSONValue] {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            let ended = hasEnded
            let found = try events(event).filter(predicate)
            if found.count >= count { return Array(found.prefix(count)) }
            if ended || ContinuousClock.now >= deadline {
                throw TestSupportError(
                    "expected \(count) \(event) line(s) from Coaty JS, got \(found.count)\n\(diagnostics)"
                )
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits for the first line of `event` that satisfies `predicate`.
    /// - Parameters:
    ///   - event: the `event` member.
    ///   - timeout: the longest wait, in seconds.
    ///   - predicate: which lines count.
    /// - Returns: the line.
    /// - Throws: ``TestSupportError`` with the peer's output when it does not arrive in time.
    func first(
        _ event: String,
        timeout: Double = 30,
        where predicate: (JSONValue) -> Bool = { _ in true }
    ) async throws -> JSONValue {
        try await wait(for: event, count: 1, timeout: timeout, where: predicate)[0]
    }

    /// Waits until its subscriptions are in place (`{"event":"ready"}`) and returns its identity.
    /// - Returns: the identity object it advertised.
    /// - Throws: ``TestSupportError`` when it does not get ready.
    @discardableResult
    func ready() async throws -> JSONValue {
        let line = try await first("ready", timeout: 10)
        guard let identity = line["identity"] else { throw TestSupportError("ready without identity: \(line)") }
        return identity
    }

    /// Its identity's objectId, once ready.
    /// - Throws: ``TestSupportError`` when it does not get ready or the id is not a UUID.
    func identityId() async throws -> CoatyUUID {
        let identity = try await ready()
        guard let id = identity["objectId"]?.stringValue.flatMap(CoatyUUID.init) else {
            throw TestSupportError("identity without a UUID objectId: \(identity)")
        }
        return id
    }

    /// Sends a signal (`SIGTERM`: Coaty JS stops and deadvertises; `SIGKILL`: its last will).
    /// - Parameter number: the signal.
    func signal(_ number: Int32) {
        if output.state.withLock({ $0.status == nil }) { _ = kill(pid, number) }
    }

    /// Waits until it exits (killed after `timeout` seconds) and returns its exit status.
    /// - Parameter timeout: the longest wait, in seconds.
    /// - Returns: the exit status (or the signal that ended it).
    @discardableResult
    func finish(timeout: Double = 10) async -> Int32 {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var killed = false
        while !hasEnded {
            if !killed && (Task.isCancelled || ContinuousClock.now >= deadline) {
                _ = kill(pid, SIGKILL)
                killed = true
            }
            do {
                try await Task.sleep(for: .milliseconds(20))
            } catch {
                await Task.yield()  // cancelled: killed above, it ends within milliseconds
            }
        }
        return output.state.withLock { $0.status ?? -1 }
    }
}

/// Runs `body` with a started `agent.js` scenario; it is killed (if still running) and reaped
/// afterwards, whether `body` returns or throws.
/// - Parameters:
///   - scenario: the agent.js scenario.
///   - arguments: its options.
///   - broker: the broker.
///   - timeout: seconds after ready until it stops by itself. Generous by default: the peer is
///     killed as soon as `body` ends, so a passing test never waits for it, while the full suite on
///     2 cores has starved this process for more than 8 s (CI missed a Log so, with 8 s).
///   - body: the test, given the running peer.
/// - Returns: what `body` returns.
/// - Throws: what starting the peer or `body` throws.
func withCoatyJS<T>(
    _ scenario: String,
    _ arguments: [String] = [],
    on broker: MosquittoBroker,
    timeout: Double = 30,
    _ body: (CoatyJSAgent) async throws -> T
) async throws -> T {
    let peer = try CoatyJSAgent(scenario, arguments, broker: broker, timeout: timeout)
    do {
        let result = try await body(peer)
        peer.signal(SIGKILL)
        await peer.finish()
        return result
    } catch {
        peer.signal(SIGKILL)
        await peer.finish()
        throw error
    }
}

/// Runs an `agent.js` scenario that ends by itself (a publisher, or a requester with `--count`)
/// to its end and returns its stdout lines.
/// - Parameters:
///   - scenario: the agent.js scenario.
///   - arguments: its options.
///   - broker: the broker.
///   - timeout: seconds after ready until it stops by itself.
/// - Returns: the peer, ended (its ``CoatyJSAgent/lines()`` are complete).
/// - Throws: ``TestSupportError`` when it exits with a failure status.
func runCoatyJS(
    _ scenario: String,
    _ arguments: [String] = [],
    on broker: MosquittoBroker,
    timeout: Double = 8
) async throws -> CoatyJSAgent {
    let peer = try CoatyJSAgent(scenario, arguments, broker: broker, timeout: timeout)
    let status = await peer.finish(timeout: timeout + 10)
    guard status == 0 else { throw TestSupportError("Coaty JS exited with \(status)\n\(peer.diagnostics)") }
    return peer
}

/// Compact JSON text of a value (for agent.js's JSON options).
func jsonText(_ value: JSONValue) -> String {
    value.serializedString()
}
