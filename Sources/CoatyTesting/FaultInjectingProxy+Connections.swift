import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

typealias Direction = FaultInjectingProxy.Direction

/// The proxy's state; lives on its event loop (held in a `NIOLoopBound`), like its channel handlers.
final class ProxyCore {
    let eventLoop: any EventLoop
    let targetHost: String
    let targetPort: Int
    var connections: [ObjectIdentifier: ProxiedConnection] = [:]
    /// New connections are reset until then.
    var refuseUntil: NIODeadline?
    /// New connections are reset while this is above 0 (each one counts it down), even after
    /// ``refuseUntil``.
    var refuseAtLeast = 0
    /// Traffic is held until then (a delay spike).
    var holdUntil: NIODeadline?
    var statistics = FaultInjectingProxy.Statistics()

    init(eventLoop: any EventLoop, targetHost: String, targetPort: Int) {
        self.eventLoop = eventLoop
        self.targetHost = targetHost
        self.targetPort = targetPort
    }

    var currentStatistics: FaultInjectingProxy.Statistics {
        var snapshot = statistics
        snapshot.openConnections = connections.count
        return snapshot
    }

    var holding: Bool { holdUntil.map { .now() < $0 } ?? false }

    /// A client connected to the proxy: connect to the target and forward, or reset it when refusing.
    func accept(_ client: any Channel) {
        statistics.accepted += 1
        if let refuseUntil, .now() < refuseUntil || refuseAtLeast > 0 {
            refuseAtLeast = max(0, refuseAtLeast - 1)
            statistics.refused += 1
            Self.reset(client)
            return
        }
        let connection = ProxiedConnection(core: self, client: client)
        connection.holding = holding
        connections[ObjectIdentifier(connection)] = connection
        do {
            try client.pipeline.syncOperations.addHandler(connection.clientSide)
        } catch {
            connections[ObjectIdentifier(connection)] = nil
            Self.reset(client)
            return
        }
        ClientBootstrap(group: eventLoop)
            .channelOption(.autoRead, value: false)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: targetHost, port: targetPort)
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .success(let server):
                    connection.attach(server: server)
                case .failure:
                    // The server is unreachable: the client sees its connection refused (reset).
                    self.statistics.refused += 1
                    self.connections[ObjectIdentifier(connection)] = nil
                    Self.reset(client)
                }
            }
    }

    func remove(_ connection: ProxiedConnection) {
        connections[ObjectIdentifier(connection)] = nil
    }

    func passThrough() {
        refuseUntil = nil
        for connection in connections.values { connection.cutBudget = [:] }
        if holdUntil != nil {
            holdUntil = nil
            for connection in connections.values { connection.release() }
        }
    }

    func armCut(bytes: Int, direction: Direction) -> Int {
        var armed = 0
        for connection in connections.values where connection.isForwarding {
            connection.cutBudget[direction] = bytes
            armed += 1
        }
        return armed
    }

    func halfOpenAll() -> Int {
        var frozen = 0
        for connection in connections.values where connection.isForwarding {
            connection.freeze()
            frozen += 1
        }
        statistics.halfOpened += frozen
        return frozen
    }

    func hold(until deadline: NIODeadline) {
        statistics.delaySpikes += 1
        holdUntil = max(holdUntil ?? deadline, deadline)
        for connection in connections.values { connection.holding = true }
        eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            guard let holdUntil, .now() >= holdUntil else { return }  // extended by a later spike
            self.holdUntil = nil
            for connection in connections.values { connection.release() }
        }
    }

    func resetAll() -> Int {
        let all = Array(connections.values)
        connections = [:]
        for connection in all { connection.reset() }
        statistics.reset += all.count
        return all.count
    }

    /// Closes `channel` with RST (SO_LINGER 0) instead of FIN.
    static func reset(_ channel: any Channel) {
        guard let provider = channel as? any SocketOptionProvider else {
            channel.close(promise: nil)
            return
        }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}

/// One client connection and its connection to the server, with the faults armed on it (event loop only).
final class ProxiedConnection {
    weak var core: ProxyCore?
    let client: any Channel
    var server: (any Channel)?
    /// Reads from the client, writes to the server (through `serverSide`).
    let clientSide: ForwardingHandler
    /// Reads from the server, writes to the client (through `clientSide`).
    var serverSide: ForwardingHandler?
    /// Bytes still to forward per direction before the connection is cut.
    var cutBudget: [Direction: Int] = [:]
    /// Half-open: nothing is read or forwarded any more, no side is closed.
    var frozen = false
    /// In a delay spike: nothing is read; what was read already waits in `held`.
    var holding = false
    var held: [Direction: [ByteBuffer]] = [:]
    /// A side ended (or a cut fired) while holding: the other side closes after the held data.
    var endedWhileHolding: Set<Direction> = []
    /// Closing: nothing more is forwarded.
    var closing = false
    var clientOpen = true
    var serverOpen = true

    init(core: ProxyCore, client: any Channel) {
        self.core = core
        self.client = client
        clientSide = ForwardingHandler(reads: .toServer, on: client.eventLoop)
        clientSide.connection = self
    }

    var isForwarding: Bool { !frozen && !closing }

    func attach(server: any Channel) {
        guard clientOpen, !closing else {
            server.close(promise: nil)
            return
        }
        self.server = server
        let handler = ForwardingHandler(reads: .toClient, on: server.eventLoop)
        handler.connection = self
        serverSide = handler
        do {
            try server.pipeline.syncOperations.addHandler(handler)
        } catch {
            reset()
            return
        }
        // Reading starts only now that both sides exist.
        client.setOption(.autoRead, value: true).whenFailure { [client] _ in client.close(promise: nil) }
        server.setOption(.autoRead, value: true).whenFailure { _ in server.close(promise: nil) }
    }

    /// The handler that reads bytes flowing in `direction`.
    func reader(_ direction: Direction) -> ForwardingHandler? {
        direction == .toServer ? clientSide : serverSide
    }

    /// The handler whose channel bytes flowing in `direction` are written to.
    func writer(_ direction: Direction) -> ForwardingHandler? {
        direction == .toServer ? serverSide : clientSide
    }

    /// Whether the side reading `direction` may read: forwarding, and its partner takes more (back-pressure).
    func mayRead(_ direction: Direction) -> Bool {
        guard !frozen, !holding, !closing, let writer = writer(direction) else { return false }
        return writer.isWritable
    }

    func received(_ buffer: ByteBuffer, _ direction: Direction) {
        if frozen || closing { return }
        if holding {
            held[direction, default: []].append(buffer)
            return
        }
        forward(buffer, direction)
    }

    private func forward(_ buffer: ByteBuffer, _ direction: Direction) {
        guard !closing, let writer = writer(direction) else { return }
        var buffer = buffer
        if let budget = cutBudget[direction] {
            if buffer.readableBytes >= budget {
                let prefix = buffer.readSlice(length: budget) ?? ByteBuffer()
                count(prefix.readableBytes, direction)
                closing = true
                core?.statistics.cut += 1
                writer.write(prefix).assumeIsolated().whenComplete { _ in self.close() }
                return
            }
            cutBudget[direction] = budget - buffer.readableBytes
        }
        count(buffer.readableBytes, direction)
        _ = writer.write(buffer)
    }

    private func count(_ bytes: Int, _ direction: Direction) {
        switch direction {
        case .toServer: core?.statistics.bytesToServer += bytes
        case .toClient: core?.statistics.bytesToClient += bytes
        }
    }

    /// The partner of the side that reads `direction` became writable (or not).
    func writabilityChanged(towards direction: Direction) {
        reader(direction)?.readIfPending()
    }

    /// Ends a delay spike: forwards what was held, in order, then reads again.
    func release() {
        guard holding else { return }
        holding = false
        guard !frozen else { return }
        for direction in Direction.allCases {
            for buffer in held[direction] ?? [] { forward(buffer, direction) }
        }
        held = [:]
        if !endedWhileHolding.isEmpty {
            close()
            return
        }
        clientSide.readIfPending()
        serverSide?.readIfPending()
    }

    func freeze() {
        frozen = true
        held = [:]
    }

    /// The side reading `direction` closed.
    func ended(_ direction: Direction) {
        switch direction {
        case .toServer: clientOpen = false
        case .toClient: serverOpen = false
        }
        if !clientOpen, !serverOpen || server == nil {
            core?.remove(self)
            return
        }
        // Half-open connections keep the other socket open; a held one closes after its held data.
        if frozen { return }
        if holding {
            endedWhileHolding.insert(direction)
            return
        }
        close()
    }

    /// Closes both sides with FIN once what was written to them is flushed.
    func close() {
        closing = true
        for side in [clientSide, serverSide] {
            guard let side else { continue }
            side.write(ByteBuffer()).assumeIsolated().whenComplete { _ in side.close() }
        }
    }

    /// Closes both sides with RST.
    func reset() {
        closing = true
        ProxyCore.reset(client)
        if let server { ProxyCore.reset(server) }
    }
}

/// Reads one side of a proxied connection and writes what the other side reads (event loop only).
final class ForwardingHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The direction of the bytes this side reads.
    let direction: Direction
    let eventLoop: any EventLoop
    weak var connection: ProxiedConnection?
    private var context: ChannelHandlerContext?
    /// A read the pipeline asked for while reading was not allowed.
    private var readPending = false

    init(reads direction: Direction, on eventLoop: any EventLoop) {
        self.direction = direction
        self.eventLoop = eventLoop
    }

    var isWritable: Bool { context?.channel.isWritable ?? false }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection?.received(unwrapInboundIn(data), direction)
    }

    func read(context: ChannelHandlerContext) {
        if connection?.mayRead(direction) ?? false {
            context.read()
        } else {
            readPending = true
        }
    }

    /// Reads now if the pipeline asked for it while reading was not allowed and it is allowed again.
    func readIfPending() {
        guard readPending, let context, connection?.mayRead(direction) ?? false else { return }
        readPending = false
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // This side takes more (or no more): the other side, which writes here, may read again.
        let other: Direction = direction == .toServer ? .toClient : .toServer
        connection?.writabilityChanged(towards: other)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection?.ended(direction)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// Writes and flushes `buffer` to this side's channel.
    func write(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard let context else { return eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
        return context.writeAndFlush(wrapOutboundOut(buffer))
    }

    func close() {
        context?.close(promise: nil)
    }
}
