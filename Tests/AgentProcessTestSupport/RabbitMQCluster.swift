import CoatyKit
import CoatyTesting
public import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A cluster of RabbitMQ nodes with the MQTT plugin, each listening on its own loopback port,
/// started in a new temporary directory for the tests of one process.
///
/// Every node is a `rabbitmq-server` of Debian's `rabbitmq-server` package (3.10) with its own
/// node name, Erlang distribution port, Mnesia directory, log directory and `rabbitmq.conf` (no
/// AMQP listener; MQTT on `127.0.0.1:<port>`, anonymous clients allowed); they share an Erlang
/// cookie. Nodes 2… join node 1 with `rabbitmqctl join_cluster`. ``stop()`` kills every node and
/// removes the directory. The binaries are looked up in `$COATY_RABBITMQ_BIN`, else
/// `/usr/lib/rabbitmq/bin` (the package's own scripts: `/usr/sbin/rabbitmqctl` would switch to
/// the `rabbitmq` user).
public struct RabbitMQCluster: Sendable {
    /// One node.
    public struct Node: Sendable {
        /// The Erlang node name, `coaty<i>-<id>@localhost`.
        public let name: String
        /// The MQTT port on 127.0.0.1.
        public let mqttPort: Int
        /// The node's directory (configuration, Mnesia, logs, pid file).
        public let directory: String
        /// The broker URL.
        public var url: String { "mqtt://127.0.0.1:\(mqttPort)" }
    }

    /// A node that did not start or join, with its log.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed, with the node's log.
        public let description: String
    }

    /// The directory of the RabbitMQ scripts, or `nil` when RabbitMQ is not installed.
    public static let binaryDirectory: String? = {
        let directory = ProcessInfo.processInfo.environment["COATY_RABBITMQ_BIN"] ?? "/usr/lib/rabbitmq/bin"
        let found = ["rabbitmq-server", "rabbitmqctl"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: "\(directory)/\($0)")
        }
        return found ? directory : nil
    }()

    /// Whether the cluster tests run: RabbitMQ is installed, or CI is set (and they then fail).
    public static let shouldRun = binaryDirectory != nil || ProcessInfo.processInfo.environment["CI"] == "true"

    /// Why the tests are skipped.
    public static let skipReason =
        "RabbitMQ is not installed (apt-get install rabbitmq-server) or set COATY_RABBITMQ_BIN; skipping the cluster tests"

    /// The cluster's directory (the shared Erlang cookie, one directory per node).
    public let directory: String
    /// The nodes, in order; nodes 2… joined node 1.
    public let nodes: [Node]
    let binaries: String

    /// Starts `count` nodes and joins them into one cluster (about 30 s on two cores).
    /// - Parameter count: the number of nodes (default 3).
    /// - Returns: the running cluster.
    /// - Throws: ``Failure`` with the failing node's log.
    public static func start(nodes count: Int = 3) async throws -> RabbitMQCluster {
        guard let binaries = binaryDirectory else { throw Failure(description: skipReason) }
        let id = UUID().uuidString.prefix(8).lowercased()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coaty-rabbitmq-\(id)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let cookie = directory + "/.erlang.cookie"
        try "coaty-test-\(id)".write(toFile: cookie, atomically: true, encoding: .utf8)
        chmod(cookie, 0o400)
        var nodes: [Node] = []
        var taken: Set<Int> = []
        func freePort() throws -> Int {
            while true {
                let port = try MosquittoBroker.freeLoopbackPort()
                if taken.insert(port).inserted { return port }
            }
        }
        for index in 1...count {
            let node = Node(
                name: "coaty\(index)-\(id)@localhost",
                mqttPort: try freePort(),
                directory: "\(directory)/node\(index)"
            )
            try FileManager.default.createDirectory(atPath: node.directory, withIntermediateDirectories: true)
            try """
            listeners.tcp = none
            mqtt.listeners.tcp.1 = 127.0.0.1:\(node.mqttPort)
            mqtt.allow_anonymous = true
            loopback_users = none
            log.console = false
            log.file.level = info

            """.write(toFile: node.directory + "/rabbitmq.conf", atomically: true, encoding: .utf8)
            try "[rabbitmq_mqtt].\n".write(
                toFile: node.directory + "/enabled_plugins",
                atomically: true,
                encoding: .utf8
            )
            nodes.append(node)
        }
        let cluster = RabbitMQCluster(directory: directory, nodes: nodes, binaries: binaries)
        do {
            for node in nodes { try cluster.launch(node, distributionPort: try freePort()) }
            for node in nodes { try await cluster.awaitStartup(node) }
            for node in nodes.dropFirst() {
                for arguments in [["stop_app"], ["join_cluster", nodes[0].name], ["start_app"]] {
                    try await cluster.control(node, arguments)
                }
            }
            for node in nodes { try await cluster.awaitListening(node) }
        } catch {
            await cluster.stop()
            throw error
        }
        return cluster
    }

    /// The environment of a node's server and of `rabbitmqctl` calls for it.
    private func environment(_ node: Node) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory  // the shared Erlang cookie
        environment["RABBITMQ_NODENAME"] = node.name
        environment["RABBITMQ_MNESIA_BASE"] = node.directory + "/mnesia"
        environment["RABBITMQ_LOG_BASE"] = node.directory + "/log"
        environment["RABBITMQ_CONFIG_FILE"] = node.directory + "/rabbitmq.conf"
        environment["RABBITMQ_ENABLED_PLUGINS_FILE"] = node.directory + "/enabled_plugins"
        environment["RABBITMQ_PID_FILE"] = node.directory + "/pid"
        // Three nodes on two cores: no busy-waiting schedulers.
        environment["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = "+sbwt none +sbwtdcpu none +sbwtdio none"
        return environment
    }

    private func launch(_ node: Node, distributionPort: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binaries + "/rabbitmq-server")
        var environment = environment(node)
        environment["RABBITMQ_DIST_PORT"] = "\(distributionPort)"
        process.environment = environment
        _ = FileManager.default.createFile(atPath: node.directory + "/server.out", contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: node.directory + "/server.out"))
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Runs `rabbitmqctl -n <node> <arguments>` without blocking a thread of the cooperative pool
    /// (each call takes a second or two: an Erlang VM starts for it), its output in a file.
    @discardableResult
    private func control(_ node: Node, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let outcome = try await runProcess(
            binaries + "/rabbitmqctl",
            ["-n", node.name] + arguments,
            environment: environment(node)
        )
        let (status, text) = (outcome.status, outcome.output)
        guard status == 0 || arguments.first == "await_startup" else {
            throw Failure(
                description:
                    "rabbitmqctl \(arguments.joined(separator: " ")) on \(node.name) failed:\n\(text)\n\(log(node))"
            )
        }
        return (status, text)
    }

    /// Waits until a node has booted (two minutes at most).
    private func awaitStartup(_ node: Node) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            // Fails at once while the node is not yet registered with epmd.
            if try await control(node, ["await_startup", "--timeout", "60"]).status == 0 { return }
            try await Task.sleep(for: .milliseconds(500))
        }
        throw Failure(description: "RabbitMQ node \(node.name) did not start within 120 s:\n\(log(node))")
    }

    /// Waits until a node's MQTT listener accepts connections (60 s at most).
    private func awaitListening(_ node: Node) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !MosquittoBroker.accepts(port: node.mqttPort) {
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "RabbitMQ node \(node.name) does not listen on MQTT:\n\(log(node))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The process id of a node's Erlang VM, from its pid file.
    public func processIdentifier(_ node: Node) -> pid_t? {
        guard let text = try? String(contentsOfFile: node.directory + "/pid", encoding: .utf8) else { return nil }
        return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Kills a node with SIGKILL (a crash: no goodbye to its clients) and waits until it is gone.
    ///
    /// The `rabbitmq-server` script that started the VM is killed too: it does not reap a killed
    /// VM, which would stay a zombie (and count as running) until the script ends.
    public func kill(_ node: Node) async {
        guard let pid = processIdentifier(node) else { return }
        if let parent = Self.parentProcess(of: pid), Self.commandLine(of: parent).contains("rabbitmq-server") {
            _ = Glibc.kill(parent, SIGKILL)
        }
        _ = Glibc.kill(pid, SIGKILL)
        let deadline = ContinuousClock.now + .seconds(10)
        while Self.isRunning(pid), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Whether a process exists and is not a zombie.
    private static func isRunning(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(close, offsetBy: 2)...].first != "Z"
    }

    /// The parent of a process, from `/proc/<pid>/stat`.
    private static func parentProcess(of pid: pid_t) -> pid_t? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }

    /// The command line of a process, its arguments joined by spaces.
    private static func commandLine(of pid: pid_t) -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return "" }
        return String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
    }

    /// Kills every node and removes the directory.
    public func stop() async {
        for node in nodes { await kill(node) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The end of a node's log files, for failure messages.
    public func log(_ node: Node) -> String {
        let paths = [node.directory + "/server.out", node.directory + "/log/\(node.name).log"]
        return paths.map { path in
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(no \(path))"
            return "--- \(path)\n" + text.split(separator: "\n").suffix(30).joined(separator: "\n")
        }.joined(separator: "\n")
    }
}
