import ArgumentParser
import CoatyKit
import CoatyOperator
import Logging
import Metrics
import Prometheus

/// `--http-port` and `--http-host` of the long-running commands (record, observe, respond): the
/// operator endpoint (`/metrics`, `/health/live`, `/health/ready`), off by default.
struct OperatorOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Serve /metrics (Prometheus), /health/live and /health/ready over HTTP on this port (0: a free port, logged at info). Off by default.",
            valueName: "port"
        )
    )
    var httpPort: Int?

    @Option(
        help: ArgumentHelp(
            "The address the HTTP endpoint binds (with --http-port). Default: 127.0.0.1 (this machine only).",
            valueName: "host"
        )
    )
    var httpHost: String?

    func validate() throws {
        if let httpPort, !(0...65_535).contains(httpPort) {
            throw ValidationError("--http-port must be between 0 and 65535.")
        }
        if let httpHost {
            if httpHost.isEmpty { throw ValidationError("--http-host must not be empty.") }
            if httpPort == nil { throw ValidationError("--http-host needs --http-port.") }
        }
    }
}

/// The operator endpoint of one command: its Prometheus registry, the metrics factory the agent
/// reports to, and where the endpoint listens. `nil` (see ``init(_:port:host:)``) when no port is given.
struct CLIOperator: Sendable {
    let registry: PrometheusCollectorRegistry
    let metricsFactory: PrometheusMetricsFactory
    let configuration: OperatorEndpoint.Configuration

    /// The endpoint of `options`, else of `port` and `host` (a configuration file's), or `nil`
    /// when neither gives a port. Bootstraps the process's `MetricsSystem` with the same factory,
    /// so metrics made without an injected factory are served too (once per process).
    init?(_ options: OperatorOptions, port: Int? = nil, host: String? = nil) {
        guard let port = options.httpPort ?? port else { return nil }
        registry = PrometheusCollectorRegistry()
        metricsFactory = PrometheusMetricsFactory(registry: registry)
        configuration = OperatorEndpoint.Configuration(host: options.httpHost ?? host ?? "127.0.0.1", port: port)
        MetricsSystem.bootstrap(metricsFactory)
    }

    /// Runs `body` while the endpoint of `setup` serves (`body` alone when `setup` is `nil`): the
    /// endpoint listens before `body` starts (a port in use fails the command with one line) and
    /// stops when `body` returns or throws.
    static func serving<T: Sendable>(
        _ setup: CLIOperator?,
        logger: Logger,
        readiness: @escaping @Sendable () async -> OperatorReadiness,
        _ body: () async throws -> T
    ) async throws -> T {
        guard let setup else { return try await body() }
        let endpoint = OperatorEndpoint(
            configuration: setup.configuration,
            registry: setup.registry,
            logger: logger,
            readiness: readiness
        )
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await endpoint.run() }
            defer { group.cancelAll() }
            do {
                _ = try await endpoint.listeningPort()
            } catch {
                throw CLIError("\(error)")
            }
            return try await body()
        }
    }
}
