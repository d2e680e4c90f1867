public import CoatyCore
public import Foundation

/// A benchmark role to start as a child process: a program and its arguments (the role first).
public struct Role: Sendable {
    /// The program.
    public var executable: URL
    /// The arguments.
    public var arguments: [String]
    /// Variables set in its environment (on top of this process's).
    public var environment: [String: String]

    /// A role.
    /// - Parameters:
    ///   - executable: the program.
    ///   - arguments: the role and its arguments.
    ///   - environment: variables set in its environment (on top of this process's).
    public init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
    }
}

/// Runs one throughput measurement: starts `subscriber`, waits for its `ready`, starts
/// `publisher`, and returns the subscriber's result once both have exited (the publisher's
/// standard input is closed when the subscriber has its result).
///
/// - Parameters:
///   - subscriber: prints `ready`, then one JSON object with at least `received`.
///   - publisher: publishes `expected` messages.
///   - expected: how many messages the subscriber must receive.
/// - Returns: the subscriber's result, with `publisherCPUSeconds`: the publisher's CPU time (user plus system, its
///   start-up included) when the subscriber had every message.
/// - Throws: ``BenchmarkError`` when anything was lost (with the subscriber's drop counters).
public func runThroughput(subscriber: Role, publisher: Role, expected: Int) throws -> JSONObject {
    let sub = try Child(subscriber.executable, subscriber.arguments, environment: subscriber.environment)
    try sub.expectReady()
    let pub = try Child(publisher.executable, publisher.arguments, environment: publisher.environment)
    var result = try sub.readJSON()
    result["publisherCPUSeconds"] = .double(CPUTime.ofProcess(pub.process.processIdentifier))
    pub.closeInput()
    pub.wait()
    sub.wait()
    guard result.integer("received") == expected else {
        throw BenchmarkError(
            "\(subscriber.executable.lastPathComponent) \(subscriber.arguments[0]) received "
                + "\(result["received"]?.serializedString() ?? "nothing") of \(expected): "
                + JSONValue.object(result).serializedString()
        )
    }
    return result
}

/// Runs one round-trip measurement: starts `responder`, waits for its `ready`, runs `requester`
/// to its end, and returns the requester's result (`p50`, `p99` in µs).
///
/// - Parameters:
///   - responder: prints `ready`, answers requests.
///   - requester: prints one JSON object with `p50` and `p99`.
///   - terminateResponder: end the responder with SIGTERM (for responders that do not stop on a
///     request of their own).
/// - Returns: the requester's result.
/// - Throws: ``BenchmarkError`` when a role fails.
public func runRoundTrips(responder: Role, requester: Role, terminateResponder: Bool = false) throws -> JSONObject {
    let answering = try Child(responder.executable, responder.arguments, environment: responder.environment)
    try answering.expectReady()
    let asking = try Child(requester.executable, requester.arguments, environment: requester.environment)
    let result = try asking.readJSON()
    asking.wait()
    if terminateResponder { answering.terminate() } else { answering.wait() }
    return result
}

/// The main program of a benchmark executable: runs the role named by the first argument (a child
/// process started by the driver), or else the driver with the arguments parsed as options;
/// prints an error to standard error and exits 1 on failure.
///
/// - Parameters:
///   - name: the executable's name, for error messages.
///   - roles: the roles by name; each gets the arguments after its name.
///   - defaults: the driver's integer options with their defaults (see ``BenchmarkOptions``).
///   - isolation: the caller's isolation.
///   - driver: the driver.
public func benchmarkMain(
    _ name: String,
    roles: [String: @Sendable ([String]) async throws -> Void],
    defaults: KeyValuePairs<String, Int>,
    isolation: isolated (any Actor)? = #isolation,
    driver: (BenchmarkOptions) async throws -> Void
) async {
    let arguments = CommandLine.arguments.dropFirst()
    do {
        if let first = arguments.first, let role = roles[first] {
            try await role(Array(arguments.dropFirst()))
        } else {
            try await driver(try BenchmarkOptions(arguments, defaults: defaults))
        }
    } catch {
        FileHandle.standardError.write(Data("\(name): \(error)\n".utf8))
        exit(1)
    }
}

/// ``benchmarkMain(_:roles:defaults:isolation:driver:)`` with the main thread blocked on a
/// semaphore instead of running the async main loop: every role then runs under valgrind 3.19
/// (Debian 12), which crashes on the `rt_sigsuspend` the async main's `dispatch_main()` makes
/// with a mask in read-only memory. For executables whose roles are counted with
/// `--instructions`; never returns.
///
/// - Parameters:
///   - name: the executable's name, for error messages.
///   - roles: the roles by name; each gets the arguments after its name.
///   - defaults: the driver's integer options with their defaults (see ``BenchmarkOptions``).
///   - driver: the driver.
public func benchmarkMainBlocking(
    _ name: String,
    roles: [String: @Sendable ([String]) async throws -> Void],
    defaults: KeyValuePairs<String, Int>,
    driver: @escaping @Sendable (BenchmarkOptions) async throws -> Void
) -> Never {
    // A child started from a task inherits the signal mask of the dispatch worker thread that spawned it, on which
    // nearly every signal is blocked: the driver's SIGTERM (`Child.terminate()`) would never end a role. The main
    // thread, which only waits here, takes signals again.
    var none = sigset_t()
    sigemptyset(&none)
    pthread_sigmask(SIG_SETMASK, &none, nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await benchmarkMain(name, roles: roles, defaults: defaults, driver: driver)
        done.signal()
    }
    done.wait()
    exit(0)
}
