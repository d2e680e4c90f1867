import CoatySync
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A local `mosquitto` broker process on a free loopback port with a pinned configuration, for tests,
/// benchmarks and demos.
///
/// ```swift
/// let broker = try MosquittoBroker()
/// try await broker.start()
/// let client = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "test"))
/// // …
/// await broker.stop()
/// ```
///
/// The configuration listens on `127.0.0.1` only, keeps no persistence, and raises mosquitto's queue limits
/// (`max_queued_messages 1000000`, unlimited bytes and in-flight messages) so the broker never drops messages
/// silently for a slow subscriber, and sets `set_tcp_nodelay true` (request/response latency). The process is stopped when the value is deinitialized.
public final class MosquittoBroker: Sendable {
    /// A TLS listener on a second loopback port.
    public struct TLSListener: Sendable, Hashable {
        /// The PEM CA certificate (used to verify client certificates).
        public var caFile: String
        /// The PEM server certificate (should name `IP:127.0.0.1` in its subjectAltName).
        public var certificateFile: String
        /// The PEM private key of the server certificate.
        public var privateKeyFile: String
        /// Whether clients must present a certificate signed by `caFile` (mutual TLS).
        public var requireClientCertificate: Bool

        /// Creates TLS listener settings.
        /// - Parameters:
        ///   - caFile: The CA certificate file.
        ///   - certificateFile: The server certificate file.
        ///   - privateKeyFile: The server key file.
        ///   - requireClientCertificate: Require mutual TLS (default `false`).
        public init(
            caFile: String,
            certificateFile: String,
            privateKeyFile: String,
            requireClientCertificate: Bool = false
        ) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.privateKeyFile = privateKeyFile
            self.requireClientCertificate = requireClientCertificate
        }
    }

    /// An error starting or finding the broker, with what to do.
    public struct Error: Swift.Error, Sendable, CustomStringConvertible {
        /// What went wrong and what to do.
        public var message: String
        /// The message.
        public var description: String { message }
    }

    private struct State: ~Copyable {
        var pid: pid_t?

        /// Whether the child still runs; reaps it when it has exited.
        mutating func isRunning() -> Bool {
            guard let pid else { return false }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == 0 { return true }
            self.pid = nil
            return false
        }
    }

    /// The plain MQTT port on 127.0.0.1.
    public let port: Int
    /// The TLS port on 127.0.0.1, when a TLS listener was configured.
    public let tlsPort: Int?
    /// The path of the mosquitto executable.
    public let executablePath: String
    /// The directory holding the configuration and log files (removed on deinit).
    public let directory: String
    /// The pinned configuration file.
    public let configurationFile: String
    /// The broker's log file (errors, warnings, notices, connections).
    public let logFile: String
    private let state = CoatyMutex(State())

    /// `mqtt://127.0.0.1:PORT`.
    public var url: String { "mqtt://127.0.0.1:\(port)" }
    /// `mqtts://127.0.0.1:TLSPORT`, when a TLS listener was configured.
    public var tlsURL: String? { tlsPort.map { "mqtts://127.0.0.1:\($0)" } }

    /// Finds the `mosquitto` executable: `$PATH`, then `/usr/sbin`, `/usr/local/sbin`, Homebrew locations.
    /// - Returns: The path, or `nil` when mosquitto is not installed.
    public static func findExecutable() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        var candidates = path.split(separator: ":").map { "\($0)/mosquitto" }
        candidates += [
            "/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/opt/homebrew/sbin/mosquitto",
            "/opt/homebrew/opt/mosquitto/sbin/mosquitto", "/usr/local/opt/mosquitto/sbin/mosquitto",
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Prepares a broker (finds the executable, picks free ports, writes the configuration); call ``start()`` next.
    /// - Parameters:
    ///   - tls: An optional TLS listener on a second port.
    ///   - passwordFile: A `mosquitto_passwd` file; when given, anonymous clients are refused.
    ///   - additionalConfiguration: Extra configuration lines appended to the pinned ones.
    /// - Throws: ``Error`` when mosquitto is not installed or the files cannot be written.
    public init(tls: TLSListener? = nil, passwordFile: String? = nil, additionalConfiguration: [String] = []) throws {
        guard let executable = Self.findExecutable() else {
            throw Error(message: "mosquitto is not installed; install it with: apt-get install mosquitto")
        }
        executablePath = executable
        port = try Self.freeLoopbackPort()
        tlsPort = tls == nil ? nil : try Self.freeLoopbackPort(avoiding: port)
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-mosquitto-\(UUID().uuidString.lowercased())").path
        self.directory = directory
        configurationFile = directory + "/mosquitto.conf"
        logFile = directory + "/mosquitto.log"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var lines = [
                "# Pinned by CoatyMQTT.MosquittoBroker",
                "per_listener_settings false",
                passwordFile == nil ? "allow_anonymous true" : "allow_anonymous false",
                "persistence false",
                "max_queued_messages 1000000",
                "max_queued_bytes 0",
                "max_inflight_messages 0",
                "max_keepalive 65535",
                // Without it a requester that subscribes its response topic per request (Coaty
                // JS does) waits about 40 ms per request: the broker's SUBACK and the response
                // queue behind Nagle's algorithm until the client's delayed ACK.
                "set_tcp_nodelay true",
                "log_dest file \(logFile)",
                "log_type error", "log_type warning", "log_type notice", "log_type information",
                "connection_messages true",
            ]
            if let user = Self.currentUserName() { lines.append("user \(user)") }
            if let passwordFile { lines.append("password_file \(passwordFile)") }
            lines.append("listener \(port) 127.0.0.1")
            if let tls, let tlsPort {
                lines += [
                    "listener \(tlsPort) 127.0.0.1",
                    "cafile \(tls.caFile)",
                    "certfile \(tls.certificateFile)",
                    "keyfile \(tls.privateKeyFile)",
                    "require_certificate \(tls.requireClientCertificate)",
                ]
            }
            lines += additionalConfiguration
            try (lines.joined(separator: "\n") + "\n").write(
                toFile: configurationFile,
                atomically: true,
                encoding: .utf8
            )
        } catch {
            throw Error(message: "Cannot write the mosquitto configuration in \(directory): \(error)")
        }
    }

    /// Starts a broker with ``init(tls:passwordFile:additionalConfiguration:)`` and ``start()``.
    ///
    /// When another listener took the port between the pick and mosquitto's `bind`, starts again on new ports
    /// (three tries).
    /// - Parameters:
    ///   - tls: An optional TLS listener on a second port.
    ///   - passwordFile: A `mosquitto_passwd` file; when given, anonymous clients are refused.
    /// - Returns: The running broker.
    /// - Throws: ``Error`` when mosquitto is missing or does not start.
    public static func start(tls: TLSListener? = nil, passwordFile: String? = nil) async throws -> MosquittoBroker {
        var attempt = 1
        while true {
            let broker = try MosquittoBroker(tls: tls, passwordFile: passwordFile)
            do {
                try await broker.start()
                return broker
            } catch let error as Error where attempt < 3 && error.message.contains("Address already in use") {
                attempt += 1
            }
        }
    }

    deinit {
        state.withLock { state in
            if state.isRunning(), let pid = state.pid {
                _ = sendSignal(pid, SIGKILL)
                var status: Int32 = 0
                _ = waitpid(pid, &status, 0)
            }
            state.pid = nil
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The process id of the running broker, or `nil` when it is not running.
    public var processIdentifier: Int32? {
        state.withLock { state in state.isRunning() ? state.pid : nil }
    }

    /// Whether the broker process runs.
    public var isRunning: Bool { state.withLock { $0.isRunning() } }

    /// Starts the broker (again, on the same ports) and waits until it accepts connections (30 s at most).
    /// - Throws: ``Error`` with the broker's log when it exits or does not listen in time.
    public func start() async throws {
        let launched: Bool = try state.withLock { state in
            if state.isRunning() { return false }
            state.pid = try Self.spawn(
                executablePath,
                arguments: ["-c", configurationFile],
                stderrPath: directory + "/stderr.log"
            )
            return true
        }
        guard launched else { return }
        // Checked once more after the deadline: on a loaded machine this task may get its next turn
        // only after the deadline, with the broker long listening.
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            if !isRunning {
                throw Error(message: "mosquitto exited at start; its output:\n\(diagnostics())")
            }
            if Self.accepts(port: port), tlsPort.map(Self.accepts(port:)) ?? true { return }
            if ContinuousClock.now >= deadline { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        await stop()
        throw Error(message: "mosquitto did not listen on 127.0.0.1:\(port) within 30 s; its output:\n\(diagnostics())")
    }

    /// Stops the broker: SIGTERM, then SIGKILL after 5 s; returns when the process has exited.
    public func stop() async {
        guard let pid = state.withLock({ state in state.isRunning() ? state.pid : nil }) else { return }
        _ = sendSignal(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        var killed = false
        while isRunning {
            if !killed, ContinuousClock.now >= deadline {
                _ = sendSignal(pid, SIGKILL)
                killed = true
            }
            await Self.pause()
        }
    }

    /// Kills the broker with SIGKILL (an abrupt crash, no goodbye to clients) and waits until it exited.
    public func kill() async {
        guard let pid = state.withLock({ state in state.isRunning() ? state.pid : nil }) else { return }
        _ = sendSignal(pid, SIGKILL)
        while isRunning { await Self.pause() }
    }

    /// Sleeps 10 ms, also in a cancelled task (stopping must finish).
    private static func pause() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: .milliseconds(10)) }
        }
    }

    /// Starts a child with a clean signal mask and default signal handlers (a child inherits the spawning thread's
    /// mask, and Swift concurrency / dispatch threads block SIGTERM, which would make mosquitto ignore it).
    /// `package`: the DNS-SD tests start their dbus-daemon and avahi-daemon with it.
    package static func spawn(_ executable: String, arguments: [String], stderrPath: String) throws -> Int32 {
        #if os(Linux)
            var attributes = posix_spawnattr_t()
            var actions = posix_spawn_file_actions_t()
        #else
            var attributes: posix_spawnattr_t?
            var actions: posix_spawn_file_actions_t?
        #endif
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGCHLD] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)

        var arena = CStringArena()
        defer { arena.free() }
        let argv: [UnsafeMutablePointer<CChar>?] =
            ([executable] + arguments).map {
                UnsafeMutablePointer(mutating: arena.copy($0))
            } + [nil]
        let environment: [UnsafeMutablePointer<CChar>?] =
            ProcessInfo.processInfo.environment.map {
                UnsafeMutablePointer(mutating: arena.copy("\($0.key)=\($0.value)"))
            } + [nil]
        var pid: pid_t = 0
        let result = argv.withUnsafeBufferPointer { argvBuffer in
            environment.withUnsafeBufferPointer { environmentBuffer in
                posix_spawn(
                    &pid,
                    executable,
                    &actions,
                    &attributes,
                    argvBuffer.baseAddress!,
                    environmentBuffer.baseAddress!
                )
            }
        }
        guard result == 0 else {
            throw Error(message: "Cannot run \(executable): \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// The broker's stderr and log file contents (for error messages).
    public func diagnostics() -> String {
        let stderrText = (try? String(contentsOfFile: directory + "/stderr.log", encoding: .utf8)) ?? ""
        let logText = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        return (stderrText + logText).split(separator: "\n").suffix(30).joined(separator: "\n")
    }

    // MARK: Sockets

    private static func currentUserName() -> String? {
        guard let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name else { return nil }
        return String(cString: name)
    }

    private static func loopbackAddress(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        return address
    }

    /// A TCP socket closed on `exec`: a child spawned meanwhile by another thread (a broker of another test) must not
    /// inherit it. An inherited probe socket bound to the port just picked keeps that port bound in the child after
    /// this process closed its copy, and the broker meant for the port fails with "Address already in use" (seen in
    /// CI and in the sanitizer job).
    private static func makeSocket() -> Int32 {
        #if canImport(Glibc) || canImport(Musl)
            return socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
            if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return fd
        #endif
    }

    /// Ports this process has handed out: two brokers started by one test run never get the same one.
    private static let handedOut = CoatyMutex(Set<Int>())

    /// The kernel's ephemeral port range (outgoing connections take their local port from it).
    private static func ephemeralRange() -> ClosedRange<Int> {
        #if os(Linux)
            if let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) {
                let bounds = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
                if bounds.count == 2, bounds[0] <= bounds[1] { return bounds[0]...bounds[1] }
            }
            return 32768...60999
        #else
            return 49152...65535
        #endif
    }

    /// Whether a loopback TCP socket can bind `port` right now.
    private static func canBind(_ port: Int) -> Bool {
        let fd = makeSocket()
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopbackAddress(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A loopback port that nothing listens on right now, outside the kernel's ephemeral range.
    ///
    /// A port the kernel hands out as port 0 lies in the ephemeral range, where any outgoing connection started
    /// between the pick and the broker's `bind` may take it ("Address already in use"). Ports below that range are
    /// never given to outgoing connections, so only another listener can take one; this process never hands the
    /// same port out twice.
    /// - Parameter avoiding: A port not to return.
    /// - Returns: The port number.
    /// - Throws: ``Error`` when no port can be bound.
    public static func freeLoopbackPort(avoiding: Int? = nil) throws -> Int {
        let ephemeral = ephemeralRange()
        let candidates = ephemeral.lowerBound > 12_000 ? 10_000...(ephemeral.lowerBound - 1) : 1_024...9_999
        for _ in 0..<200 {
            let port = Int.random(in: candidates)
            guard port != avoiding else { continue }
            let fresh = handedOut.withLock { $0.insert(port).inserted }
            guard fresh else { continue }
            if canBind(port) { return port }
        }
        throw Error(
            message: "Cannot find a free loopback port in \(candidates) (bind failed: \(String(cString: strerror(errno))))"
        )
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    /// - Parameter port: The port.
    /// - Returns: `true` when a connect succeeds.
    public static func accepts(port: Int) -> Bool {
        let fd = makeSocket()
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopbackAddress(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return result == 0
    }
}

/// `kill(2)`, reachable from inside `MosquittoBroker` where `kill()` is a method.
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 { kill(pid, signal) }
