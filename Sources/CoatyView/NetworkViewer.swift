public import CoatyCore
public import CoatyMQTT
import Foundation
import CoatySync
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
public import Logging
import NIOCore
public import ServiceLifecycle

/// A live web view of a Coaty network: an MQTT tap on the network's `coaty/…` topics feeding a
/// ``NetworkState``, and a web server (Hummingbird) serving the page, its WebSocket and the JSON
/// endpoints of <doc:ViewerData>; Discover and Query asked from the page go out through the
/// viewer's own agent.
///
/// ```swift
/// let viewer = NetworkViewer(
///     manager: manager,  // the viewer's agent, started
///     tap: tapConfiguration,  // its own MQTT client id
///     namespace: "-",
///     configuration: .init(port: 8080)
/// )
/// try await viewer.run()  // until cancelled or a graceful shutdown
/// ```
public final class NetworkViewer: Service, Sendable {
    /// Where the web server listens and how often the page is updated.
    public struct Configuration: Sendable, Hashable {
        /// The host or address to listen on (loopback by default: the view shows the whole network).
        public var host: String
        /// The TCP port; `0` picks a free one (``boundPort`` tells it).
        public var port: Int
        /// How often a state message goes to each page.
        public var pushInterval: Duration
        /// At most this many events per state message (the stream shown is sampled beyond it; counts never are).
        public var eventsPerPush: Int

        /// Creates a configuration.
        /// - Parameters:
        ///   - host: The listening host (default `127.0.0.1`).
        ///   - port: The port (default 8080).
        ///   - pushInterval: The update interval (default 500 ms).
        ///   - eventsPerPush: Events per message at most (default 100).
        public init(
            host: String = "127.0.0.1",
            port: Int = 8_080,
            pushInterval: Duration = .milliseconds(500),
            eventsPerPush: Int = 100
        ) {
            self.host = host
            self.port = port
            self.pushInterval = pushInterval
            self.eventsPerPush = eventsPerPush
        }
    }

    /// The web server could not listen: the port is taken, the host is not an address of this machine, …
    public struct CannotListen: Error, Sendable, CustomStringConvertible {
        /// The host it was to listen on.
        public let host: String
        /// The port it was to listen on.
        public let port: Int
        /// Why it could not (the server's error).
        public let reason: String
        /// One line: where and why.
        public var description: String { "Cannot serve the view on \(host):\(port): \(reason)" }
    }

    /// What the viewer knows about the network.
    public let state: NetworkState
    /// The web server's settings.
    public let configuration: Configuration
    private let manager: CommunicationManager
    private let tap: MQTTClient
    private let tapFilter: String
    private let logger: Logger
    private struct Listening {
        var port: Int?
        var ended = false
        var waiters: [UUID: CheckedContinuation<Int?, Never>] = [:]
    }
    private let listening = CoatyMutex(Listening())

    /// Creates a viewer (nothing runs before ``run()``).
    /// - Parameters:
    ///   - manager: The viewer's agent, started by the caller; its identity is shown as the viewer and it sends the
    ///     page's Discover and Query.
    ///   - tap: The MQTT configuration of the tap (the broker of `manager`, a client id of its own).
    ///   - namespace: The namespace observed, or `nil` for every namespace.
    ///   - configuration: The web server's settings.
    ///   - limits: The memory bounds of the state.
    ///   - logger: The logger.
    public init(
        manager: CommunicationManager,
        tap: MQTTConfiguration,
        namespace: String?,
        configuration: Configuration = Configuration(),
        limits: NetworkState.Limits = NetworkState.Limits(),
        logger: Logger = Logger(label: "coaty.view")
    ) {
        self.manager = manager
        self.configuration = configuration
        self.logger = logger
        var tapConfiguration = tap
        tapConfiguration.cleanSession = true
        self.tap = MQTTClient(configuration: tapConfiguration, logger: logger)
        tapFilter = "coaty/\(CoatyTopic.protocolVersion)/\(namespace ?? "+")/#"
        state = NetworkState(
            limits: limits,
            broker: tap.url,
            viewer: manager.identity,
            namespace: namespace ?? "+",
            startedAt: Date()
        )
    }

    /// The port the web server listens on, once it does.
    public var boundPort: Int? { listening.withLock { $0.port } }

    /// Waits until the web server listens.
    /// - Returns: Its port, or `nil` when ``run()`` ended without listening (the port was taken, the tap could not
    ///   connect) or the waiting task was cancelled.
    public func listeningPort() async -> Int? {
        let token = UUID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let answer: Int?? = listening.withLock { listening in
                    if let port = listening.port { return .some(port) }
                    if listening.ended || Task.isCancelled { return .some(nil) }
                    listening.waiters[token] = continuation
                    return .none
                }
                if case .some(let port) = answer { continuation.resume(returning: port) }
            }
        } onCancel: {
            let waiter = listening.withLock { $0.waiters.removeValue(forKey: token) }
            waiter?.resume(returning: nil)
        }
    }

    /// Resolves every waiter of ``listeningPort()``: with the port once listening, with `nil` once ``run()`` ended.
    private func resolveListening(port: Int?) {
        let waiters = listening.withLock { listening in
            if let port { listening.port = port } else { listening.ended = true }
            defer { listening.waiters = [:] }
            return Array(listening.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: port) }
    }

    /// Connects the tap, asks the network for its identities, and serves the page until the task is cancelled or
    /// a graceful shutdown (the tap disconnects then; the manager is the caller's to stop).
    /// - Throws: When the tap cannot connect, ``CannotListen`` when the server cannot listen.
    public func run() async throws {
        defer { resolveListening(port: nil) }
        let state = self.state
        tap.setMessageHandler { batch in
            let now = Date()
            for message in batch { state.receive(topic: message.topic, payload: message.payload, at: now) }
        }
        try await tap.connect()
        state.setConnection(.online, at: Date())
        try await tap.subscribe(tapFilter, qos: .atMostOnce)
        let states = tap.connectionStates()
        // The server in a group of its own, so that cancellation and a graceful shutdown both end it gracefully
        // (open WebSockets closed, no "already closed" errors from a cancelled server).
        let server = ServiceGroup(services: [makeApplication()], logger: logger)
        let shutDown: @Sendable () -> Void = { Task { await server.triggerGracefulShutdown() } }
        let manager = self.manager
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await connection in states {
                        switch connection {
                        case .connected: state.setConnection(.online, at: Date())
                        case .connecting: state.setConnection(.connecting, at: Date())
                        default: state.setConnection(.offline, at: Date())
                        }
                    }
                }
                group.addTask {
                    // Who is online already: every Coaty agent answers a Discover for identities; the tap sees the
                    // Resolves. The answers themselves are not needed here, and a failure only means fewer names.
                    let answers = manager.publishDiscover(.coreTypes([.identity])).responses(timeout: .seconds(2))
                    do {
                        for try await _ in answers {}
                    } catch {}
                }
                // The server decides: it ends on cancellation or a graceful shutdown, or fails (cannot listen). It
                // runs in a task of its own, awaited here, so that cancelling this one shuts it down gracefully
                // instead of cancelling it.
                let serving = Task { try await server.run() }
                try await withGracefulShutdownHandler {
                    try await withTaskCancellationHandler {
                        do {
                            try await serving.value
                        } catch where boundPort == nil {
                            throw CannotListen(host: configuration.host, port: configuration.port, reason: "\(error)")
                        }
                    } onCancel: {
                        shutDown()
                    }
                } onGracefulShutdown: {
                    shutDown()
                }
                group.cancelAll()
            }
        } catch {
            await tap.disconnect()
            throw error
        }
        await tap.disconnect()
    }

    private func makeApplication() -> some ApplicationProtocol {
        let router = Router(context: BasicWebSocketRequestContext.self)
        let state = self.state
        let manager = self.manager
        let configuration = self.configuration
        let logger = self.logger
        for asset in EmbeddedAssets.all {
            let body = ByteBuffer(string: asset.text)  // made once, shared by every response
            for path in asset.paths {
                router.get(RouterPath(path)) { _, _ in
                    Response(
                        status: .ok,
                        headers: [.contentType: asset.contentType, .cacheControl: "no-cache"],
                        body: ResponseBody(byteBuffer: body)
                    )
                }
            }
        }
        router.get("/api/state") { _, _ in
            Self.json(state.state(at: Date(), events: .newest(200)).json)
        }
        router.get("/api/agents") { _, _ in Self.json(state.agentsJSON()) }
        router.get("/api/types") { _, _ in Self.json(state.typesJSON()) }
        router.get("/api/types/:objectType") { _, context in
            let raw = context.parameters.get("objectType") ?? ""
            let objectType = raw.removingPercentEncoding ?? raw
            guard let json = state.objectTypeJSON(objectType) else {
                return Self.json(.object(["error": .string("no object of type '\(objectType)' seen")]), status: .notFound)
            }
            return Self.json(json)
        }
        router.get("/api/events") { request, _ in
            let query = request.uri.queryParameters
            let limit = min(2_000, max(1, query.get("limit").flatMap { Int($0) } ?? 200))
            let filter = NetworkState.EventFilter(
                event: query.get("event").flatMap { $0.isEmpty ? nil : $0 },
                objectType: query.get("objectType").flatMap { $0.isEmpty ? nil : $0 },
                agent: query.get("agent").flatMap { $0.isEmpty ? nil : $0 }
            )
            return Self.json(state.eventsJSON(matching: filter, limit: limit))
        }
        router.post("/api/ask") { request, _ in
            // JSON only: a cross-site form or `text/plain` fetch cannot send it without a CORS preflight, which this
            // server does not grant, so another web page open in the browser cannot make the viewer ask the network.
            guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
                return Self.json(
                    .object(["error": "the request must be JSON (Content-Type: application/json)"]),
                    status: .unsupportedMediaType
                )
            }
            let body = try await request.body.collect(upTo: 1 << 20)
            let question: NetworkQuestion
            do throws(NetworkQuestion.Invalid) {
                question = try NetworkQuestion(body: Array(buffer: body))
            } catch {
                return Self.json(.object(["error": .string(error.description)]), status: .badRequest)
            }
            do {
                let names: @Sendable (String) -> String? = { id in state.agentName(id) }
                return Self.json(try await question.ask(manager, names: names))
            } catch {
                logger.warning("A request asked from the page failed", metadata: ["error": "\(error)"])
                return Self.json(.object(["error": .string("the request could not be sent: \(error)")]), status: .serviceUnavailable)
            }
        }
        router.ws("/ws") { _, _ in
            .upgrade([:])
        } onUpgrade: { inbound, outbound, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Nothing is expected from the page; this notices when it goes.
                    for try await _ in inbound {}
                }
                group.addTask {
                    var cursor = max(0, state.latestSequence - configuration.eventsPerPush)
                    while !Task.isCancelled {
                        let (json, sequence) = state.state(
                            at: Date(),
                            events: .after(sequence: cursor, limit: configuration.eventsPerPush)
                        )
                        cursor = sequence
                        try await outbound.write(.text(json.serializedString()))
                        try await Task.sleep(for: configuration.pushInterval)
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
        return Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: router),
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "coaty view"
            ),
            onServerRunning: { [self] channel in
                resolveListening(port: channel.localAddress?.port ?? configuration.port)
            },
            logger: logger
        )
    }

    private static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-cache"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: value.serializedBytes()))
        )
    }
}

extension NetworkState {
    /// The name of an agent seen, by identity id.
    /// - Parameter id: The identity's objectId.
    /// - Returns: Its name, when known.
    public func agentName(_ id: String) -> String? {
        model.withLock { $0.agents[id]?.name }
    }
}
