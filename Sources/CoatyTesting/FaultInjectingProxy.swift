import NIOCore
import NIOPosix

/// A TCP proxy on a free loopback port that forwards to a server (an MQTT broker) and injects
/// network faults on command: cut a connection in the middle of a packet, leave it half-open,
/// hold its traffic for a while (a delay spike), reset it, or refuse new connections.
///
/// Connect the code under test to ``port`` instead of the server's port; every accepted
/// connection opens its own connection to the server and the bytes flow through unchanged until
/// a test asks for a fault:
///
/// ```swift
/// let broker = try await MosquittoBroker.start()
/// let proxy = try await FaultInjectingProxy(targetPort: broker.port)
/// let agent = try CommunicationManager.mqtt(url: proxy.mqttURL, identity: Identity(name: "agent"))
/// try await agent.start()
/// await proxy.cut(afterForwarding: 1000, direction: .toClient)  // EOF inside a packet
/// await proxy.halfOpen()                                      // silence, no FIN, no RST
/// await proxy.delaySpike(for: .seconds(2))                    // hold everything, then forward
/// await proxy.resetAll()                                      // RST
/// await proxy.refuseConnections(for: .seconds(3))
/// await proxy.stop()
/// ```
///
/// Each fault applies to the connections open when it is asked for (a delay spike and a refusal
/// also to those accepted while they last); a reconnecting client gets a healthy connection
/// unless the test arms a fault again. The proxy runs on one SwiftNIO event loop and never reads
/// faster than the other side takes: data waits in the kernel's socket buffers, so its memory
/// stays bounded (at most one read burst per direction while traffic is held).
public final class FaultInjectingProxy: Sendable {
    /// Which way bytes flow through a proxied connection.
    public enum Direction: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// From the client that connected to the proxy to the server (e.g. PUBLISH, PUBACK, PINGREQ).
        case toServer
        /// From the server to the client (e.g. CONNACK, delivered PUBLISH, PINGRESP).
        case toClient

        /// `to server` or `to client`.
        public var description: String { self == .toServer ? "to server" : "to client" }
    }

    /// What the proxy has done since it started.
    public struct Statistics: Sendable, Hashable {
        /// Connections accepted from clients (also those refused or whose server was unreachable).
        public var accepted = 0
        /// Connections reset at once because the proxy refused connections (or the server was unreachable).
        public var refused = 0
        /// Connections closed by an armed cut (``FaultInjectingProxy/cut(afterForwarding:direction:)``).
        public var cut = 0
        /// Connections left half-open (``FaultInjectingProxy/halfOpen()``).
        public var halfOpened = 0
        /// Connections reset (``FaultInjectingProxy/resetAll()``).
        public var reset = 0
        /// Delay spikes asked for (``FaultInjectingProxy/delaySpike(for:)``).
        public var delaySpikes = 0
        /// Bytes forwarded from clients to the server.
        public var bytesToServer = 0
        /// Bytes forwarded from the server to clients.
        public var bytesToClient = 0
        /// Proxied connections with at least one side still open.
        public var openConnections = 0
    }

    /// An error starting the proxy.
    public struct Error: Swift.Error, Sendable, CustomStringConvertible {
        /// What went wrong.
        public var message: String
        /// The message.
        public var description: String { message }
    }

    /// The loopback port the proxy listens on.
    public let port: Int
    /// The host connections are forwarded to.
    public let targetHost: String
    /// The port connections are forwarded to.
    public let targetPort: Int
    let eventLoop: any EventLoop
    let core: NIOLoopBound<ProxyCore>
    let listener: any Channel

    /// `mqtt://127.0.0.1:PORT`: the proxy's address for an MQTT client.
    public var mqttURL: String { "mqtt://127.0.0.1:\(port)" }

    /// Starts a proxy on 127.0.0.1 that forwards every connection to `targetHost:targetPort`.
    ///
    /// - Parameters:
    ///   - targetHost: The server's host (default `127.0.0.1`).
    ///   - targetPort: The server's port, e.g. `MosquittoBroker.port`.
    ///   - listeningPort: The port to listen on; `0` (the default) picks a free one.
    /// - Throws: ``Error`` when the port cannot be bound.
    public init(targetHost: String = "127.0.0.1", targetPort: Int, listeningPort: Int = 0) async throws {
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let core = try await eventLoop.submit {
            NIOLoopBound(
                ProxyCore(eventLoop: eventLoop, targetHost: targetHost, targetPort: targetPort),
                eventLoop: eventLoop
            )
        }.get()
        let listener: any Channel
        do {
            listener = try await ServerBootstrap(group: eventLoop, childGroup: eventLoop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.autoRead, value: false)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    core.value.accept(channel)
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
                .bind(host: "127.0.0.1", port: listeningPort)
                .get()
        } catch {
            throw Error(message: "Cannot listen on 127.0.0.1:\(listeningPort) for the proxy: \(error)")
        }
        guard let port = listener.localAddress?.port else {
            listener.close(promise: nil)
            throw Error(message: "The proxy's listening socket has no port")
        }
        self.port = port
        self.targetHost = targetHost
        self.targetPort = targetPort
        self.eventLoop = eventLoop
        self.core = core
        self.listener = listener
    }

    /// Stops listening and resets the connections, without waiting (``stop()`` waits).
    deinit {
        let core = self.core
        eventLoop.execute { _ = core.value.resetAll() }
        listener.close(promise: nil)
    }

    /// Runs `body` on the proxy's event loop and returns its result.
    private func onLoop<Result: Sendable>(_ body: @escaping @Sendable (ProxyCore) -> Result) async -> Result {
        let core = self.core
        return await withCheckedContinuation { continuation in
            eventLoop.execute { continuation.resume(returning: body(core.value)) }
        }
    }

    /// Forwards normally again: disarms pending cuts, ends a delay spike (forwarding what it held)
    /// and a refusal. Half-open connections stay silent: they are dead for good, as on a real network.
    public func passThrough() async {
        await onLoop { $0.passThrough() }
    }

    /// Arms a cut on every open connection: after forwarding `bytes` more bytes in `direction`, the
    /// connection is closed on both sides (FIN), so the receiving side sees the stream end in the
    /// middle of whatever packet those bytes belong to.
    ///
    /// - Parameters:
    ///   - bytes: How many more bytes to forward in `direction` before closing (0 closes at the next byte).
    ///   - direction: The direction whose bytes are counted.
    /// - Returns: The number of connections armed.
    @discardableResult
    public func cut(afterForwarding bytes: Int, direction: Direction) async -> Int {
        await onLoop { $0.armCut(bytes: max(0, bytes), direction: direction) }
    }

    /// Leaves every open connection half-open: from now on nothing is forwarded in either
    /// direction, and both sockets stay open (no FIN, no RST), as when a peer or a middlebox
    /// vanishes without a trace. The proxy stops reading them, so what the peers send waits in
    /// their socket buffers. Only a keep-alive can tell such a connection is dead.
    ///
    /// - Returns: The number of connections left half-open.
    @discardableResult
    public func halfOpen() async -> Int {
        await onLoop { $0.halfOpenAll() }
    }

    /// Holds the traffic of every connection, in both directions, for `duration`, then forwards it
    /// in order: a delay spike. Connections accepted meanwhile are held too. The proxy stops reading
    /// while it holds (at most one read burst per direction waits in the proxy; the rest waits in the
    /// kernel's socket buffers and, by TCP flow control, in the peers).
    ///
    /// - Parameter duration: How long to hold; a spike that overlaps a running one extends it.
    public func delaySpike(for duration: Duration) async {
        await onLoop { $0.hold(until: .now() + TimeAmount(duration)) }
    }

    /// Resets every open connection on both sides (RST), as a crashed middlebox does.
    ///
    /// - Returns: The number of connections reset.
    @discardableResult
    public func resetAll() async -> Int {
        await onLoop { $0.resetAll() }
    }

    /// Refuses new connections for `duration`, and at least the next `attempts` of them however
    /// late they come: each is reset (RST) as soon as it is accepted, so the client sees its
    /// connection fail before the server could answer.
    ///
    /// - Parameters:
    ///   - duration: How long to refuse.
    ///   - attempts: How many connection attempts to refuse at least (0 by default), so that a
    ///     client slow to retry (a loaded machine) still meets the refusal.
    public func refuseConnections(for duration: Duration, atLeast attempts: Int = 0) async {
        await onLoop { core in
            core.refuseUntil = .now() + TimeAmount(duration)
            core.refuseAtLeast = attempts
        }
    }

    /// A snapshot of what the proxy did so far.
    ///
    /// - Returns: The statistics.
    public func statistics() async -> Statistics {
        await onLoop { $0.currentStatistics }
    }

    /// Stops listening and resets every connection (also half-open ones); returns when the
    /// listening socket is closed.
    public func stop() async {
        _ = await onLoop { $0.resetAll() }
        try? await listener.close()
    }
}

extension TimeAmount {
    /// A NIO time amount of a Swift duration (nanosecond precision).
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
