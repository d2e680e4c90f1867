import CoatySync
public import Logging
public import NIOCore
import NIOHTTP1
public import NIOPosix
public import Prometheus
public import ServiceLifecycle

/// An HTTP server for operators: `GET /metrics` (Prometheus text format), `GET /health/live` and
/// `GET /health/ready` (see ``OperatorRoutes``), as a swift-service-lifecycle `Service`.
///
/// Give it the registry the agent's metrics go to (a `PrometheusMetricsFactory` over the same
/// registry is the `metricsFactory` of the manager, the transport and the recorder) and a
/// readiness check:
///
/// ```swift
/// let registry = PrometheusCollectorRegistry()
/// let metrics = PrometheusMetricsFactory(registry: registry)
/// let manager = try CommunicationManager.mqtt(url: "mqtt://127.0.0.1:1883", metricsFactory: metrics)
/// let recorder = CoatyRecorder(manager: manager, connection: database.makeConnection(), metricsFactory: metrics)
/// let endpoint = OperatorEndpoint(configuration: .init(port: 9464), registry: registry) { .of(recorder) }
/// // The endpoint first: a group stops its services in reverse order, so it answers until the end.
/// let group = ServiceGroup(services: [endpoint, recorder, manager], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// It listens on loopback by default. It stops at graceful shutdown or cancellation: the
/// listening socket and every open connection are closed.
public final class OperatorEndpoint: Service, Sendable {
    /// Where the endpoint listens.
    public struct Configuration: Sendable, Hashable {
        /// The address to bind: `127.0.0.1` by default (only this machine can connect); `0.0.0.0`
        /// or `::` serve every interface.
        public var host: String
        /// The TCP port; 0 takes a free port (see ``OperatorEndpoint/listeningPort()``).
        public var port: Int

        /// A configuration.
        /// - Parameters:
        ///   - host: the address to bind.
        ///   - port: the port, or 0 for a free one.
        public init(host: String = "127.0.0.1", port: Int = 0) {
            self.host = host
            self.port = port
        }
    }

    private enum Listening {
        case notYet([CheckedContinuation<Int, any Error>])
        case port(Int)
        case failed(any Error)
        case ended
    }

    /// Where it listens.
    public let configuration: Configuration
    /// What it answers.
    public let routes: OperatorRoutes
    /// The logger.
    public let logger: Logger
    private let eventLoopGroup: any EventLoopGroup
    private let listening = CoatyMutex(Listening.notYet([]))

    /// An endpoint serving `registry` and `readiness`.
    /// - Parameters:
    ///   - configuration: where to listen.
    ///   - registry: the metrics of `/metrics`.
    ///   - eventLoopGroup: the NIO event loops; the shared singleton by default.
    ///   - logger: where to log (the listening address at info, failures at warning); nothing by
    ///     default.
    ///   - readiness: the check of `/health/ready`, called once per request.
    public init(
        configuration: Configuration = Configuration(),
        registry: PrometheusCollectorRegistry,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "coaty.operator", factory: { _ in SwiftLogNoOpLogHandler() }),
        readiness: @escaping @Sendable () async -> OperatorReadiness
    ) {
        self.configuration = configuration
        self.routes = OperatorRoutes(registry: registry, readiness: readiness)
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    /// The port it listens on, once it does: waits until ``run()`` (called once, in another task)
    /// has bound its socket.
    /// - Returns: the bound port (the free port taken for port 0).
    /// - Throws: the error that kept ``run()`` from binding (e.g. the port is in use), or
    ///   ``OperatorEndpointError/notListening`` when it has ended.
    public func listeningPort() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let result: Result<Int, any Error>? = listening.withLock { state in
                switch state {
                case .notYet(var waiters):
                    waiters.append(continuation)
                    state = .notYet(waiters)
                    return nil
                case .port(let port): return .success(port)
                case .failed(let error): return .failure(error)
                case .ended: return .failure(OperatorEndpointError.notListening)
                }
            }
            if let result { continuation.resume(with: result) }
        }
    }

    /// Binds, then answers requests until graceful shutdown or cancellation.
    /// - Throws: ``OperatorEndpointError/cannotListen(host:port:reason:)`` when the address cannot
    ///   be bound.
    public func run() async throws {
        let server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>
        do {
            server = try await ServerBootstrap(group: eventLoopGroup)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: configuration.host, port: configuration.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                            wrappingChannelSynchronously: channel
                        )
                    }
                }
        } catch {
            let failure = OperatorEndpointError.cannotListen(
                host: configuration.host,
                port: configuration.port,
                reason: "\(error)"
            )
            finishListening(.failed(failure))
            throw failure
        }
        let port = server.channel.localAddress?.port ?? configuration.port
        finishListening(.port(port))
        defer { finishListening(.ended) }
        logger.info(
            "operator endpoint listening on http://\(Self.authority(host: configuration.host, port: port))",
            metadata: ["paths": "/metrics /health/live /health/ready"]
        )
        let routes = self.routes
        let logger = self.logger
        try await cancelWhenGracefulShutdown {
            try await withTaskCancellationHandler {
                try await withThrowingDiscardingTaskGroup { group in
                    try await server.executeThenClose { connections in
                        for try await connection in connections {
                            group.addTask { await Self.serve(connection, routes: routes, logger: logger) }
                        }
                    }
                }
            } onCancel: {
                server.channel.close(promise: nil)
            }
        }
    }

    private func finishListening(_ outcome: Listening) {
        let waiters: [CheckedContinuation<Int, any Error>] = listening.withLock { state in
            guard case .notYet(let waiters) = state else {
                if case .ended = outcome { state = .ended }
                return []
            }
            state = outcome
            return waiters
        }
        for waiter in waiters {
            switch outcome {
            case .port(let port): waiter.resume(returning: port)
            case .failed(let error): waiter.resume(throwing: error)
            default: waiter.resume(throwing: OperatorEndpointError.notListening)
            }
        }
    }

    /// Answers the requests of one connection until the client closes it, asks to close it, or the
    /// server stops.
    private static func serve(
        _ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>,
        routes: OperatorRoutes,
        logger: Logger
    ) async {
        do {
            try await withTaskCancellationHandler {
                try await connection.executeThenClose { requests, responses in
                    var head: HTTPRequestHead?
                    for try await part in requests {
                        switch part {
                        case .head(let requestHead):
                            head = requestHead
                        case .body:
                            continue
                        case .end:
                            guard let request = head else { continue }
                            head = nil
                            let response = await routes.respond(method: request.method.rawValue, uri: request.uri)
                            try await write(response, to: responses, for: request)
                            if !request.isKeepAlive { return }
                        }
                    }
                }
            } onCancel: {
                connection.channel.close(promise: nil)
            }
        } catch {
            logger.debug("An operator endpoint connection ended with an error", metadata: ["error": "\(error)"])
        }
    }

    private static func write(
        _ response: OperatorResponse,
        to responses: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>,
        for request: HTTPRequestHead
    ) async throws {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: response.contentType)
        headers.add(name: "Content-Length", value: String(response.body.count))
        headers.add(name: "Cache-Control", value: "no-store")
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
        headers.add(name: "Connection", value: request.isKeepAlive ? "keep-alive" : "close")
        let head = HTTPResponseHead(
            version: request.version,
            status: HTTPResponseStatus(statusCode: response.status),
            headers: headers
        )
        try await responses.write(.head(head))
        if request.method != .HEAD, !response.body.isEmpty {
            try await responses.write(.body(.byteBuffer(ByteBuffer(bytes: response.body))))
        }
        try await responses.write(.end(nil))
    }

    /// `host:port`, with an IPv6 address in brackets.
    static func authority(host: String, port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// Errors of an ``OperatorEndpoint``.
public enum OperatorEndpointError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The address could not be bound (in use, not an address of this machine, not permitted).
    case cannotListen(host: String, port: Int, reason: String)
    /// The endpoint is not listening: ``OperatorEndpoint/run()`` ended.
    case notListening

    /// What happened and what to do.
    public var description: String {
        switch self {
        case .cannotListen(let host, let port, let reason):
            "The operator endpoint cannot listen on \(OperatorEndpoint.authority(host: host, port: port)): \(reason); "
                + "choose another --http-port / --http-host (0 takes a free port)."
        case .notListening:
            "The operator endpoint is not listening: its run() has ended."
        }
    }
}
