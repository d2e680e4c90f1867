import CoatyKit
import CoatyTesting
import Foundation
import CoatySync
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Agents, a numbered Lamp stream and bookkeeping for the hostile network tests.
enum HostileNetwork {
    /// An agent at QoS 1 with a short keep-alive (5 s, the least libmosquitto accepts) that retries every 200 ms.
    ///
    /// - Parameters:
    ///   - url: The broker (or the proxy in front of it).
    ///   - name: The identity's name.
    ///   - keepAlive: The MQTT keep-alive.
    ///   - persistentSession: Whether the broker keeps the session (and queues QoS 1 messages)
    ///     while the agent is away (`cleanSession` off, the client id fixed by the identity).
    ///   - observerBufferLimit: The events an observer buffers before the agent holds its reads.
    static func agent(
        url: String,
        name: String,
        keepAlive: Duration = .seconds(5),
        persistentSession: Bool = false,
        observerBufferLimit: Int = 4096
    ) throws -> CommunicationManager {
        let identity = Identity(name: name)
        var configuration = try MQTTConfiguration.coaty(url: url, identityId: identity.objectId)
        configuration.keepAlive = keepAlive
        configuration.cleanSession = !persistentSession
        configuration.reconnectDelay = .milliseconds(200)
        configuration.maxReconnectDelay = .milliseconds(200)
        return try CommunicationManager(
            transport: MQTTTransport(configuration: configuration),
            identity: identity,
            registry: CoatyObjectRegistry([Lamp.self]),
            options: .init(observerBufferLimit: observerBufferLimit, qos: .atLeastOnce)
        )
    }

    /// Prints a test's measured numbers (sent, received, duplicates, reconnects, times) to the test log.
    static func report(_ line: String) {
        print("HostileNetworkTests: \(line)")
    }

    /// Waits until `condition` holds, polling every 20 ms, for `timeout` at most.
    /// - Returns: Whether it held in time.
    @discardableResult
    static func wait(for timeout: Duration, until condition: () async -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while await !condition() {
            if ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }
}

/// The numbers of the Lamps an observer received, in arrival order (duplicates included).
final class ReceivedLamps: Sendable {
    private let numbers = CoatyMutex<[Int]>([])
    private let consumer: CoatyMutex<Task<Void, Never>?> = CoatyMutex(nil)

    /// Observes the Lamp Advertises of `manager` (subscribed when it returns) and records their numbers.
    static func observe(_ manager: CommunicationManager) async throws -> ReceivedLamps {
        let received = ReceivedLamps()
        let lamps = try manager.observeAdvertise(Lamp.self)
        await lamps.subscribed()
        let task = Task {
            for await event in lamps {
                if let number = Int(event.object.name) { received.numbers.withLock { $0.append(number) } }
            }
        }
        received.consumer.withLock { $0 = task }
        return received
    }

    /// Every number received, in order of arrival.
    var all: [Int] { numbers.withLock { $0 } }
    /// How many were received, duplicates included.
    var count: Int { numbers.withLock { $0.count } }
    /// The distinct numbers received.
    var distinct: Set<Int> { Set(all) }
    /// Receptions beyond the first of a number.
    var duplicates: Int {
        let all = self.all
        return all.count - Set(all).count
    }
    /// Whether the first receptions of the numbers come in ascending order (the publisher's order).
    var firstReceptionsInOrder: Bool {
        var seen = Set<Int>()
        let firsts = all.filter { seen.insert($0).inserted }
        return firsts == firsts.sorted()
    }

    /// Waits until every number in `expected` was received.
    /// - Returns: Whether they all arrived within `timeout`.
    func waitForAll(_ expected: Set<Int>, timeout: Duration = .seconds(30)) async throws -> Bool {
        try await HostileNetwork.wait(for: timeout) { expected.isSubset(of: distinct) }
    }

    /// Ends the observation.
    func stop() { consumer.withLock { $0 }?.cancel() }
}

/// Publishes Lamps named `0`, `1`, … one after the other, remembering which publish calls returned.
final class LampStream: Sendable {
    private let returned = CoatyMutex<[Int]>([])
    private let failures = CoatyMutex<[String]>([])
    private let task: CoatyMutex<Task<Void, Never>?> = CoatyMutex(nil)

    /// Starts publishing `count` Lamps from `publisher`, `pause` apart (at the agent's QoS 1), numbered from `first`.
    static func start(
        _ publisher: CommunicationManager,
        count: Int,
        first: Int = 0,
        pause: Duration
    ) -> LampStream {
        let stream = LampStream()
        let task = Task {
            for number in first..<first + count {
                do {
                    try await publisher.publishAdvertise(Lamp(name: "\(number)", isOn: number % 2 == 0))
                    stream.returned.withLock { $0.append(number) }
                } catch {
                    stream.failures.withLock { $0.append("\(number): \(error)") }
                }
                try? await Task.sleep(for: pause)
            }
        }
        stream.task.withLock { $0 = task }
        return stream
    }

    /// The numbers whose publish call returned (acknowledged by the broker, or deferred while offline).
    var published: [Int] { returned.withLock { $0 } }
    /// The publish calls that threw, with their errors.
    var errors: [String] { failures.withLock { $0 } }

    /// Waits until every publish call returned.
    func finished() async { await task.withLock { $0 }?.value }
}

/// The connection states of a transport with the time each was entered.
final class ConnectionLog: Sendable {
    private let entries = CoatyMutex<[(state: TransportConnectionState, at: ContinuousClock.Instant)]>([])
    private let task: CoatyMutex<Task<Void, Never>?> = CoatyMutex(nil)

    /// Starts following `transport`'s connection states.
    static func follow(_ transport: any CoatyTransport) -> ConnectionLog {
        let log = ConnectionLog()
        let states = transport.connectionStates()
        let task = Task {
            for await state in states { log.entries.withLock { $0.append((state, .now)) } }
        }
        log.task.withLock { $0 = task }
        return log
    }

    /// How often the connection was lost (entered `reconnecting`).
    var losses: Int { entries.withLock { $0.filter { $0.state == .reconnecting }.count } }
    /// How often it was connected, the first connection included.
    var connections: Int { entries.withLock { $0.filter { $0.state == .connected }.count } }

    /// When the connection was first lost after `instant`.
    func firstLoss(after instant: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        entries.withLock { $0.first { $0.state == .reconnecting && $0.at >= instant }?.at }
    }

    /// When it was first connected again after `instant`.
    func firstConnection(after instant: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        entries.withLock { $0.first { $0.state == .connected && $0.at >= instant }?.at }
    }

    /// Stops following.
    func stop() { task.withLock { $0 }?.cancel() }
}

/// A started broker, an optional proxy in front of it, a subscriber observing Lamps and a publisher,
/// both at QoS 1, with their connection logs.
struct HostileScenario {
    /// How an agent reaches the broker.
    enum Route {
        case direct
        case throughProxy
    }

    let broker: MosquittoBroker
    let proxy: FaultInjectingProxy
    let subscriber: CommunicationManager
    let publisher: CommunicationManager
    let received: ReceivedLamps
    let subscriberLog: ConnectionLog
    let publisherLog: ConnectionLog

    /// Starts a proxy in front of `broker` (a new one when `nil`), then the agents (the subscriber with a
    /// persistent session).
    static func start(
        _ broker: MosquittoBroker? = nil,
        subscriber subscriberRoute: Route,
        publisher publisherRoute: Route,
        keepAlive: Duration = .seconds(5)
    ) async throws -> HostileScenario {
        let broker = try await { if let broker { broker } else { try await MosquittoBroker.start() } }()
        let proxy = try await FaultInjectingProxy(targetPort: broker.port)
        func url(_ route: Route) -> String { route == .direct ? broker.url : proxy.mqttURL }
        let subscriber = try HostileNetwork.agent(
            url: url(subscriberRoute),
            name: "subscriber",
            keepAlive: keepAlive,
            persistentSession: true
        )
        let publisher = try HostileNetwork.agent(url: url(publisherRoute), name: "publisher", keepAlive: keepAlive)
        try await subscriber.start()
        try await publisher.start()
        return HostileScenario(
            broker: broker,
            proxy: proxy,
            subscriber: subscriber,
            publisher: publisher,
            received: try await ReceivedLamps.observe(subscriber),
            subscriberLog: ConnectionLog.follow(subscriber.transport),
            publisherLog: ConnectionLog.follow(publisher.transport)
        )
    }

    /// Starts publishing `count` Lamps `pause` apart and waits until the subscriber received `flowing` of them.
    func startStream(count: Int, pause: Duration, flowing: Int) async throws -> LampStream {
        let stream = LampStream.start(publisher, count: count, pause: pause)
        let received = self.received
        let flows = try await HostileNetwork.wait(for: .seconds(30)) { received.count >= flowing }
        #expect(flows, "\(flowing) events arrive before the fault")
        return stream
    }

    /// Whether the subscriber's transport connected again after `instant` (waits 30 s at most).
    func subscriberReconnected(after instant: ContinuousClock.Instant) async throws -> Bool {
        let log = subscriberLog
        return try await HostileNetwork.wait(for: .seconds(30)) { log.firstConnection(after: instant) != nil }
    }

    /// The published numbers the subscriber never received.
    func lost(of stream: LampStream) -> Set<Int> { Set(stream.published).subtracting(received.distinct) }

    /// Stops everything: observation, logs, agents, proxy, broker.
    func stop() async {
        received.stop()
        subscriberLog.stop()
        publisherLog.stop()
        await subscriber.stop()
        await publisher.stop()
        await proxy.stop()
        await broker.stop()
    }
}

/// A plain blocking TCP connection to 127.0.0.1, to see exactly how the proxy ends a connection.
final class LoopbackSocket {
    let descriptor: Int32

    /// Connects to 127.0.0.1:`port`, or returns `nil`.
    init?(port: Int) {
        #if canImport(Glibc) || canImport(Musl)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// How the connection ended: `"reset"` (ECONNRESET), `"closed"` (EOF), `"data"` or the errno.
    func howItEnds() -> String {
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, 0)
        if count > 0 { return "data" }
        if count == 0 { return "closed" }
        return errno == ECONNRESET ? "reset" : "errno \(errno)"
    }

    /// Writes `bytes`; returns whether they all went out.
    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }
}
