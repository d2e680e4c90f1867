import CoatyKit
import Foundation
import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

/// The CLI's export of traces to an OpenTelemetry collector (swift-otel, OTLP over HTTP), on when an endpoint is
/// given: `--otlp-endpoint`, else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`. The other
/// standard `OTEL_*` variables apply (`OTEL_EXPORTER_OTLP_PROTOCOL` `http/protobuf` or `http/json`,
/// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and `_ARG`, `OTEL_BSP_*`, …); the service
/// name defaults to the command's (`coaty record`). Logs stay on stderr, with the current trace and span ids as
/// metadata (`trace_id`, `span_id`); metrics stay with the operator endpoint. Without an endpoint nothing is
/// bootstrapped: swift-distributed-tracing's no-op tracer, no cost.
enum Telemetry {
    /// The export while it runs: its service group and the task running it.
    private struct Running: Sendable {
        let group: ServiceGroup
        let task: Task<Void, Never>
    }

    private static let running = Mutex<Running?>(nil)
    /// Whether the process-global tracer was bootstrapped (once: a second bootstrap is a precondition failure).
    private static let bootstrapped = Mutex(false)
    private static let provider = Mutex<Logger.MetadataProvider?>(nil)

    /// The logger metadata provider with the current trace and span ids, once the export runs; else `nil`.
    static var metadataProvider: Logger.MetadataProvider? { provider.withLock { $0 } }

    /// The endpoint the export goes to, or `nil` (no export).
    static func endpoint(option: String?, environment: [String: String]) -> String? {
        if let option, !option.isEmpty { return option }
        for variable in ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"] {
            if let value = environment[variable], !value.isEmpty { return value }
        }
        return nil
    }

    /// Starts the export once per process when an endpoint is configured (later calls do nothing).
    ///
    /// - Parameters:
    ///   - endpoint: `--otlp-endpoint`, or `nil` for the `OTEL_*` variables.
    ///   - serviceName: the service name unless `OTEL_SERVICE_NAME` gives one.
    /// - Throws: ``CLIError`` for a configuration swift-otel refuses (one line).
    static func startIfConfigured(endpoint option: String?, serviceName: String) throws {
        let environment = ProcessInfo.processInfo.environment
        guard let endpoint = endpoint(option: option, environment: environment) else { return }
        let first = bootstrapped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.exporter = .otlp
        if let option, !option.isEmpty {
            // swift-otel applies the OTEL_* variables over the code's configuration: the option wins only as one.
            setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tracesURL(option), 1)
        }
        let backend: (factory: any Tracer, service: any Service)
        do {
            let made = try OTel.makeTracingBackend(configuration: configuration)
            backend = (made.factory, made.service)
        } catch {
            throw CLIError("Cannot export traces to \(endpoint): \(error)")
        }
        InstrumentationSystem.bootstrap(backend.factory)
        provider.withLock { $0 = OTel.makeLoggingMetadataProvider() }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: backend.service)],
                logger: Logger(label: "coaty.telemetry", factory: { _ in SwiftLogNoOpLogHandler() })
            )
        )
        let task = Task<Void, Never> { _ = try? await group.run() }
        running.withLock { $0 = Running(group: group, task: task) }
    }

    /// Writes each injected field under its name.
    private struct FieldInjector: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
    }

    /// Reads a field by its name.
    private struct FieldExtractor: Extractor {
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }

    /// The current trace context as environment variables for a child process (`TRACEPARENT`, `TRACESTATE`, the
    /// OpenTelemetry convention for processes), or none when nothing is exported or no span is current.
    static func traceEnvironment() -> [String: String] {
        guard running.withLock({ $0 != nil }), let context = ServiceContext.current else { return [:] }
        var fields: [String: String] = [:]
        InstrumentationSystem.tracer.inject(context, into: &fields, using: FieldInjector())
        var environment: [String: String] = [:]
        for (key, value) in fields { environment[key.uppercased()] = value }
        return environment
    }

    /// The trace context a parent process handed down in `TRACEPARENT` (and `TRACESTATE`): a command run by
    /// `coaty respond call --exec` continues the trace of the Call it answers. `nil` without an export or a parent.
    static func inheritedContext(_ environment: [String: String] = ProcessInfo.processInfo.environment)
        -> ServiceContext?
    {
        guard running.withLock({ $0 != nil }), let parent = environment["TRACEPARENT"] else { return nil }
        var fields = ["traceparent": parent]
        if let state = environment["TRACESTATE"] { fields["tracestate"] = state }
        var context = ServiceContext.topLevel
        InstrumentationSystem.tracer.extract(fields, into: &context, using: FieldExtractor())
        return context.isEmpty ? nil : context
    }

    /// An `--otlp-endpoint` as the traces URL: a base URL (`http://collector:4318`) gets OTLP/HTTP's `/v1/traces`,
    /// as `OTEL_EXPORTER_OTLP_ENDPOINT` does; a URL with a path is used as it is.
    static func tracesURL(_ endpoint: String) -> String {
        guard let url = URL(string: endpoint), url.path.isEmpty || url.path == "/" else { return endpoint }
        return endpoint.hasSuffix("/") ? endpoint + "v1/traces" : endpoint + "/v1/traces"
    }

    /// How long ``finish(timeout:)`` waits by default for the last export.
    static let finishTimeout = Duration.seconds(5)

    /// Exports the spans still queued and ends the export, waiting at most `timeout` (a collector that does not
    /// answer does not hold the command's exit).
    /// - Returns: `false` when the export was cut off at `timeout` (what was still queued is lost; the caller logs
    ///   it), `true` when it ended in time or nothing was exported.
    @discardableResult
    static func finish(timeout: Duration = finishTimeout) async -> Bool {
        guard let export = running.withLock({ current -> Running? in
            defer { current = nil }
            return current
        }) else { return true }
        await export.group.triggerGracefulShutdown()
        let ended = EndedFlag()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let resume = ReleaseOnce { done.resume() }
            Task {
                await export.task.value
                ended.value.withLock { $0 = true }
                resume.release()
            }
            Task {
                try? await Task.sleep(for: timeout)
                // Only an export still running is cut off (the two can meet at the same instant).
                if !ended.value.withLock({ $0 }) { export.task.cancel() }
                resume.release()
            }
        }
        return ended.value.withLock { $0 }
    }

    /// Whether the last export ended, shared by the two tasks of ``finish(timeout:)``.
    private final class EndedFlag: Sendable {
        let value = Mutex(false)
    }
}
