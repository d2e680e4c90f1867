public import ServiceLifecycle

/// Advertises a broker over DNS-SD as a swift-service-lifecycle `Service`: published when
/// ``run()`` starts, withdrawn at graceful shutdown or cancellation.
///
/// ```swift
/// let advertisement = BrokerAdvertisement(port: 1883, webSocketPort: 9001, discovery: BrokerDiscovery(logger: logger))
/// let group = ServiceGroup(services: [advertisement], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public struct BrokerAdvertisement: Service {
    /// The service name.
    public var name: String
    /// The broker's MQTT port.
    public var port: Int
    /// The broker's WebSocket port (TXT `ws-port`).
    public var webSocketPort: Int
    /// The published host target; `nil` for this machine's.
    public var host: String?
    /// The discovery it publishes with.
    public var discovery: BrokerDiscovery

    /// Creates the service; nothing is published before ``run()``.
    /// - Parameters:
    ///   - name: the service name.
    ///   - port: the broker's MQTT port.
    ///   - webSocketPort: the broker's WebSocket port.
    ///   - host: the published host target; `nil` for this machine's.
    ///   - discovery: the discovery (service type, logger).
    public init(
        name: String = BrokerDiscovery.defaultName,
        port: Int = BrokerDiscovery.defaultPort,
        webSocketPort: Int = BrokerDiscovery.defaultWebSocketPort,
        host: String? = nil,
        discovery: BrokerDiscovery = BrokerDiscovery()
    ) {
        self.name = name
        self.port = port
        self.webSocketPort = webSocketPort
        self.host = host
        self.discovery = discovery
    }

    /// Publishes the broker and keeps it published until graceful shutdown or cancellation.
    /// - Throws: ``BrokerDiscoveryError`` when it cannot be published.
    public func run() async throws {
        try await discovery.withPublishedBroker(name: name, port: port, webSocketPort: webSocketPort, host: host) {
            _ in
            // Returns at graceful shutdown; throws (and is ignored) when cancelled.
            try? await gracefulShutdown()
        }
    }
}
