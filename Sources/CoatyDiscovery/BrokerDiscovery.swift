public import Logging

/// Publishes and finds Coaty MQTT brokers over multicast DNS service discovery (mDNS/DNS-SD,
/// Bonjour, Zeroconf), as Coaty JS's `MulticastDnsDiscovery` and CoatySwift's Bonjour resolver do.
///
/// A broker is advertised as a service of type `_coaty-mqtt._tcp` named `Coaty MQTT Broker`
/// (by default), on its MQTT port, with its WebSocket port in the TXT record as `ws-port`: a
/// Coaty JS agent calling `MulticastDnsDiscovery.findMqttBrokerService()` finds a broker
/// published here, and ``find(name:timeout:)`` finds one published by Coaty JS.
///
/// ```swift
/// let discovery = BrokerDiscovery(logger: logger)
/// // Beside the broker:
/// let registration = try await discovery.publish(port: 1883)
/// // In an agent:
/// let broker = try await discovery.find(timeout: .seconds(5))
/// let configuration = try MQTTConfiguration.coaty(url: broker.url, identityId: identity.objectId)
/// ```
///
/// On Linux the daemon is avahi-daemon (through Avahi's Bonjour compatibility library, which talks to
/// it over the D-Bus system bus); on Apple systems it is mDNSResponder.
public struct BrokerDiscovery: Sendable {
    /// The DNS-SD service type of Coaty MQTT brokers: Coaty JS's `coaty-mqtt` over TCP.
    public static let coatyServiceType = "_coaty-mqtt._tcp"
    /// The service name Coaty JS publishes and looks for by default.
    public static let defaultName = "Coaty MQTT Broker"
    /// The MQTT port Coaty JS publishes by default.
    public static let defaultPort = 1883
    /// The WebSocket port Coaty JS publishes by default.
    public static let defaultWebSocketPort = 9883
    /// The TXT record key of the WebSocket port.
    public static let webSocketPortKey = "ws-port"

    /// The service type published and browsed, `_coaty-mqtt._tcp` unless changed.
    public var serviceType: String
    /// Where the discovery logs (resolutions that failed, at debug level).
    public var logger: Logger
    /// How long one resolution of a found service (to its host, port and address) may take.
    public var resolveTimeout: Duration = .seconds(5)
    /// How long the daemon may take to confirm a registration.
    public var registrationTimeout: Duration = .seconds(30)

    /// Creates a discovery for `serviceType`.
    /// - Parameters:
    ///   - serviceType: the DNS-SD service type; Coaty's by default.
    ///   - logger: where to log; nothing is logged by default.
    public init(
        serviceType: String = BrokerDiscovery.coatyServiceType,
        logger: Logger = Logger(label: "coaty.discovery", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.serviceType = serviceType
        self.logger = logger
    }

    // MARK: Publishing

    /// Advertises a broker until the returned registration is cancelled or released.
    ///
    /// ```swift
    /// let registration = try await BrokerDiscovery().publish(port: 1883, webSocketPort: 9001)
    /// defer { registration.cancel() }
    /// ```
    ///
    /// - Parameters:
    ///   - name: the service name (at most 63 bytes). When another service of the type has it,
    ///     Avahi refuses it (``BrokerDiscoveryError/nameConflict(name:serviceType:)``) and
    ///     mDNSResponder renames it (`… (2)`), see ``BrokerRegistration/name``.
    ///   - port: the broker's MQTT port.
    ///   - webSocketPort: the broker's WebSocket port, published as `ws-port` in the TXT record.
    ///   - host: the host name published as the service's target, which must have an mDNS address
    ///     record (e.g. another machine's `NAME.local`); `nil` for this machine's `.local` host name.
    ///     Coaty JS also takes an address here; Avahi cannot publish one (an `.invalidArgument` error).
    /// - Returns: the registration; it is withdrawn on ``BrokerRegistration/cancel()`` or `deinit`.
    /// - Throws: ``BrokerDiscoveryError``: `.daemonUnavailable` when no DNS-SD daemon answers, `.nameConflict`,
    ///   `.invalidArgument` for a bad name or port; `CancellationError` when the task is cancelled.
    public func publish(
        name: String = BrokerDiscovery.defaultName,
        port: Int = BrokerDiscovery.defaultPort,
        webSocketPort: Int = BrokerDiscovery.defaultWebSocketPort,
        host: String? = nil
    ) async throws -> BrokerRegistration {
        guard (1...63).contains(name.utf8.count) else {
            throw BrokerDiscoveryError.invalidArgument("the service name must have 1 to 63 bytes: '\(name)'")
        }
        for (option, value) in [("port", port), ("WebSocket port", webSocketPort)] where !(1...65_535).contains(value) {
            throw BrokerDiscoveryError.invalidArgument("the \(option) must be between 1 and 65535: \(value)")
        }
        #if !canImport(Darwin)
            if let host, Self.isIPAddress(host) {
                throw BrokerDiscoveryError.invalidArgument(
                    "avahi-daemon cannot publish an address ('\(host)') as the host target; give a host name "
                        + "with an mDNS address record (e.g. NAME.local), or none for this machine's"
                )
            }
        #endif
        let txt = try TXTRecord.encode([(Self.webSocketPortKey, String(webSocketPort))])
        let request = DNSServiceRequest.register(
            name: name,
            type: serviceType,
            host: host,
            port: UInt16(port),
            txt: txt
        )
        let (replies, continuation) = AsyncStream.makeStream(
            of: DNSServiceReply.self,
            bufferingPolicy: .bufferingNewest(8)
        )
        let operation = try DNSServiceOperation(request) { continuation.yield($0) }
        let registered = try await firstReply(in: replies, of: request, timeout: registrationTimeout) { reply in
            if case .registered(let name) = reply { name } else { nil }
        }
        guard let registered else {
            operation.cancel()
            throw BrokerDiscoveryError.noAnswer(operation: request.operationName, seconds: registrationTimeout.seconds)
        }
        logger.debug(
            "Published the broker over DNS-SD",
            metadata: ["name": "\(registered)", "type": "\(serviceType)", "port": "\(port)"]
        )
        return BrokerRegistration(
            name: registered,
            serviceType: serviceType,
            port: port,
            webSocketPort: webSocketPort,
            operation: operation
        )
    }

    /// Advertises a broker while `body` runs, and withdraws it when `body` returns or throws.
    ///
    /// ```swift
    /// try await BrokerDiscovery().withPublishedBroker(port: broker.port) { registration in
    ///     try await runUntilShutdown()
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - name: the service name.
    ///   - port: the broker's MQTT port.
    ///   - webSocketPort: the broker's WebSocket port (TXT `ws-port`).
    ///   - host: the published host target; `nil` for this machine's.
    ///   - isolation: the caller's isolation, which `body` runs in.
    ///   - body: runs while the broker is advertised.
    /// - Returns: what `body` returns.
    /// - Throws: what ``publish(name:port:webSocketPort:host:)`` or `body` throws.
    public func withPublishedBroker<T>(
        name: String = BrokerDiscovery.defaultName,
        port: Int = BrokerDiscovery.defaultPort,
        webSocketPort: Int = BrokerDiscovery.defaultWebSocketPort,
        host: String? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (BrokerRegistration) async throws -> sending T
    ) async throws -> sending T {
        let registration = try await publish(name: name, port: port, webSocketPort: webSocketPort, host: host)
        defer { registration.cancel() }
        return try await body(registration)
    }

    // MARK: Finding

    /// Finds the broker advertised under `name`, as Coaty JS's `findMqttBrokerService` does.
    ///
    /// ```swift
    /// let broker = try await BrokerDiscovery().find(timeout: .seconds(5))
    /// // broker.url == "mqtt://192.168.1.20:1883"
    /// ```
    ///
    /// - Parameters:
    ///   - name: the service name to look for.
    ///   - timeout: how long to wait for it to appear.
    /// - Returns: the resolved broker: address, port, WebSocket port.
    /// - Throws: ``BrokerDiscoveryError/notFound(name:serviceType:seconds:)`` when it did not appear
    ///   within `timeout`, `.daemonUnavailable` when no DNS-SD daemon answers; `CancellationError`.
    public func find(
        name: String = BrokerDiscovery.defaultName,
        timeout: Duration = .seconds(5)
    ) async throws -> BrokerEndpoint {
        let browser = BrokerBrowser(discovery: self, name: name)
        let found = try await withTimeout(timeout) {
            for try await event in browser {
                if case .found(let endpoint) = event { return endpoint }
            }
            // The browse ends early only when this task is cancelled.
            throw CancellationError()
        }
        guard let found else {
            throw BrokerDiscoveryError.notFound(name: name, serviceType: serviceType, seconds: timeout.seconds)
        }
        return found
    }

    /// The brokers advertised now and later: each is reported once found (resolved) and once lost.
    ///
    /// ```swift
    /// for try await event in BrokerDiscovery().browse() {
    ///     switch event {
    ///     case .found(let broker): print("found", broker.url)
    ///     case .lost(let name): print("lost", name)
    ///     }
    /// }
    /// ```
    ///
    /// Browsing starts when iteration starts and stops when it ends (the loop is left or the task cancelled).
    /// - Returns: the sequence of found and lost brokers.
    public func browse() -> BrokerBrowser {
        BrokerBrowser(discovery: self, name: nil)
    }

    // MARK: Resolving

    /// Resolves a browsed service to an endpoint: its SRV and TXT records, then the IPv4 address of its host.
    func resolve(name: String, domain: String, interfaceIndex: UInt32) async throws -> BrokerEndpoint {
        let request = DNSServiceRequest.resolve(
            name: name,
            type: serviceType,
            domain: domain,
            interfaceIndex: interfaceIndex
        )
        let resolved = try await firstReply(of: request, timeout: resolveTimeout) { reply in
            if case .resolved(let hostTarget, let port, let txt, let interfaceIndex) = reply {
                ResolvedService(hostTarget: hostTarget, port: port, txt: txt, interfaceIndex: interfaceIndex)
            } else {
                nil
            }
        }
        guard let resolved else {
            throw BrokerDiscoveryError.noAnswer(operation: request.operationName, seconds: resolveTimeout.seconds)
        }
        let hostName = resolved.hostTarget.hasSuffix(".") ? String(resolved.hostTarget.dropLast()) : resolved.hostTarget
        var host = hostName
        // Coaty JS publishes an address as the target when given a host; a name needs its A record.
        if !Self.isIPAddress(hostName) {
            let query = DNSServiceRequest.queryAddress(
                host: resolved.hostTarget,
                interfaceIndex: resolved.interfaceIndex
            )
            if let address = try await firstReply(
                of: query,
                timeout: resolveTimeout,
                match: { reply in
                    if case .address(let address) = reply { address } else { nil }
                }
            ) {
                host = address
            } else {
                logger.debug("No IPv4 address for the broker's host; using its name", metadata: ["host": "\(hostName)"])
            }
        }
        let txt = TXTRecord.decode(resolved.txt)
        return BrokerEndpoint(
            name: name,
            host: host,
            hostName: hostName,
            port: Int(resolved.port),
            webSocketPort: txt[Self.webSocketPortKey].flatMap { Int($0) },
            txtRecord: txt
        )
    }

    /// Runs `request` until its first reply `match` accepts, at most `timeout`; `nil` when none came in time.
    private func firstReply<T: Sendable>(
        of request: DNSServiceRequest,
        timeout: Duration,
        match: @escaping @Sendable (DNSServiceReply) -> T?
    ) async throws -> T? {
        let (replies, continuation) = AsyncStream.makeStream(
            of: DNSServiceReply.self,
            bufferingPolicy: .bufferingNewest(8)
        )
        let operation = try DNSServiceOperation(request) { continuation.yield($0) }
        defer { operation.cancel() }
        return try await firstReply(in: replies, of: request, timeout: timeout, match: match)
    }

    /// The first reply in `replies` that `match` accepts, at most `timeout`; a failure reply throws.
    private func firstReply<T: Sendable>(
        in replies: AsyncStream<DNSServiceReply>,
        of request: DNSServiceRequest,
        timeout: Duration,
        match: @escaping @Sendable (DNSServiceReply) -> T?
    ) async throws -> T? {
        try await withTimeout(timeout) {
            for await reply in replies {
                if case .failed(let code) = reply { throw BrokerDiscoveryError.failure(of: request, code: code) }
                if let matched = match(reply) { return matched }
            }
            throw CancellationError()
        }
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isIPAddress(_ host: String) -> Bool {
        if host.contains(":") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in UInt8(part) != nil }
    }
}

/// The SRV and TXT records of a resolved service.
private struct ResolvedService: Sendable {
    var hostTarget: String
    var port: UInt16
    var txt: [UInt8]
    var interfaceIndex: UInt32
}

/// Runs `operation` for at most `timeout`: its result, or `nil` when the time ran out first (it is cancelled then).
func withTimeout<T: Sendable>(
    _ timeout: Duration,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
