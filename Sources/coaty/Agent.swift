import ArgumentParser
import CoatyKit
import CoatySync
import Dispatch
import Foundation
import Logging
import Metrics
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A runtime failure of a command: printed as one line on stderr, exit code 1.
struct CLIError: Error, CustomStringConvertible {
    /// What went wrong and what to do, on one line.
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The agent a command runs: a communication manager connected with the shared options.
struct CLIAgent: Sendable {
    let manager: CommunicationManager
    let logger: Logger
    let options: ConnectionOptions
    /// The MQTT configuration the agent connects with.
    let mqttConfiguration: MQTTConfiguration

    /// Creates the agent (not connected yet); register observations before ``start(interruptedBy:)`` so they
    /// are subscribed before the identity is advertised (the identity Advertise means "ready").
    /// `--broker auto` entries are looked up over DNS-SD first.
    init(
        _ options: ConnectionOptions,
        defaultName: String,
        registry: CoatyObjectRegistry = CoatyObjectRegistry(),
        observerBufferLimit: Int? = nil,
        durableIdentityId: CoatyUUID? = nil,
        sharedSubscriptionGroup: String? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) async throws {
        // Before the logger: its lines then carry the current trace and span ids.
        try Telemetry.startIfConfigured(endpoint: options.otlpEndpoint, serviceName: defaultName)
        logger = options.makeLogger()
        let options = try await options.resolvingDiscoveredBrokers(logger: logger)
        self.options = options
        var managerOptions = options.managerOptions
        if let observerBufferLimit { managerOptions.observerBufferLimit = observerBufferLimit }
        managerOptions.sharedSubscriptionGroup = sharedSubscriptionGroup
        let identity = Identity(objectId: durableIdentityId ?? CoatyUUID(), name: options.name ?? defaultName)
        var configuration = try options.mqttConfiguration(identityId: identity.objectId)
        if durableIdentityId != nil {
            // Durable: a persistent session under a fixed client id, QoS 1, and each message
            // acknowledged only once what it carries is committed (the broker keeps the rest).
            configuration.cleanSession = false
            configuration.holdsAcknowledgements = true
            managerOptions.qos = .atLeastOnce
        }
        mqttConfiguration = configuration
        let transport = MQTTTransport(configuration: configuration, logger: logger, metricsFactory: metricsFactory)
        do {
            manager = try CommunicationManager(
                transport: transport,
                identity: identity,
                registry: registry,
                options: managerOptions,
                logger: logger,
                metricsFactory: metricsFactory
            )
        } catch {
            throw CLIError("\(error)")
        }
    }

    /// Connects; fails with one clear line when the broker cannot be reached, refuses the
    /// connection, or does not answer within the connect timeout.
    ///
    /// - Parameter signals: SIGINT/SIGTERM arriving before the connection is up end the command
    ///   at once with exit code 0 (as a signal later does), instead of after the connect timeout.
    func start(interruptedBy signals: ShutdownSignals? = nil) async throws {
        let url = options.brokerForMessages
        // Every broker of a failover list may take the connect timeout.
        let seconds = options.connectTimeout * Double(max(1, options.brokers.count))
        let manager = self.manager
        do {
            try await interruptible(by: signals) {
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        try await manager.start()
                        return true
                    }
                    group.addTask {
                        // A safety net over the transport's own connect timeout. It judges the connection only: a
                        // resumed persistent session (a durable recorder restarting after an outage) gets its
                        // backlog before the broker acknowledges the subscriptions, so the manager is online only
                        // once that backlog is read, which takes as long as it takes to store it. Connected (the
                        // CONNACK) in time is enough; the start goes on while the connection stays up.
                        try await Task.sleep(for: .milliseconds(Int64(seconds * 1000) + 2000))
                        var reported = false
                        while manager.transport.connectionState == .connected {
                            if !reported {
                                manager.logger.info(
                                    "Connected; receiving what the broker kept for this session before the subscriptions are acknowledged"
                                )
                                reported = true
                            }
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        return false
                    }
                    let started = try await group.next() ?? false
                    group.cancelAll()
                    if !started {
                        throw CLIError(
                            "The broker at \(url) did not accept the connection within \(Self.format(seconds)) s."
                        )
                    }
                }
            }
        } catch let exit as ExitCode {
            await manager.stop()
            throw exit
        } catch let error as CLIError {
            await manager.stop()
            throw error
        } catch let error as CommunicationError {
            await manager.stop()
            throw CLIError(Self.describe(error, url: url, seconds: seconds))
        } catch {
            await manager.stop()
            throw CLIError("Cannot connect to \(url): \(error)")
        }
    }

    /// Publishes the Deadvertise of the identity, flushes and disconnects; then exports the spans still queued
    /// (with `--otlp-endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT`).
    func stop() async {
        await manager.stop()
        if !(await Telemetry.finish()) {
            logger.warning(
                "Stopped exporting traces after \(Telemetry.finishTimeout): the spans still queued were dropped (the collector did not take them in time)"
            )
        }
    }

    static func describe(_ error: CommunicationError, url: String, seconds: Double) -> String {
        switch error {
        case .transport(.brokerUnreachable(let reason)):
            reason.contains(url) ? reason : "Cannot reach the broker at \(url): \(reason)"
        case .transport(.connectionRefused(let reason)):
            reason.contains(url) ? reason : "The broker at \(url) refused the connection: \(reason)"
        case .transport(.failed(let reason)):
            reason.contains(url) ? reason : "Cannot connect to \(url): \(reason)"
        default:
            "\(error)"
        }
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}

/// Runs `operation` (a connect) and returns its result, ending the command with exit code 0
/// (`ExitCode.success`) when SIGINT/SIGTERM arrives first; the operation is cancelled then.
func interruptible<T: Sendable>(
    by signals: ShutdownSignals?,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    guard let signals else { return try await operation() }
    // `.some(nil)`: the signal decided.
    let result: T? = try await withThrowingTaskGroup(of: T??.self) { group in
        group.addTask { .some(try await operation()) }
        group.addTask { await signals.next() ? .some(nil) : nil }
        return try await group.firstDecision(or: nil)
    }
    guard let result else { throw ExitCode.success }
    return result
}

// MARK: - Output

/// Writes data lines to stdout, one `write` per line, so every line is flushed as it is made.
enum Output {
    /// The lines not written yet (see ``append(_:)``).
    private static let pending = CoatyMutex<[UInt8]>([])
    /// Lines are written once this many bytes are pending (one system call per chunk, not per line).
    static let chunkSize = 64 * 1024

    /// Writes a line now (with whatever is pending before it).
    static func line(_ text: String) {
        append(text)
        flush()
    }

    /// Adds a line; writes the pending lines once they reach ``chunkSize``. Call ``flush()``
    /// before waiting for more input, so a line never waits for the next one.
    static func append(_ text: String) {
        let full = pending.withLock { bytes -> [UInt8]? in
            bytes.append(contentsOf: text.utf8)
            bytes.append(0x0A)
            guard bytes.count >= chunkSize else { return nil }
            defer { bytes.removeAll(keepingCapacity: true) }
            return bytes
        }
        if let full { write(full) }
    }

    /// Writes the pending lines.
    static func flush() {
        let bytes = pending.withLock { bytes -> [UInt8] in
            defer { bytes.removeAll(keepingCapacity: true) }
            return bytes
        }
        if !bytes.isEmpty { write(bytes) }
    }

    /// Writes all of `bytes` to stdout, blocking while the reader is slower: the back-pressure
    /// that holds the observation, and through it the reads from the broker.
    private static func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = systemWrite(1, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    return  // stdout is gone (EPIPE): nothing more can be shown
                }
                offset += n
            }
        }
    }
}

#if canImport(Glibc)
    private let systemWrite = Glibc.write
#else
    private let systemWrite = Darwin.write
#endif

/// What an event loop's consumer can tell about the events waiting for it, so output is flushed
/// exactly when the loop is about to wait.
protocol WaitingEventsReporting {
    /// The events ready to be taken without waiting.
    var waitingCount: Int { get }
}

extension EventObservation.Iterator: WaitingEventsReporting {}

/// The observation itself reports them too, for a stopping event loop that prints them first
/// instead of discarding them (it does not own the iterator).
extension EventObservation: WaitingEventsReporting {
    var waitingCount: Int { progress.waiting }
}

// MARK: - Running until a count, a timeout or a signal

/// Counts the events an event loop received, for its summary line.
final class EventCounter: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds `count`.
    func add(_ count: Int) { value.add(count, ordering: .relaxed) }

    /// The events counted.
    var count: Int { value.load(ordering: .relaxed) }
}

/// How an event loop ended.
enum EventLoopEnd: Sendable {
    case count
    case exhausted
    case timeout
    case signal
}

/// Prints the elements of `sequence` as lines until `count` lines were printed, `timeout`
/// seconds elapsed, SIGINT/SIGTERM arrived, or the sequence ended.
///
/// On a signal, the events already received (a ``WaitingEventsReporting`` sequence tells how
/// many) are printed first, for up to ``signalDrainLimit``; what a stalled reader of stdout left
/// unprinted after that is logged at warning, never discarded silently.
///
/// - Returns: how it ended.
@discardableResult
func printEvents<S: AsyncSequence & Sendable>(
    _ sequence: S,
    count: Int?,
    timeout: Double?,
    signals: ShutdownSignals,
    received: EventCounter = EventCounter(),
    logger: Logger? = nil,
    render: @escaping @Sendable (S.Element) -> String?
) async throws -> EventLoopEnd where S.Element: Sendable {
    return try await withThrowingTaskGroup(of: EventLoopEnd?.self) { group in
        group.addTask {
            var printed = 0
            var iterator = sequence.makeAsyncIterator()
            // Lines go out in large chunks while events keep coming, and at once when none waits.
            defer { Output.flush() }
            while true {
                if (iterator as? any WaitingEventsReporting)?.waitingCount ?? 0 == 0 { Output.flush() }
                guard let element = try await iterator.next() else { break }
                received.add(1)
                guard let line = render(element) else { continue }
                Output.append(line)
                printed += 1
                if let count, printed >= count { return .count }
            }
            return Task.isCancelled ? nil : .exhausted
        }
        if let timeout {
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
                return Task.isCancelled ? nil : .timeout
            }
        }
        group.addTask {
            guard await signals.next() else { return nil }
            // Print what was received before the signal (an observation tells how much): stopping
            // now would discard it with the buffer.
            guard let pending = sequence as? any WaitingEventsReporting else { return .signal }
            let deadline = ContinuousClock.now + signalDrainLimit
            while pending.waitingCount > 0, ContinuousClock.now < deadline, !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(5))
            }
            if Task.isCancelled { return nil }
            let left = pending.waitingCount
            if left > 0 {
                logger?.warning(
                    "Stopping with received events not printed: the reader of stdout did not take them within the limit",
                    metadata: ["unprinted": "\(left)", "limit": "\(signalDrainLimit)"]
                )
            }
            return .signal
        }
        return try await group.firstDecision(or: .exhausted)
    }
}

/// How long a signalled event loop goes on printing the events it received before the signal.
let signalDrainLimit: Duration = .seconds(5)

extension ThrowingTaskGroup {
    /// The first child result that is not `nil` (a child returns `nil` when it ends without deciding,
    /// e.g. cancelled), or `fallback` when none decides; the other children are cancelled.
    mutating func firstDecision<Decision>(or fallback: Decision) async throws -> Decision
    where ChildTaskResult == Decision? {
        defer { cancelAll() }
        while let next = try await self.next() {
            if let next { return next }
        }
        return fallback
    }
}

/// SIGINT and SIGTERM as an awaitable event, so long-running commands stop cleanly (they
/// deadvertise their identity and exit 0). Create it before the agent advertises its identity
/// (which tells others it is ready), so a signal sent from then on is never fatal.
///
/// A signal is remembered: every wait after it returns at once, so one wait may end with the
/// connect (``CLIAgent/start(interruptedBy:)``) and the next one still sees a later signal.
final class ShutdownSignals: Sendable {
    private struct State {
        var received = false
        var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        var nextWaiter = 0
    }

    /// Shared with the signal handlers.
    private final class Box: Sendable {
        let state = CoatyMutex(State())

        func receive() {
            let waiters = state.withLock { state in
                state.received = true
                defer { state.waiters = [:] }
                return state.waiters.values
            }
            for waiter in waiters { waiter.resume(returning: true) }
        }
    }

    private let box = Box()
    private let sources: CoatyMutex<[any DispatchSourceSignal]>

    init() {
        var sources: [any DispatchSourceSignal] = []
        let box = self.box
        // The sources register asynchronously, while SIG_IGN already applies: a signal in between
        // would be lost, so this waits (briefly) until both are registered.
        let registered = DispatchSemaphore(value: 0)
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { box.receive() }
            source.setRegistrationHandler { registered.signal() }
            source.resume()
            sources.append(source)
        }
        for _ in sources { _ = registered.wait(timeout: .now() + 2) }
        self.sources = CoatyMutex(sources)
    }

    /// Waits for a signal (returns at once after one arrived); `false` when the waiting task is
    /// cancelled first.
    func next() async -> Bool {
        let box = self.box
        let id = box.state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Bool, Never>) in
                let now: Bool? = box.state.withLock { state in
                    if state.received { return true }
                    if Task.isCancelled { return false }
                    state.waiters[id] = waiter
                    return nil
                }
                if let now { waiter.resume(returning: now) }
            }
        } onCancel: {
            box.state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: false)
        }
    }

    deinit {
        sources.withLock { sources in
            for source in sources { source.cancel() }
        }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}

// MARK: - Shared request/observe options

/// `--count` and `--timeout` of observing and requesting commands.
struct EventLimitOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Exit 0 after this many events.", valueName: "n"))
    var count: Int?

    @Option(help: ArgumentHelp("Exit 0 when this many seconds have elapsed.", valueName: "seconds"))
    var timeout: Double?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1.") }
        if let timeout, timeout <= 0 { throw ValidationError("--timeout must be more than 0 seconds.") }
    }
}
