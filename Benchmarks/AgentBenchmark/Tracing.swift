import CoatyKit
import Foundation
import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

/// Tracing on in a role, to count what it costs: with `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, a role bootstraps
/// swift-otel as `coaty` does (tracing only, OTLP/HTTP, the standard `OTEL_*` variables: sampler, batch processor) and
/// its manager speaks MQTT 5, so trace contexts travel as user properties. Without the variable nothing changes.
enum BenchmarkTracing {
    private struct Running: Sendable {
        let group: ServiceGroup
        let task: Task<Void, Never>
    }

    private static let running = Mutex<Running?>(nil)

    /// Whether the roles of this process trace (the endpoint variable is set).
    static var isOn: Bool {
        !(ProcessInfo.processInfo.environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? "").isEmpty
    }

    /// Bootstraps swift-otel once when ``isOn``.
    static func startIfRequested(serviceName: String) throws {
        guard isOn, running.withLock({ $0 == nil }) else { return }
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.exporter = .otlp
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: backend.service)],
                logger: Logger(label: "benchmark.telemetry", factory: { _ in SwiftLogNoOpLogHandler() })
            )
        )
        running.withLock { $0 = Running(group: group, task: Task { _ = try? await group.run() }) }
    }

    /// Exports what is queued and ends the export (waits for it: a benchmark's sink answers).
    static func finish() async {
        guard let export = running.withLock({ current -> Running? in
            defer { current = nil }
            return current
        }) else { return }
        await export.group.triggerGracefulShutdown()
        await export.task.value
    }
}
